"""The resolved `Stack`: a validated config with its profile, and what follows from them (the
driver mode, the driver's root, whether the toolkit, the validator or the DRA driver run...).

Pure: the loader (gpustack.resolve.load) builds a `Stack`; the components and everything after them
only read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpustack.config.field_types import WithResources
from gpustack.config.model import GPUStack
from gpustack.config.node_pools import NodePool
from gpustack.config.profile_model import NodeSelectorRequirement, Profile, ProfileFacts
from gpustack.resolve import mig
from gpustack.resolve.patches import Patch

# Labels only Node Feature Discovery sets: with nfd.mode disabled nothing puts them on a node.
NFD_LABEL_PREFIX = "feature.node.kubernetes.io/"

# The device plugin config of the GPU nodes in no pool: the config manager falls back to it
# (DEFAULT_CONFIG, k8s-device-plugin cmd/config-manager/main.go, v0.20.0), so no pool takes its name.
DEFAULT_CONFIG = "default"
# Driver modes in which NVIDIA's driver container installs the driver.
DRIVER_CONTAINER_MODES = ("container", "driver-toolkit")
# Where a driver container's root filesystem appears on the host (NVIDIA/gpu-operator
# controllers/object_controls.go DefaultDriverInstallDir, v26.7.0).
DRIVER_CONTAINER_ROOT = "/run/nvidia/driver"
# resource.k8s.io/v1 is served from Kubernetes 1.34 (DRA GA, KEP-4381); the DRA driver's chart
# picks the highest version the live cluster serves (kubernetes-sigs/dra-driver-nvidia-gpu
# templates/_helpers.tpl resourceApiVersion, v0.4.1).
RESOURCE_API_V1_FROM = (1, 34)
# Distributions whose driver images are tagged by major version only (NVIDIA/gpu-operator
# internal/state/nodepool.go getOSTag and controllers/state_manager.go getGPUNodeOSInfo, v26.7.0).
MAJOR_VERSION_TAGGED = ("ol", "rocky", "rhel")


def split_node_os(node_os: str) -> tuple[str, str]:
    """`rhel9.6` -> ('rhel', '9.6'): NFD's system-os_release.ID and VERSION_ID labels."""
    os_id = node_os.rstrip("0123456789.")
    return os_id, node_os.removeprefix(os_id)


def driver_os_tag(node_os: str) -> str:
    """The OS suffix of the driver image tag the GPU Operator pulls for nodes of `node_os`:
    ID and VERSION_ID, the major version only for RHEL, Rocky and Oracle Linux (`rhel9.6` ->
    `rhel9`, `rhcos4.18` -> `rhcos4.18`)."""
    os_id, version = split_node_os(node_os)
    if os_id in MAJOR_VERSION_TAGGED:
        version = version.split(".")[0]
    return f"{os_id}{version}"


@dataclass(frozen=True)
class Stack:
    """A validated config with its profile: everything the components need, and nothing on disk."""

    config: GPUStack
    profile: Profile
    source: str
    entitlement_pem: bytes | None = None
    # The MIG configs of migManager.config.file, checked (gpustack.resolve.mig).
    user_mig_configs: mig.Configs | None = None
    # Settings left out because they do not apply to the profile: (field path, why).
    left_out: tuple[tuple[str, str], ...] = ()
    entitlement_mode: int | None = None  # the PEM file's permission bits
    # `patches:` of the bases then the config, read and parsed (gpustack.build.patching applies them).
    patches: tuple[Patch, ...] = ()
    # The `--set FIELD=VALUE` options the config was loaded with, as given (the output records
    # them: a render without them would not give the same files).
    overrides: tuple[str, ...] = ()
    # The image lock beside the config (gpustack.resolve.image_lock): image -> digest, and its path.
    image_digests: Mapping[str, str] = field(default_factory=dict)
    lock_file: Path | None = None
    # Set on a view of the stack as one node pool's nodes see it (gpustack.build.node_files,
    # from GPUStack.pool_settings): the pool.
    pool: NodePool | None = None

    @property
    def name(self) -> str:
        return self.config.metadata.name

    @property
    def namespace(self) -> str:
        return self.config.namespace

    @property
    def facts(self) -> ProfileFacts:
        return self.profile.facts

    @property
    def gpu_node_selector(self) -> list[NodeSelectorRequirement]:
        """The profile's GPU node requirements that something sets: NFD's labels only while
        NFD runs (nfd.mode disabled leaves GPU nodes to nodes.selector and platform labels)."""
        requirements = self.facts.gpuNodeSelector
        if self.config.nfd.mode != "disabled":
            return list(requirements)
        return [item for item in requirements if not item.key.startswith(NFD_LABEL_PREFIX)]

    @property
    def mig_manager_enabled(self) -> bool:
        enabled = self.config.migManager.enabled
        if enabled == "auto":
            pools = [None, *self.config.nodes.pools]
            strategies = {self.config.pool_settings(pool).mig_strategy for pool in pools}
            return strategies != {"none"} and self.facts.migPartitioning == "mig-manager"
        return enabled

    @property
    def mig_configs(self) -> mig.Configs:
        """Every MIG config the MIG manager knows: the built-in ones, then the user's."""
        return {**mig.builtin_configs(), **(self.user_mig_configs or {})}

    @property
    def pools(self) -> list[NodePool]:
        return list(self.config.nodes.pools)

    @property
    def driver_mode(self) -> str:
        return driver_mode(self.config, self.profile)

    @property
    def driver_container(self) -> bool:
        """The driver runs in a container that gpustack deploys (NVIDIA's driver image)."""
        return self.driver_mode in DRIVER_CONTAINER_MODES

    @property
    def driver_root(self) -> str:
        """Where the driver's files are on the host: every component's nvidiaDriverRoot."""
        return DRIVER_CONTAINER_ROOT if self.driver_container else self.facts.driver.root

    @property
    def dev_root(self) -> str:
        """Where the /dev holding the GPU device nodes is on the host. A driver container creates
        them under its root (k8s-device-plugin `--dev-root`: '/' or '/run/nvidia/driver');
        upstream defaults the dev root to the driver root (api/config/v1/config.go)."""
        if self.driver_container:
            return DRIVER_CONTAINER_ROOT
        return self.facts.driver.devRoot or self.facts.driver.root

    @property
    def node_os(self) -> str:
        """The GPU nodes' OS as `<os-release ID><VERSION_ID>`: the platform's for its version
        (OpenShift: RHCOS of `platform.openshiftVersion`), else `driver.nodeOS`. Load refuses a
        platform version the profile does not know (gpustack.resolve.checks.driver)."""
        by_version = self.facts.driver.nodeOS
        if by_version:
            return by_version[self.config.platform.openshiftVersion or ""]
        return self.config.driver.nodeOS

    @property
    def dra_enabled(self) -> bool:
        """NVIDIA's DRA driver runs (`gpuAllocation: dra`, the cluster's or some pool's)."""
        return "dra" in self.gpu_allocations

    @property
    def gpu_allocations(self) -> set[str]:
        """How pods get GPUs on some GPU node: `device-plugin`, `dra` or both (node pools)."""
        config = self.config
        return {config.gpuAllocation} | {
            config.pool_settings(pool).gpu_allocation for pool in self.pools
        }

    @property
    def smoke_test_allocation(self) -> str:
        """How the smoke test gets its GPU: as its first canary pool's nodes do, where it runs,
        else as the cluster's nodes do."""
        canaries = [pool for pool in self.pools if pool.canary]
        return self.config.pool_settings(canaries[0] if canaries else None).gpu_allocation

    @property
    def dra_gpus(self) -> bool:
        """The DRA driver allocates GPUs (its `gpus` kubelet plugin)."""
        return self.dra_enabled and self.config.dra.gpus.enabled

    @property
    def dra_compute_domains(self) -> bool:
        return self.dra_enabled and self.config.dra.computeDomains.enabled

    @property
    def dra_extended_resource(self) -> bool:
        """The API server keeps a DeviceClass's `extendedResourceName` (and the scheduler serves
        `nvidia.com/gpu` limits from it): the field exists from resource.k8s.io/v1 (1.34), behind
        the DRAExtendedResource gate, alpha and off in 1.34 and 1.35, beta and on from 1.36
        (KEP-5004; kubernetes pkg/features DRAExtendedResource). Where the gate is off the API
        server drops the field: the DeviceClass would never match what Git holds."""
        gates = self.config.platform.featureGates
        if "DRAExtendedResource" in gates:
            return gates["DRAExtendedResource"]
        return kubernetes_minor(self.config.platform.kubernetesVersion) >= EXTENDED_RESOURCE_ON_FROM

    @property
    def resource_api_version(self) -> str:
        """The resource.k8s.io version of the DRA objects, pinned by the target Kubernetes
        version where the chart asks the live cluster."""
        return resource_api_version(self.config.platform.kubernetesVersion)

    @property
    def toolkit_enabled(self) -> bool:
        enabled = self.config.toolkit.enabled
        facts = self.facts.runtime.toolkit
        if enabled == "auto":
            return facts is not None and (self.driver_container or facts.required)
        return bool(enabled)

    @property
    def validator_enabled(self) -> bool:
        enabled = self.config.validator.enabled
        if enabled == "auto":
            return validator_finds_driver(self.config, self.profile)
        return bool(enabled)

    @property
    def device_list_strategy(self) -> list[str]:
        """How the device plugin hands GPUs to the runtime. `auto` with the toolkit: CDI through
        annotations and the CRI field both, as the GPU Operator sets DEVICE_LIST_STRATEGY
        (controllers/object_controls.go, v26.7.0): the CRI field (CDIDevices) reaches the
        runtime only from Kubernetes 1.29 (KEP-4009), the annotations on every version."""
        strategy = self.config.devicePlugin.deviceListStrategy
        if strategy == "auto":
            return ["cdi-annotations", "cdi-cri"] if self.toolkit_enabled else ["envvar"]
        return [strategy]

    @property
    def nvidia_plugin_serves(self) -> bool:
        """NVIDIA's device plugin advertises the GPUs as the `devicePlugin` section says:
        gpustack's DaemonSet, or the node OS's own plugin configured from `node/` (Bottlerocket).
        False where the platform's plugin (GKE's) reads its own settings."""
        return self.config.devicePlugin.enabled or self.facts.devicePluginProvider == "bottlerocket"

    @property
    def uses_cdi(self) -> bool:
        """GPUs reach containers as CDI devices, so the runtime must resolve them: the device
        plugin's CDI strategies, or the DRA driver, which hands out nothing but CDI devices
        (dra-driver-nvidia-gpu docs/prerequisites.md: "CDI enabled in your container runtime")."""
        if self.dra_enabled:
            return True
        return any(strategy.startswith("cdi") for strategy in self.device_list_strategy)

    @property
    def gpu_machine_config_pool(self) -> str | None:
        """The MachineConfigPool of the GPU nodes gpustack renders (`worker-gpu`), or None: not
        OpenShift, or gpustack's MachineConfigs target the whole worker pool."""
        if not self.facts.machineConfigOperator:
            return None
        pool = self.config.nodes.machineConfigPool
        return None if pool == "worker" else pool

    @property
    def machine_config_role(self) -> str:
        """The `machineconfiguration.openshift.io/role` of gpustack's MachineConfigs."""
        return self.gpu_machine_config_pool or "worker"

    @property
    def monitor(self) -> str:
        monitor = self.config.dcgmExporter.monitor
        return self.profile.facts.monitoring if monitor == "auto" else monitor

    @property
    def runtime_class_enabled(self) -> bool:
        enabled = self.config.runtimeClass.enabled
        if enabled == "auto":
            need = self.profile.facts.runtime.runtimeClass
            # With CDI the toolkit adds an `nvidia` runtime handler that the GPU stack's own pods
            # run under (gpu-operator assets/pre-requisites/0220_runtime_class_cdi.yaml).
            return need in ("required", "optional") or (need == "cdi-only" and self.toolkit_enabled)
        return bool(enabled)

    @property
    def runtime_class_name(self) -> str | None:
        """The runtimeClassName every GPU pod sets, or None when the default runtime serves."""
        return self.config.runtimeClass.name if self.runtime_class_enabled else None

    @property
    def alerts_enabled(self) -> bool:
        setting = self.config.alerts.enabled
        if setting == "auto":
            # Azure Monitor managed Prometheus reads no rule objects from the cluster: its rules
            # are Azure resources (Prometheus rule groups), so a PrometheusRule would load nowhere.
            return self.config.dcgmExporter.enabled and self.monitor not in (
                "none",
                "azure-servicemonitor",
            )
        return setting

    @property
    def dashboard_enabled(self) -> bool:
        setting = self.config.dashboard.enabled
        if setting == "auto":
            return self.config.dcgmExporter.enabled and self.monitor != "none"
        return setting

    @property
    def smoke_test_enabled(self) -> bool:
        enabled = self.config.smokeTest.enabled
        if enabled == "auto":
            return self.config.gitops.tool != "none"
        return bool(enabled)

    @property
    def component_resources(self) -> dict[str, dict[str, dict[str, str]]]:
        """The `resources` the config sets, by the component label of the workloads they go to."""
        result: dict[str, dict[str, dict[str, str]]] = {}
        for name in type(self.config).model_fields:
            section = getattr(self.config, name)
            if isinstance(section, WithResources) and section.resources is not None:
                for component in section.components:
                    result[component] = section.resources.as_pod_spec()
        return result


def kubernetes_minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


# DRAExtendedResource turns beta, on by default, in Kubernetes 1.36 (KEP-5004).
EXTENDED_RESOURCE_ON_FROM = (1, 36)


def resource_api_version(kubernetes_version: str) -> str:
    if kubernetes_minor(kubernetes_version) >= RESOURCE_API_V1_FROM:
        return "resource.k8s.io/v1"
    # Kubernetes 1.33 serves v1beta2, 1.32 v1beta1 (docs/prerequisites.md); the DRA driver is
    # refused below 1.34 (gpustack.resolve.checks.dra), so nothing renders with these.
    return (
        "resource.k8s.io/v1beta2"
        if kubernetes_minor(kubernetes_version) >= (1, 33)
        else ("resource.k8s.io/v1beta1")
    )


# The DRA driver's gates on by default (kubernetes-sigs/dra-driver-nvidia-gpu
# pkg/featuregates/featuregates.go defaultFeatureGates, Beta, v0.4.1).
DRA_GATES_ON_BY_DEFAULT = (
    "IMEXDaemonsWithDNSNames",
    "ComputeDomainCliques",
    "CrashOnNVLinkFabricErrors",
)


def dra_gate_enabled(config: GPUStack, gate: str) -> bool:
    """Whether a driver feature gate is on: as the config sets it, else the driver's default."""
    gates = {str(key): value for key, value in config.dra.featureGates.items()}
    return gates.get(gate, gate in DRA_GATES_ON_BY_DEFAULT)


def validator_finds_driver(config: GPUStack, profile: Profile) -> bool:
    """NVIDIA's driver validation looks for nvidia-smi on the host's root (/usr/bin, /usr/sbin,
    /bin, /sbin, /opt/bin) and else in a driver container's root, /run/nvidia/driver
    (NVIDIA/gpu-operator cmd/nvidia-validator/main.go hostNvidiaSMISearchPaths and
    validateDriverContainer, v26.7.0): a driver kept elsewhere (GKE's /home/kubernetes/bin/nvidia)
    it never finds."""
    mode = driver_mode(config, profile)
    return mode in DRIVER_CONTAINER_MODES or (
        mode == "preinstalled" and profile.facts.driver.root == "/"
    )


def driver_mode(config: GPUStack, profile: Profile) -> str:
    """Who installs the driver: the config's `driver.mode`, the profile's default for `auto`."""
    mode = config.driver.mode
    return profile.facts.driver.default if mode == "auto" else mode
