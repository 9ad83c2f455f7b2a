"""Which input each document is, and which platform the inputs point at: a GPU Operator
ClusterPolicy (as `kubectl get clusterpolicy -o yaml` prints it, a `List` of them too, or the file
kept in a Git repository), the GPU Operator chart's Helm values, the k8s-device-plugin chart's
values, a device plugin config (`version: v1`), or a ConfigMap holding device plugin configs.
Names from the inputs are untrusted: `printable` is how a report line or a comment shows one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpustack.config.field_types import DNS1123_LABEL
from gpustack.errors import Location, UserError
from gpustack.objects import kind_of
from gpustack.read.yamlio import Document, Path_, SourceMap

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
        if kind_of(data) in ("List", "ClusterPolicyList"):
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
    sections = {key for key in data if key in SPEC_FIELDS and key not in ("devicePlugin", "gfd")}
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
        spec = value_at(each.data, each.root)
        if not isinstance(spec, dict):
            continue

        def value(*path: str, spec: Any = spec) -> Any:
            return value_at(spec, path)

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
        for index, env in enumerate(env_list(value("toolkit", "env"))):
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


def value_at(data: Any, path: Path_) -> Any:
    for part in path:
        if isinstance(data, dict) and isinstance(part, str):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data


def env_list(env: Any) -> list[tuple[str, Any]]:
    if not isinstance(env, list):
        return []
    return [(str(item.get("name")), item.get("value")) for item in env if isinstance(item, dict)]


# ClusterPolicySpec's fields (api/nvidia/v1/clusterpolicy_types.go, v26.7.0): an empty one is
# unset, whatever its kind.
SPEC_FIELDS = {
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
