"""The Namespace every namespaced object lands in."""

from __future__ import annotations

from typing import Any

from gpustack.config import Stack


def build(stack: Stack) -> list[dict[str, Any]]:
    labels = {
        # The plugins mount hostPaths, which only the privileged Pod Security level admits
        # (k8s-device-plugin static privileged-with-service-account manifest).
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/audit": "privileged",
        "pod-security.kubernetes.io/warn": "privileged",
        **stack.facts.namespaceLabels,
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": stack.namespace, "labels": labels},
        }
    ]
