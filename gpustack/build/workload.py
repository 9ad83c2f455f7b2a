"""What every GPU workload shares: how it finds GPU nodes, what it tolerates, how it is selected,
the host paths NVIDIA's containers mount (the host's root, the driver's root), its service
account and RBAC, and the `nvidia.com/gpu.deploy.*` labels that move it off a node.

Components call these instead of writing their own placement, so that the rule "every GPU
workload selects GPU nodes the same way and tolerates every configured taint" holds by construction.
"""

from __future__ import annotations

import itertools
from typing import Any

from gpustack.build.pod import HostPath
from gpustack.config.node_pools import NodePool
from gpustack.objects import kind_of, labels_of
from gpustack.resolve.stack import DRIVER_CONTAINER_ROOT, Stack

NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
PART_OF_LABEL = "app.kubernetes.io/part-of"
PART_OF = "gpustack"

# The key the device plugin advertises; GPU workloads tolerate it whatever its value or effect.
GPU_RESOURCE = "nvidia.com/gpu"
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"


# --- Paths, volumes and names the GPU components share ---------------------------------------
# gpu-operator values.yaml `toolkit.installDir` (v26.7.0): where the Container Toolkit DaemonSet
# installs the runtime and its hook on the host.
TOOLKIT_INSTALL_DIR = "/usr/local/nvidia"
# The nvidia-cdi-hook the CDI specs name; the device plugin writes specs that call it too
# (object_controls.go transformDevicePluginCtrForCDI: <installDir>/toolkit/nvidia-cdi-hook).
CDI_HOOK = f"{TOOLKIT_INSTALL_DIR}/toolkit/nvidia-cdi-hook"
# Where the nvidia-container-toolkit packages install the hook (nvidia-container-toolkit-base).
HOST_CDI_HOOK = "/usr/bin/nvidia-cdi-hook"
CDI_ROOT = "/var/run/cdi"
# Where the Container Toolkit's and the MIG manager's containers see the host's root and the
# driver's root (gpu-operator object_controls.go, v26.7.0: DRIVER_ROOT_CTR_PATH, DEV_ROOT_CTR_PATH).
HOST_ROOT = "/host"
DRIVER_ROOT_MOUNT = "/driver-root"


def container_path(host_path: str) -> str:
    """Where a host folder the toolkit reads (driver root, dev root) appears in its container."""
    return HOST_ROOT if host_path == "/" else DRIVER_ROOT_MOUNT


def host_root(*, read_only: bool = True, kind: str | None = None) -> HostPath:
    """The host's root at HOST_ROOT, where NVIDIA's containers run the host's tools
    (`chroot /host nvidia-smi`, `systemctl`); HostToContainer, so that a driver root the driver
    container mounts on the host later shows there too."""
    return HostPath(
        "host-root", "/", HOST_ROOT, kind, read_only=read_only, propagation="HostToContainer"
    )


def driver_container_root(*, read_only: bool = False) -> HostPath:
    """The driver container's root on the host (/run/nvidia/driver), at the same path in the
    container, as the validator's containers mount it (gpu-operator
    assets/state-operator-validation/0500_daemonset.yaml `driver-install-dir`, v26.7.0);
    HostToContainer: the driver container mounts its root there after this pod starts."""
    return HostPath(
        "driver-install-dir",
        DRIVER_CONTAINER_ROOT,
        DRIVER_CONTAINER_ROOT,
        "DirectoryOrCreate",
        read_only=read_only,
        propagation="HostToContainer",
    )


def mounted_driver_root(stack: Stack) -> list[HostPath]:
    """The driver root at DRIVER_ROOT_MOUNT, for a container told so by DRIVER_ROOT_CTR_PATH
    (`container_path`: the Container Toolkit, the MIG manager); none where the driver root is
    the host's own, which HOST_ROOT shows. HostToContainer: the driver container mounts its
    root there after this pod starts."""
    if stack.driver_root == "/":
        return []
    return [
        HostPath(
            "driver-install-dir",
            stack.driver_root,
            DRIVER_ROOT_MOUNT,
            "DirectoryOrCreate",
            propagation="HostToContainer",
        )
    ]


# The ServiceAccount token, API server CA and namespace where client-go's in-cluster config reads
# them, as the kubelet mounts them into every container of a pod whose account automounts its
# token (kubernetes.io, "Managing Service Accounts", kube-api-access projected volume), mounted
# only into the one container that calls the API (the driver manager, the device plugin's
# config manager).
API_ACCESS_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
API_ACCESS: dict[str, Any] = {
    "name": "driver-manager-api-access",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                    ]
                }
            },
        ]
    },
}
# The node label an OpenShift custom MachineConfigPool selects its nodes by
# (openshift/machine-config-operator docs/custom-pools.md).
NODE_ROLE_PREFIX = "node-role.kubernetes.io/"
# The DeviceClass a pod claims a whole GPU of through DRA (kubernetes-sigs/dra-driver-nvidia-gpu
# v0.4.1, deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml).
GPU_DEVICE_CLASS = "gpu.nvidia.com"
# kubernetes-sigs/node-feature-discovery v0.19.0 (the worker's `local` feature source): where GFD (or any tool) drops feature files that the worker's `local` source reads.
FEATURES_D = "/etc/kubernetes/node-feature-discovery/features.d"


def selector_labels(name: str) -> dict[str, str]:
    """The labels a workload's selector matches. `name` is unique per workload, so no two
    DaemonSets share a selector (a GitOps hazard of the upstream chart, k8s-device-plugin #982)."""
    return {NAME_LABEL: name, PART_OF_LABEL: PART_OF}


def gpu_node_affinity(stack: Stack, extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Required node affinity: the profile's GPU node label AND nodes.selector AND `extra`."""
    expressions: list[dict[str, Any]] = []
    for requirement in stack.gpu_node_selector:
        expression: dict[str, Any] = {"key": requirement.key, "operator": requirement.operator}
        if requirement.operator == "In":
            expression["values"] = list(requirement.values)
        expressions.append(expression)
    for key, value in stack.config.nodes.selector.items():
        expressions.append({"key": key, "operator": "In", "values": [value]})
    expressions.extend(extra or [])
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": expressions}]
            }
        }
    }


def pool_node_terms(
    base: list[dict[str, Any]], pools: list[NodePool], *, inside: bool
) -> list[dict[str, Any]]:
    """Required node affinity terms (ORed), each `base` and more: with `inside`, on the nodes of
    any of `pools` (one term per pool, its selector's labels `In`); else on the nodes in none of
    them. A node is outside a pool when one of its selector's labels differs: one term per
    choice of such a label in each pool (`NotIn`)."""
    if inside:
        return [
            {
                "matchExpressions": [
                    *base,
                    *(
                        {"key": key, "operator": "In", "values": [value]}
                        for key, value in pool.selector.items()
                    ),
                ]
            }
            for pool in pools
        ]
    choices = [sorted(pool.selector.items()) for pool in pools]
    return [
        {
            "matchExpressions": [
                *base,
                *(
                    {"key": key, "operator": "NotIn", "values": [value]}
                    for key, value in combination
                ),
            ]
        }
        for combination in itertools.product(*choices)
    ]


def allocation_pools(stack: Stack) -> list[NodePool]:
    """The pools whose GPUs are handed out otherwise than the cluster's (`gpuAllocation`)."""
    config = stack.config
    return [
        pool
        for pool in stack.pools
        if config.pool_settings(pool).gpu_allocation != config.gpuAllocation
    ]


def place_by_allocation(stack: Stack, pod_spec: dict[str, Any], allocation: str) -> dict[str, Any]:
    """A GPU pod spec (from `gpu_pod_spec`) kept to the nodes whose GPUs `allocation` hands out
    (`device-plugin` or `dra`), so that no node runs both the device plugin and the DRA driver's
    kubelet plugin: every GPU node but the other allocation's pools where the cluster's
    `gpuAllocation` is `allocation`, else only the pools that choose it. Unchanged while no pool
    differs from the cluster."""
    differing = allocation_pools(stack)
    if not differing:
        return pod_spec
    required = pod_spec["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    base = required["nodeSelectorTerms"][0]["matchExpressions"]
    inside = stack.config.gpuAllocation != allocation
    required["nodeSelectorTerms"] = pool_node_terms(base, differing, inside=inside)
    return pod_spec


def gpu_tolerations(stack: Stack) -> list[dict[str, Any]]:
    """Tolerate every configured taint (the cluster's and each pool's), any `nvidia.com/gpu`
    taint, and the control-plane taint when GPU nodes are control-plane nodes (single-node
    clusters)."""
    tolerations: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()

    def add(toleration: dict[str, Any]) -> None:
        identity = (toleration["key"], toleration["operator"], toleration.get("effect", ""))
        if identity not in seen:
            seen.add(identity)
            tolerations.append(toleration)

    pool_taints = [taint for pool in stack.config.nodes.pools for taint in pool.taints]
    for taint in [*stack.config.nodes.taints, *pool_taints]:
        if taint.value is None:
            add({"key": taint.key, "operator": "Exists", "effect": taint.effect})
        else:
            add(
                {
                    "key": taint.key,
                    "operator": "Equal",
                    "value": taint.value,
                    "effect": taint.effect,
                }
            )
    add({"key": GPU_RESOURCE, "operator": "Exists"})
    if stack.config.nodes.controlPlane:
        add({"key": CONTROL_PLANE_TAINT, "operator": "Exists", "effect": "NoSchedule"})
    return tolerations


def gpu_pod_spec(stack: Stack, *, runtime_class: bool = True) -> dict[str, Any]:
    """Scheduling fields every GPU DaemonSet's pod spec starts with.

    `runtime_class` is False for pods that must not run under the nvidia runtime (none here yet);
    the field is set only when the profile's default runtime cannot reach the driver.
    """
    spec: dict[str, Any] = {}
    if runtime_class and stack.runtime_class_name:
        spec["runtimeClassName"] = stack.runtime_class_name
    spec["priorityClassName"] = "system-node-critical"
    spec["affinity"] = gpu_node_affinity(stack)
    spec["tolerations"] = gpu_tolerations(stack)
    return spec


def daemonset(
    stack: Stack,
    name: str,
    pod_spec: dict[str, Any],
    *,
    component: str,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A DaemonSet in the stack's namespace with its own selector and a rolling update."""
    selector = selector_labels(name)
    template_labels = {**selector, COMPONENT_LABEL: component, **(labels or {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": stack.namespace, "labels": dict(template_labels)},
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": template_labels}, "spec": pod_spec},
        },
    }


def service_account(stack: Stack, name: str, *, calls_api: bool = True) -> dict[str, Any]:
    """A workload's ServiceAccount; one whose pods never call the API server gets no token."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": stack.namespace},
        "automountServiceAccountToken": calls_api,
    }


def config_map(stack: Stack, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": stack.namespace},
        "data": data,
    }


def scc_rules(stack: Stack, scc: str = "privileged") -> list[dict[str, Any]]:
    """On OpenShift, the RBAC rule that lets a ServiceAccount's pods use an SCC."""
    if not stack.facts.securityContextConstraints:
        return []
    return [
        {
            "apiGroups": ["security.openshift.io"],
            "resources": ["securitycontextconstraints"],
            "resourceNames": [scc],
            "verbs": ["use"],
        }
    ]


def kubelet_socket_selinux(stack: Stack) -> dict[str, Any]:
    """securityContext fields for a container that talks to the kubelet over its unix sockets
    (device-plugins/kubelet.sock, pod-resources) without being privileged.

    SELinux on RHCOS denies container_t `write` and `connectto` on those sockets (unprivileged
    device plugins: kubernetes/kubernetes #73240; pod-resources: gpu-operator #2092; the denial:
    intel-technology-enabling-for-openshift #113), which is why the GPU Operator runs such pods
    privileged. spc_t lifts only the SELinux confinement; SCC `privileged` admits it.
    """
    if not stack.facts.securityContextConstraints:
        return {}
    return {"seLinuxOptions": {"type": "spc_t"}}


def cluster_role_with_binding(
    stack: Stack, name: str, rules: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": stack.namespace}],
        },
    ]


def role_with_binding(stack: Stack, name: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": stack.namespace},
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": stack.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": stack.namespace}],
        },
    ]


def host_driver(stack: Stack) -> list[HostPath]:
    """The driver's host folder, for a container on a platform with no nvidia runtime to put
    the driver into it (GKE mounts /home/kubernetes/bin/nvidia at /usr/local/nvidia); none
    elsewhere."""
    mount = stack.facts.driver.hostMount
    if mount is None:
        return []
    return [HostPath("nvidia-driver", mount.path, mount.mountPath, "Directory", read_only=True)]


def host_driver_env(stack: Stack) -> list[dict[str, Any]]:
    """Where a container with `host_driver` mounted finds the driver's libraries."""
    mount = stack.facts.driver.hostMount
    if mount is None:
        return []
    # GKE docs: applications find libnvidia-ml and libcuda through this path.
    return [{"name": "LD_LIBRARY_PATH", "value": f"{mount.mountPath}/lib64"}]


# --- Deploy labels ---------------------------------------------------------------------------
# NVIDIA's managers take the GPU stack off a node by flipping its `nvidia.com/gpu.deploy.<x>`
# labels: k8s-driver-manager before it unloads a driver (`paused-for-driver-upgrade`), the MIG
# manager before it repartitions the GPUs (`paused-for-mig-change`); then each waits until no pod
# labelled `app=<x>` is left on the node in its namespace and sets the labels back. A "true"
# label is paused ("<value>_<pause>" when already paused by the other manager), an absent one
# is written empty (which stops nothing) and a "false" stays "false" (k8s-driver-manager v0.12.0 cmd/driver-manager/main.go
# maybeSetPaused, maybeSetTrue, waitForPodsToTerminate; mig-parted v0.15.0 pkg/mig/reconfigure).
# The GPU Operator's DaemonSets select `<label>: "true"` and its controller labels every GPU node
# (gpu-operator v26.7.0 assets/state-*/*daemonset.yaml). With no controller here, gpustack's
# DaemonSets leave a node only on the values the managers write, so a node without the labels
# (one that joined without the node/ files, or every node of a cluster rendered before them)
# keeps its GPU stack; the node/ files register the labels as "true" wherever the platform lets
# them start so (not OpenShift, whose Machine API re-applies a MachineSet's labels), which is
# what lets a manager stop the pods there.
DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
DEPLOYED = "true"
# The values that take a DaemonSet off a node: "false" and a pause of one or both managers.
PAUSES = ("paused-for-driver-upgrade", "paused-for-mig-change")
NOT_DEPLOYED = (
    "false",
    *PAUSES,
    f"{PAUSES[0]}_{PAUSES[1]}",
    f"{PAUSES[1]}_{PAUSES[0]}",
)

# By a DaemonSet's app.kubernetes.io/component: the deploy label it selects on and the `app` pod
# label the managers wait for (k8s-driver-manager v0.12.0 waitForPodsToTerminate; the validator's
# is the GPU Operator's nvidia-operator-validator). The MPS control daemon holds the GPUs like the
# plugin it serves: it leaves with the plugin's label and is waited for under the plugin's name.
DEPLOY_CLIENTS: dict[str, tuple[str, str | None]] = {
    "nvidia-driver": ("driver", None),
    "container-toolkit": ("container-toolkit", "nvidia-container-toolkit-daemonset"),
    "device-plugin": ("device-plugin", "nvidia-device-plugin-daemonset"),
    "mps-control-daemon": ("device-plugin", "nvidia-device-plugin-daemonset"),
    "gpu-feature-discovery": ("gpu-feature-discovery", "gpu-feature-discovery"),
    "dcgm-exporter": ("dcgm-exporter", "nvidia-dcgm-exporter"),
    "mig-manager": ("mig-manager", "nvidia-mig-manager"),
    "operator-validator": ("operator-validator", "nvidia-operator-validator"),
    # The validator's binary in its metrics mode, which runs nvidia-smi every minute: it leaves
    # a node with the validator (k8s-driver-manager pauses no label of its own, and waits for
    # the pods labelled app=nvidia-operator-validator to go, cmd/driver-manager/main.go
    # waitForPodsToTerminate, where the GPU Operator's validators share that label for the same
    # shutdown gate).
    "node-status-exporter": ("operator-validator", "nvidia-operator-validator"),
    # The DRA driver's kubelet plugin, which k8s-driver-manager pauses last, once no pod holds a
    # GPU claim on the node, so the kubelet can still reach it to release the claims
    # (k8s-driver-manager v0.12.0 cmd/driver-manager/main.go nvidiaDRADriverDeployLabel,
    # evictKubeletPlugin).
    "dra-kubelet-plugin": ("dra-driver", "nvidia-dra-driver-kubelet-plugin"),
}
# Clients only some clusters run, whose deploy label is registered only there: on a node where
# `nvidia.com/gpu.deploy.dra-driver` is set, k8s-driver-manager takes the DRA path of its
# upgrade (it looks for GPU resource claims and waits for the kubelet plugin).
_DRA_CLIENTS = ("dra-kubelet-plugin",)


def deploy_label_keys(stack: Stack) -> list[str]:
    """The deploy label keys of the GPU DaemonSets this stack may run, sorted."""
    clients = [
        client
        for component, client in DEPLOY_CLIENTS.items()
        if stack.dra_enabled or component not in _DRA_CLIENTS
    ]
    return sorted({DEPLOY_LABEL_PREFIX + label for label, _ in clients})


def _not_deployed(label: str) -> list[str]:
    # k8s-driver-manager sets the driver's label to "pre-installed" on a node whose host already
    # has a driver (main.go disableContainerizedDriver): the driver pod must leave it.
    return [*NOT_DEPLOYED, "pre-installed"] if label == "driver" else list(NOT_DEPLOYED)


def deploy_labels_used(stack: Stack) -> bool:
    """Whether a manager that flips the deploy labels runs: the driver container's
    k8s-driver-manager or the MIG manager."""
    return stack.driver_container or stack.mig_manager_enabled


# Kubernetes' own kubectl image (kubernetes/kubernetes #116672, published from v1.28; no shell,
# the binary at /bin/kubectl), at the target version's minor: kubectl works within one minor version
# of the API server (Kubernetes version skew policy).
KUBECTL_IMAGE = "registry.k8s.io/kubectl"
KUBECTL_FIRST_MINOR = 28


def kubectl_image(stack: Stack) -> str:
    minor = int(stack.config.platform.kubernetesVersion.split(".")[1])
    return f"{KUBECTL_IMAGE}:v1.{max(minor, KUBECTL_FIRST_MINOR)}.0"


def deploy_labeller(stack: Stack, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    """An init container that starts the deploy labels of its node as "true", what the GPU
    Operator's controller does for every GPU node (gpu-operator v26.7.0 controllers/
    state_manager.go labelGPUNodes), so the managers can stop the GPU DaemonSets on any node:
    one that joined without the node/ files, every node of a cluster rendered before them, every
    OpenShift node (whose MachineSet cannot carry them). It labels its node only while every
    deploy label is absent or empty (the value k8s-driver-manager writes for an absent one): a
    label set to anything else, a pause above all, is never touched. `mounts` give it an API
    token where its pod's account does not mount one."""
    keys = deploy_label_keys(stack)
    started = ",".join(
        f"{key} notin ({','.join([DEPLOYED, *_not_deployed(key.removeprefix(DEPLOY_LABEL_PREFIX))])})"
        for key in keys
    )
    return {
        "name": "deploy-labels",
        "image": kubectl_image(stack),
        "command": ["/bin/kubectl"],
        # `notin` also selects a node without the key (Kubernetes labels docs, set-based
        # requirements); with no node selected kubectl changes nothing and succeeds.
        "args": [
            "label",
            "nodes",
            "--overwrite",
            "--field-selector=metadata.name=$(NODE_NAME)",
            f"--selector={started}",
            *(f"{key}={DEPLOYED}" for key in keys),
        ],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": 65534,
        },
        "volumeMounts": mounts,
    }


def deploy_node_labels(stack: Stack) -> dict[str, str]:
    """The deploy labels GPU nodes register with, all "true" (what the GPU Operator's
    controller would write on each GPU node)."""
    if not deploy_labels_used(stack) or stack.facts.nodeLabelsReapplied:
        return {}
    keys = deploy_label_keys(stack)
    if stack.config.gpuAllocation != "dra":
        # Nodes whose GPUs the device plugin hands out (the cluster's, or a pool's as
        # node.pool_view shows it) run no DRA kubelet plugin for k8s-driver-manager to wait for.
        dra_keys = {DEPLOY_LABEL_PREFIX + DEPLOY_CLIENTS[client][0] for client in _DRA_CLIENTS}
        keys = [key for key in keys if key not in dra_keys]
    return dict.fromkeys(keys, DEPLOYED)


def select_on_deploy_labels(stack: Stack, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GPU DaemonSets, each leaving a node whose deploy label is paused or "false" and
    carrying the `app` label the managers wait on, when a manager flips those labels; the objects
    as they are otherwise."""
    if not deploy_labels_used(stack):
        return objects
    result = []
    for obj in objects:
        labels = labels_of(obj["spec"]["template"]) if kind_of(obj) == "DaemonSet" else {}
        client = DEPLOY_CLIENTS.get(labels.get(COMPONENT_LABEL, ""))
        if client is None:
            result.append(obj)
            continue
        label, app = client
        # New dicts and lists along the two paths that change (the pod's labels, its node
        # selector terms), the rest shared with `obj`, which the result replaces: no DaemonSet
        # is copied whole for two changes.
        template = obj["spec"]["template"]
        metadata = {**template["metadata"]}
        if app:
            metadata["labels"] = {**metadata["labels"], "app": app}
        affinity = template["spec"]["affinity"]
        node_affinity = affinity["nodeAffinity"]
        required = node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]
        expression = {"key": DEPLOY_LABEL_PREFIX + label, "operator": "NotIn"}
        terms = [
            {
                **term,
                "matchExpressions": [
                    *term["matchExpressions"],
                    {**expression, "values": _not_deployed(label)},
                ],
            }
            for term in required["nodeSelectorTerms"]
        ]
        spec = {
            **template["spec"],
            "affinity": {
                **affinity,
                "nodeAffinity": {
                    **node_affinity,
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        **required,
                        "nodeSelectorTerms": terms,
                    },
                },
            },
        }
        template = {**template, "metadata": metadata, "spec": spec}
        result.append({**obj, "spec": {**obj["spec"], "template": template}})
    return result
