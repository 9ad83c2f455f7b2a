"""`gpustack import`'s disk and render side, and its one entry point (`import_config`): the inputs
read bounded, the imported config checked as a config (and with `--check` rendered in memory and
compared with what the operator runs for the same inputs), and the config written.

What the operator runs for a ClusterPolicy (images, plugin config, runtime) is
`report.Imported.expected`, taken from the inputs and the defaults of the operator release
they were written for; what gpustack runs is read from the rendered objects, so the comparison
sees what a cluster would. A component the operator runs that gpustack would not (and that the
platform does not run in its place) is a finding: `--check` exits 1.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpustack.adopt import importing, inputs, releases, report
from gpustack.build.pipeline import render
from gpustack.build.workload import COMPONENT_LABEL
from gpustack.config import commented
from gpustack.errors import Location, UserError, display_path
from gpustack.objects import kind_of, labels_of, name_of
from gpustack.read.bounded import MAX_FILE_BYTES, decode, read_bounded
from gpustack.read.yamlio import Document, load_all_text, load_text
from gpustack.resolve import platform_profiles
from gpustack.resolve.load import load_stack
from gpustack.resolve.stack import Stack, validator_finds_driver

HEADER = (
    "# Written by `gpustack import`. Each imported field says where it came from; fields equal\n"
    "# to gpustack's defaults are left out (the import's report lists them, and what was not\n"
    "# carried over). Imported from:\n"
)


def read_inputs(files: list[Path]) -> tuple[list[Document], list[str]]:
    """Every YAML document of every file (bounded reads), with each file's stem beside it."""
    documents: list[Document] = []
    stems: list[str] = []
    for path in files:
        shown = display_path(path)
        _inside_repository(path, shown)
        text = decode(read_bounded(path, MAX_FILE_BYTES, "an import input"), shown)
        found = [each for each in load_all_text(text, shown) if each.data is not None]
        if not found:
            raise UserError("holds no YAML document to import", Location(shown, 1, 1))
        documents += found
        stems += [path.stem] * len(found)
    return documents, stems


def _inside_repository(path: Path, shown: str) -> None:
    """An input named inside a git repository (a pull request's file, say) is one of its files:
    a symbolic link out of it (to a credentials file of the machine) is not followed. An input
    named outside any repository (`kubectl get ... > /tmp/policy.yaml`) is read where it is."""
    named = Path(os.path.abspath(path)).parent
    top = next(
        (folder for folder in (named, *named.parents) if os.path.lexists(folder / ".git")), None
    )
    if top is None:
        return
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(os.path.realpath(top)):
        raise UserError(
            "is a symbolic link out of the git repository it is in; import does not follow it",
            Location(shown),
            hint="copy the file into the repository, or name it where it is",
        )


def config_text(imported: report.Imported, sources: list[str]) -> str:
    """The imported config's file: the header naming the inputs, then its fields, each with
    the input fields it came from."""
    named = "".join(f"#   {inputs.printable(each, len(each))}\n" for each in sources)
    return commented.config_text(imported.config, HEADER + named)


def load(
    text: str, output_file: Path | None, profiles_dir: Path | None, imported: report.Imported
) -> Stack:
    """The imported config as gpustack reads it. Each value was checked against its field as it
    was imported, so what is left is a combination of settings gpustack refuses: said at the
    input field the config field came from, without a value of the inputs (untrusted: a
    credential in a repository would reach the CI log)."""
    path = output_file or Path("imported.yaml")
    document = load_text(text, display_path(path))
    try:
        return load_stack(path, profiles_dir=profiles_dir, document=document)
    except UserError as problem:
        target = problem.field or ""
        places = [
            location
            for name, locations in sorted(imported.origins.items())
            if target == name or target.startswith(name + ".") or name.startswith(target + ".")
            for location in locations
            if location.file  # the release's defaults have no file to name
        ]
        # A value the message quotes is named as such, so the reason stays; a message that
        # shows one otherwise is not shown at all.
        shown = problem.message
        for value in sorted(filter(None, imported.values), key=len, reverse=True):
            for quoted in (repr(value), f"'{value}'", f'"{value}"'):
                shown = shown.replace(quoted, "(an imported value)")
        if any(value and value in shown for value in imported.values):
            shown = "gpustack refuses the imported settings together"
        raise UserError(
            f"the imported config is not valid: {shown}",
            places[0] if places else None,
            field=problem.field,
            hint="the import's report says where each setting came from: change the input "
            "(or give fewer inputs), or edit the imported config",
        ) from None


def load_imported(
    imported: report.Imported,
    sources: list[str],
    output_file: Path | None,
    profiles_dir: Path | None,
) -> tuple[report.Imported, str, Stack]:
    """The config's text and the config as gpustack reads it. A setting that only the operator
    release's defaults gave (no input wrote it) and that gpustack then refuses on this profile
    (the chart's `mig.strategy: single` where the node pool makes MIG partitions) is left out,
    said in the report with why, rather than failing the import: the user never wrote it."""
    tried: set[str] = set()
    while True:
        text = config_text(imported, sources)
        try:
            return imported, text, load(text, output_file, profiles_dir, imported)
        except UserError as problem:
            target = _defaults_only(imported, problem.field or "")
            if target is None or target in tried:
                raise
            tried.add(target)
            why = problem.message.removeprefix("the imported config is not valid: ")
            imported = report.leave_out(imported, target, why)


def _defaults_only(imported: report.Imported, field: str) -> str | None:
    """The config field at (or above) `field` when only the operator's defaults set it."""
    for target, locations in imported.origins.items():
        if (target == field or field.startswith(target + ".")) and not any(
            each.file for each in locations
        ):
            return target
    return None


def write_config(path: Path, text: str, force: bool) -> None:
    """Write the config to a new file; an existing one only with `force`, replaced whole."""
    shown = display_path(path)
    if os.path.lexists(path) and not force:
        raise UserError(
            "exists already; the import does not overwrite it",
            Location(shown),
            hint="give --force to replace it, or another -o",
        )
    folder = path.parent if str(path.parent) else Path(".")
    try:
        descriptor, staged = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.")
    except OSError as error:
        raise UserError(f"cannot write the config: {error.strerror}", Location(shown)) from None
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(staged, 0o644)
        if force:
            os.replace(staged, path)
        else:
            os.link(staged, path)  # fails if the file appeared meanwhile
            os.unlink(staged)
    except OSError as error:
        Path(staged).unlink(missing_ok=True)
        raise UserError(f"cannot write the config: {error.strerror}", Location(shown)) from None


@dataclass(frozen=True)
class Difference:
    aspect: str
    operator: str
    gpustack: str
    # A component the operator runs that would stop running, with no platform's own in its place.
    stops: bool = False
    # A component the platform runs itself (GKE's device plugin, a driver the platform installs)
    # or has no use for (the validator where its driver validation cannot find the driver).
    replaced: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "aspect": self.aspect,
            "operator": self.operator,
            "gpustack": self.gpustack,
            "stops": self.stops,
            "replaced": self.replaced,
        }


# The operator's component (a key of releases.Release.images) -> gpustack's by its component label.
_COMPONENTS = {
    "driver": "nvidia-driver",
    "driver.manager": "nvidia-driver",
    "toolkit": "container-toolkit",
    "devicePlugin": "device-plugin",
    "gfd": "gpu-feature-discovery",
    "dcgmExporter": "dcgm-exporter",
    "migManager": "mig-manager",
    "validator": "operator-validator",
    "nodeStatusExporter": "node-status-exporter",
}
NOT_RUN = "not run"


def check(stack: Stack, imported: report.Imported) -> list[Difference]:
    """Render the imported config and compare it with what the operator runs."""
    objects = render(stack).objects
    found = _rendered(stack, objects)
    differences = []
    for aspect, expected in sorted(imported.expected.items()):
        actual = found.get(aspect, NOT_RUN)
        if not _same(aspect, expected, actual):
            component = aspect.removesuffix(" image")
            gone = aspect.endswith(" image") and expected != NOT_RUN and actual == NOT_RUN
            replaced = gone and _platform_runs(stack, component)
            differences.append(
                Difference(
                    aspect, _shown(aspect, expected), actual, gone and not replaced, replaced
                )
            )
    return differences


# What the operator side of a difference may show: values of the inputs (untrusted) only where
# they are what their aspect names, an image reference (registry, path, tag, digest: no
# credentials, no URL), a name or an absolute path; gpustack's own words as they are.
_IMAGE = re.compile(
    r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[0-9a-f]{64})?"
)
# A release's tag: `v0.20.0`, `595.91.07`, `4.6.0-4.8.3`, with a distribution or `distroless`.
_RELEASE_TAG = re.compile(
    r"v?[0-9]+(\.[0-9]+){1,2}(-[0-9]+(\.[0-9]+){2})?(-(ubuntu|ubi|rhel|centos)[0-9.]*|-distroless)?"
)
_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?")
_PATH = re.compile(r"/[A-Za-z0-9._/-]{0,4095}")
_HIDDEN = "(not shown: not a value gpustack takes)"


def _shown(aspect: str, value: str) -> str:
    if value == NOT_RUN or aspect in ("CDI", "plugin migStrategy", "plugin sharing"):
        return value
    if aspect.endswith(" image"):
        safe = bool(_IMAGE.fullmatch(value) and _RELEASE_TAG.fullmatch(value.rpartition(":")[2]))
    elif aspect == "exporter counters":
        name = value.removeprefix("ConfigMap ")
        safe = name == value or bool(_NAME.fullmatch(name))
    elif aspect == "pull secrets":
        safe = all(_NAME.fullmatch(name) for name in value.split(", "))
    elif aspect.startswith("toolkit "):
        safe = bool(_PATH.fullmatch(value) or _NAME.fullmatch(value) or value in ("", "none"))
    else:
        safe = bool(_NAME.fullmatch(value))
    return value if safe else _HIDDEN


def _platform_runs(stack: Stack, component: str) -> bool:
    """The platform runs its own in place of the operator's component (profile facts): the
    driver where no driver container is one of its modes, the runtime where it needs no
    toolkit, the device plugin where its own serves nvidia.com/gpu, MIG partitions where the
    node pool or the node OS makes them; and the validator where its driver validation cannot
    find the platform's driver (GKE's), where gpustack's DaemonSets wait for no ready file."""
    facts = stack.facts
    if component == "validator":
        return not validator_finds_driver(stack.config, stack.profile)
    if component in ("driver", "driver.manager"):
        return not {"container", "driver-toolkit"} & set(facts.driver.modes)
    if component == "toolkit":
        return facts.runtime.toolkit is None
    if component in ("devicePlugin", "gfd"):
        return facts.devicePluginProvider != "nvidia"
    if component == "migManager":
        return facts.migPartitioning != "mig-manager"
    return False


def _same(aspect: str, expected: str, actual: str) -> bool:
    if aspect == "driver image":
        # Both run <version>-<node OS>: the operator adds the OS tag from NFD's labels.
        return actual == expected or actual.startswith(expected + "-")
    if aspect.endswith(" image"):
        return releases.same_release(expected, actual)
    return actual == expected


def _rendered(stack: Stack, objects: list[dict[str, Any]]) -> dict[str, str]:
    found: dict[str, str] = {}
    daemonsets = {
        labels_of(obj).get(COMPONENT_LABEL): obj for obj in objects if kind_of(obj) == "DaemonSet"
    }
    for component, label in _COMPONENTS.items():
        daemonset = daemonsets.get(label)
        if daemonset is None:
            continue
        pod = daemonset["spec"]["template"]["spec"]
        if component == "driver.manager":
            images = [c["image"] for c in pod.get("initContainers", [])]
            image = next((each for each in images if "k8s-driver-manager" in each), None)
        else:
            image = pod["containers"][0]["image"]
        if image:
            found[f"{component} image"] = image
        secrets = [each["name"] for each in pod.get("imagePullSecrets", [])]
        if secrets:
            found["pull secrets"] = ", ".join(sorted(secrets))
        if pod.get("runtimeClassName"):
            found["runtime class"] = pod["runtimeClassName"]
    for obj in objects:
        if kind_of(obj) == "RuntimeClass":
            found.setdefault("runtime class", name_of(obj))
        name = obj.get("metadata", {}).get("name", "")
        if kind_of(obj) == "ConfigMap" and name == "nvidia-dcgm-exporter-metrics":
            rows = [
                line
                for text in obj.get("data", {}).values()
                for line in str(text).splitlines()
                if line.strip() and not line.startswith("#")
            ]
            found["exporter counters"] = f"gpustack's counters ({len(rows)} fields)"
        if kind_of(obj) == "ConfigMap" and name == "nvidia-device-plugin-config":
            for text in obj.get("data", {}).values():
                plugin = load_text(str(text), name).data
                if isinstance(plugin, dict):
                    _plugin(plugin, found)
    toolkit = stack.facts.runtime.toolkit
    if stack.toolkit_enabled and toolkit is not None:
        for name, fact in (
            ("CONTAINERD_CONFIG", toolkit.configFile),
            ("RUNTIME_CONFIG", toolkit.configFile),
            ("CONTAINERD_SOCKET", toolkit.socket),
            ("RUNTIME_SOCKET", toolkit.socket),
            ("RUNTIME_DROP_IN_CONFIG", toolkit.dropInConfigFile),
            ("RUNTIME_RESTART_MODE", toolkit.restartMode),
        ):
            if fact is not None:
                found[f"toolkit {name}"] = str(fact)
        found["toolkit CONTAINERD_RUNTIME_CLASS"] = stack.config.runtimeClass.handler
        found["toolkit RUNTIME_CLASS"] = stack.config.runtimeClass.handler
    found["plugin migStrategy"] = found.get("plugin migStrategy", "none")
    found.setdefault("plugin sharing", "none")
    found["CDI"] = "on" if stack.uses_cdi else "off"
    return found


def _plugin(plugin: dict[str, Any], found: dict[str, str]) -> None:
    flags = plugin.get("flags") or {}
    if isinstance(flags, dict) and flags.get("migStrategy"):
        found["plugin migStrategy"] = str(flags["migStrategy"])
    sharing = plugin.get("sharing") or {}
    for key, strategy in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        shared = sharing.get(key) if isinstance(sharing, dict) else None
        if isinstance(shared, dict):
            for item in shared.get("resources") or []:
                if isinstance(item, dict) and item.get("name") == "nvidia.com/gpu":
                    found["plugin sharing"] = f"{strategy} x{item.get('replicas')}"


def differences_text(differences: list[Difference]) -> str:
    if not differences:
        return "check: the rendered config runs what the operator runs\n"
    lines = [f"check: {len(differences)} difference(s) from what the operator runs:"]
    for each in differences:
        note = (
            " (STOPS RUNNING)"
            if each.stops
            else " (the platform runs its own, or needs none)"
            if each.replaced
            else ""
        )
        lines.append(f"  {each.aspect}: operator {each.operator}; gpustack {each.gpustack}{note}")
    stopped = [each.aspect.removesuffix(" image") for each in differences if each.stops]
    if stopped:
        lines.append(
            f"check failed: {', '.join(stopped)} would stop running when gpustack takes over "
            "(docs/import.md, Switching a live cluster over)"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ImportRequest:
    """What `gpustack import` was asked for."""

    files: list[Path]
    profile: str | None  # None: guessed from the inputs
    output_file: Path | None  # None: the config goes to stdout
    force: bool  # replace an existing output_file
    check: bool  # render the config and compare it with what the operator runs
    operator_version: str | None  # None: the ClusterPolicy's labels, else the newest release
    profiles_dir: Path | None


@dataclass(frozen=True)
class ImportResult:
    config: str  # the config's text, written to output_file when one was given
    imported: report.Imported
    sources: list[str]  # the inputs as the report names them
    differences: list[Difference] | None  # with --check
    written: str | None  # the file written, as the user named it

    def report(self, output: str) -> str:
        """The report in `output`'s format (text or json), ending in a line break."""
        if output == "json":
            data: dict[str, Any] = {
                "profile": self.imported.profile,
                "profileReason": self.imported.profile_reason,
                "operatorVersion": self.imported.release,
                "operatorVersionReason": self.imported.release_reason or None,
                "entries": [entry.as_json() for entry in self.imported.entries],
            }
            if self.differences is not None:
                data["differences"] = [each.as_json() for each in self.differences]
            return json.dumps(data, indent=2, sort_keys=True) + "\n"
        text = report.report_text(self.imported, self.sources)
        if self.differences is not None:
            text += differences_text(self.differences)
        return text

    @property
    def exit_code(self) -> int:
        """1 when a component the operator runs would stop running, as stale output is for
        `check`: the config is written all the same, for the user to change."""
        return 1 if self.differences and any(each.stops for each in self.differences) else 0


def import_config(request: ImportRequest) -> ImportResult:
    """Read the inputs, import them on the profile, load the config as `render` would (and with
    `check` render and compare it), and write it to the output file."""
    documents, stems = read_inputs(request.files)
    found = inputs.classify(documents, stems)
    profile = request.profile
    if profile is None:
        available = platform_profiles.available(request.profiles_dir)
        profile, reason = inputs.guess_profile(found, available)
    else:
        reason = "given with --profile"
    loaded, _ = platform_profiles.load(profile, request.profiles_dir)
    output_file = request.output_file
    name = report.config_name(output_file.stem if output_file else None)
    imported = importing.import_inputs(found, loaded, reason, name, request.operator_version)
    sources = [display_path(each) for each in request.files]
    imported, text, stack = load_imported(imported, sources, output_file, request.profiles_dir)
    differences = check(stack, imported) if request.check else None
    if output_file is not None:
        write_config(output_file, text, request.force)
    written = display_path(output_file) if output_file is not None else None
    return ImportResult(text, imported, sources, differences, written)
