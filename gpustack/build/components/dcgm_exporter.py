"""NVIDIA's DCGM exporter: GPU telemetry (utilisation, memory, power, errors) for Prometheus.

Facts from NVIDIA/dcgm-exporter (dcgm-exporter.yaml, deployment/ chart, etc/*.csv at d5e5f51), the
GPU Operator's state-dcgm-exporter assets (a22dbf6) and Google's prometheus-engine nvidia-dcgm
example. One exporter per GPU node reads every GPU through DCGM and labels each sample with the
pod that holds the GPU (the kubelet's pod-resources API). How Prometheus finds it is the one
platform difference: a ServiceMonitor for prometheus-operator, a PodMonitoring for Google Managed
Prometheus, or nothing.
"""

from __future__ import annotations

from typing import Any

from gpustack.build import pod, ready_files
from gpustack.build.metrics import COUNTERS
from gpustack.build.metrics import DCGM_EXPORTER as NAME
from gpustack.build.monitoring import scrape_objects
from gpustack.build.pod import host_path_volume
from gpustack.build.workload import (
    API_ACCESS,
    API_ACCESS_MOUNT,
    COMPONENT_LABEL,
    cluster_role_with_binding,
    config_map,
    daemonset,
    gpu_pod_spec,
    host_driver,
    host_driver_env,
    kubelet_socket_selinux,
    role_with_binding,
    scc_rules,
    selector_labels,
    service_account,
)
from gpustack.config.field_types import duration_ms
from gpustack.resolve.stack import Stack

COMPONENT = "dcgm-exporter"
METRICS_CONFIG_MAP = "nvidia-dcgm-exporter-metrics"
COUNTERS_KEY = "counters.csv"
# A directory the image does not own, so the image's own counter files stay visible.
COUNTERS_DIR = "/etc/gpustack/dcgm-exporter"
# dcgm-exporter.yaml: container port `metrics`, DCGM_EXPORTER_LISTEN=":9400".
PORT = 9400
PORT_NAME = "metrics"
# The exporter's default kubelet socket directory inside the container (dcgm-exporter.yaml mount).
POD_RESOURCES = "/var/lib/kubelet/pod-resources"
# What the Service and the monitors carry; the monitors select on the selector labels among them.
LABELS = {**selector_labels(NAME), COMPONENT_LABEL: COMPONENT}


def image(stack: Stack) -> str:
    # dcgm-exporter and gpu-operator values.yaml: the distroless variant is the default tag.
    return f"nvcr.io/nvidia/k8s/dcgm-exporter:{stack.config.dcgmExporter.version}-distroless"


def counters_csv() -> str:
    """The collectors file in the exporter's format: `field, type, help` lines, `#` comments."""
    lines = ["# Format: DCGM field, Prometheus type, help text."]
    for heading, counters in COUNTERS:
        lines += ["", f"# {heading}"]
        lines += [f"{field}, {kind}, {help_text}" for field, kind, help_text in counters]
    return "\n".join(lines) + "\n"


def build(stack: Stack) -> list[dict[str, Any]]:
    if not stack.config.dcgmExporter.enabled:
        return []
    objects: list[dict[str, Any]] = [
        # Pods are mapped to GPUs through the kubelet's pod-resources socket (gpu-operator
        # #2726): the account mounts no token. Only in DRA mode does the exporter call the API
        # server, from its one container, which gets a token of its own (DRA_ACCESS).
        service_account(stack, NAME, calls_api=False),
        config_map(stack, METRICS_CONFIG_MAP, {COUNTERS_KEY: counters_csv()}),
        _daemonset(stack),
    ]
    if stack.dra_gpus:
        objects += cluster_role_with_binding(stack, NAME, DRA_RULES)
    rules = scc_rules(stack)
    if rules:
        objects += role_with_binding(stack, NAME, rules)
    # The exporter labels its samples with the GPU's pod, namespace and container, not with its
    # own node: the monitor adds that.
    objects += scrape_objects(stack, NAME, LABELS, (PORT_NAME, PORT), by_node=True)
    if stack.monitor in ("servicemonitor", "azure-servicemonitor") and (
        stack.facts.securityContextConstraints
    ):
        objects += _cluster_monitoring_access(stack)
    return objects


# The API token of the exporter's container in DRA mode.
DRA_ACCESS: dict[str, Any] = {**API_ACCESS, "name": "dcgm-exporter-api-access"}
# What the exporter reads in DRA mode, as its chart grants it (NVIDIA/dcgm-exporter
# deployment/templates/clusterrole.yaml, d5e5f51, with kubernetesDRA.enabled): the ResourceSlices
# that tie a claimed device to its GPU (internal/pkg/transformation/dra.go, an informer: list
# and watch) and the pods that hold the claims.
DRA_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["", "resource.k8s.io"],
        "resources": ["pods", "resourceslices"],
        "verbs": ["get", "list", "watch"],
    }
]


def _security_context(stack: Stack) -> dict[str, Any]:
    if stack.facts.driver.hostMount is not None or not stack.facts.runtime.unprivilegedEnvvar:
        # No nvidia runtime injects /dev/nvidia* here (GKE), or it does so only for privileged
        # containers (Bottlerocket: NVIDIA/dcgm-exporter #279), and the exporter requests no GPU
        # for the platform's device plugin to hand it: only a privileged container sees the
        # device nodes of every GPU (prometheus-engine nvidia-dcgm example runs it privileged).
        return {"privileged": True}
    security: dict[str, Any] = {
        # The embedded DCGM host engine runs as root and needs SYS_ADMIN for the DCGM_FI_PROF_*
        # profiling counters (dcgm-exporter.yaml; without it the exporter fails with "host
        # engine is running as non-root", dcgm-exporter #402). Every other capability is
        # dropped and privileges cannot grow.
        "runAsNonRoot": False,
        "runAsUser": 0,
        "capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]},
        "allowPrivilegeEscalation": False,
        # The pod-resources socket (OpenShift).
        **kubelet_socket_selinux(stack),
    }
    return security


def _env(stack: Stack) -> list[dict[str, Any]]:
    env = [
        pod.env("DCGM_EXPORTER_LISTEN", f":{PORT}"),
        # Label samples with the pod, namespace and container that hold each GPU.
        pod.env("DCGM_EXPORTER_KUBERNETES", "true"),
        pod.env("DCGM_EXPORTER_COLLECTORS", f"{COUNTERS_DIR}/{COUNTERS_KEY}"),
        # Collect as often as Prometheus scrapes (the exporter's default is every 30 s, in ms).
        pod.env("DCGM_EXPORTER_INTERVAL", str(duration_ms(stack.config.dcgmExporter.interval))),
        pod.field_env("NODE_NAME", "spec.nodeName"),
    ]
    if stack.facts.devicePluginProvider == "gke" and not stack.config.devicePlugin.enabled:
        # GKE's device plugin hands out GPUs by device name (nvidia0), not by UUID
        # (prometheus-engine nvidia-dcgm example).
        env.append(pod.env("DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE", "device-name"))
    if stack.facts.driver.hostMount is None:
        # The nvidia runtime or hook exposes every GPU to the exporter, which requests none.
        env.append(pod.env("NVIDIA_VISIBLE_DEVICES", "all"))
    env += host_driver_env(stack)
    if stack.dra_gpus:
        # GPUs handed out by NVIDIA's DRA driver reach a pod through a ResourceClaim: the
        # kubelet's pod-resources name the claim's device, and the exporter ties it to a GPU
        # through the driver's ResourceSlices only in DRA mode (the chart's kubernetesDRA.enabled,
        # deployment/templates/daemonset.yaml KUBERNETES_ENABLE_DRA, d5e5f51); without it the
        # GPUs of DRA pods carry no pod labels.
        env.append(pod.env("KUBERNETES_ENABLE_DRA", "true"))
    return env


def _volumes_and_mounts(stack: Stack) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The kubelet's pod-resources socket (which pod holds which GPU), the counters to collect,
    the driver where no runtime injects it, and in DRA mode an API token."""
    driver_volumes, driver_mounts = pod.host_paths(host_driver(stack))
    resources = f"{stack.facts.kubeletRoot}/pod-resources"
    volumes = [
        host_path_volume("pod-resources", resources, "Directory"),
        pod.config_map_volume("counters", METRICS_CONFIG_MAP),
        *driver_volumes,
    ]
    mounts = [
        pod.mount("pod-resources", POD_RESOURCES, read_only=True),
        pod.mount("counters", COUNTERS_DIR, read_only=True),
        *driver_mounts,
    ]
    if stack.dra_gpus:
        volumes.append(DRA_ACCESS)
        mounts.append(pod.mount(DRA_ACCESS["name"], API_ACCESS_MOUNT, read_only=True))
    return volumes, mounts


def _daemonset(stack: Stack) -> dict[str, Any]:
    volumes, mounts = _volumes_and_mounts(stack)
    probe = {"httpGet": {"path": "/health", "port": PORT_NAME}, "initialDelaySeconds": 45}
    pod_spec = gpu_pod_spec(stack)
    pod_spec.update(
        {
            "serviceAccountName": NAME,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": COMPONENT,
                    "image": image(stack),
                    "env": _env(stack),
                    "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
                    # dcgm-exporter chart: DCGM needs about 45 s to start watching fields.
                    "livenessProbe": {**probe, "periodSeconds": 5},
                    "readinessProbe": probe,
                    "securityContext": _security_context(stack),
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        # Chart values.yaml: 256Mi OOM-killed exporters on ordinary nodes
                        # (dcgm-exporter #609, raised to 512Mi). No CPU limit: throttling a
                        # collector only makes scrapes late.
                        "limits": {"memory": "512Mi"},
                    },
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        }
    )
    return daemonset(
        stack, NAME, ready_files.after_toolkit_ready(stack, pod_spec), component=COMPONENT
    )


def _cluster_monitoring_access(stack: Stack) -> list[dict[str, Any]]:
    """OpenShift's platform Prometheus (openshift-monitoring/prometheus-k8s) scrapes a namespace
    labelled openshift.io/cluster-monitoring only if it may read its targets there (GPU Operator
    state-operator-metrics prometheus-k8s Role and RoleBinding)."""
    name = "prometheus-k8s"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": stack.namespace},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["services", "endpoints", "pods"],
                    "verbs": ["get", "list", "watch"],
                },
                # Newer prometheus-operator releases discover targets through EndpointSlices.
                {
                    "apiGroups": ["discovery.k8s.io"],
                    "resources": ["endpointslices"],
                    "verbs": ["get", "list", "watch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": stack.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [
                {"kind": "ServiceAccount", "name": name, "namespace": "openshift-monitoring"}
            ],
        },
    ]
