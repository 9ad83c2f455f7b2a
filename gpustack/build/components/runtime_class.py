"""The RuntimeClass that sends GPU pods to containerd's `nvidia` runtime handler."""

from __future__ import annotations

from typing import Any

from gpustack.build.workload import gpu_tolerations
from gpustack.resolve.stack import Stack


def build(stack: Stack) -> list[dict[str, Any]]:
    name = stack.config.runtimeClass.name
    if not stack.runtime_class_enabled or name in stack.facts.runtime.providedRuntimeClasses:
        return []  # GPU pods still name it (workload.gpu_pod_spec); the platform owns the object
    node_selector = {
        requirement.key: requirement.values[0]
        for requirement in stack.gpu_node_selector
        if requirement.operator == "In" and len(requirement.values) == 1
    }
    node_selector.update(stack.config.nodes.selector)
    scheduling: dict[str, Any] = {}
    # The scheduler merges these into every pod using the class: GPU pods land only on GPU
    # nodes and tolerate their taints (node.k8s.io/v1 RuntimeClass.scheduling).
    if node_selector:
        scheduling["nodeSelector"] = node_selector
    scheduling["tolerations"] = gpu_tolerations(stack)
    return [
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": name},
            # Handler name as registered by `nvidia-ctk runtime configure` (k8s-device-plugin README).
            "handler": stack.config.runtimeClass.handler,
            "scheduling": scheduling,
        }
    ]
