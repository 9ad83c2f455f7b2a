"""NVIDIA's driver container: builds or unpacks the driver on each GPU node, loads the kernel
modules and exposes the user-space driver under /run/nvidia/driver, where the Container Toolkit
and every other component find it (`driver.mode` container or driver-toolkit).

Facts from NVIDIA/gpu-operator v26.7.0: assets/state-driver/0500_daemonset.yaml and the
operator's renders of it (internal/state/testdata golden files: minimal, precompiled, OpenShift
Driver Toolkit), deployments/gpu-operator/values.yaml (`driver.version`, `driver.repository`).

What the operator adds at run time and gpustack cannot (it runs nothing in the cluster):
- the node's OS and kernel, read from NFD labels, pick the image tag; here the config says them
  (`driver.nodeOS`, `driver.kernelVersion`; on OpenShift the profile's RHCOS for
  `platform.openshiftVersion`, `facts.driver.nodeOS`) and the DaemonSet selects only nodes whose
  NFD labels match, so an image never lands on a node it does not fit;
- on OpenShift the Driver Toolkit (DTK) image per RHCOS build, read from the cluster's
  `openshift/driver-toolkit` ImageStream, one DaemonSet per RHCOS build selected on NFD's
  `system-os_release.OSTREE_VERSION`; here `driver.rhcosBuilds` lists the builds and their DTK
  images (`gpustack driver-toolkit-builds` reads them from a saved ImageStream), with
  `driver.rhcosVersion` and `driver.driverToolkitImage` as the one-build form; with neither,
  one DaemonSet for every node with `driver.driverToolkitImage` or Red Hat's DTK for
  `platform.openshiftVersion`, whose kernel is the newest z-stream's;
- the upgrade controller (k8s-operator-libs pkg/upgrade), which takes the nodes one by one while
  the DaemonSet updates OnDelete, evicting each node's GPU pods before it deletes the driver pod;
  here the DaemonSet rolls (`driver.upgrade.maxUnavailable`), a stopping driver pod evicts its
  node's GPU pods before its daemons stop (`_gpu_pod_eviction`), and a new driver pod counts as
  available only once its driver answers, so the next node waits.

What the operator's DaemonSet has and gpustack keeps: k8s-driver-manager as the init container
(`uninstall_driver`), which unloads nouveau or the old driver before the new one installs, after
evicting the GPU pods and taking the GPU DaemonSets off the node through their
`nvidia.com/gpu.deploy.<component>` labels (`workload.select_on_deploy_labels`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from gpustack.build import pod
from gpustack.build.decorate import CANARY, POOL_LABEL, ignore, rollout
from gpustack.build.pod import HostPath
from gpustack.build.ready_files import DRIVER_READY, VALIDATIONS
from gpustack.build.workload import (
    API_ACCESS,
    API_ACCESS_MOUNT,
    COMPONENT_LABEL,
    cluster_role_with_binding,
    daemonset,
    deploy_labeller,
    gpu_pod_spec,
    host_root,
    pool_node_terms,
    role_with_binding,
    scc_rules,
    service_account,
)
from gpustack.config.node_pools import NodePool
from gpustack.objects import kind_of
from gpustack.resolve.stack import DRIVER_CONTAINER_ROOT, Stack, driver_os_tag, split_node_os

NAME = "nvidia-driver-daemonset"
ACCOUNT = "nvidia-driver"
CONTAINER = "nvidia-driver-ctr"
# The pod label every driver DaemonSet's pods carry, whatever their pool or build.
COMPONENT = "nvidia-driver"
MANAGER = "k8s-driver-manager"
# The container that evicts the node's GPU pods as the driver pod stops, before the driver's
# daemons stop (see _gpu_pod_eviction).
EVICTION = "gpu-pod-eviction"
# The pod's own folder (an emptyDir: new with each pod, so nothing in it outlives the pod) where
# the driver container says it has withdrawn its ready file and the eviction that the GPU pods
# are gone.
HANDOVER = "/run/driver-handover"
DRIVER_WITHDRAWN = f"{HANDOVER}/driver-withdrawn"
GPU_PODS_GONE = f"{HANDOVER}/gpu-pods-gone"
EVICTION_LOG = f"{HANDOVER}/gpu-pod-eviction.log"
# How long the eviction waits for the driver container to withdraw its ready file: a preStop
# hook that removes two files, or none where the driver container is not running.
WITHDRAW_SECONDS = 30
# k8s-driver-manager waits up to 5 minutes for the GPU DaemonSets' pods to leave the node
# (cmd/driver-manager/main.go defaultGracePeriod, v0.12.0); they leave within their own
# grace period, 30 s by default, all at once.
DAEMONSETS_LEAVE_SECONDS = 300
# What the eviction may take where `driver.upgrade.drain.timeoutSeconds` is 0 (no limit): a
# stopping pod cannot wait for ever, its grace period bounds it.
UNLIMITED_EVICTION_SECONDS = 3600
# The driver container's own stop once its preStop hook returns: it stops the persistence
# daemon and the fabric manager, unloads the modules and unmounts its root.
DRIVER_STOP_SECONDS = 60
# gpu-operator values.yaml `driver.manager.repository`/`.image` (v26.7.0).
MANAGER_IMAGE = "nvcr.io/nvidia/cloud-native/k8s-driver-manager"
# gpu-operator values.yaml `driver.repository`/`driver.image`.
IMAGE = "nvcr.io/nvidia/driver"
# Written by the driver pod's startup probe once the driver is up, as gpu-operator's startup
# probe writes it; what every GPU DaemonSet's driver validation waits for (ready_files).
READY_FILE = DRIVER_READY
# The driver container's script writes NotReady here when it starts and Ready once its daemons
# (persistenced, the fabric manager on NVSwitch systems) run (gpu-driver-container
# ubuntu22.04/nvidia-driver _set_daemons_status); gpu-operator's startup probe waits for Ready.
DAEMONS_STATUS_FILE = f"{VALIDATIONS}/.driver-daemons-status"
# What the ready file says: the validator reads it as a YAML map of the driver's extra
# components (gpu-operator cmd/nvidia-validator/main.go validateAdditionalDriverComponents,
# v26.7.0), none of which gpustack runs (GPUDirect RDMA, GDS, GDRCopy).
READY_FLAGS = ("GDRCOPY_ENABLED", "GDS_ENABLED", "GPU_DIRECT_RDMA_ENABLED")
SHARED_DTK = "/mnt/shared-nvidia-driver-toolkit"
NFD_OS = "feature.node.kubernetes.io/system-os_release"
NFD_KERNEL = "feature.node.kubernetes.io/kernel-version.full"
# (volume, host path, mount path, hostPath type) of a RHEL host's subscription.
RHEL_SUBSCRIPTION = (
    (
        "subscription-entitlement",
        "/etc/pki/entitlement",
        "/run/secrets/etc-pki-entitlement",
        "Directory",
    ),
    ("subscription-repo", "/etc/yum.repos.d/redhat.repo", "/run/secrets/redhat.repo", "File"),
    ("subscription-rhsm", "/etc/rhsm", "/run/secrets/rhsm", "Directory"),
)


def image(stack: Stack, kernel: str | None = None) -> str:
    """The driver image; `kernel`: the precompiled image for that kernel (one of
    `driver.kernelVersions`), else `driver.kernelVersion`'s."""
    driver = stack.config.driver
    if stack.facts.driver.nodeOS:
        # The platform's OS for its version, tagged as the GPU Operator tags it: RHCOS up to
        # OpenShift 4.18 is `rhcos4.18`, from 4.19 RHCOS reports its RHEL (`rhel9.6` -> `rhel9`).
        return f"{IMAGE}:{driver.version}-{driver_os_tag(stack.node_os)}"
    if driver.precompiled:
        # Precompiled tags are <branch>-<kernel>-<os> (gpu-operator golden precompiled render).
        branch = driver.version.split(".")[0]
        return f"{IMAGE}:{branch}-{kernel or driver.kernelVersion}-{driver.nodeOS}"
    return f"{IMAGE}:{driver.version}-{driver.nodeOS}"


def driver_toolkit_image(stack: Stack) -> str:
    explicit = stack.config.driver.driverToolkitImage
    if explicit:
        return explicit
    template = stack.facts.driver.driverToolkitImage or ""
    return template.replace("{openshiftVersion}", stack.config.platform.openshiftVersion or "")


@dataclass(frozen=True)
class RhcosPin:
    """One RHCOS build whose nodes get a driver DaemonSet of their own, and its DTK image."""

    version: str
    driver_toolkit_image: str


def rhcos_pins(stack: Stack) -> list[RhcosPin | None]:
    """The driver DaemonSets to render, one per pinned RHCOS build; None: one for every node."""
    driver = stack.config.driver
    if stack.driver_mode != "driver-toolkit":
        return [None]
    if driver.rhcosBuilds:
        return [RhcosPin(each.rhcosVersion, each.driverToolkitImage) for each in driver.rhcosBuilds]
    if driver.rhcosVersion and driver.driverToolkitImage:
        return [RhcosPin(driver.rhcosVersion, driver.driverToolkitImage)]
    return [None]


def kernels(stack: Stack) -> list[str | None]:
    """The driver DaemonSets to render, one per kernel of `driver.kernelVersions` (precompiled
    images are built for one kernel each); None: one for every node (the nodes of
    `driver.kernelVersion` where it is the one kernel)."""
    driver = stack.config.driver
    if stack.driver_mode == "container" and driver.precompiled and driver.kernelVersions:
        return list(driver.kernelVersions)
    return [None]


def daemonset_name(
    pin: RhcosPin | None, pool: NodePool | None = None, kernel: str | None = None
) -> str:
    # The GPU Operator names a build's DaemonSet `<name>-<RHCOS version>`
    # (controllers/object_controls.go transformOpenShiftDriverToolkitContainer, v26.7.0); a
    # pool's is `<name>-<pool>` before that. A kernel's is `<name>-<kernel>` in the same way
    # (the operator's NVIDIADriver renders one per OS and kernel, internal/state/driver.go
    # getDriverAppName, hashing the kernel into the name instead).
    name = f"{NAME}-{pool.name}" if pool else NAME
    if pin:
        return f"{name}-{pin.version}"
    return f"{name}-{kernel}" if kernel else name


def driver_pools(stack: Stack) -> list[NodePool]:
    """The pools whose nodes get a driver DaemonSet of their own: those that set their own
    driver version, and canary pools, so that a driver change reaches a canary's nodes through
    its own DaemonSet, rolled out before the others (gpustack.build.decorate)."""
    return [pool for pool in stack.pools if pool.canary or (pool.driver and pool.driver.version)]


def _with_version(stack: Stack, pool: NodePool) -> Stack:
    """The stack with the pool's driver version as the driver's."""
    config = stack.config
    driver = config.driver.model_copy(update={"version": config.pool_settings(pool).driver_version})
    return replace(stack, config=config.model_copy(update={"driver": driver}))


def build(stack: Stack) -> list[dict[str, Any]]:
    if not stack.driver_container:
        return []
    # Only k8s-driver-manager calls the API server: its token is mounted into it alone
    # (API_ACCESS), the long-running driver containers get none.
    objects = [service_account(stack, ACCOUNT, calls_api=False)]
    objects += cluster_role_with_binding(stack, ACCOUNT, MANAGER_RULES)
    rules = scc_rules(stack)
    if rules:
        objects += role_with_binding(stack, ACCOUNT, rules)
    pools = driver_pools(stack)
    if any(pool.canary for pool in pools):
        # A canary's driver DaemonSet is applied first, and it needs its account and rights.
        for obj in objects:
            rollout(obj, CANARY)
    for pin in rhcos_pins(stack):
        for kernel in kernels(stack):
            objects.append(_daemonset(stack, pin, exclude=pools, kernel=kernel))
            for pool in pools:
                objects.append(
                    _daemonset(_with_version(stack, pool), pin, pool=pool, kernel=kernel)
                )
    return objects


# What k8s-driver-manager v0.12.0 calls (cmd/driver-manager/main.go, internal/kubernetes/client.go
# and its vendored k8s.io/kubectl v0.36.3 pkg/drain), and no more: the operator's ClusterRole
# (assets/state-driver/0210_clusterrole.yaml, v26.7.0) also lets it list, update and watch nodes,
# watch pods and read ClusterVersions, which it never does.
MANAGER_RULES: list[dict[str, Any]] = [
    # Its node's deploy labels (GetNodeLabelValue, UpdateNodeLabels: a strategic merge patch) and
    # cordon/uncordon (drain.RunCordonOrUncordon patches spec.unschedulable).
    # The deploy-labels init container finds its node by a selector (a list) and labels it.
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
    # The pods on its node in every namespace (WaitForPodTermination, DeleteOrEvictPods,
    # GetPodsForDeletion) and each evicted pod until it is gone (drain's waitForDelete).
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    # GPU pods leave through the Eviction API, which honours PodDisruptionBudgets (drain evicts
    # wherever discovery lists pods/eviction, every supported Kubernetes; it never deletes).
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    # drain's daemonSetFilter reads the DaemonSet behind each DaemonSet pod.
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get"]},
    # A pod with ResourceClaims uses a GPU if one is allocated by gpu.nvidia.com
    # (podHasGPUResourceClaim); without this right any such pod stops the eviction.
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
]


def manager_image(stack: Stack) -> str:
    return f"{MANAGER_IMAGE}:{stack.config.driver.manager.version}"


def _node_requirements(
    stack: Stack, pin: RhcosPin | None, kernel: str | None
) -> list[dict[str, Any]]:
    """NFD labels that keep the image on nodes it was built for."""
    driver = stack.config.driver
    if stack.config.nfd.mode == "disabled":
        # Nothing sets NFD's labels: the nodes are found by nodes.selector alone.
        return []
    # The node OS is <os-release ID><VERSION_ID>, e.g. ubuntu22.04, rhel9.6, or on OpenShift
    # RHCOS's for the release (rhcos4.18; from 4.19 rhel9.6).
    os_id, version = split_node_os(stack.node_os)
    requirements = [
        {"key": f"{NFD_OS}.ID", "operator": "In", "values": [os_id]},
        {"key": f"{NFD_OS}.VERSION_ID", "operator": "In", "values": [version]},
    ]
    if pin:
        # One RHCOS build, as the GPU Operator's DaemonSet per build selects it.
        requirements.append(
            {"key": f"{NFD_OS}.OSTREE_VERSION", "operator": "In", "values": [pin.version]}
        )
    if driver.precompiled:
        # One kernel, as the GPU Operator's precompiled DaemonSet selects it (golden
        # driver-precompiled render: kernel-version.full).
        requirements.append(
            {"key": NFD_KERNEL, "operator": "In", "values": [str(kernel or driver.kernelVersion)]}
        )
    return requirements


def _privileged(stack: Stack) -> dict[str, Any]:
    # Privileged: it loads kernel modules, creates device nodes and mounts its root filesystem
    # back to the host (Bidirectional). SELinux level s0 as upstream on OpenShift.
    security: dict[str, Any] = {"privileged": True}
    if stack.facts.securityContextConstraints:
        security["seLinuxOptions"] = {"level": "s0"}
    return security


# The driver mounts its root filesystem at /run/nvidia/driver for the host to see, and its
# manager unmounts an old driver's from there (Bidirectional).
_RUN_NVIDIA = HostPath(
    "run-nvidia", "/run/nvidia", "/run/nvidia", "DirectoryOrCreate", propagation="Bidirectional"
)
_HOST_SYS = HostPath("host-sys", "/sys", "/sys", "Directory")


def _api_access_mount() -> dict[str, Any]:
    """The API token, for the one container of the pod that calls the API server."""
    return pod.mount(API_ACCESS["name"], API_ACCESS_MOUNT, read_only=True)


def _host_paths(stack: Stack, dtk: bool) -> list[HostPath]:
    """The host paths the driver container mounts (gpu-operator
    assets/state-driver/0500_daemonset.yaml, v26.7.0)."""
    paths = [
        _RUN_NVIDIA,
        HostPath("var-log", "/var/log", "/var/log"),
        HostPath("dev-log", "/dev/log", "/dev/log"),
        HostPath("host-os-release", "/etc/os-release", "/host-etc/os-release", read_only=True),
        HostPath(
            "firmware-search-path",
            "/sys/module/firmware_class/parameters/path",
            "/sys/module/firmware_class/parameters/path",
        ),
        # GSP firmware, found by the kernel through the search path the driver sets.
        HostPath(
            "nv-firmware",
            f"{DRIVER_CONTAINER_ROOT}/lib/firmware",
            "/lib/firmware",
            "DirectoryOrCreate",
        ),
        # On NVSwitch systems (HGX) the driver container runs the fabric manager and topologyd,
        # which keep their state here for the host; /sys/devices/system for bringing the GPU's
        # memory and CPUs online.
        HostPath(
            "run-nvidia-fabricmanager",
            "/run/nvidia-fabricmanager",
            "/run/nvidia-fabricmanager",
            "DirectoryOrCreate",
        ),
        HostPath(
            "run-nvidia-topologyd",
            "/run/nvidia-topologyd",
            "/run/nvidia-topologyd",
            "DirectoryOrCreate",
        ),
        HostPath(
            "host-sys-devices-system", "/sys/devices/system", "/sys/devices/system", "Directory"
        ),
    ]
    if not dtk and split_node_os(stack.node_os)[0] == "rhel":
        # A RHEL driver container installs kernel headers from Red Hat's repositories with the
        # host's subscription (gpu-operator controllers/object_controls.go SubscriptionPathMap).
        paths += [
            HostPath(name, host, target, kind, read_only=True)
            for name, host, target, kind in RHEL_SUBSCRIPTION
        ]
    return paths


# The driver container's host paths that the DTK sidecar mounts too, where the two build the
# modules together (gpu-operator OpenShift golden render).
_DTK_SHARED_PATHS = ("var-log", "host-os-release", "firmware-search-path", "nv-firmware")


def _driver_container(
    stack: Stack, kernel: str | None, dtk: bool, mounts: list[dict[str, Any]]
) -> dict[str, Any]:
    env: list[dict[str, Any]] = [
        # The driver container must not be handed GPUs by an nvidia runtime (upstream).
        pod.env("NVIDIA_VISIBLE_DEVICES", "void"),
        pod.field_env("NODE_NAME", "spec.nodeName"),
        # Not upstream's NODE_IP (status.hostIP): no script of the driver images reads it
        # (NVIDIA/gpu-driver-container nvidia-driver, every OS), and here it would change
        # DRIVER_CONFIG_DIGEST, reloading every node's driver for nothing.
    ]
    if dtk:
        env.append({"name": "OPENSHIFT_VERSION", "value": stack.config.platform.openshiftVersion})
    return {
        "name": CONTAINER,
        "image": image(stack, kernel),
        # DTK: the driver container prepares the shared folder and waits for the DTK sidecar to
        # build the modules against the node's kernel (gpu-operator OpenShift golden render).
        "command": ["ocp_dtk_entrypoint"] if dtk else ["nvidia-driver"],
        "args": ["nv-ctr-run-with-dtk"] if dtk else ["init"],
        "env": env,
        "securityContext": _privileged(stack),
        "volumeMounts": mounts,
    }


def _dtk_container(stack: Stack, pin: RhcosPin | None, paths: list[HostPath]) -> dict[str, Any]:
    """The Driver Toolkit sidecar, which builds the driver's modules against the node's kernel
    once the driver container has prepared the shared folder."""
    env = [pod.env("NVIDIA_VISIBLE_DEVICES", "void")]
    if pin:
        env.insert(0, pod.env("RHCOS_VERSION", pin.version))
    shared = {path.name: path.mount() for path in paths}
    return {
        "name": "openshift-driver-toolkit-ctr",
        "image": pin.driver_toolkit_image if pin else driver_toolkit_image(stack),
        "command": ["bash", "-xc"],
        "args": [
            f"until [ -f {SHARED_DTK}/dir_prepared ]; do echo Waiting for {CONTAINER} "
            "to prepare the shared directory ...; sleep 10; done; "
            f"exec {SHARED_DTK}/ocp_dtk_entrypoint dtk-build-driver"
        ],
        "env": env,
        "securityContext": _privileged(stack),
        "volumeMounts": [
            pod.mount(_SHARED_DTK_VOLUME, SHARED_DTK),
            *(shared[name] for name in _DTK_SHARED_PATHS),
        ],
    }


_SHARED_DTK_VOLUME = "shared-nvidia-driver-toolkit"
_HANDOVER_VOLUME = "driver-handover"


def _readiness() -> str:
    """Ready while the driver answers, as gpu-operator's startup probe judges it
    (assets/state-driver/0400_configmap.yaml startup-probe.sh, v26.7.0): the module loaded, the
    driver's daemons Ready (on NVSwitch systems the fabric manager, without which the GPUs take
    no CUDA work), nvidia-smi answering, and the ready file there (written by the startup probe,
    removed when the pod that wrote it stops). What a rolling update waits for before the next
    node."""
    return (
        f"test -f /sys/module/nvidia/refcnt && test -f {READY_FILE} && "
        f'{{ [ ! -f {DAEMONS_STATUS_FILE} ] || [ "$(cat {DAEMONS_STATUS_FILE})" = Ready ]; }} && '
        "nvidia-smi"
    )


def _installing(
    stack: Stack, pin: RhcosPin | None, kernel: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """The containers that install the driver (the driver container, and the DTK sidecar that
    builds its modules), their volumes, and the digest of what they install, which each of
    them carries as DRIVER_CONFIG_DIGEST.

    A driver pod that restarts (an eviction, a crash, a node reboot's race) must not unload the
    modules GPU pods hold: that fails ("in use") and the pod crash-loops. With a digest of what
    it installs, equal to the one the running driver stored in /run/nvidia/nvidia-driver.state,
    it installs the user-space files only (gpu-driver-container ubuntu22.04/nvidia-driver and
    rhel9/common.sh `_should_skip_kernel_module_reload`; gpu-operator sets it on both containers,
    controllers/object_controls.go DRIVER_CONFIG_DIGEST, v26.7.0). What the pod gains beyond
    these (the probes and the preStop hook, the driver manager, scheduling, the update
    strategy) installs nothing: it stays out of the digest, so changing it reloads no
    driver."""
    dtk = stack.driver_mode == "driver-toolkit"
    paths = _host_paths(stack, dtk)
    volumes, mounts = pod.host_paths(paths)
    if dtk:
        mounts.append(pod.mount(_SHARED_DTK_VOLUME, SHARED_DTK))
        volumes.append(pod.empty_dir(_SHARED_DTK_VOLUME))
    containers = [_driver_container(stack, kernel, dtk, mounts)]
    if dtk:
        containers.append(_dtk_container(stack, pin, paths))
    digest = _digest({"containers": containers, "volumes": volumes})
    for container in containers:
        container["env"].append(pod.env(DIGEST, digest))
    return containers, volumes, digest


def _place(
    pod_spec: dict[str, Any],
    requirements: list[dict[str, Any]],
    pool: NodePool | None,
    exclude: list[NodePool] | None,
) -> None:
    """Keep `pod_spec` to the nodes its DaemonSet serves: those `requirements` select, of
    `pool` or of none of the `exclude` pools, one driver pod on each."""
    required = pod_spec["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    if requirements:
        required["nodeSelectorTerms"][0]["matchExpressions"].extend(requirements)
    if pool is not None or exclude:
        # Each GPU node gets exactly one driver pod: its pool's, or the cluster's.
        base = required["nodeSelectorTerms"][0]["matchExpressions"]
        if pool is not None:
            required["nodeSelectorTerms"] = pool_node_terms(base, [pool], inside=True)
        else:
            required["nodeSelectorTerms"] = pool_node_terms(base, exclude or [], inside=False)
    # One driver pod per node, whichever DaemonSet it comes from, as the GPU Operator's
    # (assets/state-driver/0500_daemonset.yaml podAntiAffinity, v26.7.0): a node that moves from
    # one driver DaemonSet to another (a pool given a driver of its own, a pool marked canary, a
    # node labelled into a pool, a new RHCOS build or kernel) gets its new pod only once the old
    # one is gone. Two at once would fight over the modules and /run/nvidia/driver: the new pod's
    # manager unmounts the driver root the old one still serves, and the driver script refuses a
    # second instance (its PID file lock).
    pod_spec["affinity"]["podAntiAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": COMPONENT_LABEL, "operator": "In", "values": [COMPONENT]}
                    ]
                },
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }


def _pod_spec(
    stack: Stack,
    pin: RhcosPin | None,
    kernel: str | None,
    requirements: list[dict[str, Any]],
    pool: NodePool | None,
    exclude: list[NodePool] | None,
) -> dict[str, Any]:
    """The pod of one driver DaemonSet: k8s-driver-manager and the deploy labeller first, the
    containers that install the driver, and the GPU pods' eviction as it stops."""
    containers, volumes, digest = _installing(stack, pin, kernel)
    driver_container = containers[0]
    driver_container.update(
        {
            # Building the driver can take minutes; upstream allows 60 s + 120 x 10 s.
            "startupProbe": pod.exec_probe(
                _startup_probe(), initial_delay=60, period=10, timeout=60, failure_threshold=120
            ),
            "lifecycle": pod.pre_stop(_driver_pre_stop(stack)),
            "readinessProbe": pod.exec_probe(
                _readiness(), period=30, timeout=60, failure_threshold=3
            ),
        }
    )
    # k8s-driver-manager runs `chroot /host nvidia-smi` to find a driver on the host.
    volumes += [host_root().volume(), _HOST_SYS.volume(), API_ACCESS]
    if _evicts_on_stop(stack):
        driver_container["volumeMounts"].append(pod.mount(_HANDOVER_VOLUME, HANDOVER))
        containers.append(_gpu_pod_eviction(stack))
        volumes.append(pod.empty_dir(_HANDOVER_VOLUME))
    # No runtimeClassName: the driver runs under the default runtime, before any nvidia runtime
    # can work.
    pod_spec = gpu_pod_spec(stack, runtime_class=False)
    _place(pod_spec, requirements, pool, exclude)
    if _evicts_on_stop(stack):
        pod_spec["terminationGracePeriodSeconds"] = _stop_seconds(stack) + DRIVER_STOP_SECONDS
    pod_spec.update(
        {
            "serviceAccountName": ACCOUNT,
            "hostPID": True,
            # The node's deploy labels start as "true" before the manager reads them.
            "initContainers": [
                deploy_labeller(stack, [_api_access_mount()]),
                _manager(stack, digest),
            ],
            "containers": containers,
            "volumes": volumes,
        }
    )
    return pod_spec


def _daemonset(
    stack: Stack,
    pin: RhcosPin | None,
    pool: NodePool | None = None,
    exclude: list[NodePool] | None = None,
    kernel: str | None = None,
) -> dict[str, Any]:
    """One driver DaemonSet: for every GPU node (of one RHCOS build, `pin`, or one kernel,
    `kernel`), for a pool's nodes (`pool`), or for the nodes in none of the `exclude` pools."""
    requirements = _node_requirements(stack, pin, kernel)
    pod_spec = _pod_spec(stack, pin, kernel, requirements, pool, exclude)
    # A build's DaemonSet carries the labels the GPU Operator finds its builds' DaemonSets by
    # (controllers/state_manager.go ocpDriverToolkitIdentificationLabel and
    # ocpDriverToolkitVersionLabel, v26.7.0).
    labels = {"openshift.driver-toolkit": "true"} if pin else None
    workload = daemonset(
        stack, daemonset_name(pin, pool, kernel), pod_spec, component=COMPONENT, labels=labels
    )
    if pin:
        workload["metadata"]["labels"]["openshift.driver-toolkit.rhcos"] = pin.version
    if pool is not None:
        workload["metadata"]["labels"][POOL_LABEL] = pool.name
        if pool.canary:
            rollout(workload, CANARY)
    # Upstream's DaemonSet is OnDelete and the operator's upgrade controller deletes the pods node
    # by node. Here the DaemonSet rolls, which Argo CD's and Flux's health follow: the old pod
    # evicts the GPU pods as it stops, the new pod's driver manager unloads what is left of the
    # old driver, and the next node waits until this one's driver pod has been Ready for
    # minReadySeconds (a node whose new driver never answers stops the rollout there).
    workload["spec"]["updateStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": stack.config.driver.upgrade.maxUnavailable},
    }
    workload["spec"]["minReadySeconds"] = 30
    workload["spec"]["template"]["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/default-container": CONTAINER
    }
    if requirements and not _labels_published(stack):
        # NFD publishes the system-os_release and kernel labels by default; an NFD installed
        # elsewhere (Red Hat's operator included) is not among these manifests.
        ignore(workload, "node-label-unsourced")
    return workload


def _startup_probe() -> str:
    """gpu-operator's startup probe (assets/state-driver/0400_configmap.yaml startup-probe.sh,
    v26.7.0), inline: the ready file, what the toolkit, the validator and the device plugin wait
    for, is written only once the module is loaded, the driver's daemons report Ready (a driver
    image that predates the status file writes none, and is judged by nvidia-smi alone) and
    nvidia-smi answers. On NVSwitch systems the fabric manager is one of those daemons: before it
    runs the GPUs take no CUDA work (error 802), so nothing may be told the driver is ready."""
    flags = " && ".join(f'echo "{flag}: false"' for flag in READY_FLAGS)
    return "; ".join(
        [
            "set -eu",
            f"mkdir -p {VALIDATIONS}",
            'if [ ! -f /sys/module/nvidia/refcnt ]; then echo "NVIDIA kernel module not loaded";'
            " exit 1; fi",
            f'if [ -f {DAEMONS_STATUS_FILE} ]; then status="$(cat {DAEMONS_STATUS_FILE})";'
            ' if [ "$status" != Ready ]; then'
            ' echo "NVIDIA driver daemons are not ready; current status: $status"; exit 1; fi; fi',
            'if ! nvidia-smi; then echo "nvidia-smi failed"; exit 1; fi',
            f"{{ {flags}; }} > {READY_FILE}.tmp",
            f"mv {READY_FILE}.tmp {READY_FILE}",
        ]
    )


def _evicts_on_stop(stack: Stack) -> bool:
    """Whether a stopping driver pod evicts its node's GPU pods before its daemons stop."""
    return stack.config.driver.upgrade.gpuPodEviction


def _eviction_seconds(stack: Stack) -> int:
    return stack.config.driver.upgrade.drain.timeoutSeconds or UNLIMITED_EVICTION_SECONDS


def _stop_seconds(stack: Stack) -> int:
    """How long the driver container's preStop hook waits for the GPU pods to be gone: the
    eviction's own steps, each bounded."""
    return WITHDRAW_SECONDS + DAEMONSETS_LEAVE_SECONDS + _eviction_seconds(stack)


def _driver_pre_stop(stack: Stack) -> str:
    """The driver container's preStop hook. It withdraws the ready file first, so nothing put
    back on the node from now on takes this driver for one that works (ready_files waits for the
    file). Where the pod evicts the GPU pods as it stops, it then holds the container, and with
    it the persistence daemon and the fabric manager, until the eviction is over: the kubelet
    signals a container only once its preStop hook has returned, and the driver image's script
    stops its daemons on that signal (gpu-driver-container nvidia-driver `_shutdown`), whether
    or not GPU pods still use them."""
    withdraw = f"rm -f {READY_FILE} {DAEMONS_STATUS_FILE}"
    if not _evicts_on_stop(stack):
        return withdraw
    return "; ".join(
        [
            withdraw,
            f"touch {DRIVER_WITHDRAWN}",
            "waited=0",
            f'while [ ! -f {GPU_PODS_GONE} ] && [ "$waited" -lt {_stop_seconds(stack)} ]; '
            "do sleep 1; waited=$((waited + 1)); done",
        ]
    )


def _gpu_pod_eviction(stack: Stack) -> dict[str, Any]:
    """The container that takes the GPU pods off the node as the driver pod stops, while its
    daemons still run: the operator's upgrade controller evicts them before it deletes a driver
    pod (NVIDIA/k8s-operator-libs pkg/upgrade: cordon, wait for jobs, pod deletion, drain, then
    pod restart), and here the DaemonSet's rolling update deletes the pod with nothing before it.

    Its preStop hook runs k8s-driver-manager `uninstall_driver` (the manager's own image, whose
    busybox shell is there for lifecycle hooks: k8s-driver-manager
    deployments/container/Dockerfile.distroless, v0.12.0) once the driver container has withdrawn
    its ready file. With FORCE_REINSTALL it goes past the digest check and does what the new
    pod's manager would: it takes the GPU DaemonSets off the node (deploy labels) and waits for
    them, cordons the node, evicts the pods that use GPUs through the Eviction API (so
    PodDisruptionBudgets hold) and waits until they are gone; then it tries to unload the
    driver, which it cannot (no CAP_SYS_MODULE: the container is unprivileged), so it uncordons
    the node, puts the labels back and exits (cleanupOnFailure). That is safe by construction:
    the GPU DaemonSets that return wait for the ready file, which only the next driver pod's
    startup probe writes, and without the device plugin the node takes no GPU pod. Then the
    driver container stops its daemons and unloads the driver nothing holds any more, and the
    next pod's manager finds no driver loaded.

    Its drain fallback stays off: its unload always fails, and with ENABLE_AUTO_DRAIN it would
    drain the whole node every time. The next pod's manager keeps `driver.upgrade.drain`.
    Its output goes to a file the container's main process follows, so `kubectl logs` shows it
    (a hook's own output is not kept)."""
    drain = stack.config.driver.upgrade.drain
    evict = "; ".join(
        [
            "waited=0",
            f'while [ ! -f {DRIVER_WITHDRAWN} ] && [ "$waited" -lt {WITHDRAW_SECONDS} ]; '
            "do sleep 1; waited=$((waited + 1)); done",
            # No driver loaded (the pod stops before its driver came up): nothing to keep.
            "if [ -f /sys/module/nvidia/refcnt ]; then "
            f"driver-manager uninstall_driver >> {EVICTION_LOG} 2>&1; "
            # The manager's last lines report the unload it is refused: expected.
            'echo "eviction over; the driver container stops its daemons and unloads the driver" '
            f">> {EVICTION_LOG}; fi",
            f"touch {GPU_PODS_GONE}",
        ]
    )
    return {
        "name": EVICTION,
        "image": manager_image(stack),
        "command": ["sh", "-c"],
        # Idle until the pod stops; it shows what the preStop hook writes.
        "args": [f": >> {EVICTION_LOG}; exec tail -f {EVICTION_LOG}"],
        "env": [
            pod.field_env("NODE_NAME", "spec.nodeName"),
            pod.env("NVIDIA_VISIBLE_DEVICES", "void"),
            # Past the digest check, which would skip the eviction (the running driver is this
            # pod's own): cmd/driver-manager/main.go shouldSkipUninstall.
            pod.env("FORCE_REINSTALL", "true"),
            pod.env("ENABLE_GPU_POD_EVICTION", "true"),
            pod.env("ENABLE_AUTO_DRAIN", "false"),
            pod.env("DRAIN_USE_FORCE", pod.flag(drain.force)),
            pod.env("DRAIN_POD_SELECTOR_LABEL", drain.podSelector),
            {"name": "DRAIN_TIMEOUT_SECONDS", "value": f"{_eviction_seconds(stack)}s"},
            pod.env("DRAIN_DELETE_EMPTYDIR_DATA", pod.flag(drain.deleteEmptyDir)),
            pod.field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
        ],
        "lifecycle": pod.pre_stop(evict),
        # Unprivileged, and not root: with the pod's host PID namespace a root process could
        # signal the host's root processes. The manager only reads /sys/module and calls the API
        # server; the kernel refuses it the unload (delete_module needs CAP_SYS_MODULE).
        "securityContext": {
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "runAsGroup": 65534,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [pod.mount(_HANDOVER_VOLUME, HANDOVER), _api_access_mount()],
    }


def _manager(stack: Stack, digest: str) -> dict[str, Any]:
    """k8s-driver-manager `uninstall_driver`, as the GPU Operator's driver DaemonSet runs it
    (gpu-operator assets/state-driver/0500_daemonset.yaml, v26.7.0): on a node with no NVIDIA
    driver loaded it unloads nouveau; on one with a driver loaded it takes the GPU DaemonSets
    off the node (deploy labels) and, unless DRIVER_CONFIG_DIGEST equals the running driver's,
    evicts the pods using GPUs and unloads the old driver; then it puts the labels back
    (cmd/driver-manager/main.go uninstallDriver, k8s-driver-manager v0.12.0)."""
    upgrade = stack.config.driver.upgrade
    drain = upgrade.drain
    return {
        "name": MANAGER,
        "image": manager_image(stack),
        "command": ["driver-manager"],
        "args": ["uninstall_driver"],
        "env": [
            pod.field_env("NODE_NAME", "spec.nodeName"),
            # Under the default runtime, never handed GPUs (upstream).
            pod.env("NVIDIA_VISIBLE_DEVICES", "void"),
            pod.env("ENABLE_GPU_POD_EVICTION", pod.flag(upgrade.gpuPodEviction)),
            pod.env("ENABLE_AUTO_DRAIN", pod.flag(drain.enabled)),
            pod.env("DRAIN_USE_FORCE", pod.flag(drain.force)),
            pod.env("DRAIN_POD_SELECTOR_LABEL", drain.podSelector),
            # A Go duration (cmd/driver-manager DurationFlag); "0s" waits forever.
            {"name": "DRAIN_TIMEOUT_SECONDS", "value": f"{drain.timeoutSeconds}s"},
            pod.env("DRAIN_DELETE_EMPTYDIR_DATA", pod.flag(drain.deleteEmptyDir)),
            # Where it waits for the GPU DaemonSets' pods to leave: gpustack's namespace.
            pod.field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
            pod.env("DRIVER_CONFIG_DIGEST", digest),
        ],
        # Privileged: it unloads kernel modules and unmounts the old driver's root filesystem
        # from the host's /run/nvidia (Bidirectional).
        "securityContext": {"privileged": True},
        "volumeMounts": [
            _RUN_NVIDIA.mount(),
            host_root().mount(),
            _HOST_SYS.mount(),
            _api_access_mount(),
        ],
    }


def _digest(install: dict[str, Any]) -> str:
    """What the driver containers install (images, commands, env, mounts), hashed."""
    text = json.dumps(install, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


DIGEST = "DRIVER_CONFIG_DIGEST"
# What a driver container's fields install, as far as a patch can change them; its probes,
# hooks and resources install nothing.
_INSTALLING = ("image", "command", "args", "env", "envFrom", "volumeMounts", "securityContext")


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _install(daemonset: dict[str, Any]) -> str | None:
    """A hash of what a driver DaemonSet's containers install (their DRIVER_CONFIG_DIGEST
    aside), or None for any other object. Patched objects may hold anything."""
    if kind_of(daemonset) != "DaemonSet":
        return None
    pod = _mapping(_mapping(_mapping(daemonset.get("spec")).get("template")).get("spec"))
    containers = [_mapping(each) for each in _items(pod.get("containers"))]
    found = False
    install = []
    for container in containers:
        env = _items(container.get("env"))
        found = found or any(_mapping(item).get("name") == DIGEST for item in env)
        kept = {key: container.get(key) for key in _INSTALLING if key in container}
        kept["env"] = [item for item in env if _mapping(item).get("name") != DIGEST]
        install.append(kept)
    if not found:
        return None
    return _digest({"containers": install, "volumes": pod.get("volumes")})


def installs(objects: list[dict[str, Any]]) -> dict[int, str]:
    """What each driver DaemonSet among `objects` installs (by its place), before patches."""
    found = {}
    for index, obj in enumerate(objects):
        install = _install(obj)
        if install is not None:
            found[index] = install
    return found


def redigest(objects: list[dict[str, Any]], before: dict[int, str]) -> None:
    """After the config's patches: a driver DaemonSet whose patched containers install something
    else (an env var such as KERNEL_MODULE_TYPE, an image, a mount) gets a new
    DRIVER_CONFIG_DIGEST, so its driver manager and driver container reload the driver as they
    would for any change of what it installs, rather than keep the loaded one; a patch that
    installs nothing new (a toleration, a label, a probe) leaves the digest, and the driver,
    alone."""
    for index, install in before.items():
        patched = _install(objects[index])
        if patched is None or patched == install:
            continue
        pod = _mapping(_mapping(_mapping(objects[index].get("spec")).get("template")).get("spec"))
        for group in ("initContainers", "containers"):
            for container in _items(pod.get(group)):
                for item in _items(_mapping(container).get("env")):
                    if _mapping(item).get("name") == DIGEST and isinstance(item.get("value"), str):
                        item["value"] = _digest({"digest": item["value"], "patched": patched})


def _labels_published(stack: Stack) -> bool:
    return stack.config.nfd.mode == "deploy"
