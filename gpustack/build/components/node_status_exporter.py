"""NVIDIA's node status exporter: each GPU node's bring-up as Prometheus metrics.

Facts from NVIDIA/gpu-operator v26.7.0: assets/state-node-status-exporter/ (the DaemonSet, RBAC,
Service and ServiceMonitor), cmd/nvidia-validator/metrics.go (the metrics and what each reads),
cmd/nvidia-validator/main.go (the `metrics` component's flags and env) and
controllers/object_controls.go (TransformNodeStatusExporter). The GPU Operator runs it where its
ClusterPolicy says `nodeStatusExporter.enabled`: off in the helm chart's values.yaml, on in the
OpenShift bundle's ClusterPolicy (bundle/manifests/gpu-operator-certified.clusterserviceversion.yaml
alm-examples); gpustack's profiles carry the same default.

It is the validator's image run as `nvidia-validator` with COMPONENT=metrics. Every 30 s it looks
for the validator's ready files (driver-ready, toolkit-ready, cuda-ready, plugin-ready in
/run/nvidia/validations), every 60 s it runs the driver validation again (nvidia-smi from the
host's root or the driver container's /run/nvidia/driver) and counts NVIDIA PCI devices with
lspci, and every 30 s it reads its node's GPU capacity from the API server. Each metric carries
the node's name as its `node` label (metrics.go NewNodeMetrics), which the alerts join on.
"""

from __future__ import annotations

from typing import Any

from gpustack.build import pod, ready_files
from gpustack.build.metrics import NODE_STATUS_EXPORTER as NAME
from gpustack.build.metrics import node_status_exporter_enabled as enabled
from gpustack.build.monitoring import scrape_objects
from gpustack.build.workload import (
    COMPONENT_LABEL,
    cluster_role_with_binding,
    daemonset,
    driver_container_root,
    gpu_pod_spec,
    host_root,
    role_with_binding,
    scc_rules,
    selector_labels,
    service_account,
)
from gpustack.resolve.stack import Stack

# state-node-status-exporter/0700_daemonset.yaml (v26.7.0): port 8000 named node-status.
COMPONENT = "node-status-exporter"
PORT = 8000
PORT_NAME = "node-status"
LABELS = {**selector_labels(NAME), COMPONENT_LABEL: COMPONENT}


def image(stack: Stack) -> str:
    # values.yaml `nodeStatusExporter`: repository nvcr.io/nvidia, image gpu-operator (the
    # validator's image, which carries nvidia-validator).
    return f"{ready_files.IMAGE}:{stack.config.nodeStatusExporter.version}"


def build(stack: Stack) -> list[dict[str, Any]]:
    if not enabled(stack):
        return []
    rules: list[dict[str, Any]] = [
        # The driver validation looks for a driver DaemonSet the operator owns before it looks in
        # the driver container's root (main.go runValidation, isDriverManagedByOperator: list).
        # Upstream's Role also grants pods get/list and daemonsets get/watch, which the metrics
        # component never uses.
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]},
        *scc_rules(stack),
    ]
    objects = [
        service_account(stack, NAME),
        *role_with_binding(stack, NAME, rules),
        # main.go countGPUResources reads its own node (getNode); upstream's ClusterRole adds
        # list and watch.
        *cluster_role_with_binding(
            stack, NAME, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
        ),
        _daemonset(stack),
    ]
    # state-node-status-exporter/0600_service_monitor.yaml: port node-status, path /metrics.
    # Not by node: the samples carry their node already.
    objects += scrape_objects(stack, NAME, LABELS, (PORT_NAME, PORT))
    return objects


def _daemonset(stack: Stack) -> dict[str, Any]:
    # Under the nvidia runtime as every GPU pod here, which hands it no GPU
    # (NVIDIA_VISIBLE_DEVICES=void): it reaches the driver through the host's root or the driver
    # container's.
    volumes, mounts = pod.host_paths(
        [
            host_root(),
            driver_container_root(read_only=True),
            ready_files.validations(read_only=True),
        ]
    )
    pod_spec = gpu_pod_spec(stack)
    pod_spec.update(
        {
            "serviceAccountName": NAME,
            "containers": [
                {
                    "name": NAME,
                    "image": image(stack),
                    "command": ["nvidia-validator"],
                    "env": [
                        pod.env("NVIDIA_VISIBLE_DEVICES", "void"),
                        pod.env("COMPONENT", "metrics"),
                        pod.env("METRICS_PORT", str(PORT)),
                        pod.field_env("NODE_NAME", "spec.nodeName"),
                        pod.field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
                    ],
                    "ports": [{"name": PORT_NAME, "containerPort": PORT, "protocol": "TCP"}],
                    # Privileged as upstream's: the driver validation chroots into the host's
                    # root and runs nvidia-smi, which needs the GPUs' device nodes (the runtime
                    # hands it none) and lspci reads every PCI device's config space.
                    "securityContext": {"privileged": True},
                    "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
                    # HostToContainer: the driver container mounts its root there later. The
                    # validator's ready files are only looked at (metrics.go watchStatusFile;
                    # main.go --output-dir defaults to /run/nvidia/validations).
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        }
    )
    return daemonset(stack, NAME, pod_spec, component=COMPONENT)
