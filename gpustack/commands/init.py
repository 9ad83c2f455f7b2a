"""`gpustack init`: a commented starter config for a profile."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from gpustack.commands import common

if TYPE_CHECKING:
    from gpustack.resolve.profile_model import ProfileFacts

# Written beside the config, so editors complete and check it offline (yaml-language-server):
# write.config_file.SCHEMA_FILE, which a test keeps equal (here: building the parser loads no
# library).
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
    from gpustack.errors import display_path
    from gpustack.write.config_file import InitRequest, NewConfig, init

    def text_of(new: NewConfig) -> str:
        return starter(profile, new.cluster, profiles_dir, str(new.path), new.schema, new.base)

    request = InitRequest(path, profile, name, force, profiles_dir, schema, extends)
    written = init(request, text_of)
    config = written.config
    following = ["gpustack", "render", str(config.path)]
    if profiles_dir is not None:
        following += ["--profiles-dir", str(profiles_dir)]
    common.echo(
        f"wrote {display_path(config.path)} (profile {written.profile}"
        + (f", extends {config.base}" if config.base else "")
        + f"); next: {shlex.join(following)} writes out/{config.cluster}/",
        err=True,
    )
    return 0


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
