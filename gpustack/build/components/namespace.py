"""The Namespace every namespaced object lands in."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from gpustack.resolve.stack import Stack

# Kubernetes' own namespaces: `default`, and the `kube-` prefix it reserves for system namespaces
# (kubernetes.io docs, concepts/overview/working-with-objects/namespaces: "Initial namespaces").
KUBERNETES_NAMESPACES = ("default", "kube-*")


def platform_owned(stack: Stack) -> bool:
    """Whether the stack's namespace belongs to Kubernetes or the platform. It exists already, and
    gpustack must not own it: with GitOps pruning, moving the stack elsewhere would delete it."""
    patterns = (*KUBERNETES_NAMESPACES, *stack.facts.platformNamespaces)
    return any(fnmatchcase(stack.namespace, pattern) for pattern in patterns)


def build(stack: Stack) -> list[dict[str, Any]]:
    if platform_owned(stack):
        return []
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
