"""What a cluster already has, as a gpustack config: a GPU Operator ClusterPolicy (as `kubectl get
clusterpolicy -o yaml` prints it, a `List` of them too, or the file kept in a Git repository), the
GPU Operator chart's Helm values, the k8s-device-plugin chart's values, and the device plugin's
config files (on their own, in a ConfigMap, or in the chart's `config.map`).

Pure: parsed documents in (`yamlio.Document`, read bounded by the command), a commented config
document and a report out. Every field of every input gets one outcome in the report: mapped to a
config field (the config's comment says from where), the same as gpustack's default (left out of
the config), not carried over (with why), or unknown (a field this importer does not know, never
dropped silently). The report names fields, never values: the inputs are untrusted.

A ClusterPolicy or a values override file holds what its author changed; the operator fills in
the rest from its defaults (driver and toolkit on, CDI...). The import starts from the defaults of
the operator release the inputs were written for (`gpu_operator_releases.yaml`, one entry per
release: NVIDIA/gpu-operator deployments/gpu-operator/values.yaml at its tag, and
api/nvidia/v1/clusterpolicy_types.go's defaults), named by `--operator-version`, by the
ClusterPolicy's Helm labels, or else the newest release known, and the report says which.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml  # type: ignore[import-untyped]
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from gpustack.errors import Location, UserError
from gpustack.read.yamlio import Document, Path_, SourceMap, load_all_text
from gpustack.resolve.field_types import API_VERSION, DNS1123_LABEL, duration_ms
from gpustack.resolve.model import field_accepts, field_default
from gpustack.resolve.profile_model import Profile

# Each GPU Operator release's defaults (images, CDI, the exporter's ServiceMonitor).
RELEASES_DATA = Path(__file__).with_name("gpu_operator_releases.yaml")

Image = tuple[str, str, str]  # repository, image, version


@dataclass(frozen=True)
class Release:
    """What one GPU Operator release runs for the fields an input leaves out."""

    version: str
    images: dict[str, Image]
    cdi: bool  # the chart's cdi.enabled (and the CRD's default from v25.10.0)
    service_monitor: bool  # the chart's dcgmExporter.serviceMonitor.enabled
    manager_env: dict[str, str]  # the chart's driver.manager.env, where the release sets it


@cache
def releases() -> dict[str, Release]:
    """The releases the importer knows, oldest first."""
    data = yaml.safe_load(RELEASES_DATA.read_text(encoding="utf-8"))
    found = {}
    for version, facts in data["releases"].items():
        images = {}
        for component, reference in facts["images"].items():
            path, tag = reference.rsplit(":", 1)
            repository, image = path.rsplit("/", 1)
            images[component] = (repository, image, tag)
        found[version] = Release(
            version,
            images,
            facts["cdi"],
            facts["serviceMonitor"],
            dict(facts.get("managerEnv") or {}),
        )
    return dict(sorted(found.items(), key=lambda item: release_key(item[0])))


# A release number's part: a few digits. An input may write thousands, which no release has and
# which Python refuses to read as a number (int() above 4,300 digits raises).
_NUMBER = "[0-9]{1,9}"


def release_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.removeprefix("v").split("."))


def newest_release() -> Release:
    return list(releases().values())[-1]


# The device-plugin chart's image (NVIDIA/k8s-device-plugin deployments/helm/
# nvidia-device-plugin/values.yaml, v0.20.0: the tag defaults to the chart's appVersion).
PLUGIN_CHART_IMAGE = ("nvcr.io/nvidia/k8s-device-plugin", "v0.20.0")
# The registry every upstream image above comes from.
UPSTREAM_REGISTRY = "nvcr.io"

# The config sections each operator component maps to (its version, resources, enabled).
SECTIONS = {
    "driver": "driver",
    "driver.manager": "driver.manager",
    "toolkit": "toolkit",
    "devicePlugin": "devicePlugin",
    "gfd": "gfd",
    "dcgmExporter": "dcgmExporter",
    "migManager": "migManager",
    "validator": "validator",
    "nodeStatusExporter": "nodeStatusExporter",
}

Outcome = Literal["mapped", "default", "dropped", "unknown"]
OUTCOMES: tuple[Outcome, ...] = ("mapped", "default", "dropped", "unknown")
HEADINGS = {
    "mapped": "mapped",
    "default": "same as gpustack's default",
    "dropped": "not carried over",
    "unknown": "unknown fields (not read)",
}

CLUSTER_POLICY = "ClusterPolicy"
OPERATOR_VALUES = "GPU Operator values"
OPERATOR_DEFAULTS = "GPU Operator defaults"
PLUGIN_VALUES = "device-plugin values"
PLUGIN_CONFIG = "plugin config"
CONFIG_MAP = "ConfigMap"


@dataclass
class Input:
    """One input: a ClusterPolicy, a chart's values, a plugin config or a ConfigMap."""

    kind: str
    name: str  # as the report and the config's comments name it
    data: dict[str, Any]
    source: SourceMap
    prefix: Path_ = ()  # where `data` is in its document (a List's item)
    root: Path_ = ()  # where the operator's settings start (a ClusterPolicy's spec)

    def location(self, path: Path_) -> Location:
        if self.kind == OPERATOR_DEFAULTS:
            return Location("")  # no file: the release's defaults, named by the entry
        return self.source.nearest((*self.prefix, *path))

    def shown(self, path: Path_) -> str:
        return f"{self.name} {dotted(path)}".strip()


@dataclass(frozen=True)
class Entry:
    """One input field and what became of it."""

    input: str
    field: str
    location: str
    outcome: Outcome
    target: str | None = None
    why: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "field": self.field,
            "location": self.location,
            "outcome": self.outcome,
            "target": self.target,
            "why": self.why,
        }


@dataclass
class Imported:
    config: CommentedMap
    entries: list[Entry]
    profile: str
    profile_reason: str
    # What the operator (or the device-plugin chart) runs for these inputs: aspect -> value.
    expected: dict[str, str] = field(default_factory=dict)
    # The operator release whose defaults filled in what the inputs leave out, and why that one
    # (None: no operator input, a device-plugin chart's values or plugin configs alone).
    release: str | None = None
    release_reason: str = ""
    # Where each config field came from: the input fields' locations.
    origins: dict[str, list[Location]] = field(default_factory=dict)
    # Every value the inputs gave the config, for messages that must not show them.
    values: list[str] = field(default_factory=list)


def printable(text: str, limit: int = 80) -> str:
    """A name from an input as a report line or a config comment may show it: one line (a line
    break or any other control or separator character is `?`), at most `limit` characters."""
    return "".join(ch if ch.isprintable() else "?" for ch in text)[:limit]


def dotted(path: Path_) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            shown = printable(str(part))
            text += f".{shown}" if text else shown
    return text


# ---------------------------------------------------------------------------------------------
# Which input each document is.


def classify(documents: list[Document], stems: list[str]) -> list[Input]:
    """Each document's inputs, in order; `stems` name a plugin config file by its file name."""
    inputs: list[Input] = []
    for document, stem in zip(documents, [printable(each) for each in stems]):
        data, source = document.data, document.source
        if data is None:
            continue
        if not isinstance(data, dict):
            raise UserError(
                "is not a ClusterPolicy, Helm values or a device plugin config (a YAML "
                "mapping was expected)",
                source.nearest(()),
            )
        if data.get("kind") == "List" or data.get("kind") == "ClusterPolicyList":
            items = data.get("items")
            if not isinstance(items, list):
                raise UserError("a List without items", source.nearest(("items",)), "items")
            for index, item in enumerate(items):
                inputs.append(_object(item, source, ("items", index), stem))
        elif "kind" in data or "apiVersion" in data:
            inputs.append(_object(data, source, (), stem))
        else:
            inputs.append(_values(data, source, stem))
    if not inputs:
        raise UserError(
            "holds nothing to import",
            Location(documents[0].source.file) if documents else None,
        )
    return inputs


def _object(data: Any, source: SourceMap, prefix: Path_, stem: str) -> Input:
    if not isinstance(data, dict):
        raise UserError("a List item is not a mapping", source.nearest(prefix))
    kind, api_version = data.get("kind"), str(data.get("apiVersion", ""))
    metadata: dict[str, Any] = data.get("metadata") or {}
    name = metadata.get("name") if isinstance(metadata, dict) else None
    name = name if isinstance(name, str) else ""
    shown = name if re.fullmatch(DNS1123_LABEL, name or "-") else "(unnamed)"
    if kind == CLUSTER_POLICY and api_version.startswith("nvidia.com/"):
        return Input(CLUSTER_POLICY, CLUSTER_POLICY, data, source, prefix, ("spec",))
    if kind == CONFIG_MAP and api_version == "v1":
        return Input(CONFIG_MAP, f"ConfigMap {shown}", data, source, prefix)
    if kind == "GPUStack":
        raise UserError(
            "is a gpustack config already: import reads what the GPU Operator or the "
            "device-plugin chart was given",
            source.nearest((*prefix, "kind")),
            field="kind",
        )
    raise UserError(
        "is neither a ClusterPolicy (nvidia.com/v1) nor a ConfigMap holding device plugin "
        "configs; other objects are not imported",
        source.nearest((*prefix, "kind")),
        field="kind",
    )


# Top-level keys only the device-plugin chart's values have (NVIDIA/k8s-device-plugin
# deployments/helm/nvidia-device-plugin/values.yaml, v0.20.0).
_PLUGIN_CHART_KEYS = {
    "migStrategy",
    "failOnInitError",
    "deviceListStrategy",
    "deviceIDStrategy",
    "nvidiaDriverRoot",
    "compatWithCPUManager",
    "fullnameOverride",
    "allowDefaultNamespace",
    "image",
    "podAnnotations",
}
# Top-level keys of the GPU Operator chart's values (deployments/gpu-operator/values.yaml).
_OPERATOR_CHART_KEYS = {
    "operator",
    "driver",
    "toolkit",
    "dcgmExporter",
    "daemonsets",
    "node-feature-discovery",
    "migManager",
    "clusterPolicy",
    "validator",
    "platform",
}


def _values(data: dict[str, Any], source: SourceMap, stem: str) -> Input:
    if data.get("version") == "v1" and set(data) & {"flags", "sharing", "resources"}:
        return Input(PLUGIN_CONFIG, f"plugin config {stem}", data, source)
    if set(data) & _PLUGIN_CHART_KEYS:
        return Input(PLUGIN_VALUES, PLUGIN_VALUES, data, source)
    # An override file may hold any one setting of the operator's chart (`mig.strategy`,
    # `cdi.enabled`): the ClusterPolicy's sections are the chart's too. `devicePlugin` and `gfd`
    # are both charts' sections: the operator's when they name an image or a plugin config.
    sections = {key for key in data if key in _SPEC_FIELDS and key not in ("devicePlugin", "gfd")}
    operator_only = {"repository", "image", "version", "config", "env", "args"}
    shared = [data.get(key) for key in ("devicePlugin", "gfd")]
    if (
        set(data) & _OPERATOR_CHART_KEYS
        or sections
        or any(isinstance(each, dict) and set(each) & operator_only for each in shared)
    ):
        return Input(OPERATOR_VALUES, OPERATOR_VALUES, data, source)
    raise UserError(
        "is not a ClusterPolicy, the GPU Operator's or the device-plugin chart's Helm values, "
        "nor a device plugin config (`version: v1`): none of their fields is here",
        source.nearest(()),
    )


# ---------------------------------------------------------------------------------------------
# Which profile.


@dataclass(frozen=True)
class Signal:
    profile: str
    reason: str


def profile_signals(inputs: list[Input]) -> list[Signal]:
    """What in the inputs names a platform (each signal with the field it comes from)."""
    found: list[Signal] = []
    for each in inputs:
        if each.kind not in (CLUSTER_POLICY, OPERATOR_VALUES):
            continue
        spec = _at(each.data, each.root)
        if not isinstance(spec, dict):
            continue

        def value(*path: str, spec: Any = spec) -> Any:
            return _at(spec, path)

        def named(*path: str | int, each: Input = each) -> str:
            return each.shown((*each.root, *path))

        if value("operator", "use_ocp_driver_toolkit") is True:
            found.append(Signal("openshift", named("operator", "use_ocp_driver_toolkit")))
        if value("operator", "defaultRuntime") == "crio":
            found.append(Signal("openshift", named("operator", "defaultRuntime")))
        if value("platform", "openshift") is True:
            found.append(Signal("openshift", named("platform", "openshift")))
        gke_path = "/home/kubernetes/bin/nvidia"
        for path in (("hostPaths", "driverInstallDir"), ("toolkit", "installDir")):
            if value(*path) == gke_path and value("driver", "enabled") is False:
                found.append(Signal("gke", named(*path)))
        # RKE2 and k3s keep containerd's config under their own data folder; both use the
        # socket /run/k3s/containerd/containerd.sock, which therefore tells neither.
        for index, env in enumerate(_env_list(value("toolkit", "env"))):
            name, setting = env
            if name not in ("CONTAINERD_CONFIG", "RUNTIME_CONFIG", "CONTAINERD_SOCKET"):
                continue
            for distribution in ("rke2", "k3s"):
                if str(setting).startswith(f"/var/lib/rancher/{distribution}/"):
                    found.append(Signal(distribution, named("toolkit", "env", index)))
    return found


def guess_profile(inputs: list[Input], available: list[str]) -> tuple[str, str]:
    """The profile the inputs point at, with why; a UserError asking for --profile otherwise."""
    signals = profile_signals(inputs)
    profiles = sorted({signal.profile for signal in signals})
    if len(profiles) == 1 and profiles[0] in available:
        reasons = ", ".join(sorted({signal.reason for signal in signals}))
        return profiles[0], f"guessed from {reasons}"
    choices = ", ".join(available)
    if profiles == ["gke"]:
        raise UserError(
            "the inputs describe GKE (driver disabled, /home/kubernetes/bin/nvidia), but not "
            "which node image",
            hint="give --profile gke-cos or --profile gke-ubuntu",
        )
    if len(profiles) > 1:
        raise UserError(
            f"the inputs point at several platforms ({', '.join(profiles)})",
            hint=f"give --profile, one of: {choices}",
        )
    raise UserError(
        "nothing in the inputs names the platform (OpenShift's driver toolkit, GKE's driver "
        "paths, RKE2's or k3s' containerd config)",
        hint=f"give --profile, one of: {choices}",
    )


# ---------------------------------------------------------------------------------------------
# The import.


def _at(data: Any, path: Path_) -> Any:
    for part in path:
        if isinstance(data, dict) and isinstance(part, str):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data


def _env_list(env: Any) -> list[tuple[str, Any]]:
    if not isinstance(env, list):
        return []
    return [(str(item.get("name")), item.get("value")) for item in env if isinstance(item, dict)]


_MISSING = object()


class _Import:
    """The config being written and the report, for one profile."""

    def __init__(self, profile: Profile, inputs: list[Input], release: Release) -> None:
        self.profile = profile
        self.release = release
        self.inputs = [id(each) for each in inputs]
        self.order: list[tuple[int, int, int]] = []  # each entry's input and position
        self.settings: dict[str, tuple[Any, list[str]]] = {}
        self.entries: list[Entry] = []
        self.expected: dict[str, str] = {}
        self.done: set[tuple[int, Path_]] = set()  # (input id, path) given an outcome
        self.mapped_at: dict[str, list[int]] = {}  # config field -> its entries
        self.paths: list[tuple[str, Path_]] = []  # each entry's input kind and path
        self.hidden: set[int] = set()  # entries of the defaults that an input's field replaced
        self.locations: dict[str, list[Location]] = {}  # config field -> its inputs' places

    # -- outcomes -------------------------------------------------------------------------
    def record(
        self,
        source: Input,
        path: Path_,
        outcome: Outcome,
        target: str | None = None,
        why: str | None = None,
    ) -> None:
        self.done.add((id(source), path))
        where = source.location(path)
        self.order.append((self.inputs.index(id(source)), where.line, where.column))
        self.paths.append((source.kind, path[len(source.root) :]))
        shown = printable(str(where), 4096)  # a file's name on one line, as every name
        self.entries.append(Entry(source.name, dotted(path), shown, outcome, target, why))

    def default(self, source: Input, path: Path_, why: str = "same as gpustack's") -> None:
        self.record(source, path, "default", why=why)

    def dropped(self, source: Input, path: Path_, why: str) -> None:
        self.record(source, path, "dropped", why=why)

    def gpustack_default(self, target: str) -> Any:
        node: Any = self.profile.defaults
        for part in target.split("."):
            node = node.get(part, _MISSING) if isinstance(node, dict) else _MISSING
        if node is not _MISSING:
            return node
        try:
            return field_default(target)
        except KeyError:
            return _MISSING

    def auto(self, target: str) -> Any:
        """What a setting left at `auto` comes to on this profile with the settings so far
        (stack.Stack: toolkit_enabled, monitor); None where it depends on more."""
        facts = self.profile.facts
        if target == "toolkit.enabled":
            mode = self.settings.get("driver.mode", (facts.driver.default,))[0]
            required = facts.runtime.toolkit is not None and facts.runtime.toolkit.required
            return mode in ("container", "driver-toolkit") or required
        if target == "dcgmExporter.monitor":
            return facts.monitoring
        if target == "driver.mode":
            return facts.driver.default
        return None

    def set(self, source: Input, path: Path_, target: str, value: Any, why: str = "") -> None:
        """Map the field at `path` to the config field `target`; the same value as gpustack's
        default is left out of the config."""
        if not field_accepts(target, value):
            # Said without the value: the inputs are untrusted, and a credential in a
            # repository would otherwise reach the CI log.
            self.dropped(source, path, f"not a value gpustack's {target} takes")
            return
        known = self.settings.get(target)
        origin = source.shown(path)
        defaulted = known is not None and self.from_defaults(target)
        if known is not None and (known[0] != value or defaulted):
            # A later input overrides an earlier one, as a kustomize patch or a second values
            # file does: the earlier field is reported as overridden; a default the inputs
            # replace is left out of the report.
            for index in self.mapped_at.pop(target, []):
                entry = self.entries[index]
                if self.paths[index][0] == OPERATOR_DEFAULTS:
                    self.hidden.add(index)
                    continue
                self.entries[index] = Entry(
                    entry.input,
                    entry.field,
                    entry.location,
                    "dropped",
                    target,
                    f"overridden by {origin}",
                )
            known = None
            del self.settings[target]
            self.locations.pop(target, None)
        if known is None and self.gpustack_default(target) == value:
            self.record(source, path, "default", target, why or f"{target} is the same")
            return
        if known is None and self.gpustack_default(target) == "auto" and self.auto(target) == value:
            self.record(source, path, "default", target, f"what {target} auto gives here")
            return
        if known is None:
            self.settings[target] = (value, [origin])
        elif origin not in known[1]:
            known[1].append(origin)
        self.locations.setdefault(target, []).append(source.location(path))
        self.mapped_at.setdefault(target, []).append(len(self.entries))
        self.record(source, path, "mapped", target, why or None)

    def from_defaults(self, target: str) -> bool:
        """The config field holds the operator's default, no input's field."""
        indexes = self.mapped_at.get(target)
        return bool(indexes) and all(self.paths[i][0] == OPERATOR_DEFAULTS for i in indexes or ())

    # -- the walk -------------------------------------------------------------------------
    def leaves(self, source: Input) -> Iterator[tuple[Path_, Any]]:
        """Every field of `source` that has no outcome yet, as (path, value); a list or mapping
        that is a value of its own (env, tolerations, labels...) counts as one field."""

        def walk(node: Any, path: Path_) -> Iterator[tuple[Path_, Any]]:
            if (id(source), path) in self.done:
                return
            whole = path and path[-1] in _WHOLE_VALUES
            if isinstance(node, dict) and node and not whole:
                for key, value in node.items():
                    yield from walk(value, (*path, str(key)))
            else:
                yield path, node

        yield from walk(source.data, ())

    def config(self) -> CommentedMap:
        root = CommentedMap()
        comments: dict[int, tuple[CommentedMap, int, list[tuple[str, str, int]]]] = {}
        for target in sorted(self.settings, key=_config_order):
            value, origins = self.settings[target]
            node = root
            *sections, name = target.split(".")
            for section in sections:
                node = node.setdefault(section, CommentedMap())
            node[name] = _commented(value)
            # One line whatever the inputs' names hold: a line break in a comment would start
            # a key of its own.
            text = printable("from " + " and ".join(origins), 400)
            width = len(name) + 1 + (len(_plain(value)) + 1 if _plain(value) else 0)
            comments.setdefault(id(node), (node, 2 * len(sections), []))[2].append(
                (name, text, width)
            )
        # The comments of one mapping in one column, two spaces after its longest line.
        for node, indent, entries in comments.values():
            column = indent + max(width for _, _, width in entries) + 2
            for name, text, _ in entries:
                node.yaml_add_eol_comment(text, name, column=column)
        return root


# Fields whose value is a whole list or mapping of the user's (they map, or not, as one).
_WHOLE_VALUES = {
    "env",
    "args",
    "tolerations",
    "labels",
    "annotations",
    "resources",
    "imagePullSecrets",
    "nodeSelector",
    "affinity",
    "additionalLabels",
    "relabelings",
    "managedFields",
    "conditions",
    "podSecurityContext",
    "securityContext",
    "selectorLabelsOverride",
    "podAnnotations",
    "map",
    "data",
    "extraObjects",
    "node-feature-discovery",
    "draDriver",
    "fallbackStrategies",
    "featureGates",
    "logging",
    "initContainer",
    "startupProbe",
    "livenessProbe",
    "readinessProbe",
}


def _plain(value: Any) -> str:
    """A scalar as the config writes it on its key's line ('' for a list or a mapping)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return ""
    return str(value)


def _commented(value: Any) -> Any:
    if isinstance(value, dict):
        mapping = CommentedMap()
        for key, item in value.items():
            mapping[key] = _commented(item)
        return mapping
    if isinstance(value, list):
        return CommentedSeq([_commented(item) for item in value])
    return value


# The config's sections in the order `gpustack init` writes them (model.GPUStack).
_ORDER = [
    "apiVersion",
    "kind",
    "metadata",
    "platform",
    "namespace",
    "nodes",
    "devicePlugin",
    "gfd",
    "migManager",
    "nfd",
    "dcgmExporter",
    "runtimeClass",
    "driver",
    "toolkit",
    "validator",
    "nodeStatusExporter",
    "images",
]


def _config_order(target: str) -> tuple[int, str]:
    section = target.split(".")[0]
    return (_ORDER.index(section) if section in _ORDER else len(_ORDER), target)


def import_inputs(
    inputs: list[Input],
    profile: Profile,
    profile_reason: str,
    name: str,
    operator_version: str | None = None,
) -> Imported:
    """The config and the report for `inputs` on `profile`; what an operator input leaves out
    is `operator_version`'s default (else the release the inputs name, else the newest)."""
    operator = [each for each in inputs if each.kind in (CLUSTER_POLICY, OPERATOR_VALUES)]
    release, release_reason = choose_release(inputs, operator_version)
    defaults: list[Input] = []
    if operator:
        # Helm renders the ClusterPolicy from the chart's values: a values file leaves the rest
        # to values.yaml; a ClusterPolicy of its own to the operator's code.
        chart = any(each.kind == OPERATOR_VALUES for each in operator)
        defaults = [
            Input(
                OPERATOR_DEFAULTS,
                f"GPU Operator {release.version}'s default",
                operator_defaults(release, chart),
                SourceMap(""),
            )
        ]
    # The defaults come first (every input overrides them) and are reported last.
    state = _Import(profile, [*inputs, *defaults], release)
    plugin_configs = _plugin_configs(inputs)
    for each in [*defaults, *inputs]:
        if each.kind in (CLUSTER_POLICY, OPERATOR_VALUES, OPERATOR_DEFAULTS):
            _operator(state, each, plugin_configs)
        elif each.kind == PLUGIN_VALUES:
            _plugin_chart(state, each, plugin_configs)
    for each in inputs:
        reported = any(done[0] == id(each) for done in state.done)
        if each.kind == PLUGIN_CONFIG and not reported:
            _plugin_config(state, PluginConfig(each, (), each.data), "default")
        _leftovers(state, each, plugin_configs)
    _mig_manager_auto(state, defaults[0] if defaults else None)
    _without_validator(state)
    _without_effect(state)
    config = state.config()
    config.insert(0, "apiVersion", API_VERSION)
    config.insert(1, "kind", "GPUStack")
    config.insert(2, "metadata", CommentedMap(name=name))
    config.insert(3, "platform", CommentedMap(profile=profile.metadata.name))
    config["platform"].yaml_add_eol_comment(printable(profile_reason, 400), "profile")
    # The report in the inputs' order, each input's fields as they are written; of the
    # defaults, what they gave the config or could not (what equals gpustack's own is left out,
    # and so is a default an input's own field replaced).
    given = {path for kind, path in state.paths if kind != OPERATOR_DEFAULTS}
    kept = [
        (order, entry)
        for index, (order, entry) in enumerate(zip(state.order, state.entries))
        if state.paths[index][0] != OPERATOR_DEFAULTS
        or (
            index not in state.hidden
            and entry.outcome != "default"
            and state.paths[index][1] not in given
        )
    ]
    entries = [entry for _, entry in sorted(kept, key=lambda pair: pair[0])]
    return Imported(
        config,
        entries,
        profile.metadata.name,
        profile_reason,
        state.expected,
        release.version if operator else None,
        release_reason if operator else "",
        state.locations,
        sorted(
            {
                text
                for target, (value, _) in state.settings.items()
                if target not in _CHOICES
                for text in _strings(value)
            }
        ),
    )


def leave_out(imported: Imported, target: str, why: str) -> Imported:
    """`imported` without the config field `target`, which only the operator's defaults set and
    gpustack refuses on this profile (`why`, a message without the inputs' values): the defaults'
    entries for it say so."""
    *sections, name = target.split(".")
    nodes = [imported.config]
    for section in sections:
        nodes.append(nodes[-1][section])
    del nodes[-1][name]
    for parent, section in reversed(list(zip(nodes, sections))):
        if not parent[section]:
            del parent[section]
    entries = [
        Entry(
            entry.input,
            entry.field,
            entry.location,
            "dropped",
            target,
            f"the operator's default, which gpustack refuses here: {why}",
        )
        if entry.target == target and not entry.location
        else entry
        for entry in imported.entries
    ]
    origins = {key: value for key, value in imported.origins.items() if key != target}
    return replace(imported, entries=entries, origins=origins)


# Config fields whose values are gpustack's own words (a choice among a few), not an input's.
_CHOICES = {
    "driver.mode",
    "toolkit.enabled",
    "devicePlugin.migStrategy",
    "devicePlugin.deviceListStrategy",
    "devicePlugin.sharing.strategy",
    "migManager.enabled",
    "dcgmExporter.monitor",
    "nfd.mode",
}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


# ---------------------------------------------------------------------------------------------
# Which operator release's defaults.

# The labels the operator's chart puts on its ClusterPolicy (deployments/gpu-operator/templates/
# _helpers.tpl gpu-operator.labels, v26.7.0): the release it was installed with.
_VERSION_LABELS = ("app.kubernetes.io/version", "helm.sh/chart")


def _labelled_release(each: Input) -> tuple[str, str] | None:
    """The release a ClusterPolicy's Helm labels name, with the label."""
    labels = _at(each.data, ("metadata", "labels"))
    if each.kind != CLUSTER_POLICY or not isinstance(labels, dict):
        return None
    for label in _VERSION_LABELS:
        written = labels.get(label)
        found = re.search(
            rf"(?<![0-9.])v?({_NUMBER}\.{_NUMBER}\.{_NUMBER})$",
            written if isinstance(written, str) else "",
        )
        if found is not None:
            return f"v{found.group(1)}", label
    return None


def choose_release(inputs: list[Input], given: str | None) -> tuple[Release, str]:
    """The operator release whose defaults fill in what the inputs leave out, and why."""
    known = releases()
    if given is not None:
        version = given if given.startswith("v") else f"v{given}"
        if version not in known:
            raise UserError(
                "--operator-version: not a GPU Operator release the importer knows",
                hint=f"one of: {', '.join(known)}",
            )
        return known[version], "given with --operator-version"
    for each in inputs:
        labelled = _labelled_release(each)
        if labelled is None:
            continue
        version, label = labelled
        if version in known:
            return known[version], f"the ClusterPolicy's label {label}"
        # A release the importer does not list: the closest older one of its line, else the
        # newest (a later release than the importer knows).
        line = [
            each
            for each in known
            if release_key(each)[:2] == release_key(version)[:2]
            and release_key(each) < release_key(version)
        ]
        chosen = known[line[-1]] if line else newest_release()
        return chosen, (
            f"the ClusterPolicy's label {label} names a release the importer does not list; "
            f"the closest it knows; give --operator-version"
        )
    return newest_release(), (
        "the inputs do not name the operator release: the newest the importer knows; give "
        "--operator-version with the release installed (`helm list -n gpu-operator`)"
    )


# What every release's operator does with a field a ClusterPolicy leaves out
# (api/nvidia/v1/clusterpolicy_types.go IsEnabled methods: the driver, the toolkit, the device
# plugin, GFD, the DCGM exporter and the MIG manager run unless switched off; the node status
# exporter does not; controllers/object_controls.go ServiceMonitor: none without
# dcgmExporter.serviceMonitor; applyMIGConfiguration: no MIG_STRATEGY, the plugin's own `none`).
_RUN_UNLESS_OFF = ("driver", "toolkit", "devicePlugin", "gfd", "dcgmExporter", "migManager")


def operator_defaults(release: Release, chart: bool) -> dict[str, Any]:
    """The operator's settings for what an input leaves out, in the values' (and the spec's)
    layout: the chart's values.yaml for a values file (`chart`), else the operator's own."""
    data: dict[str, Any] = {}
    for component, (repository, image, version) in release.images.items():
        node = data
        for part in component.split("."):
            node = node.setdefault(part, {})
        node.update(repository=repository, image=image, version=version)
    for section in _RUN_UNLESS_OFF:
        data[section]["enabled"] = True
    data["nodeStatusExporter"]["enabled"] = False
    data["cdi"] = {"enabled": release.cdi}
    if chart and release.manager_env:
        data["driver"]["manager"]["env"] = [
            {"name": name, "value": value} for name, value in release.manager_env.items()
        ]
    data["dcgmExporter"]["serviceMonitor"] = {"enabled": chart and release.service_monitor}
    if chart:
        data["mig"] = {"strategy": "single"}  # values.yaml `mig.strategy`, every release
    return data


# The switch of each section whose settings act only while its component runs.
_SWITCHES = {
    "driver": "mode",
    "toolkit": "enabled",
    "migManager": "enabled",
    "dcgmExporter": "enabled",
    "gfd": "enabled",
    "validator": "enabled",
    "nodeStatusExporter": "enabled",
}


def _runs(state: _Import, section: str) -> bool:
    """Whether the component of a config section runs with the settings imported so far on this
    profile (stack.Stack's rules: driver_container, toolkit_enabled, mig_manager_enabled)."""
    facts = state.profile.facts

    def setting(target: str) -> Any:
        known = state.settings.get(target)
        return known[0] if known is not None else state.gpustack_default(target)

    if section == "driver":
        mode = setting("driver.mode")
        return (facts.driver.default if mode == "auto" else mode) in ("container", "driver-toolkit")
    if section == "toolkit":
        enabled = setting("toolkit.enabled")
        return state.auto("toolkit.enabled") if enabled == "auto" else bool(enabled)
    if section == "migManager":
        enabled = setting("migManager.enabled")
        if enabled == "auto":
            return (
                setting("devicePlugin.migStrategy") != "none"
                and facts.migPartitioning == "mig-manager"
            )
        return bool(enabled)
    return setting(f"{section}.enabled") is not False


def _validator_runs(state: _Import) -> bool:
    """gpustack's validator runs where its driver validation finds the driver: a driver
    container, or a host driver at `/` (stack.validator_finds_driver)."""
    known = state.settings.get("validator.enabled")
    enabled = known[0] if known is not None else state.gpustack_default("validator.enabled")
    if enabled != "auto":
        return bool(enabled)
    mode = state.settings.get("driver.mode", (state.gpustack_default("driver.mode"),))[0]
    mode = state.profile.facts.driver.default if mode == "auto" else mode
    root = state.profile.facts.driver.root
    return mode in ("container", "driver-toolkit") or (mode == "preinstalled" and root == "/")


def _without_validator(state: _Import) -> None:
    """The node status exporter reports the validator's ready files: where gpustack's validator
    cannot run (its driver validation does not find the platform's driver), the operator's
    exporter is not carried over, and `--check` says it would stop."""
    known = state.settings.get("nodeStatusExporter.enabled")
    if known is None or known[0] is not True or _validator_runs(state):
        return
    for index in state.mapped_at.pop("nodeStatusExporter.enabled", []):
        entry = state.entries[index]
        state.entries[index] = Entry(
            entry.input,
            entry.field,
            entry.location,
            "dropped",
            None,
            "the node status exporter reports the validator's checks, and gpustack's validator "
            "cannot find the driver on this profile",
        )
    del state.settings["nodeStatusExporter.enabled"]
    state.locations.pop("nodeStatusExporter.enabled", None)


def _without_effect(state: _Import) -> None:
    """A setting of a component that does not run would have no effect, which gpustack refuses
    in a config: the operator's field is read, and left out (a default's, from the report)."""
    for target in sorted(state.settings):
        section, _, rest = target.partition(".")
        switch = _SWITCHES.get(section)
        if switch is None or rest == switch or _runs(state, section):
            continue
        for index in state.mapped_at.pop(target, []):
            if state.paths[index][0] == OPERATOR_DEFAULTS:
                state.hidden.add(index)
                continue
            entry = state.entries[index]
            state.entries[index] = Entry(
                entry.input,
                entry.field,
                entry.location,
                "dropped",
                target,
                f"no effect: gpustack's {section} does not run with these settings",
            )
        del state.settings[target]
        state.locations.pop(target, None)


def _mig_manager_auto(state: _Import, defaults: Input | None) -> None:
    """The MIG manager the operator runs (on MIG-capable nodes, whatever the MIG strategy) is
    `auto` where the final MIG strategy runs gpustack's too, `true` only where none does: an
    earlier input's choice, made before a later one named the strategy, is set right here."""
    known = state.settings.get("migManager.enabled")
    strategy = state.settings.get("devicePlugin.migStrategy", ("none",))[0]
    operator_runs = state.expected.get("migManager image", "not run") != "not run"
    if (
        defaults is not None
        and operator_runs
        and strategy == "none"
        and known is None
        and state.profile.facts.migPartitioning == "mig-manager"
    ):
        state.set(defaults, ("migManager", "enabled"), "migManager.enabled", True)
        return
    if known is None or known[0] is not True or strategy == "none":
        return
    if not state.from_defaults("migManager.enabled"):
        return
    for index in state.mapped_at.pop("migManager.enabled", []):
        state.hidden.add(index)
    del state.settings["migManager.enabled"]
    state.locations.pop("migManager.enabled", None)


# ---------------------------------------------------------------------------------------------
# Device plugin configs: `version: v1` files, on their own or as ConfigMap entries.


@dataclass
class PluginConfig:
    source: Input
    path: Path_  # where the text is, in its input (a ConfigMap's data key, or the whole file)
    data: dict[str, Any]


def _plugin_configs(inputs: list[Input]) -> dict[tuple[str, str], PluginConfig]:
    """Plugin configs by (owner, entry name): the owner is the ConfigMap's name, the chart's
    values (`config.map`, the operator chart's `devicePlugin.config.data`), or '' for a file
    of its own (named by its file name)."""
    found: dict[tuple[str, str], PluginConfig] = {}
    for each in inputs:
        if each.kind == PLUGIN_CONFIG:
            found[("", each.name.removeprefix("plugin config "))] = PluginConfig(
                each, (), each.data
            )
        elif each.kind == CONFIG_MAP:
            found |= _configs_at(each, ("data",), each.name.removeprefix("ConfigMap "))
        elif each.kind == PLUGIN_VALUES:
            found |= _configs_at(each, ("config", "map"), PLUGIN_VALUES)
        else:
            found |= _configs_at(each, (*each.root, "devicePlugin", "config", "data"), each.name)
    return found


def _configs_at(source: Input, base: Path_, owner: str) -> dict[tuple[str, str], PluginConfig]:
    """The plugin configs in the mapping of texts at `base` (an entry that is not one YAML
    mapping is left for the report to name)."""
    entries = _at(source.data, base)
    found: dict[tuple[str, str], PluginConfig] = {}
    for key, text in entries.items() if isinstance(entries, dict) else ():
        if not isinstance(text, str):
            continue
        path = (*base, str(key))
        try:
            parsed = [
                doc.data
                for doc in load_all_text(text, str(source.location(path)))
                if doc.data is not None
            ]
        except UserError:
            continue
        if len(parsed) == 1 and isinstance(parsed[0], dict):
            found[(owner, str(key))] = PluginConfig(source, path, parsed[0])
    return found


def _plugin_config(state: _Import, config: PluginConfig, role: str) -> None:
    """Map one plugin config: the default one to devicePlugin; any other is not carried."""
    source, base, data = config.source, config.path, config.data
    if role != "default":
        state.dropped(
            source,
            base,
            "a plugin config nodes choose by their nvidia.com/device-plugin.config label; "
            "gpustack renders one config for every GPU node (the default one)",
        )
        return

    def value(*path: str) -> Any:
        return _at(data, path)

    whole = base != ()  # a ConfigMap entry is one field of its input: say what became of it
    notes: list[str] = []
    flags: dict[str, Any] = value("flags") if isinstance(value("flags"), dict) else {}
    strategy = flags.get("migStrategy")
    if strategy in ("none", "single", "mixed"):
        if whole:
            notes.append(f"flags.migStrategy -> devicePlugin.migStrategy {strategy}")
            _set_quiet(state, source, base, "devicePlugin.migStrategy", strategy)
        else:
            state.set(source, ("flags", "migStrategy"), "devicePlugin.migStrategy", strategy)
    plugin: dict[str, Any] = flags.get("plugin") or {}
    plugin = plugin if isinstance(plugin, dict) else {}
    list_strategy = plugin.get("deviceListStrategy")
    if isinstance(list_strategy, str) and list_strategy in (
        "envvar",
        "cdi-annotations",
        "cdi-cri",
        "volume-mounts",
    ):
        if whole:
            _set_quiet(state, source, base, "devicePlugin.deviceListStrategy", list_strategy)
        else:
            state.set(
                source,
                ("flags", "plugin", "deviceListStrategy"),
                "devicePlugin.deviceListStrategy",
                list_strategy,
            )
    sharing = value("sharing") if isinstance(value("sharing"), dict) else {}
    for key, strategy_name in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        shared = sharing.get(key)
        if not isinstance(shared, dict):
            continue
        resources = shared.get("resources")
        gpu = next(
            (
                item
                for item in resources or []
                if isinstance(item, dict) and item.get("name") == "nvidia.com/gpu"
            ),
            None,
        )
        replicas = gpu.get("replicas") if gpu else None
        here: Path_ = ("sharing", key)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 2:
            # replicas 0 or 1: the plugin shares nothing (gitops-catalog's no-time-sliced).
            if not whole:
                state.default(source, here, "shares no GPU (fewer than 2 replicas)")
            continue
        targets = {
            "devicePlugin.sharing.strategy": strategy_name,
            "devicePlugin.sharing.replicas": replicas,
        }
        for flag in ("renameByDefault", "failRequestsGreaterThanOne"):
            if isinstance(shared.get(flag), bool):
                targets[f"devicePlugin.sharing.{flag}"] = shared[flag]
        for target, setting in targets.items():
            if whole:
                _set_quiet(state, source, base, target, setting)
            else:
                state.set(source, (*here, "resources"), target, setting)
        # gpustack shares every GPU of a node as nvidia.com/gpu: the other resources of the
        # list, and `rename` and `devices`, are said, each where it is written.
        partial = False
        for index, item in enumerate(resources or []):
            if item is gpu and isinstance(item, dict):
                extras = [str(name) for name in item if name not in ("name", "replicas")]
            else:
                extras = [""]
            for name in extras:
                partial = True
                if not whole:
                    state.dropped(
                        source,
                        (*here, "resources", index, *([name] if name else [])),
                        "gpustack shares every GPU as nvidia.com/gpu, with one replicas count",
                    )
        if partial:
            notes.append(f"sharing.{key}: only nvidia.com/gpu's replicas")
        if not whole:
            for flag in shared:
                if flag not in ("resources", "renameByDefault", "failRequestsGreaterThanOne"):
                    state.dropped(source, (*here, str(flag)), "no gpustack setting")
    if whole:
        state.record(
            source,
            base,
            "mapped",
            "devicePlugin",
            "the default plugin config"
            + (": " + "; ".join(notes) if notes else "")
            + "; its other flags are gpustack's (the profile's driver root, CDI)",
        )
        return
    for path, _ in state.leaves(source):
        if path and path[0] == "version":
            state.default(source, path, "the plugin config format gpustack writes too")
        elif path and path[0] in ("flags", "resources", "sharing"):
            state.dropped(
                source,
                path,
                "gpustack writes this plugin flag itself, from the profile and the config",
            )


def _set_quiet(state: _Import, source: Input, path: Path_, target: str, value: Any) -> None:
    """Map a value found inside a field (a plugin config in a ConfigMap entry): the entry's own
    outcome is reported once by the caller."""
    if not field_accepts(target, value):
        return  # the entry's outcome says what it maps: gpustack's own stands
    if target in state.settings and state.from_defaults(target):
        # The plugin config the operator runs replaces the operator's default.
        state.hidden.update(state.mapped_at.pop(target, []))
        del state.settings[target]
        state.locations.pop(target, None)
    if state.gpustack_default(target) == value or target in state.settings:
        return
    state.settings[target] = (value, [source.shown(path)])
    state.locations.setdefault(target, []).append(source.location(path))


# ---------------------------------------------------------------------------------------------
# The GPU Operator: a ClusterPolicy or the chart's values (the chart writes the ClusterPolicy's
# spec from the same keys: deployments/gpu-operator/templates/clusterpolicy.yaml, v26.7.0).


def _operator(
    state: _Import, source: Input, plugin_configs: dict[tuple[str, str], PluginConfig]
) -> None:
    root = source.root
    spec = _at(source.data, root)
    if not isinstance(spec, dict):
        if source.kind == CLUSTER_POLICY:
            raise UserError(
                "the ClusterPolicy has no spec mapping",
                source.location(("spec",)),
                field="spec",
            )
        return

    def get(*path: str) -> Any:
        return _at(spec, path)

    def at(*path: str | int) -> Path_:
        return (*root, *path)

    def present(*path: str) -> bool:
        parent = _at(spec, path[:-1])
        return isinstance(parent, dict) and path[-1] in parent

    facts = state.profile.facts
    _operator_version(state, source)
    # Driver.
    enabled = get("driver", "enabled")
    ocp_toolkit = get("operator", "use_ocp_driver_toolkit") is True
    mode: str
    if enabled is False:
        mode = "preinstalled" if "preinstalled" in facts.driver.modes else facts.driver.default
        state.set(source, at("driver", "enabled"), "driver.mode", mode)
    elif enabled is True or not present("driver", "enabled"):
        # driver.enabled defaults to true (clusterpolicy_types.go DriverSpec.Enabled).
        if "container" in facts.driver.modes:
            mode = "container"
        elif "driver-toolkit" in facts.driver.modes:
            mode = "driver-toolkit"
        else:
            mode = ""
        if mode and present("driver", "enabled"):
            state.set(source, at("driver", "enabled"), "driver.mode", mode)
        elif present("driver", "enabled"):
            state.dropped(
                source,
                at("driver", "enabled"),
                f"the {state.profile.metadata.name} profile installs the driver its own way "
                f"({facts.driver.default})",
            )
    if present("operator", "use_ocp_driver_toolkit"):
        if ocp_toolkit and "driver-toolkit" in facts.driver.modes:
            state.default(
                source,
                at("operator", "use_ocp_driver_toolkit"),
                "gpustack builds the driver with the Driver Toolkit (driver.mode driver-toolkit)",
            )
        else:
            state.default(source, at("operator", "use_ocp_driver_toolkit"), "not used here")
    driver_on = enabled is not False and state.settings.get("driver.mode", ("",))[0] in (
        "container",
        "driver-toolkit",
        "",
    )
    _versions(state, source, spec, driver_on)
    if get("driver", "usePrecompiled") is True:
        state.dropped(
            source,
            at("driver", "usePrecompiled"),
            "gpustack renders one precompiled image per kernel and the input names no "
            "kernel: set driver.precompiled: true with driver.kernelVersion (the nodes' "
            "`uname -r`); until then the driver is built on the node",
        )
    elif present("driver", "usePrecompiled"):
        state.default(source, at("driver", "usePrecompiled"), "built on the node")
    module_type = get("driver", "kernelModuleType")
    if present("driver", "kernelModuleType"):
        state.dropped(
            source,
            at("driver", "kernelModuleType"),
            "gpustack sets no KERNEL_MODULE_TYPE: the driver container chooses (open modules "
            "on GPUs that support them)"
            + (
                "; a `patches:` entry can set KERNEL_MODULE_TYPE on the driver container"
                if module_type in ("open", "proprietary")
                else ""
            ),
        )
    _upgrade(state, source, spec)
    _manager_env(state, source, get("driver", "manager", "env"), at("driver", "manager", "env"))
    # Toolkit and CDI.
    profile = state.profile.metadata.name
    if get("toolkit", "enabled") is True and facts.runtime.toolkit is None:
        state.dropped(
            source,
            at("toolkit", "enabled"),
            f"gpustack does not deploy the Container Toolkit on {profile}: the platform's "
            "runtime reaches the GPUs without it",
        )
    elif isinstance(get("toolkit", "enabled"), bool):
        state.set(source, at("toolkit", "enabled"), "toolkit.enabled", get("toolkit", "enabled"))
    _toolkit_env(state, source, get("toolkit", "env"), at("toolkit", "env"))
    cdi = get("cdi", "enabled")
    if isinstance(cdi, bool):
        if cdi:
            state.default(
                source,
                at("cdi", "enabled"),
                "gpustack hands GPUs over by CDI where it renders the toolkit "
                "(devicePlugin.deviceListStrategy auto)",
            )
        else:
            state.set(source, at("cdi", "enabled"), "devicePlugin.deviceListStrategy", "envvar")
    if present("cdi", "default"):
        state.default(
            source, at("cdi", "default"), "deprecated in the operator; cdi.enabled decides"
        )
    # Device plugin.
    if get("devicePlugin", "enabled") is True and facts.devicePluginProvider != "nvidia":
        state.dropped(
            source,
            at("devicePlugin", "enabled"),
            f"the platform's own device plugin serves nvidia.com/gpu on {profile}; gpustack "
            "does not deploy NVIDIA's there",
        )
    elif isinstance(get("devicePlugin", "enabled"), bool):
        state.set(
            source,
            at("devicePlugin", "enabled"),
            "devicePlugin.enabled",
            get("devicePlugin", "enabled"),
        )
    strategy = get("mig", "strategy")
    if strategy in ("none", "single", "mixed"):
        state.set(source, at("mig", "strategy"), "devicePlugin.migStrategy", strategy)
    # What a later input (a kustomize patch) leaves out keeps an earlier input's value.
    if isinstance(strategy, str):
        state.expected["plugin migStrategy"] = strategy
    state.expected.setdefault("plugin migStrategy", "none")
    state.expected.setdefault("plugin sharing", "none")
    # cdi.enabled defaults to true (clusterpolicy_types.go CDIConfigSpec.Enabled, v26.7.0); the
    # toolkit writes the CDI specs.
    if present("toolkit", "enabled") or present("cdi", "enabled") or "CDI" not in state.expected:
        toolkit_on = get("toolkit", "enabled") is not False
        state.expected["CDI"] = "on" if toolkit_on and cdi is not False else "off"
    _device_plugin_config(state, source, spec, plugin_configs)
    # MIG manager.
    mig_enabled = get("migManager", "enabled")
    partitioning = facts.migPartitioning
    if mig_enabled is True and partitioning != "mig-manager":
        state.dropped(
            source,
            at("migManager", "enabled"),
            f"on {profile} the {'node OS' if partitioning == 'node-settings' else 'node pool'} "
            "creates the MIG partitions itself",
        )
    elif isinstance(mig_enabled, bool):
        # The operator runs it on MIG-capable nodes (nvidia.com/mig.capable) whatever the MIG
        # strategy; gpustack's `auto` runs it with a strategy, `true` without one.
        with_strategy = state.settings.get("devicePlugin.migStrategy", ("none",))[0] != "none"
        state.set(
            source,
            at("migManager", "enabled"),
            "migManager.enabled",
            ("auto" if with_strategy else True) if mig_enabled else False,
            "runs with a MIG strategy" if mig_enabled and with_strategy else "",
        )
    default_config = get("migManager", "config", "default")
    if isinstance(default_config, str) and default_config:
        state.set(
            source,
            at("migManager", "config", "default"),
            "migManager.defaultConfig",
            default_config,
        )
    if get("migManager", "config", "name"):
        state.dropped(
            source,
            at("migManager", "config", "name"),
            "a ConfigMap of mig-parted configs: save its config.yaml as a file and set "
            "migManager.config.file",
        )
    for env_name, env_value in _env_list(get("migManager", "env")):
        if env_name == "WITH_REBOOT":
            state.set(
                source,
                at("migManager", "env"),
                "migManager.withReboot",
                str(env_value).lower() == "true",
            )
    # DCGM exporter.
    if isinstance(get("dcgmExporter", "enabled"), bool):
        state.set(
            source,
            at("dcgmExporter", "enabled"),
            "dcgmExporter.enabled",
            get("dcgmExporter", "enabled"),
        )
    counters = get("dcgmExporter", "config", "name")
    if counters:
        state.dropped(
            source,
            at("dcgmExporter", "config", "name"),
            "a ConfigMap of custom counters: gpustack renders its own counters list (the one "
            "its alerts and dashboard read); a `patches:` entry can change it",
        )
    if counters:
        state.expected["exporter counters"] = f"ConfigMap {counters}"
    state.expected.setdefault("exporter counters", "the exporter image's default counters")
    monitor = get("dcgmExporter", "serviceMonitor", "enabled")
    if isinstance(monitor, bool):
        state.set(
            source,
            at("dcgmExporter", "serviceMonitor", "enabled"),
            "dcgmExporter.monitor",
            "servicemonitor" if monitor else "none",
        )
    interval = get("dcgmExporter", "serviceMonitor", "interval")
    if isinstance(interval, str) and interval:
        state.set(
            source,
            at("dcgmExporter", "serviceMonitor", "interval"),
            "dcgmExporter.interval",
            interval,
        )
    labels = get("dcgmExporter", "serviceMonitor", "additionalLabels")
    if isinstance(labels, dict) and labels:
        state.set(
            source,
            at("dcgmExporter", "serviceMonitor", "additionalLabels"),
            "dcgmExporter.monitorLabels",
            {str(key): str(value) for key, value in labels.items()},
        )
    # GFD, NFD, node status exporter, validator.
    for section in ("gfd", "nodeStatusExporter"):
        if isinstance(get(section, "enabled"), bool):
            state.set(source, at(section, "enabled"), f"{section}.enabled", get(section, "enabled"))
    if isinstance(get("nfd", "enabled"), bool):
        state.set(
            source,
            at("nfd", "enabled"),
            "nfd.mode",
            "deploy" if get("nfd", "enabled") else "external",
        )
    for part, target in (
        ("plugin", "validator.pluginWorkload"),
        ("cuda", "validator.cudaWorkload"),
    ):
        for env_name, env_value in _env_list(get("validator", part, "env")):
            if env_name == "WITH_WORKLOAD":
                state.set(
                    source, at("validator", part, "env"), target, str(env_value).lower() == "true"
                )
    # Runtime class, common DaemonSet settings, registries and pull secrets, resources.
    runtime_class = get("operator", "runtimeClass")
    if isinstance(runtime_class, str) and runtime_class:
        state.set(source, at("operator", "runtimeClass"), "runtimeClass.name", runtime_class)
    if isinstance(runtime_class, str) and runtime_class:
        state.expected["runtime class"] = runtime_class
    state.expected.setdefault("runtime class", "nvidia")
    _daemonsets(state, source, spec)
    _registries(state, source, spec)


def _operator_version(state: _Import, source: Input) -> None:
    labelled = _labelled_release(source)
    if labelled is None:
        return
    version = state.release.version
    if labelled[0] == version:
        why = f"installed by GPU Operator {version}, whose defaults fill in what it leaves out"
    else:
        why = f"GPU Operator {version}'s defaults fill in what the ClusterPolicy leaves out"
    state.default(source, ("metadata", "labels"), why)


def _image(state: _Import, spec: dict[str, Any], component: str) -> Image:
    """(repository, image, version) the operator runs for a component of the spec."""
    repository, image, version = state.release.images[component]
    section = _at(spec, tuple(component.split(".")))
    if isinstance(section, dict):
        repository = str(section.get("repository") or repository)
        image = str(section.get("image") or image)
        version = str(section.get("version") or version)
    return repository, image, version


# A release tag with the base image's distribution: how the operator's charts before v25.10.0
# pin the Container Toolkit, the MIG manager, the device plugin and the driver manager
# (`v1.17.8-ubuntu20.04`, `v0.12.3-ubuntu20.04`, `v0.15.0-ubi8`). Each project publishes the
# same release under its short tag too (NVIDIA/nvidia-container-toolkit and NVIDIA/mig-parted
# deployments/container/Makefile `push-short`: "we also push a short tag equal to the version"),
# the tag gpustack runs.
_DISTRO_TAG = re.compile(
    rf"(v{_NUMBER}\.{_NUMBER}\.{_NUMBER})-(ubuntu[0-9.]+|ubi[0-9]+|rhel[0-9.]+|centos[0-9]+)"
)
# dcgm-exporter's `<DCGM>-<exporter>-<distribution>`: gpustack runs the `-distroless` image,
# published from 4.4.1-4.6.0 (the release GPU Operator v25.10.0 moved to, NVIDIA/gpu-operator
# #1770 "Use distroless tag for dcgm-exporter"); an older release has only its distribution
# images, which run the exporter differently.
_EXPORTER_TAG = re.compile(
    rf"({_NUMBER}\.{_NUMBER}\.{_NUMBER})-({_NUMBER}\.{_NUMBER}\.{_NUMBER})-"
    r"(distroless|ubuntu[0-9.]+|ubi[0-9]+)"
)
_FIRST_DISTROLESS_EXPORTER = ((4, 4, 1), (4, 6, 0))
# Components that gpustack runs from the operator's own image (nvcr.io/nvidia/gpu-operator).
_VALIDATOR_IMAGE = ("validator", "nodeStatusExporter")


def _short_tag(component: str, written: str) -> tuple[str, str | None]:
    """The tag gpustack runs for the operator's `written` tag, and why, where it differs; or
    ("", why) where gpustack cannot run that release."""
    if component == "dcgmExporter":
        found = _EXPORTER_TAG.fullmatch(written)
        if found is None:
            return written, None
        dcgm, exporter, variant = found.groups()
        release = (release_key(dcgm), release_key(exporter))
        if variant != "distroless" and release < _FIRST_DISTROLESS_EXPORTER:
            return "", (
                "an exporter release before 4.4.1-4.6.0, published without the distroless "
                "image of gpustack's exporter: the config keeps gpustack's own "
                "(dcgmExporter.version)"
            )
        why = None if variant == "distroless" else "the release's distroless image"
        return f"{dcgm}-{exporter}", why
    if component in _VALIDATOR_IMAGE:
        if not re.fullmatch(rf"v{_NUMBER}\.{_NUMBER}\.{_NUMBER}", written):
            return written, None  # no release: the field check says so
        if field_accepts(f"{component}.version", written):
            return written, None
        return "", (
            "gpustack's validator runs nvidia-validator from the GPU Operator's own image, "
            "which carries it from v25.10.0 on (before, the validator was an image of its own, "
            "gpu-operator-validator): the config keeps gpustack's own (" + component + ".version)"
        )
    found = _DISTRO_TAG.fullmatch(written)
    if found is None:
        return written, None
    return found.group(1), "the release its distribution-suffixed tag names (its short tag)"


def same_release(operator: str, gpustack: str) -> bool:
    """Two image references name the same release of the same image: a distribution-suffixed
    tag is its release's short tag (and dcgm-exporter's distroless one)."""
    if operator == gpustack:
        return True
    path, _, tag = operator.rpartition(":")
    other_path, _, other_tag = gpustack.rpartition(":")
    if path != other_path:
        return False
    component = "dcgmExporter" if path.endswith("/dcgm-exporter") else ""
    short = _short_tag(component, tag)[0] if component else _short_tag("", tag)[0]
    if component:
        return bool(short) and other_tag in (short, f"{short}-distroless")
    return short == other_tag


def _versions(state: _Import, source: Input, spec: dict[str, Any], driver_on: bool) -> None:
    root = source.root
    for component, section in SECTIONS.items():
        path = tuple(component.split("."))
        node = _at(spec, path)
        repository, image, version = _image(state, spec, component)
        if component.startswith("driver") and not driver_on:
            state.expected[f"{component} image"] = "not run"
            if isinstance(node, dict) and "version" in node:
                state.default(
                    source,
                    (*root, *path, "version"),
                    "no driver container here: the driver is the host's",
                )
            continue
        off = isinstance(node, dict) and node.get("enabled") is False
        # The node status exporter is off unless enabled (clusterpolicy_types.go IsEnabled).
        if component == "nodeStatusExporter" and not (
            isinstance(node, dict) and node.get("enabled") is True
        ):
            off = True
        aspect = f"{component} image"
        explicit = isinstance(node, dict) and bool(
            {"enabled", "repository", "image", "version"} & set(node)
        )
        if explicit or aspect not in state.expected:
            state.expected[aspect] = "not run" if off else f"{repository}/{image}:{version}"
        if not isinstance(node, dict) or "version" not in node:
            continue
        where = (*root, *path, "version")
        written = node.get("version")
        if not isinstance(written, str) or not written:
            state.default(source, where, f"unset: the operator's default ({state.release.version})")
            continue
        if component == "gfd":
            plugin = _short_tag("devicePlugin", _image(state, spec, "devicePlugin")[2])[0]
            if _short_tag("gfd", written)[0] == plugin:
                state.default(source, where, "GFD runs the device plugin's image and version")
            else:
                state.dropped(
                    source,
                    where,
                    "gpustack runs GFD at the device plugin's version (devicePlugin.version)",
                )
            continue
        if component == "driver" and not re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?", written):
            state.dropped(
                source,
                where,
                "not a driver version such as 595.91.07 (a digest or a custom tag): gpustack "
                "names the driver image by version and node OS",
            )
            continue
        tag, why = _short_tag(component, written)
        if not tag and off:
            state.default(source, where, "the component is off")
            continue
        if not tag:
            state.dropped(source, where, why or "")
            continue
        state.set(source, where, f"{section}.version", tag, why or "")


def _registries(state: _Import, source: Input, spec: dict[str, Any]) -> None:
    """Each component's repository (and image name) against upstream's: one registry that
    replaces nvcr.io for all of them is images.registry; pull secrets are images.pullSecrets."""
    root = source.root
    registries: dict[str, list[Path_]] = {}
    secrets: list[str] = []
    for component, (upstream_repository, upstream_image, _) in state.release.images.items():
        path = tuple(component.split("."))
        node = _at(spec, path)
        if not isinstance(node, dict):
            continue
        repository, image = node.get("repository"), node.get("image")
        if "image" in node:
            if not image or image == upstream_image:
                state.default(source, (*root, *path, "image"), "upstream's image name")
            elif component in _VALIDATOR_IMAGE and image == "gpu-operator-validator":
                state.dropped(
                    source,
                    (*root, *path, "image"),
                    "the validator image of GPU Operator releases before v25.10.0: gpustack's "
                    "validator runs nvidia-validator from the operator's own image",
                )
            else:
                state.dropped(
                    source,
                    (*root, *path, "image"),
                    "a renamed image: images.registry keeps upstream's image names (a "
                    "`patches:` entry can set another)",
                )
        if "repository" in node:
            where = (*root, *path, "repository")
            if not repository or repository == upstream_repository:
                state.default(source, where, "upstream's repository")
            elif isinstance(repository, str) and repository.endswith(
                upstream_repository.removeprefix(UPSTREAM_REGISTRY)
            ):
                registry = repository[
                    : len(repository) - len(upstream_repository.removeprefix(UPSTREAM_REGISTRY))
                ]
                registries.setdefault(registry, []).append(where)
            else:
                state.dropped(
                    source,
                    where,
                    "a repository path other than upstream's: images.registry replaces the "
                    f"registry host ({UPSTREAM_REGISTRY}) and keeps each image's path",
                )
        pulled = node.get("imagePullSecrets")
        if "imagePullSecrets" in node:
            names = [str(item) for item in pulled] if isinstance(pulled, list) else []
            if names:
                for name in names:
                    if name not in secrets:
                        secrets.append(name)
                state.record(
                    source, (*root, *path, "imagePullSecrets"), "mapped", "images.pullSecrets"
                )
            else:
                state.default(source, (*root, *path, "imagePullSecrets"), "none")
    for registry, paths in sorted(registries.items()):
        for where in paths:
            state.set(source, where, "images.registry", registry)
    if secrets:
        value = sorted(name for name in secrets if field_accepts("images.pullSecrets", [name]))
        known = state.settings.get("images.pullSecrets")
        merged = sorted({*value, *(known[0] if known else [])})
        if not merged:
            return
        state.locations.setdefault("images.pullSecrets", []).append(
            source.location((*root, "imagePullSecrets"))
        )
        state.settings["images.pullSecrets"] = (
            merged,
            [*(known[1] if known else []), f"{source.name} imagePullSecrets"],
        )
        state.expected["pull secrets"] = ", ".join(merged)


def _upgrade(state: _Import, source: Input, spec: dict[str, Any]) -> None:
    """driver.upgradePolicy (NVIDIA/k8s-operator-libs api/upgrade/v1alpha1
    DriverUpgradePolicySpec) as the driver DaemonSet's rolling update and k8s-driver-manager's
    eviction and drain."""
    base = (*source.root, "driver", "upgradePolicy")
    policy = _at(spec, ("driver", "upgradePolicy"))
    if not isinstance(policy, dict):
        return
    parallel = policy.get("maxParallelUpgrades")
    if isinstance(parallel, int) and not isinstance(parallel, bool) and parallel >= 1:
        state.set(
            source,
            (*base, "maxParallelUpgrades"),
            "driver.upgrade.maxUnavailable",
            parallel,
            "nodes upgraded at a time",
        )
    if parallel == 0 and not isinstance(parallel, bool):
        state.dropped(
            source,
            (*base, "maxParallelUpgrades"),
            "0, no limit: the driver's rolling update takes maxUnavailable nodes at a time",
        )
    unavailable = policy.get("maxUnavailable")
    if "maxUnavailable" in policy:
        if isinstance(parallel, int) and parallel >= 1:
            state.dropped(
                source,
                (*base, "maxUnavailable"),
                "the DaemonSet's rolling update takes maxParallelUpgrades nodes at a time",
            )
        elif isinstance(unavailable, (int, str)):
            state.set(
                source, (*base, "maxUnavailable"), "driver.upgrade.maxUnavailable", unavailable
            )
    if "autoUpgrade" in policy:
        if policy["autoUpgrade"] is True:
            state.default(source, (*base, "autoUpgrade"), "a new driver rolls out node by node")
        else:
            state.dropped(
                source,
                (*base, "autoUpgrade"),
                "gpustack rolls a driver change out at once (the DaemonSet's rolling update); "
                "hold a change back in Git instead",
            )
    drain = policy.get("drain")
    if isinstance(drain, dict):
        names = {
            "enable": "driver.upgrade.drain.enabled",
            "timeoutSeconds": "driver.upgrade.drain.timeoutSeconds",
            "podSelector": "driver.upgrade.drain.podSelector",
            "deleteEmptyDir": "driver.upgrade.drain.deleteEmptyDir",
            "force": "driver.upgrade.drain.force",
        }
        for key, target in names.items():
            if key in drain and drain[key] is not None:
                state.set(source, (*base, "drain", key), target, drain[key])
    for key in ("podDeletion", "gpuPodDeletion"):
        deletion = policy.get(key)
        if isinstance(deletion, dict):
            for name in deletion:
                state.dropped(
                    source,
                    (*base, key, str(name)),
                    "k8s-driver-manager evicts GPU pods within the drain's timeout and "
                    "options (driver.upgrade.drain)",
                )
    if "waitForCompletion" in policy:
        state.dropped(
            source,
            (*base, "waitForCompletion"),
            "the operator's upgrade controller waits for jobs; gpustack's DaemonSet update "
            "does not",
        )


# k8s-driver-manager's environment (NVIDIA/k8s-driver-manager v0.12.0 cmd/driver-manager) that
# gpustack's settings write.
_MANAGER_ENV = {
    "ENABLE_GPU_POD_EVICTION": "driver.upgrade.gpuPodEviction",
    "ENABLE_AUTO_DRAIN": "driver.upgrade.drain.enabled",
    "DRAIN_USE_FORCE": "driver.upgrade.drain.force",
    "DRAIN_POD_SELECTOR_LABEL": "driver.upgrade.drain.podSelector",
    "DRAIN_TIMEOUT_SECONDS": "driver.upgrade.drain.timeoutSeconds",
    "DRAIN_DELETE_EMPTYDIR_DATA": "driver.upgrade.drain.deleteEmptyDir",
}


# What Go's strconv.ParseBool reads as true and as false.
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _manager_env(state: _Import, source: Input, env: Any, path: Path_) -> None:
    if not isinstance(env, list):
        return
    for index, (name, value) in enumerate(_env_list(env)):
        target = _MANAGER_ENV.get(name)
        where = (*path, index)
        if target is None:
            state.dropped(source, where, "no gpustack setting for this driver-manager variable")
            continue
        if target.endswith("timeoutSeconds"):
            # A count of seconds, or a duration as the driver manager reads it and the operator
            # writes it (`0s`: a Go duration flag, k8s-driver-manager v0.12.0 main.go).
            text = str(value).strip()
            if re.fullmatch(r"[0-9]+", text):
                text += "s"
            if not re.fullmatch(r"([0-9]+(h|m|s|ms))+", text) or duration_ms(text) % 1000:
                state.dropped(source, where, "not a whole number of seconds")
                continue
            setting: Any = duration_ms(text) // 1000
        elif target.endswith("podSelector"):
            setting = str(value or "")
        else:
            # As the driver manager reads it (urfave/cli v2 BoolFlag: empty is false, else Go's
            # strconv.ParseBool); anything else stops the manager, which gpustack's would not.
            text = "" if value is None else str(value)
            if text not in _GO_TRUE and text not in _GO_FALSE and text != "":
                state.dropped(source, where, "not a boolean the driver manager reads")
                continue
            setting = text in _GO_TRUE
        state.set(source, where, target, setting)
    state.done.add((id(source), path))


# The Container Toolkit's runtime variables and the profile facts that decide them.
_TOOLKIT_FACTS = {
    "CONTAINERD_CONFIG": "configFile",
    "RUNTIME_CONFIG": "configFile",
    "CONTAINERD_SOCKET": "socket",
    "RUNTIME_SOCKET": "socket",
    "RUNTIME_DROP_IN_CONFIG": "dropInConfigFile",
    "RUNTIME_RESTART_MODE": "restartMode",
}


def _toolkit_env(state: _Import, source: Input, env: Any, path: Path_) -> None:
    if not isinstance(env, list):
        return
    toolkit = state.profile.facts.runtime.toolkit
    profile = state.profile.metadata.name
    for index, (name, value) in enumerate(_env_list(env)):
        where = (*path, index)
        if name in _TOOLKIT_FACTS or name in ("CONTAINERD_RUNTIME_CLASS", "RUNTIME_CLASS"):
            state.expected[f"toolkit {name}"] = str(value)
        fact = _TOOLKIT_FACTS.get(name)
        if name in ("CONTAINERD_RUNTIME_CLASS", "RUNTIME_CLASS"):
            state.set(source, where, "runtimeClass.handler", str(value))
        elif fact is not None and toolkit is not None:
            if getattr(toolkit, fact) == value:
                state.default(source, where, f"the {profile} profile's too")
            else:
                state.dropped(
                    source,
                    where,
                    f"the {profile} profile decides it (facts.runtime.toolkit.{fact}); a "
                    "profile of your own (--profiles-dir) can say otherwise",
                )
        elif name in ("CONTAINERD_SET_AS_DEFAULT", "NVIDIA_RUNTIME_SET_AS_DEFAULT"):
            state.dropped(
                source,
                where,
                "gpustack keeps runc the default runtime and names the nvidia runtime "
                "through runtimeClass",
            )
        else:
            state.dropped(source, where, "no gpustack setting for this toolkit variable")
    state.done.add((id(source), path))


def _device_plugin_config(
    state: _Import,
    source: Input,
    spec: dict[str, Any],
    plugin_configs: dict[tuple[str, str], PluginConfig],
) -> None:
    base = (*source.root, "devicePlugin", "config")
    config = _at(spec, ("devicePlugin", "config"))
    if not isinstance(config, dict):
        return
    name, default = config.get("name"), config.get("default")
    # The operator chart's own ConfigMap (devicePlugin.config.create and .data), or one the
    # ClusterPolicy names.
    chart_data = isinstance(config.get("data"), dict) and bool(config["data"])
    owner = source.name if chart_data else str(name or "")
    if not owner:
        for key in config:
            state.default(source, (*base, str(key)), "no plugin config: gpustack's own")
        return
    mine = {
        entry: each for (config_map, entry), each in plugin_configs.items() if config_map == owner
    }
    if not mine:
        # The operator's plugin shares GPUs as that config says, which only its ConfigMap
        # tells: `--check` says so rather than compare with the default's `none`.
        state.expected["plugin sharing"] = (
            "its plugin config's (the ConfigMap devicePlugin.config.name names, not among the "
            "inputs)"
        )
        state.dropped(
            source,
            (*base, "name"),
            "the ConfigMap is not among the inputs: give its YAML too "
            "(`kubectl get configmap NAME -o yaml`) to import its plugin configs",
        )
        for key in config:
            if key != "name":
                state.dropped(source, (*base, str(key)), "its ConfigMap is not among the inputs")
        return
    chosen = str(default) if default else (next(iter(mine)) if len(mine) == 1 else "")
    if chosen not in mine:
        chosen = ""
    for key in config:
        if key in ("name", "default", "create", "data"):
            state.record(
                source,
                (*base, str(key)),
                "mapped" if chosen else "dropped",
                "devicePlugin" if chosen else None,
                None if chosen else "names no plugin config among the inputs as the default",
            )
        else:
            state.dropped(source, (*base, str(key)), "no gpustack setting")
    for entry, each in sorted(mine.items()):
        _plugin_config(state, each, "default" if entry == chosen else "other")
        if entry == chosen:
            _expected_plugin(state, each.data)


def _expected_plugin(state: _Import, data: dict[str, Any]) -> None:
    flags: dict[str, Any] = data.get("flags") or {}
    if isinstance(flags, dict) and flags.get("migStrategy"):
        state.expected["plugin migStrategy"] = str(flags["migStrategy"])
    sharing: dict[str, Any] = data.get("sharing") or {}
    sharing = sharing if isinstance(sharing, dict) else {}
    for key, strategy in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        shared = sharing.get(key)
        if isinstance(shared, dict):
            for item in shared.get("resources") or []:
                if isinstance(item, dict) and item.get("name") == "nvidia.com/gpu":
                    replicas = item.get("replicas")
                    if isinstance(replicas, int) and replicas >= 2:
                        state.expected["plugin sharing"] = f"{strategy} x{replicas}"


def _daemonsets(state: _Import, source: Input, spec: dict[str, Any]) -> None:
    base = (*source.root, "daemonsets")
    daemonsets = _at(spec, ("daemonsets",))
    if not isinstance(daemonsets, dict):
        return
    tolerations = daemonsets.get("tolerations")
    if isinstance(tolerations, list):
        _tolerations(state, source, tolerations, (*base, "tolerations"))
    if "priorityClassName" in daemonsets:
        if daemonsets["priorityClassName"] in ("system-node-critical", "", None):
            state.default(source, (*base, "priorityClassName"), "system-node-critical")
        else:
            state.dropped(
                source,
                (*base, "priorityClassName"),
                "gpustack's GPU DaemonSets run system-node-critical (a `patches:` entry can "
                "change it)",
            )
    for key in ("labels", "annotations"):
        if key in daemonsets:
            if daemonsets[key]:
                state.dropped(
                    source,
                    (*base, key),
                    f"no gpustack setting: a `patches:` entry can add {key} to the DaemonSets",
                )
            else:
                state.default(source, (*base, key), "none")
    if "updateStrategy" in daemonsets:
        if daemonsets["updateStrategy"] == "RollingUpdate":
            state.default(source, (*base, "updateStrategy"), "RollingUpdate")
        else:
            state.dropped(source, (*base, "updateStrategy"), "gpustack's DaemonSets roll")
    rolling = daemonsets.get("rollingUpdate")
    if isinstance(rolling, dict):
        for key in rolling:
            if str(rolling[key]) == "1":
                state.default(source, (*base, "rollingUpdate", str(key)), "one node at a time")
            else:
                state.dropped(
                    source,
                    (*base, "rollingUpdate", str(key)),
                    "gpustack rolls its DaemonSets one node at a time (the driver: "
                    "driver.upgrade.maxUnavailable)",
                )


def _tolerations(state: _Import, source: Input, tolerations: list[Any], base: Path_) -> None:
    """Each toleration of a GPU node taint (a key and an effect) is a taint of nodes.taints:
    gpustack's GPU workloads tolerate them and the node/ files apply them. Any other item
    (no key: every taint; no effect: every effect of the key) is said on its own, and the others
    are still carried over."""
    taints: list[dict[str, str]] = []
    mapped: list[int] = []
    for index, toleration in enumerate(tolerations):
        key = toleration.get("key") if isinstance(toleration, dict) else None
        effect = toleration.get("effect") if isinstance(toleration, dict) else None
        if not isinstance(toleration, dict) or not key:
            state.dropped(
                source,
                (*base, index),
                "a toleration without a key tolerates every taint: gpustack's GPU workloads "
                "tolerate nodes.taints (and nvidia.com/gpu); add a node's other taints there",
            )
            continue
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            state.dropped(
                source,
                (*base, index),
                "a toleration without an effect tolerates every effect of its key: gpustack "
                "tolerates each of nodes.taints with its effect",
            )
            continue
        taint = {"key": str(key)}
        if toleration.get("operator") != "Exists" and toleration.get("value"):
            taint["value"] = str(toleration["value"])
        elif str(key) == "nvidia.com/gpu":
            taint["value"] = "present"  # gpustack's taint: the node/ files write it
        taint["effect"] = str(effect)
        taints.append(taint)
        mapped.append(index)
    state.done.add((id(source), base))
    if not taints:
        return
    if not field_accepts("nodes.taints", taints):
        for index in mapped:
            state.dropped(source, (*base, index), "not a taint gpustack's nodes.taints takes")
        return
    for index in mapped:
        state.set(
            source,
            (*base, index),
            "nodes.taints",
            taints,
            "GPU workloads tolerate them, and the node/ files apply them",
        )


# ---------------------------------------------------------------------------------------------
# The device-plugin chart.


def _plugin_chart(
    state: _Import, source: Input, plugin_configs: dict[tuple[str, str], PluginConfig]
) -> None:
    data = source.data
    plugin_on = _at(data, ("devicePlugin", "enabled"))
    if isinstance(plugin_on, bool):
        state.set(source, ("devicePlugin", "enabled"), "devicePlugin.enabled", plugin_on)
    for key, target in (
        ("migStrategy", "devicePlugin.migStrategy"),
        ("deviceListStrategy", "devicePlugin.deviceListStrategy"),
    ):
        if isinstance(data.get(key), str):
            state.set(source, (key,), target, data[key])
    strategy = data.get("migStrategy")
    state.expected["plugin migStrategy"] = strategy if isinstance(strategy, str) else "none"
    state.expected["plugin sharing"] = "none"
    list_strategy = data.get("deviceListStrategy")
    state.expected["CDI"] = (
        "on" if isinstance(list_strategy, str) and list_strategy.startswith("cdi") else "off"
    )
    # The chart runs the plugin (and GFD with gfd.enabled), nothing else of the stack.
    for component in SECTIONS:
        if component not in ("devicePlugin", "gfd"):
            state.expected.setdefault(f"{component} image", "not run")
    if _at(data, ("gfd", "enabled")) is not True:
        state.expected.setdefault("gfd image", "not run")
    tag = _at(data, ("image", "tag"))
    if isinstance(tag, str) and tag:
        state.set(source, ("image", "tag"), "devicePlugin.version", tag)
    repository = _at(data, ("image", "repository"))
    upstream_repository, upstream_tag = PLUGIN_CHART_IMAGE
    plugin_image = f"{repository or upstream_repository}:{tag or upstream_tag}"
    state.expected["devicePlugin image"] = plugin_image
    if _at(data, ("gfd", "enabled")) is True:
        state.expected["gfd image"] = plugin_image
    if isinstance(repository, str):
        suffix = upstream_repository.removeprefix(UPSTREAM_REGISTRY)
        if repository == upstream_repository:
            state.default(source, ("image", "repository"), "upstream's repository")
        elif repository.endswith(suffix):
            state.set(
                source, ("image", "repository"), "images.registry", repository[: -len(suffix)]
            )
        else:
            state.dropped(
                source,
                ("image", "repository"),
                "a repository path other than upstream's: images.registry keeps each image's path",
            )
    secrets = data.get("imagePullSecrets")
    if isinstance(secrets, list) and secrets:
        names = sorted(
            str(item.get("name")) if isinstance(item, dict) else str(item) for item in secrets
        )
        state.set(source, ("imagePullSecrets",), "images.pullSecrets", names)
        state.expected["pull secrets"] = ", ".join(names)
    if isinstance(_at(data, ("gfd", "enabled")), bool):
        state.set(source, ("gfd", "enabled"), "gfd.enabled", data["gfd"]["enabled"])
    resources = data.get("resources")
    if isinstance(resources, dict) and resources:
        state.set(source, ("resources",), "devicePlugin.resources", resources)
    tolerations = data.get("tolerations")
    if isinstance(tolerations, list):
        state.dropped(
            source,
            ("tolerations",),
            "gpustack tolerates nodes.taints (the profile's nvidia.com/gpu taint by default) "
            "and runs its DaemonSets system-node-critical",
        )
    config = data.get("config")
    if isinstance(config, dict):
        mine = {
            entry: each
            for (owner, entry), each in plugin_configs.items()
            if owner in (PLUGIN_VALUES, str(config.get("name") or "-"))
        }
        default = config.get("default")
        chosen = str(default) if default else (next(iter(mine)) if len(mine) == 1 else "")
        if chosen and chosen not in mine:
            state.dropped(
                source,
                ("config", "default"),
                "names a plugin config that is not among the inputs",
            )
            chosen = ""
        for entry, each in sorted(mine.items()):
            _plugin_config(state, each, "default" if entry == chosen else "other")
            if entry == chosen:
                _expected_plugin(state, each.data)
        for key in ("name", "default"):
            if key in config and (id(source), ("config", key)) not in state.done:
                if config[key]:
                    state.record(source, ("config", key), "mapped", "devicePlugin")
                else:
                    state.default(source, ("config", key), "no plugin config: gpustack's own")
        if "map" in config and not mine:
            state.default(source, ("config", "map"), "empty")
    # The chart's per-flag values: null is unset (the plugin's own default).
    for path, value in list(state.leaves(source)):
        if value is None or value == {} or value == [] or value == "":
            state.default(source, path, "unset")


# ---------------------------------------------------------------------------------------------
# What no handler took: known fields not carried over, and unknown ones.

# (pattern, why): `*` matches one path part, a trailing `**` any rest.
_NOT_CARRIED: list[tuple[str, str]] = [
    ("apiVersion", "the input's own"),
    ("kind", "the input's own"),
    ("metadata.**", "the object's identity and cluster state, not a setting"),
    ("status.**", "the operator's status, not a setting"),
    ("operator.**", "the operator's own Deployment, which gpustack replaces"),
    ("platform.**", "the chart's platform switch: the profile says it"),
    ("clusterPolicy.**", "the chart's switch for its ClusterPolicy"),
    ("gpuCluster.**", "the chart's switch for its GPUCluster"),
    ("node-feature-discovery", "the chart's NFD settings: gpustack renders NFD its own way (nfd)"),
    ("nfd.nodefeaturerules", "gpustack renders its NodeFeatureRule with NFD"),
    ("nfd.**", "the chart's NFD settings: gpustack renders NFD its own way (nfd)"),
    ("draDriver", "the DRA driver is not part of the GPU stack gpustack renders"),
    ("extraObjects", "extra objects of the chart: keep them beside the rendered folder"),
    ("psp.**", "PodSecurityPolicy is gone from Kubernetes"),
    ("psa.**", "gpustack labels its Namespace for privileged pods itself"),
    ("hostPaths.**", "the profile decides the driver and root paths"),
    ("dcgm.**", "gpustack's exporter runs DCGM embedded, without a separate hostengine"),
    ("sandboxWorkloads.**", "gpustack renders no sandbox (VM passthrough, Kata) stack"),
    ("vgpuManager.**", "gpustack renders no vGPU manager"),
    ("vgpuDeviceManager.**", "gpustack renders no vGPU device manager"),
    ("vfioManager.**", "gpustack renders no VFIO manager (sandbox workloads)"),
    ("sandboxDevicePlugin.**", "gpustack renders no sandbox device plugin"),
    ("kataSandboxDevicePlugin.**", "gpustack renders no Kata device plugin"),
    ("kataManager.**", "gpustack renders no Kata manager"),
    ("ccManager.**", "gpustack renders no confidential-computing manager"),
    ("gds.**", "gpustack renders no GPUDirect Storage driver"),
    ("gdrcopy.**", "gpustack renders no GDRCopy driver"),
    ("cdi.nriPluginEnabled", "gpustack runs no NRI plugin"),
    ("driver.useNvidiaDriverCRD", "gpustack renders the driver DaemonSet itself, no NVIDIADriver"),
    ("driver.nvidiaDriverCRD.**", "gpustack renders the driver DaemonSet itself, no NVIDIADriver"),
    (
        "driver.useOpenKernelModules",
        "deprecated for kernelModuleType; the driver container chooses",
    ),
    ("driver.rdma.**", "gpustack loads no GPUDirect RDMA module"),
    ("driver.repoConfig.**", "a package-repository ConfigMap for the driver build: not supported"),
    ("driver.certConfig.**", "a certificate ConfigMap for the driver build: not supported"),
    ("driver.licensingConfig.**", "vGPU licensing: gpustack renders no vGPU guest driver setup"),
    ("driver.virtualTopology.**", "vGPU topology: not supported"),
    ("driver.kernelModuleConfig.**", "custom kernel module parameters: not supported"),
    ("driver.secretEnv", "a Secret of driver environment: not supported"),
    ("driver.manager.imagePullPolicy", "gpustack's pull policy is the Kubernetes default"),
    ("toolkit.installDir", "gpustack installs the toolkit in /usr/local/nvidia"),
    ("devicePlugin.mps.**", "gpustack's MPS root is the plugin's /run/nvidia/mps"),
    ("dcgmExporter.serviceMonitor.scrapeTimeout", "gpustack's monitor keeps Prometheus' timeout"),
    ("dcgmExporter.serviceMonitor.honorLabels", "gpustack's monitor does not honour labels"),
    ("dcgmExporter.serviceMonitor.relabelings", "a `patches:` entry can add relabelings"),
    ("dcgmExporter.service.**", "gpustack's exporter Service is its own"),
    ("dcgmExporter.hpcJobMapping.**", "HPC job mapping: not supported"),
    ("dcgmExporter.enablePodLabels", "pod labels on metrics: not supported"),
    ("dcgmExporter.enablePodUID", "pod UIDs on metrics: not supported"),
    ("dcgmExporter.podLabelAllowlistRegex", "pod labels on metrics: not supported"),
    ("dcgmExporter.hostPID", "gpustack's exporter runs without the host's PID namespace"),
    ("migManager.config.create", "the chart's ConfigMap switch: see migManager.config.file"),
    ("migManager.config.data", "mig-parted configs: save them as a file, migManager.config.file"),
    (
        "migManager.gpuClientsConfig.**",
        "a GPU clients ConfigMap: gpustack's MIG manager knows the GPU clients it renders",
    ),
    ("*.imagePullPolicy", "gpustack pulls by the Kubernetes default (IfNotPresent for a tag)"),
    ("*.hostNetwork", "gpustack's GPU pods run in the pod network"),
    ("*.args", "no gpustack setting: a `patches:` entry can add arguments"),
    ("*.env", "no gpustack setting for these variables: a `patches:` entry can set them"),
    ("*.annotations", "no gpustack setting: a `patches:` entry can add annotations"),
    ("*.startupProbe", "gpustack's driver probes are upstream's"),
    ("*.livenessProbe", "gpustack's driver probes are upstream's"),
    ("*.readinessProbe", "gpustack's driver probes are upstream's"),
    ("*.config.name", "no gpustack setting"),
    ("validator.**", "gpustack's validator runs the checks the profile needs"),
    # The device-plugin chart.
    ("compatWithCPUManager", "gpustack's plugin passes no device specs (the CPU manager works)"),
    ("failOnInitError", "gpustack's plugin fails on an init error"),
    ("deviceIDStrategy", "gpustack's plugin names GPUs by UUID"),
    ("nvidiaDriverRoot", "the profile decides the driver root"),
    ("gdrcopyEnabled", "gpustack renders no GDRCopy driver"),
    ("gdsEnabled", "gpustack renders no GPUDirect Storage driver"),
    ("mofedEnabled", "gpustack loads no MOFED driver"),
    ("deviceDiscoveryStrategy", "the plugin finds GPUs by NVML (its auto)"),
    ("nameOverride", "gpustack names its objects itself"),
    ("fullnameOverride", "gpustack names its objects itself"),
    ("namespaceOverride", "the config's namespace"),
    ("selectorLabelsOverride", "gpustack labels its objects itself"),
    ("allowDefaultNamespace", "the config's namespace"),
    ("image.pullPolicy", "gpustack pulls by the Kubernetes default"),
    ("updateStrategy.**", "gpustack's DaemonSets roll one node at a time"),
    ("podAnnotations", "a `patches:` entry can add annotations"),
    ("podSecurityContext", "gpustack's plugin runs with upstream's security context"),
    ("securityContext", "gpustack's plugin runs with upstream's security context"),
    ("nodeSelector", "gpustack places GPU workloads by NFD's label and nodes.selector"),
    ("affinity", "gpustack places GPU workloads by NFD's label and nodes.selector"),
    ("priorityClassName", "gpustack's GPU DaemonSets run system-node-critical"),
    ("runtimeClassName", "gpustack sets runtimeClassName where the profile's runtime needs it"),
    ("gfd.**", "gpustack's GFD is its own DaemonSet (gfd.enabled)"),
    ("mps.**", "gpustack runs the MPS control daemon with sharing.strategy mps"),
    ("cdi.**", "the toolkit gpustack renders writes the CDI specs"),
    ("config.fallbackStrategies", "gpustack renders one plugin config for every node"),
    ("config.map", "the plugin configs, each reported on its own"),
    ("data.**", "not a device plugin config (`version: v1`)"),
]


def _matches(pattern: str, path: Path_) -> bool:
    parts = pattern.split(".")
    names = [str(part) for part in path if not isinstance(part, int)]
    if parts[-1] == "**":
        head = parts[:-1]
        return len(names) >= len(head) and all(
            want in ("*", have) for want, have in zip(head, names)
        )
    return len(names) == len(parts) and all(want in ("*", have) for want, have in zip(parts, names))


def _leftovers(
    state: _Import, source: Input, plugin_configs: dict[tuple[str, str], PluginConfig]
) -> None:
    if source.kind == PLUGIN_CONFIG:
        return
    entries = source.data.get("data") if source.kind == CONFIG_MAP else None
    if isinstance(entries, dict) and (id(source), ("data",)) not in state.done:
        owner = source.name.removeprefix("ConfigMap ")
        for key in entries:
            if (owner, str(key)) in plugin_configs:
                unread = "a plugin config in a ConfigMap no input's devicePlugin.config.name names"
            else:
                unread = "not a device plugin config (`version: v1`)"
            if (id(source), ("data", str(key))) not in state.done:
                state.dropped(source, ("data", str(key)), unread)
        state.done.add((id(source), ("data",)))
    for path, value in list(state.leaves(source)):
        relative = path[len(source.root) :] if path[: len(source.root)] == source.root else path
        if source.kind == CONFIG_MAP:
            relative = path
        why: str | None = next(
            (reason for pattern, reason in _NOT_CARRIED if _matches(pattern, relative)), None
        )
        if why is None and path[: len(source.root)] != source.root:
            why = next(
                (reason for pattern, reason in _NOT_CARRIED if _matches(pattern, path)), None
            )
        sandbox = _at(source.data, (*source.root, "sandboxWorkloads", "enabled")) is True
        if relative and relative[0] in _SANDBOX and not sandbox and why is not None:
            state.default(
                source, path, "runs only with sandboxWorkloads.enabled, which is off here"
            )
        elif relative == ("devicePlugin", "mps", "root") and value == "/run/nvidia/mps":
            state.default(source, path, "gpustack's MPS root too")
        elif relative and relative[-1] == "enabled" and value is False and why is not None:
            state.default(source, path, "off, as in gpustack")
        elif _empty(value) and (
            why is not None
            or relative[-1:] in (("name",), ("default",))
            or (relative and relative[0] in _SPEC_FIELDS)
        ):
            state.default(source, path, "unset")
        elif relative[-1:] == ("resources",) and isinstance(value, dict):
            section = None if why and relative[0] == "operator" else _resource_section(relative)
            if section and value:
                state.set(source, path, f"{section}.resources", value)
            elif section:
                state.default(source, path, "gpustack's own requests")
            else:
                state.dropped(source, path, why or "no gpustack setting")
        elif why is not None:
            state.dropped(source, path, why)
        else:
            state.record(
                source,
                path,
                "unknown",
                why=f"not a field the importer knows (GPU Operator {newest_release().version})",
            )


# ClusterPolicySpec's fields (api/nvidia/v1/clusterpolicy_types.go, v26.7.0): an empty one is
# unset, whatever its kind.
_SPEC_FIELDS = {
    "operator",
    "daemonsets",
    "driver",
    "toolkit",
    "devicePlugin",
    "dcgmExporter",
    "dcgm",
    "nodeStatusExporter",
    "gfd",
    "mig",
    "migManager",
    "psp",
    "psa",
    "validator",
    "gds",
    "gdrcopy",
    "sandboxWorkloads",
    "vfioManager",
    "sandboxDevicePlugin",
    "vgpuManager",
    "vgpuDeviceManager",
    "cdi",
    "kataManager",
    "ccManager",
    "hostPaths",
    "kataSandboxDevicePlugin",
}


# The operator's components for VMs and confidential computing: they run only with sandbox
# workloads on (clusterpolicy_types.go SandboxWorkloadsSpec, v26.7.0).
_SANDBOX = {
    "vgpuManager",
    "vgpuDeviceManager",
    "vfioManager",
    "sandboxDevicePlugin",
    "kataSandboxDevicePlugin",
    "kataManager",
    "ccManager",
}


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == {} or value == []


def _resource_section(path: Path_) -> str | None:
    component = ".".join(str(part) for part in path[:-1])
    return SECTIONS.get(component) if component != "driver.manager" else None


# ---------------------------------------------------------------------------------------------
# Text of the report.


def report_text(imported: Imported, shown: list[str]) -> str:
    names = ", ".join(printable(each, 400) for each in shown)
    lines = [f"imported {names} for profile {imported.profile} ({imported.profile_reason})"]
    if imported.release is not None:
        lines.append(
            f"what the inputs leave out: GPU Operator {imported.release}'s defaults "
            f"({imported.release_reason})"
        )
    for outcome in OUTCOMES:
        entries = [entry for entry in imported.entries if entry.outcome == outcome]
        if not entries:
            continue
        lines.append(f"{HEADINGS[outcome]} ({len(entries)}):")
        for entry in entries:
            where = f"{entry.location}: " if entry.location else ""
            text = f"  {where}{entry.input} {entry.field}"
            if entry.target:
                text += f" -> {entry.target}"
            if entry.why:
                text += f": {entry.why}"
            lines.append(text)
    return "\n".join(lines) + "\n"


def config_name(stem: str | None) -> str:
    """metadata.name: the -o file's name where it is a DNS label, else `imported`."""
    return stem if stem and re.fullmatch(DNS1123_LABEL, stem) and len(stem) <= 63 else "imported"
