"""The starter config `gpustack init` writes: what the user chose (the cluster's name, its
profile or the base it extends) and the required fields written; every other field shown
commented out with the default it takes (the profile's, and the base's over it), each choice
explained in its comment. Written values would shadow a base: only what is chosen is written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from gpustack.config import SCHEMA_FILE
from gpustack.config.commented import Field, config_text
from gpustack.config.model import field_choices, field_default
from gpustack.config.profile_model import ProfileFacts
from gpustack.resolve import bottlerocket
from gpustack.resolve import platform_profiles as profiles
from gpustack.resolve.layered_settings import merge
from gpustack.resolve.load import settings_of

HEADER = """\
# yaml-language-server: $schema={schema}
# gpustack cluster config. `gpustack render {path}` writes its manifests to out/{name}/.
# Every field below is optional except apiVersion, kind, metadata.name and platform.profile;
# left out, a field takes the profile's default (see `gpustack profiles show {profile}`).
# The commented lines show the defaults; uncomment a line (and its section's) to choose
# another value, which then overrides {overridden}.
{from_base}"""
# Comments start in this column, so that the values line up and read as a table.
COMMENT_COLUMN = 33

# What `runtimeClass.enabled: auto` does, per the profile's runtime fact.
RUNTIME_CLASS_AUTO = {
    "required": "on every GPU pod (containerd's default is runc)",
    "optional": "on every GPU pod; false if nvidia is containerd's default",
    "default": "off here (the node image makes nvidia containerd's default)",
    "cdi-only": "on every GPU pod with the Container Toolkit's CDI, else off",
    "none": "off here (the platform mounts the driver)",
}

# What runs the device plugin, per the profile's devicePluginProvider fact.
PLUGIN_NOTES = {
    "gke": "GKE runs its own device plugin on GPU nodes",
    "bottlerocket": "Bottlerocket runs NVIDIA's plugin as a host service; node/ sets it up",
}


def starter(
    profile_name: str,
    cluster: str,
    profiles_dir: Path | None = None,
    path: str = "gpustack.yaml",
    schema: str = SCHEMA_FILE,
    base: str | None = None,
) -> str:
    """The starter config's text for `cluster` on `profile_name` (else the base's profile,
    else kubeadm), written at `path`, its modeline naming `schema`, extending `base` (a path
    relative to the config's folder) when given."""
    inherited: dict[str, object] = settings_of(Path(path).parent / base) if base else {}
    platform_of_base = inherited.get("platform")
    base_profile = platform_of_base.get("profile") if isinstance(platform_of_base, dict) else None
    write_profile = bool(profile_name) or not isinstance(base_profile, str)
    profile_name = profile_name or (base_profile if isinstance(base_profile, str) else "kubeadm")
    profile, layer = profiles.load(profile_name, profiles_dir)
    defaults = merge(layer.data, inherited)
    fields = [
        *([Field("extends", base, "a fleet's shared settings")] if base else []),
        Field("apiVersion", "gpustack.dev/v1alpha1"),
        Field("kind", "GPUStack"),
        Field("metadata.name", cluster, "DNS-1123 label; names the output folder"),
        Field("platform.profile", profile_name, " | ".join(profiles.available(profiles_dir))),
        *_settings(defaults, profile.facts),
    ]
    # Only what was chosen is written; a value written out would shadow a base's.
    chosen = {"extends", "apiVersion", "kind", "metadata.name"}
    if write_profile:
        chosen.add("platform.profile")
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
    shown = [
        Field(each.path, each.value, each.comment, written=each.path in chosen) for each in fields
    ]
    return config_text(shown, header, COMMENT_COLUMN, flow=True)


@dataclass(frozen=True)
class _Defaults:
    """The values in force where the config leaves a field out: the profile's defaults (the
    base's over them), else the model's."""

    data: dict[str, Any]

    def setting(self, path: str, fallback: object = None) -> object:
        """The value of a config field, else `fallback` (for a field the config model requires
        and a user profile left open)."""
        node: object = self.data
        for key in path.split("."):
            if not isinstance(node, dict) or key not in node:
                try:
                    return field_default(path)
                except KeyError:
                    return fallback
            node = node[key]
        return node

    def field(self, path: str, comment: str) -> Field:
        return Field(path, self.setting(path), comment)


def _settings(defaults: dict[str, Any], facts: ProfileFacts) -> list[Field]:
    """Every field the starter shows below the platform's profile, with the value in force."""
    shown = _Defaults(defaults)
    setting, default = shown.setting, shown.field
    taints = cast("list[dict[str, object]]", setting("nodes.taints"))
    # A taint as kubectl prints it: key, value, effect.
    listed = [
        {key: taint[key] for key in ("key", "value", "effect") if taint.get(key) is not None}
        for taint in taints
    ]
    fields = [
        Field(
            "platform.kubernetesVersion",
            str(setting("platform.kubernetesVersion", "1.31")),
            "target for schema validation and API deprecations",
        ),
    ]
    if setting("platform.openshiftVersion"):
        fields.append(
            Field(
                "platform.openshiftVersion",
                str(setting("platform.openshiftVersion")),
                "OpenShift minor version",
            )
        )
    fields += [
        Field("namespace", setting("namespace", "gpu-system"), "DNS-1123 label"),
        default(
            "nodes.selector", "labels GPU nodes carry, ANDed into every GPU workload's placement"
        ),
        Field("nodes.taints", listed, "every GPU workload tolerates these; node/ applies them"),
        *(
            Field(f"nodes.{pool}", setting(f"nodes.{pool}"), f"the GPU {kind} node/ creates")
            for pool, kind in (("gke", "node pool"), ("aks", "node pool"), ("eks", "node group"))
            if setting(f"nodes.{pool}")
        ),
    ]
    return fields + _component_settings(shown, facts)


def _component_settings(shown: _Defaults, facts: ProfileFacts) -> list[Field]:
    """The fields of the components' sections, with the values in force and what each does."""
    setting, default = shown.setting, shown.field
    return [
        default(
            "gpuAllocation",
            "device-plugin | dra (NVIDIA's DRA driver, Kubernetes 1.34+; then drop devicePlugin.enabled)",
        ),
        Field(
            "devicePlugin.enabled",
            setting("devicePlugin.enabled", True),
            PLUGIN_NOTES.get(facts.devicePluginProvider, "NVIDIA's device plugin"),
        ),
        default("devicePlugin.migStrategy", " | ".join(field_choices("devicePlugin.migStrategy"))),
        default("devicePlugin.deviceListStrategy", _list_strategy_note(facts)),
        default(
            "devicePlugin.sharing.strategy",
            " | ".join(field_choices("devicePlugin.sharing.strategy")),
        ),
        default("devicePlugin.sharing.replicas", "pods per GPU when sharing"),
        Field(
            "gfd.enabled",
            setting("gfd.enabled"),
            "GPU Feature Discovery: nvidia.com/gpu.* node labels",
        ),
        Field(
            "nfd.mode",
            setting("nfd.mode", "deploy"),
            "deploy | external (installed elsewhere) | disabled",
        ),
        default("dcgmExporter.enabled", "GPU metrics on port 9400"),
        default(
            "dcgmExporter.monitor",
            f"auto ({facts.monitoring} here) | servicemonitor | podmonitoring | "
            "azure-servicemonitor | none",
        ),
        default("dcgmExporter.interval", "how often Prometheus scrapes the exporter"),
        default(
            "dcgmExporter.monitorLabels",
            "labels Prometheus selects monitors by, e.g. {release: prometheus}",
        ),
        default(
            "images.registry",
            "air-gapped: the mirror to pull every image from, e.g. registry.example.com",
        ),
        default("images.pullSecrets", "Secrets every pod pulls its images with"),
        default(
            "images.requireDigests",
            "audited: every image pinned by gpustack.lock (`gpustack images --lock-from`)",
        ),
        default(
            "smokeTest.enabled", "a GPU pod after every sync; auto: with gitops.tool argocd or flux"
        ),
        default("runtimeClass.enabled", f"auto: {RUNTIME_CLASS_AUTO[facts.runtime.runtimeClass]}"),
        default("runtimeClass.name", _provided_note(facts.runtime.providedRuntimeClasses)),
        default("runtimeClass.handler", "the runtime name in the container runtime's config"),
        default("driver.mode", f"auto ({facts.driver.default}) | {' | '.join(facts.driver.modes)}"),
        default("toolkit.enabled", _toolkit_note(facts)),
        default("validator.enabled", _validator_note(facts, setting("validator.enabled"))),
    ]


def _list_strategy_note(facts: ProfileFacts) -> str:
    if facts.devicePluginProvider == "bottlerocket":
        return "auto (Bottlerocket's default, volume-mounts) | " + " | ".join(
            bottlerocket.DEVICE_LIST_STRATEGIES
        )
    return "auto (cdi-annotations and cdi-cri with the toolkit, else envvar) | " + " | ".join(
        choice for choice in field_choices("devicePlugin.deviceListStrategy") if choice != "auto"
    )


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
    # (stack.validator_finds_driver).
    container = facts.driver.default in ("container", "driver-toolkit")
    if container or (facts.driver.default == "preinstalled" and facts.driver.root == "/"):
        return "NVIDIA's per-node validation, which GPU DaemonSets wait for: on here"
    return "NVIDIA's per-node validation: not here (it cannot find this platform's driver)"


def _provided_note(provided: list[str]) -> str:
    if "nvidia" in provided:
        return "the platform creates this class; gpustack renders only other names"
    return ""
