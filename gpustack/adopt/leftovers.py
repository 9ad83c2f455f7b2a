"""What no mapping took: an input's fields that gpustack knows and does not carry over (each
with why), empty ones, each component's resources, and the fields the importer does not know,
which are reported as unknown and never dropped silently."""

from __future__ import annotations

from typing import Any

from gpustack.adopt.inputs import CONFIG_MAP, PLUGIN_CONFIG, SECTIONS, SPEC_FIELDS, Input, value_at
from gpustack.adopt.plugin_configs import PluginConfig
from gpustack.adopt.releases import newest_release
from gpustack.adopt.report import Import
from gpustack.read.yamlio import Path_

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


def map_leftovers(
    state: Import, source: Input, plugin_configs: dict[tuple[str, str], PluginConfig]
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
        sandbox = value_at(source.data, (*source.root, "sandboxWorkloads", "enabled")) is True
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
            or (relative and relative[0] in SPEC_FIELDS)
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
