"""`gpustack init`: a commented starter config for a profile."""

from __future__ import annotations

import errno
import json
import os
import shlex
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from gpustack.commands import common

if TYPE_CHECKING:
    from gpustack.resolve.profile_model import ProfileFacts

# Written beside the config, so editors complete and check it offline (yaml-language-server).
SCHEMA_FILE = "gpustack.schema.json"

HEADER = """\
# yaml-language-server: $schema={schema}
# gpustack cluster config. `gpustack render {path}` writes its manifests to out/{name}/.
# Every field below is optional except apiVersion, kind, metadata.name and platform.profile;
# left out, a field takes the profile's default (see `gpustack profiles show {profile}`).
# The commented lines show the defaults; uncomment a line (and its section's) to choose
# another value, which then overrides {overridden}.
{from_base}"""
# Comments start in this column, so that the values line up and read as a table.
COMMENT_COLUMN = 32

# What `runtimeClass.enabled: auto` does, per the profile's runtime fact.
RUNTIME_CLASS_AUTO = {
    "required": "on every GPU pod (containerd's default is runc)",
    "optional": "on every GPU pod; false if nvidia is containerd's default",
    "default": "off here (the node image makes nvidia containerd's default)",
    "cdi-only": "on every GPU pod with the Container Toolkit's CDI, else off",
    "none": "off here (the platform mounts the driver)",
}


app = common.application()


@app.command("init")
def run(
    path: Annotated[
        Path,
        typer.Argument(
            help="Where to write the config; a folder (or a path not ending in .yaml) gets "
            "gpustack.yaml in it, named after the folder.",
            metavar="PATH",
        ),
    ] = Path("gpustack.yaml"),
    profile: Annotated[
        str,
        typer.Option(
            "--profile",
            help="Platform profile to start from (default: the base's with --extends, else "
            "kubeadm).",
            metavar="NAME",
            autocompletion=common.profile_names,
            show_default=False,
        ),
    ] = "",
    name: Annotated[
        str,
        typer.Option(
            "--name",
            help="Cluster name (default: from the file name).",
            metavar="NAME",
            show_default=False,
        ),
    ] = "",
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    profiles_dir: common.ProfilesDir = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            help=f"Where the $schema modeline points (default: {SCHEMA_FILE} beside the config, "
            "written or refreshed there).",
            metavar="PATH|URL",
        ),
    ] = None,
    extends: Annotated[
        Path | None,
        typer.Option(
            "--extends",
            help="Start a fleet member: the config extends this base, whose settings it keeps "
            "(only the cluster's name is written; the rest shows as comments).",
            metavar="BASE",
        ),
    ] = None,
    debug: common.Debug = False,
) -> int:
    """Write a commented starter config (never overwriting without --force)."""
    from gpustack.errors import Location, UserError, display_path
    from gpustack.read.yamlio import load_text
    from gpustack.resolve.config_schema import schema_text
    from gpustack.resolve.field_types import dns_label
    from gpustack.resolve.load import load_stack

    if schema is not None and any(
        ord(character) < 0x20 or ord(character) == 0x7F for character in schema
    ):
        # A newline would end the modeline comment and start keys of the config.
        raise UserError(
            "cannot hold a line break or another control character",
            Location("--schema"),
            hint="give a path or URL on one line",
        )
    folder_name = None
    # A folder, existing or to be made (a path not ending in .yaml or .yml: `init gpu-west/`).
    if path.is_dir() or (not path.exists() and path.suffix not in (".yaml", ".yml")):
        folder_name = path.resolve().name
        path = path / "gpustack.yaml"
    if path.is_symlink():
        raise UserError(
            "is a symbolic link; init writes a new file and never through a link",
            Location(display_path(path)),
        )
    if path.is_dir() or (path.exists() and not path.is_file()):
        raise UserError(
            "is not a regular file; init will not replace it", Location(display_path(path))
        )
    if path.exists() and not force:
        raise UserError("already exists (use --force to overwrite)", Location(display_path(path)))
    default_name = folder_name if folder_name and dns_label(folder_name) else "my-cluster"
    cluster = name or (path.stem if path.stem != "gpustack" else default_name)
    if not dns_label(cluster):
        raise UserError(
            f"{cluster!r} is not a valid DNS-1123 label"
            + ("" if name else "; pass --name")
            + " (lowercase letters, digits and '-', at most 63 characters)",
            field="metadata.name",
        )
    base = None
    if extends is not None and not extends.is_file():
        raise UserError(f"base config {display_path(extends)} not found", Location("--extends"))
    if extends is not None:
        # Named as the config will name it: relative to the config's folder.
        base = os.path.relpath(os.path.abspath(extends), os.path.abspath(path.parent))
    text = starter(profile, cluster, profiles_dir, str(path), schema or SCHEMA_FILE, base)
    # The starter loads as render will load it (its base included) before anything is written.
    load_stack(path, profiles_dir=profiles_dir, document=load_text(text, display_path(path)))
    schema_path = path.parent / SCHEMA_FILE
    if schema is None and schema_path.is_symlink():
        raise UserError(
            "is a symbolic link; init writes the schema only as a file of its own; pass --schema "
            "to point elsewhere",
            Location(display_path(schema_path)),
        )
    if schema is None and schema_path.exists() and not _is_gpustack_schema(schema_path):
        raise UserError(
            "exists and is not gpustack's config schema; pass --schema to point elsewhere",
            Location(display_path(schema_path)),
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(
            f"cannot create the folder: {error.strerror}", Location(display_path(path.parent))
        ) from None
    _write(path, text)
    if schema is None:
        _write(schema_path, schema_text())
    following = ["gpustack", "render", str(path)]
    if profiles_dir is not None:
        following += ["--profiles-dir", str(profiles_dir)]
    chosen = load_stack(path, profiles_dir=profiles_dir).profile.metadata.name
    common.echo(
        f"wrote {display_path(path)} (profile {chosen}"
        + (f", extends {base}" if base else "")
        + f"); next: {shlex.join(following)} writes out/{cluster}/",
        err=True,
    )
    return 0


def _write(path: Path, text: str) -> None:
    """Write `text` to the file `path`, never through a symbolic link (one planted between the
    checks and the write included); any failure is one message."""
    import os

    from gpustack.errors import Location, UserError, display_path

    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, flags | os.O_NONBLOCK, 0o666)
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise UserError(
                    "is not a regular file; init will not write to it",
                    Location(display_path(path)),
                )
            data = memoryview(text.encode("utf-8"))
            while data:
                data = data[os.write(descriptor, data) :]
        finally:
            os.close(descriptor)
    except UserError:
        raise
    except OSError as error:
        problem = (
            "is a symbolic link; init writes a new file and never through a link"
            if error.errno == errno.ELOOP
            else f"cannot write: {error.strerror}"
        )
        raise UserError(problem, Location(display_path(path))) from None


def _is_gpustack_schema(path: Path) -> bool:
    """Whether `path` holds a gpustack config schema (of any version), so it may be refreshed."""
    from gpustack.errors import UserError
    from gpustack.read.bounded import read_bounded
    from gpustack.resolve.config_schema import SCHEMA_ID

    try:
        # Bounded, and only a regular file: a FIFO or a huge file there is not a schema.
        document = json.loads(read_bounded(path, what="a JSON schema"))
        return bool(document.get("$id") == SCHEMA_ID)
    except (UserError, ValueError, AttributeError):
        return False


def starter(
    profile_name: str,
    cluster: str,
    profiles_dir: Path | None = None,
    path: str = "gpustack.yaml",
    schema: str = SCHEMA_FILE,
    base: str | None = None,
) -> str:
    """The starter config: what the user chose (the cluster's name, its profile or the base it
    extends) and the required fields; every other field commented out with the default it
    takes (the profile's, and the base's over it), each choice explained. Written values would
    shadow a base: only what is chosen is written."""
    from gpustack.resolve import bottlerocket
    from gpustack.resolve import platform_profiles as profiles
    from gpustack.resolve.layered_settings import merge
    from gpustack.resolve.load import settings_of
    from gpustack.resolve.model import field_choices, field_default

    inherited: dict[str, object] = settings_of(Path(path).parent / base) if base else {}
    platform_of_base = inherited.get("platform")
    base_profile = platform_of_base.get("profile") if isinstance(platform_of_base, dict) else None
    write_profile = bool(profile_name) or not isinstance(base_profile, str)
    profile_name = profile_name or (base_profile if isinstance(base_profile, str) else "kubeadm")
    profile, layer = profiles.load(profile_name, profiles_dir)
    defaults = merge(layer.data, inherited)
    facts = profile.facts
    plugin_notes = {
        "gke": "GKE runs its own device plugin on GPU nodes",
        "bottlerocket": "Bottlerocket runs NVIDIA's plugin as a host service; node/ sets it up",
    }

    def setting(path: str, fallback: object = None) -> object:
        """The profile's default for a config field, else the model's, else `fallback` (for a
        field the config model requires and a user profile left open)."""
        node: object = defaults
        for key in path.split("."):
            if not isinstance(node, dict) or key not in node:
                try:
                    return field_default(path)
                except KeyError:
                    return fallback
            node = node[key]
        return node

    def line(path: str, comment: str, value: object) -> tuple[str, str]:
        """`  field: value` at the field's depth, with its comment."""
        name = path.rpartition(".")[2]
        return (f"{'  ' * path.count('.')}{name}: {_value(value)}", comment)

    def default_line(path: str, comment: str) -> tuple[str, str]:
        """A field written with its default: the profile's, else the model's."""
        return line(path, comment, setting(path))

    taints = cast("list[dict[str, object]]", setting("nodes.taints"))
    lines: list[tuple[str, str]] = [
        ("apiVersion: gpustack.dev/v1alpha1", ""),
        ("kind: GPUStack", ""),
        ("metadata:", ""),
        (f"  name: {cluster}", "DNS-1123 label; names the output folder"),
        ("platform:", ""),
        (f"  profile: {profile_name}", " | ".join(profiles.available(profiles_dir))),
        (
            f'  kubernetesVersion: "{setting("platform.kubernetesVersion", "1.31")}"',
            "target for schema validation and API deprecations",
        ),
    ]
    if setting("platform.openshiftVersion"):
        lines.append(
            (
                f'  openshiftVersion: "{setting("platform.openshiftVersion")}"',
                "OpenShift minor version",
            )
        )
    lines += [
        line("namespace", "DNS-1123 label", setting("namespace", "gpu-system")),
        ("nodes:", ""),
        default_line(
            "nodes.selector", "labels GPU nodes carry, ANDed into every GPU workload's placement"
        ),
        (
            "  taints:" if taints else "  taints: []",
            "every GPU workload tolerates these; node/ applies them",
        ),
        *((f"  - {_flow(taint)}", "") for taint in taints),
        *(
            [line("nodes.gke", "the GPU node pool node/ creates", setting("nodes.gke"))]
            if setting("nodes.gke")
            else []
        ),
        *(
            [line("nodes.aks", "the GPU node pool node/ creates", setting("nodes.aks"))]
            if setting("nodes.aks")
            else []
        ),
        *(
            [line("nodes.eks", "the GPU node group node/ creates", setting("nodes.eks"))]
            if setting("nodes.eks")
            else []
        ),
        default_line(
            "gpuAllocation",
            "device-plugin | dra (NVIDIA's DRA driver, Kubernetes 1.34+; then drop devicePlugin.enabled)",
        ),
        ("devicePlugin:", ""),
        line(
            "devicePlugin.enabled",
            plugin_notes.get(facts.devicePluginProvider, "NVIDIA's device plugin"),
            setting("devicePlugin.enabled", True),
        ),
        default_line(
            "devicePlugin.migStrategy", " | ".join(field_choices("devicePlugin.migStrategy"))
        ),
        default_line(
            "devicePlugin.deviceListStrategy",
            "auto (Bottlerocket's default, volume-mounts) | "
            + " | ".join(bottlerocket.DEVICE_LIST_STRATEGIES)
            if facts.devicePluginProvider == "bottlerocket"
            else "auto (cdi-annotations and cdi-cri with the toolkit, else envvar) | "
            + " | ".join(
                c for c in field_choices("devicePlugin.deviceListStrategy") if c != "auto"
            ),
        ),
        ("  sharing:", ""),
        default_line(
            "devicePlugin.sharing.strategy",
            " | ".join(field_choices("devicePlugin.sharing.strategy")),
        ),
        default_line("devicePlugin.sharing.replicas", "pods per GPU when sharing"),
        ("gfd:", ""),
        line(
            "gfd.enabled",
            "GPU Feature Discovery: nvidia.com/gpu.* node labels",
            setting("gfd.enabled"),
        ),
        ("nfd:", ""),
        line(
            "nfd.mode",
            "deploy | external (installed elsewhere) | disabled",
            setting("nfd.mode", "deploy"),
        ),
        ("dcgmExporter:", ""),
        default_line("dcgmExporter.enabled", "GPU metrics on port 9400"),
        default_line(
            "dcgmExporter.monitor",
            f"auto ({facts.monitoring} here) | servicemonitor | podmonitoring | "
            "azure-servicemonitor | none",
        ),
        default_line("dcgmExporter.interval", "how often Prometheus scrapes the exporter"),
        default_line(
            "dcgmExporter.monitorLabels",
            "labels Prometheus selects monitors by, e.g. {release: prometheus}",
        ),
        ("images:", ""),
        default_line(
            "images.registry",
            "air-gapped: the mirror to pull every image from, e.g. registry.example.com",
        ),
        default_line("images.pullSecrets", "Secrets every pod pulls its images with"),
        default_line(
            "images.requireDigests",
            "audited: every image pinned by gpustack.lock (`gpustack images --lock-from`)",
        ),
        ("smokeTest:", ""),
        default_line(
            "smokeTest.enabled", "a GPU pod after every sync; auto: with gitops.tool argocd or flux"
        ),
        ("runtimeClass:", ""),
        default_line(
            "runtimeClass.enabled", f"auto: {RUNTIME_CLASS_AUTO[facts.runtime.runtimeClass]}"
        ),
        default_line("runtimeClass.name", _provided_note(facts.runtime.providedRuntimeClasses)),
        default_line("runtimeClass.handler", "the runtime name in the container runtime's config"),
        ("driver:", ""),
        default_line(
            "driver.mode", f"auto ({facts.driver.default}) | {' | '.join(facts.driver.modes)}"
        ),
        ("toolkit:", ""),
        default_line("toolkit.enabled", _toolkit_note(facts)),
        ("validator:", ""),
        default_line("validator.enabled", _validator_note(facts, setting("validator.enabled"))),
    ]
    header = HEADER.format(
        schema=schema,
        path=path,
        name=cluster,
        profile=profile_name,
        from_base=f"# It extends {base}: the base's settings apply (the comments show them) "
        "unless written here.\n"
        if base
        else "",
        overridden=f"the base's ({base})" if base else "the profile's default",
    )
    if base:
        lines.insert(0, (f"extends: {_flow_value(base)}", "a fleet's shared settings"))
    # Only what was chosen is written; a value written out would shadow a base's.
    chosen = {"extends", "apiVersion", "kind", "metadata", *(["platform"] if write_profile else [])}
    written = []
    section = ""
    for text, comment in lines:
        indent = len(text) - len(text.lstrip())
        if not indent:
            section = text.partition(":")[0]
        key = text.strip().partition(":")[0]
        if section not in chosen:
            text = f"# {text}"
        elif section == "platform" and indent and key != "profile":
            text = f"{text[:indent]}# {text[indent:]}"
        written.append(_line(text, comment))
    return header + "".join(written)


def _toolkit_note(facts: ProfileFacts) -> str:
    if facts.runtime.toolkit is None:
        return "NVIDIA Container Toolkit DaemonSet: not available here"
    if facts.runtime.toolkit.required:
        return "NVIDIA Container Toolkit DaemonSet: on here (the runtime needs it)"
    return "NVIDIA Container Toolkit DaemonSet: on with a driver container"


def _validator_note(facts: ProfileFacts, enabled: object) -> str:
    if enabled is False:
        return "NVIDIA's per-node validation: off on this profile"
    # What validator.enabled auto decides with the profile's default driver mode
    # (gpustack.resolve.stack.validator_finds_driver).
    container = facts.driver.default in ("container", "driver-toolkit")
    if container or (facts.driver.default == "preinstalled" and facts.driver.root == "/"):
        return "NVIDIA's per-node validation, which GPU DaemonSets wait for: on here"
    return "NVIDIA's per-node validation: not here (it cannot find this platform's driver)"


def _line(text: str, comment: str) -> str:
    if not comment:
        return text + "\n"
    return f"{text.ljust(COMMENT_COLUMN - 1)} # {comment}\n"


def _value(value: object) -> str:
    """A default as YAML: booleans and null spelled out, mappings and lists in flow style."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict) and value:
        # YAML flow style, `{vmSize: Standard_NC4as_T4_v3}`, as the taints are written.
        items = (f"{_flow_value(key)}: {_flow_value(item)}" for key, item in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def _flow_value(value: object) -> str:
    """A value inside a flow mapping: plain where YAML reads it back as the same string."""
    if isinstance(value, str):
        plain = (
            bool(value) and value[0].isalpha() and all(c.isalnum() or c in "._/-" for c in value)
        )
        return value if plain and value.lower() not in _YAML_WORDS else json.dumps(value)
    return _value(value)


# Plain scalars YAML reads as something other than a string.
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _flow(taint: dict[str, object]) -> str:
    """A taint as a one-line YAML mapping, in the order kubectl prints taints."""
    fields = [
        f"{key}: {taint[key]}" for key in ("key", "value", "effect") if taint.get(key) is not None
    ]
    return "{" + ", ".join(fields) + "}"


def _provided_note(provided: list[str]) -> str:
    if "nvidia" in provided:
        return "the platform creates this class; gpustack renders only other names"
    return ""
