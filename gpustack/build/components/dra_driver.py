"""NVIDIA's DRA driver for GPUs: hands out GPUs, MIG devices and multi-node NVLink ComputeDomains
through ResourceClaims (`gpuAllocation: dra`) instead of the device plugin's `nvidia.com/gpu`.

Rendered as its Helm chart renders it (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1,
deployments/helm/dra-driver-nvidia-gpu: crds/, templates/, values.yaml), with what the chart
asks the live cluster for pinned from the config instead: the resource.k8s.io version from
`platform.kubernetesVersion` (templates/_helpers.tpl resourceApiVersion), the OpenShift SCC
bindings from the profile. The kubelet plugin publishes each node's ResourceSlices itself at run
time; nothing here renders one. Left out as the chart's defaults leave them out: the admission
webhook and the NetworkPolicies.
"""

from __future__ import annotations

import copy
from typing import Any

from gpustack.build import metrics, pod, ready_files
from gpustack.build.decorate import pulled
from gpustack.build.pod import host_path_volume
from gpustack.build.workload import (
    COMPONENT_LABEL,
    GPU_DEVICE_CLASS,
    daemonset,
    gpu_pod_spec,
    place_by_allocation,
    selector_labels,
)
from gpustack.config.field_types import ResourceRequirements
from gpustack.resolve.stack import Stack, dra_gate_enabled

# The chart's name, which names its objects (templates/_helpers.tpl dra-driver-nvidia-gpu.name,
# fullname for a release of the same name).
CHART = "dra-driver-nvidia-gpu"
KUBELET_PLUGIN = metrics.DRA_KUBELET_PLUGIN  # f"{CHART}-kubelet-plugin"
CONTROLLER = f"{CHART}-controller"
# _helpers.tpl serviceAccountName: "<fullname>-service-account", suffixed per workload
# (kubeletplugin.yaml, controller.yaml).
SERVICE_ACCOUNT = f"{CHART}-service-account"
KUBELET_PLUGIN_ACCOUNT = f"{SERVICE_ACCOUNT}-kubeletplugin"
CONTROLLER_ACCOUNT = f"{SERVICE_ACCOUNT}-controller"
# The account of the IMEX daemons the controller launches (rbac-compute-domain-daemon.yaml).
DAEMON_ACCOUNT = "compute-domain-daemon-service-account"
COMPONENT = "dra-kubelet-plugin"
CONTROLLER_COMPONENT = "dra-controller"
# values.yaml image.repository; the tag is "v" + the chart's appVersion (_helpers.tpl fullimage).
IMAGE = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu"
GROUP = "resource.nvidia.com"
# values.yaml kubeletPlugin.containers.*.healthcheckPort, kubeletPlugin.metrics and
# controller.metrics.
GPUS_HEALTH_PORT = 51516
COMPUTE_DOMAINS_HEALTH_PORT = 51515
GPUS_METRICS = ":8080"
COMPUTE_DOMAINS_METRICS = ":8081"
CONTROLLER_METRICS = ":8080"
METRICS_PATH = "/metrics"
CDI_ROOT = "/var/run/cdi"


def image(stack: Stack) -> str:
    return f"{IMAGE}:{stack.config.dra.version}"


def _image_for_env(stack: Stack) -> str:
    """The image the driver starts other pods from (IMAGE_NAME: the controller's IMEX daemons,
    the plugin's MPS daemons), pinned and mirrored as decorate does the containers' own."""
    return pulled(image(stack), stack.config.images.registry, stack.image_digests)


def _feature_gates(stack: Stack) -> list[dict[str, Any]]:
    """FEATURE_GATES as the chart writes it (key=value, by key), only when any gate is set."""
    gates = stack.config.dra.featureGates
    if not gates:
        return []
    value = ",".join(f"{key}={str(gates[key]).lower()}" for key in sorted(gates))
    return [pod.env("FEATURE_GATES", value)]


def _gate(stack: Stack, gate: str) -> bool:
    return dra_gate_enabled(stack.config, gate)


def build(stack: Stack) -> list[dict[str, Any]]:
    if not stack.dra_enabled:
        return []
    objects = [*custom_resource_definitions(), *_device_classes(stack)]
    objects += _kubelet_plugin_rbac(stack)
    objects.append(_kubelet_plugin(stack))
    if stack.dra_compute_domains:
        objects += _controller_rbac(stack)
        objects += _daemon_rbac(stack)
        objects.append(_controller(stack))
    objects += _admission_policy(stack)
    return objects


# ---------------------------------------------------------------------------------------------
# DeviceClasses (templates/deviceclass-*.yaml): which devices of which driver a claim may get.


def _device_class(stack: Stack, name: str, expression: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    return {
        "apiVersion": stack.resource_api_version,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def _device_classes(stack: Stack) -> list[dict[str, Any]]:
    classes = []
    if stack.dra_gpus:
        gpu = _device_class(
            stack,
            GPU_DEVICE_CLASS,
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
        )
        if stack.resource_api_version == "resource.k8s.io/v1" and stack.dra_extended_resource:
            # A pod's `nvidia.com/gpu` limit is served from this class (KEP-5004; the chart's
            # deviceclass-gpu.yaml names it). Only where the API server keeps the field: with
            # DRAExtendedResource off it drops it, and Argo CD and Flux would see the DeviceClass
            # differ from Git for ever.
            gpu["spec"]["extendedResourceName"] = "nvidia.com/gpu"
        classes += [
            gpu,
            _device_class(
                stack,
                "mig.nvidia.com",
                "device.driver == 'gpu.nvidia.com' && "
                "device.attributes['gpu.nvidia.com'].type == 'mig'",
            ),
            _device_class(
                stack,
                "vfio.gpu.nvidia.com",
                "device.driver == 'gpu.nvidia.com' && "
                "device.attributes['gpu.nvidia.com'].type == 'vfio'",
            ),
        ]
    if stack.dra_compute_domains:
        classes += [
            _device_class(
                stack,
                "compute-domain-daemon.nvidia.com",
                "device.driver == 'compute-domain.nvidia.com' && "
                "device.attributes['compute-domain.nvidia.com'].type == 'daemon'",
            ),
            _device_class(
                stack,
                "compute-domain-default-channel.nvidia.com",
                "device.driver == 'compute-domain.nvidia.com' && "
                "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
                "device.attributes['compute-domain.nvidia.com'].id == 0",
            ),
        ]
    return classes


# ---------------------------------------------------------------------------------------------
# RBAC (templates/rbac-*.yaml), one namespace: the chart's ADDITIONAL_NAMESPACES is not offered.


def _service_account(stack: Stack, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": stack.namespace},
    }


def _binding(
    kind: str, name: str, role: str, account: str, namespace: str, *, in_namespace: bool
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if in_namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata,
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": kind.removesuffix("Binding"),
            "name": role,
        },
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }


def _role(kind: str, name: str, namespace: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if kind == "Role":
        metadata["namespace"] = namespace
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata,
        "rules": rules,
    }


def _rule(group: str, resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


def _scc(stack: Stack, name: str, account: str, scc: str) -> list[dict[str, Any]]:
    """On OpenShift, the chart binds the account to the SCC's `system:openshift:scc:<name>`
    ClusterRole (it looks for the SecurityContextConstraints API in the live cluster)."""
    if not stack.facts.securityContextConstraints:
        return []
    return [
        _binding(
            "ClusterRoleBinding",
            name,
            f"system:openshift:scc:{scc}",
            account,
            stack.namespace,
            in_namespace=False,
        )
    ]


def _kubelet_plugin_rbac(stack: Stack) -> list[dict[str, Any]]:
    """rbac-kubeletplugin.yaml: the plugins publish their node's ResourceSlices, read the claims
    they prepare and the ComputeDomains; with MPSSupport the gpus plugin runs an MPS control
    daemon per claim as a Deployment."""
    namespace = stack.namespace
    cluster_role = f"{CHART}-clusterrole-kubeletplugin"
    role = f"{CHART}-role-kubeletplugin"
    rules = [
        _rule(GROUP, ["computedomains"], ["get", "list", "watch"]),
        _rule("resource.k8s.io", ["resourceclaims"], ["get", "list", "watch"]),
        _rule(
            "resource.k8s.io",
            ["resourceslices"],
            ["get", "list", "watch", "create", "update", "delete"],
        ),
        _rule("", ["nodes"], ["get", "list", "watch", "update"]),
        _rule("", ["pods"], ["get", "list", "watch"]),
    ]
    namespaced = [_rule(GROUP, ["computedomaincliques"], ["get"])]
    if stack.dra_gpus and _gate(stack, "MPSSupport"):
        namespaced.append(
            _rule(
                "apps",
                ["deployments"],
                ["get", "list", "watch", "create", "update", "patch", "delete"],
            )
        )
    return [
        _service_account(stack, KUBELET_PLUGIN_ACCOUNT),
        _role("ClusterRole", cluster_role, namespace, rules),
        _binding(
            "ClusterRoleBinding",
            f"{CHART}-clusterrole-binding-kubeletplugin",
            cluster_role,
            KUBELET_PLUGIN_ACCOUNT,
            namespace,
            in_namespace=False,
        ),
        _role("Role", role, namespace, namespaced),
        _binding(
            "RoleBinding",
            f"{CHART}-role-binding-kubeletplugin",
            role,
            KUBELET_PLUGIN_ACCOUNT,
            namespace,
            in_namespace=True,
        ),
        *_scc(
            stack,
            f"{CHART}-openshift-privileged-role-binding-kubeletplugin",
            KUBELET_PLUGIN_ACCOUNT,
            "privileged",
        ),
    ]


def _controller_rbac(stack: Stack) -> list[dict[str, Any]]:
    """rbac-controller.yaml: the ComputeDomain controller writes each domain's status and its
    ResourceClaimTemplates, labels nodes, and runs the IMEX daemons as DaemonSets."""
    namespace = stack.namespace
    cluster_role = f"{CHART}-clusterrole-controller"
    role = f"{CHART}-role-controller"
    rules = [
        _rule(GROUP, ["computedomains"], ["get", "list", "watch", "update"]),
        _rule(GROUP, ["computedomains/status"], ["update"]),
        _rule(
            "resource.k8s.io",
            ["resourceclaimtemplates"],
            ["get", "list", "watch", "create", "update", "delete"],
        ),
        _rule("coordination.k8s.io", ["leases"], ["get", "create", "update"]),
        _rule("", ["nodes"], ["get", "list", "watch", "update"]),
        _rule("", ["pods"], ["get", "list", "watch"]),
    ]
    namespaced = [
        _rule(
            "apps", ["daemonsets"], ["get", "list", "watch", "create", "update", "patch", "delete"]
        ),
        _rule(GROUP, ["computedomaincliques"], ["get", "list", "watch", "update"]),
    ]
    return [
        _service_account(stack, CONTROLLER_ACCOUNT),
        _role("ClusterRole", cluster_role, namespace, rules),
        _binding(
            "ClusterRoleBinding",
            f"{CHART}-clusterrole-binding-controller-{namespace}",
            cluster_role,
            CONTROLLER_ACCOUNT,
            namespace,
            in_namespace=False,
        ),
        _role("Role", role, namespace, namespaced),
        _binding(
            "RoleBinding",
            f"{CHART}-role-binding-controller",
            role,
            CONTROLLER_ACCOUNT,
            namespace,
            in_namespace=True,
        ),
    ]


def _daemon_rbac(stack: Stack) -> list[dict[str, Any]]:
    """rbac-compute-domain-daemon.yaml: the account of the IMEX daemon pods the controller
    starts (their pod spec is the controller's, not the chart's); `anyuid` on OpenShift."""
    role = "compute-domain-daemon-role"
    rules = [
        _rule(
            GROUP,
            ["computedomains", "computedomains/status"],
            ["get", "list", "watch", "update", "patch"],
        ),
        _rule(
            GROUP, ["computedomaincliques"], ["get", "list", "watch", "create", "update", "patch"]
        ),
        _rule("", ["pods"], ["get", "list", "watch", "patch"]),
    ]
    return [
        _service_account(stack, DAEMON_ACCOUNT),
        _role("ClusterRole", role, stack.namespace, rules),
        _binding(
            "ClusterRoleBinding",
            "compute-domain-daemon-role-binding",
            role,
            DAEMON_ACCOUNT,
            stack.namespace,
            in_namespace=False,
        ),
        *_scc(
            stack, "compute-domain-daemon-openshift-anyuid-role-binding", DAEMON_ACCOUNT, "anyuid"
        ),
    ]


# ---------------------------------------------------------------------------------------------
# The kubelet plugin DaemonSet (templates/kubeletplugin.yaml).

# The script both plugin containers run (kubeletplugin.yaml args): MASK_NVIDIA_DRIVER_PARAMS
# hides GPUs from the plugin under nvkind only; off here.
_PLUGIN_SCRIPT = """\
# Conditionally mask the params file to prevent this container from
# recreating any missing GPU device nodes. This is necessary, for
# example, when running under nvkind to limit the set GPUs governed
# by the plugin even though it has cgroup access to all of them.
if [ "${{MASK_NVIDIA_DRIVER_PARAMS}}" = "true" ]; then
  cp /proc/driver/nvidia/params /root/gpu-params
  sed -i 's/^ModifyDeviceFiles: 1$/ModifyDeviceFiles: 0/' /root/gpu-params
  mount --bind /root/gpu-params /proc/driver/nvidia/params
fi
{binary} -v $(LOG_VERBOSITY)"""


def _kubelet_paths(stack: Stack) -> tuple[str, str]:
    """values.yaml kubeletPlugin.kubeletRegistrarDirectoryPath and kubeletPluginsDirectoryPath,
    under the profile's kubelet root."""
    root = stack.facts.kubeletRoot
    return f"{root}/plugins_registry", f"{root}/plugins"


def _plugin_container(
    stack: Stack,
    name: str,
    binary: str,
    health_port: int,
    metrics: str,
    liveness_period: int,
    resources: ResourceRequirements | None,
) -> dict[str, Any]:
    registrar, plugins = _kubelet_paths(stack)
    env: list[dict[str, Any]] = [
        # HTTP_ENDPOINT and METRICS_PATH: the metrics server (values.yaml kubeletPlugin.metrics).
        pod.env("HTTP_ENDPOINT", metrics),
        pod.env("METRICS_PATH", METRICS_PATH),
        pod.env("LOG_VERBOSITY", str(stack.config.dra.logVerbosity)),
        pod.env("MASK_NVIDIA_DRIVER_PARAMS", "false"),
        pod.env("NVIDIA_DRIVER_ROOT", stack.driver_root),
        # Under runc: explicit "void", else an nvidia runtime would inject every GPU.
        pod.env("NVIDIA_VISIBLE_DEVICES", "void"),
        pod.env("CDI_ROOT", CDI_ROOT),
        pod.env("NVIDIA_MIG_CONFIG_DEVICES", "all"),
        pod.field_env("NODE_NAME", "spec.nodeName"),
        pod.field_env("NAMESPACE", "metadata.namespace"),
    ]
    if name == "gpus":
        env += [
            pod.field_env("SERVICE_ACCOUNT_NAME", "spec.serviceAccountName"),
            pod.env("IMAGE_NAME", _image_for_env(stack)),
        ]
    env += [
        *_feature_gates(stack),
        pod.env("KUBELET_REGISTRAR_DIRECTORY_PATH", registrar),
        pod.env("KUBELET_PLUGINS_DIRECTORY_PATH", plugins),
        pod.env("HEALTHCHECK_PORT", str(health_port)),
    ]
    probe = {"grpc": {"port": health_port, "service": "liveness"}, "timeoutSeconds": 10}
    container: dict[str, Any] = {
        "name": name,
        # Privileged: the plugins create GPU device nodes, write CDI specs on the host, mount
        # with Bidirectional propagation and (gpus) change MIG partitions.
        "securityContext": {"privileged": True},
        "image": image(stack),
        "imagePullPolicy": "IfNotPresent",
        "command": ["bash", "-c"],
        "args": [_PLUGIN_SCRIPT.format(binary=binary)],
    }
    if resources:
        container["resources"] = resources.as_pod_spec()
    return {
        **container,
        "startupProbe": {**probe, "failureThreshold": 600, "periodSeconds": 1},
        "livenessProbe": {**probe, "failureThreshold": 3, "periodSeconds": liveness_period},
        "env": env,
        "volumeMounts": _plugin_mounts(stack, name),
    }


def _plugin_mounts(stack: Stack, name: str) -> list[dict[str, Any]]:
    """kubeletplugin.yaml's volumeMounts of the plugin container `name`, as the chart has them."""
    registrar, plugins = _kubelet_paths(stack)
    driver_root: dict[str, Any] = {
        "name": "driver-root",
        "mountPath": "/driver-root",
        "mountPropagation": "HostToContainer",
    }
    if name == "compute-domains":
        driver_root["readOnly"] = True  # the chart's gpus container mounts it writable
    mounts = [
        {"name": "plugins-registry", "mountPath": registrar},
        # Bidirectional: the plugins create their sockets and prepared claims' state here.
        {"name": "plugins", "mountPath": plugins, "mountPropagation": "Bidirectional"},
        {"name": "cdi", "mountPath": CDI_ROOT},
        driver_root,
    ]
    if name == "gpus" and _gate(stack, "PassthroughSupport"):
        # Binding GPUs to vfio-pci needs the host's root, /sys and /proc.
        mounts += [
            {
                "name": "host-root",
                "mountPath": "/host-root",
                "mountPropagation": "HostToContainer",
                "readOnly": True,
            },
            {"name": "sysfs", "mountPath": "/sys/", "mountPropagation": "Bidirectional"},
            {"name": "procfs", "mountPath": "/proc/", "mountPropagation": "Bidirectional"},
        ]
    return mounts


def _driver_root_parent(stack: Stack) -> str:
    """kubeletplugin.yaml driver-root-parent: the driver root's parent folder, `/` for `/`."""
    root = stack.driver_root
    return "/" if root == "/" else root.rstrip("/").rsplit("/", 1)[0] or "/"


def _prestart(stack: Stack) -> dict[str, Any]:
    """The init container that waits until the driver is on the host under NVIDIA_DRIVER_ROOT
    (/usr/bin/kubelet-plugin-prestart.sh in the image)."""
    registrar, plugins = _kubelet_paths(stack)
    parent_mount = pod.mount(
        "driver-root-parent",
        "/driver-root-parent",
        read_only=stack.driver_root == "/",
        # A driver container mounts the driver there after this pod starts (Bidirectional, out
        # of this pod's lifecycle): HostToContainer lets the plugin see it.
        propagation=None if stack.driver_root == "/" else "HostToContainer",
    )
    return {
        "name": "init-container",
        "image": image(stack),
        "securityContext": {"privileged": True},
        "command": ["bash", "/usr/bin/kubelet-plugin-prestart.sh"],
        "env": [
            pod.env("NVIDIA_DRIVER_ROOT", stack.driver_root),
            pod.env("NVIDIA_VISIBLE_DEVICES", "void"),
            pod.env("KUBELET_REGISTRAR_DIRECTORY_PATH", registrar),
            pod.env("KUBELET_PLUGINS_DIRECTORY_PATH", plugins),
        ],
        "volumeMounts": [parent_mount],
    }


def _plugin_containers(stack: Stack) -> list[dict[str, Any]]:
    """A container per kind of device the DRA driver hands out: (its settings, container name,
    binary, health port, metrics address, liveness period)."""
    dra = stack.config.dra
    plugins: list[tuple[Any, str, str, int, str, int]] = [
        (
            dra.computeDomains,
            "compute-domains",
            "compute-domain-kubelet-plugin",
            COMPUTE_DOMAINS_HEALTH_PORT,
            COMPUTE_DOMAINS_METRICS,
            10,
        ),
        (dra.gpus, "gpus", "gpu-kubelet-plugin", GPUS_HEALTH_PORT, GPUS_METRICS, 30),
    ]
    return [
        _plugin_container(stack, name, binary, port, metrics, period, settings.resources)
        for settings, name, binary, port, metrics, period in plugins
        if settings.enabled
    ]


def _kubelet_plugin_volumes(stack: Stack) -> list[dict[str, Any]]:
    registrar, plugins = _kubelet_paths(stack)
    volumes = [
        host_path_volume("plugins-registry", registrar),
        host_path_volume("plugins", plugins),
        host_path_volume("cdi", CDI_ROOT),
        host_path_volume("driver-root-parent", _driver_root_parent(stack), "DirectoryOrCreate"),
        host_path_volume("driver-root", stack.driver_root, "DirectoryOrCreate"),
    ]
    if stack.config.dra.gpus.enabled and _gate(stack, "PassthroughSupport"):
        volumes += [
            host_path_volume("host-root", "/", "Directory"),
            host_path_volume("sysfs", "/sys/", "Directory"),
            host_path_volume("procfs", "/proc/", "Directory"),
        ]
    return volumes


def _kubelet_plugin(stack: Stack) -> dict[str, Any]:
    dra = stack.config.dra
    # Under runc, as the chart runs it (NVIDIA_VISIBLE_DEVICES=void): the plugins reach the
    # driver through the driver-root mount, not through an nvidia runtime.
    pod_spec = gpu_pod_spec(stack, runtime_class=False)
    if dra.gpus.enabled:
        # Only where the DRA driver hands out the GPUs (pools with the other gpuAllocation run
        # the device plugin); for ComputeDomains alone it runs beside the plugin everywhere.
        pod_spec = place_by_allocation(stack, pod_spec, "dra")
    pod_spec.update(
        {
            "serviceAccountName": KUBELET_PLUGIN_ACCOUNT,
            "initContainers": [_prestart(stack)],
            "containers": _plugin_containers(stack),
            "volumes": _kubelet_plugin_volumes(stack),
        }
    )
    workload = daemonset(
        stack,
        KUBELET_PLUGIN,
        ready_files.after_toolkit_ready(stack, pod_spec),
        component=COMPONENT,
    )
    # values.yaml kubeletPlugin.updateStrategy: every node at once; prepared claims outlive a
    # plugin restart (checkpointed under the plugins folder).
    workload["spec"]["updateStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "100%"},
    }
    return workload


# ---------------------------------------------------------------------------------------------
# The ComputeDomain controller Deployment (templates/controller.yaml).


def _controller_env(stack: Stack) -> list[dict[str, Any]]:
    verbosity = str(stack.config.dra.logVerbosity)
    env = [
        pod.env("HTTP_ENDPOINT", CONTROLLER_METRICS),
        pod.env("METRICS_PATH", METRICS_PATH),
        pod.env("PPROF_PATH", ""),
        pod.env("LOG_VERBOSITY", verbosity),
        # The verbosity of the IMEX daemons the controller launches.
        pod.env("LOG_VERBOSITY_CD_DAEMON", verbosity),
        pod.field_env("POD_NAME", "metadata.name"),
        pod.field_env("NAMESPACE", "metadata.namespace"),
        pod.env("IMAGE_NAME", _image_for_env(stack)),
    ]
    secrets = stack.config.images.pullSecrets
    if secrets:
        # The IMEX daemon DaemonSets the controller creates pull the same image.
        env.append(pod.env("CD_DAEMON_IMAGE_PULL_SECRET_NAMES", ",".join(secrets)))
    env += [
        pod.env("NVIDIA_VISIBLE_DEVICES", "void"),
        *_feature_gates(stack),
        # values.yaml controller.leaderElection: off with its one replica.
        pod.env("LEADER_ELECTION_ENABLED", "false"),
        pod.env("LEADER_ELECTION_LEASE_LOCK_NAME", CONTROLLER),
        pod.env("LEADER_ELECTION_LEASE_LOCK_NAMESPACE", stack.namespace),
        pod.env("LEADER_ELECTION_LEASE_DURATION", "15s"),
        pod.env("LEADER_ELECTION_RENEW_DEADLINE", "10s"),
        pod.env("LEADER_ELECTION_RETRY_PERIOD", "2s"),
    ]
    return env


# values.yaml controller.affinity and tolerations: near the control plane.
_CONTROL_PLANE_AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [
                        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}
                    ]
                },
            }
        ]
    }
}
_CONTROL_PLANE_TOLERATIONS: list[dict[str, Any]] = [
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/master", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
]


def _controller(stack: Stack) -> dict[str, Any]:
    dra = stack.config.dra
    namespace = stack.namespace
    selector = selector_labels(CONTROLLER)
    labels = {**selector, COMPONENT_LABEL: CONTROLLER_COMPONENT}
    container: dict[str, Any] = {
        "name": "compute-domain",
        # It only calls the API server.
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "image": image(stack),
        "imagePullPolicy": "IfNotPresent",
        "command": ["compute-domain-controller", "-v", "$(LOG_VERBOSITY)"],
        "env": _controller_env(stack),
    }
    if dra.computeDomains.controllerResources:
        container["resources"] = dra.computeDomains.controllerResources.as_pod_spec()
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": CONTROLLER, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "serviceAccountName": CONTROLLER_ACCOUNT,
                    "containers": [container],
                    "affinity": copy.deepcopy(_CONTROL_PLANE_AFFINITY),
                    "tolerations": copy.deepcopy(_CONTROL_PLANE_TOLERATIONS),
                },
            },
        },
    }


# ---------------------------------------------------------------------------------------------
# The ValidatingAdmissionPolicy (templates/validatingadmissionpolicy*.yaml): a kubelet plugin
# may change only its own node's ResourceSlices, so a compromised node cannot rewrite another's.


def _admission_policy(stack: Stack) -> list[dict[str, Any]]:
    name = f"resourceslices-policy-{CHART}"
    # The chart matches `system:serviceaccount:<namespace>:<fullname>-service-account`, an
    # account no pod of the chart runs as since the kubelet plugin's got its own suffix: the
    # policy then never applies. It matches the kubelet plugin's account here.
    user = f"system:serviceaccount:{stack.namespace}:{KUBELET_PLUGIN_ACCOUNT}"
    target = '(request.operation == "DELETE" ? oldObject : object)'
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["resource.k8s.io"],
                        "apiVersions": ["v1", "v1beta1", "v1beta2"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["resourceslices"],
                    }
                ]
            },
            "matchConditions": [
                {"name": "isRestrictedUser", "expression": f'request.userInfo.username == "{user}"'}
            ],
            "variables": [
                {
                    # With ServiceAccountTokenPodNodeInfo (KEP-4193) a pod's service account
                    # token names its node; the chart's validation message requires it.
                    "name": "userNodeName",
                    "expression": "request.userInfo.extra[?'authentication.kubernetes.io/"
                    "node-name'][0].orValue('')",
                },
                {"name": "objectNodeName", "expression": f'{target}.spec.?nodeName.orValue("")'},
                {
                    "name": "nodeSelectorValue",
                    "expression": f"{target}.spec.?nodeSelector.orValue(null)",
                },
                {"name": "allNodesValue", "expression": f"{target}.spec.?allNodes.orValue(false)"},
            ],
            "validations": [
                {
                    "expression": 'variables.userNodeName != ""',
                    "message": "no node association found for user, this user must run in a "
                    "pod on a node and ServiceAccountTokenPodNodeInfo must be enabled",
                },
                {
                    "expression": "variables.userNodeName == variables.objectNodeName || "
                    "variables.allNodesValue == true || variables.nodeSelectorValue != null",
                    "messageExpression": '"this user running on node \'"+variables.userNodeName'
                    '+"\' may not modify cluster or node resourceslices"',
                },
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return [policy, binding]


# ---------------------------------------------------------------------------------------------
# CRDs (crds/resource.nvidia.com_computedomains.yaml and _computedomaincliques.yaml, v0.4.1,
# controller-gen v0.17.1), descriptions shortened; the API served is v1beta1.

_STRING: dict[str, Any] = {"type": "string"}
_DAEMON_STATUS: dict[str, Any] = {
    "type": "string",
    "enum": ["Ready", "NotReady"],
    "default": "NotReady",
    "description": "Whether the IMEX daemon on the node is ready to broker GPU memory exchanges.",
}


def _daemon_info(name_key: str, description: str) -> dict[str, Any]:
    """A daemon of a ComputeDomain (status.nodes) or of a clique (daemons), kept as a map list
    keyed by its node's name."""
    item = {
        "type": "object",
        "description": description,
        "properties": {
            "cliqueID": _STRING,
            "index": {
                "type": "integer",
                "description": "Fixes the daemon's DNS name within its clique: (cliqueID, index) "
                "is unique.",
            },
            "ipAddress": _STRING,
            name_key: _STRING,
            "status": _DAEMON_STATUS,
        },
        "required": ["cliqueID", "ipAddress", name_key],
    }
    return {
        "type": "array",
        "items": item,
        "x-kubernetes-list-map-keys": [name_key],
        "x-kubernetes-list-type": "map",
    }


def _compute_domain_schema() -> dict[str, Any]:
    spec = {
        "type": "object",
        "description": "ComputeDomainSpec provides the spec for a ComputeDomain.",
        "properties": {
            "channel": {
                "type": "object",
                "description": "The channel a workload inside the ComputeDomain runs with.",
                "properties": {
                    "allocationMode": {
                        "type": "string",
                        "enum": ["All", "Single"],
                        "default": "Single",
                        "description": "Request all IMEX channels of the domain or exactly one.",
                    },
                    "resourceClaimTemplate": {
                        "type": "object",
                        "description": "The ResourceClaimTemplate the controller generates.",
                        "properties": {"name": _STRING},
                        "required": ["name"],
                    },
                },
                "required": ["resourceClaimTemplate"],
            },
            "numNodes": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "Intended number of IMEX daemons (deprecated; 0 recommended with "
                "IMEXDaemonsWithDNSNames).",
            },
        },
        "required": ["channel"],
        "x-kubernetes-validations": [
            {"message": "A computeDomain.spec is immutable", "rule": "self == oldSelf"}
        ],
    }
    status = {
        "type": "object",
        "description": "Global ComputeDomain status, for debugging; workloads must not rely on it.",
        "properties": {
            "nodes": _daemon_info(
                "name",
                "ComputeDomainNode provides information about each node added to a ComputeDomain.",
            ),
            "status": {"type": "string", "enum": ["Ready", "NotReady"], "default": "NotReady"},
        },
        "required": ["status"],
    }
    return {
        "type": "object",
        "description": "ComputeDomain prepares a set of nodes to run a multi-node workload in.",
        "properties": {
            "apiVersion": _STRING,
            "kind": _STRING,
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def _clique_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "ComputeDomainClique holds information about one clique of a "
        'ComputeDomain, in the driver namespace, named "<computeDomainUID>.<cliqueID>".',
        "properties": {
            "apiVersion": _STRING,
            "daemons": _daemon_info(
                "nodeName",
                "ComputeDomainDaemonInfo provides information about each daemon in a "
                "ComputeDomainClique.",
            ),
            "kind": _STRING,
            "metadata": {"type": "object"},
        },
    }


def _crd(kind: str, schema: dict[str, Any], *, status: bool) -> dict[str, Any]:
    plural = f"{kind.lower()}s"
    version: dict[str, Any] = {
        "name": "v1beta1",
        "schema": {"openAPIV3Schema": schema},
        "served": True,
        "storage": True,
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
            },
            "scope": "Namespaced",
            "versions": [version],
        },
    }


def custom_resource_definitions() -> list[dict[str, Any]]:
    """Both CRDs, whatever is enabled, as Helm installs a chart's crds/ folder: the kubelet
    plugin's RBAC names them either way."""
    return [
        _crd("ComputeDomain", _compute_domain_schema(), status=True),
        _crd("ComputeDomainClique", _clique_schema(), status=False),
    ]
