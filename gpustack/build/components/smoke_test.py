"""The GPU smoke test: a Job whose pod takes one GPU from the device plugin and runs CUDA on it,
or, with the DRA driver (`gpuAllocation: dra`), claims one GPU through a ResourceClaimTemplate of
DeviceClass `gpu.nvidia.com` and runs nvidia-smi on it.

Once the stack reports ready it proves what readiness cannot: a pod that asks for a GPU is
scheduled on a GPU node, the runtime hands it the device and the driver, and a CUDA kernel runs.
The default image is NVIDIA's vectorAdd sample (k8s-device-plugin README, "Running GPU Jobs"),
which exits non-zero when the kernel or its result fails. The Job is named after a hash of
everything it renders from, `gpustack.build.decorate` makes it an Argo CD PostSync hook, and with Flux
it is the last stage, whose Kustomization depends on the workloads only and waits for the Job
(`gpustack.build.gitops_objects`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import gpustack
from gpustack.build import workload
from gpustack.build.workload import (
    COMPONENT_LABEL,
    GPU_RESOURCE,
    gpu_node_affinity,
    gpu_tolerations,
    selector_labels,
)
from gpustack.config.node_pools import NodePool
from gpustack.resolve.stack import Stack

NAME = "gpu-smoke-test"
COMPONENT = "smoke-test"
# Any uid but root: the GPU device nodes are world read-write (nvidia-modprobe's default mode).
NON_ROOT_UID = 65534
# With DRA: what the pod runs unless smokeTest.command says otherwise. The driver's CDI spec puts
# the host driver's nvidia-smi into the container (dra-driver-nvidia-gpu docs/install.md runs
# `nvidia-smi -L` in a plain ubuntu image); it exits non-zero when it finds no GPU.
DRA_COMMAND = ["nvidia-smi"]
# The pod's name for its claim (spec.resourceClaims, container resources.claims).
CLAIM = "gpu"
# A finished Job is deleted after a day when nothing else removes it (plain kubectl apply), so
# applying the folder again later runs the test again.
KEEP_FINISHED_SECONDS = 86400


def resource(stack: Stack) -> str:
    """The extended resource the pod takes one of: what the device plugin advertises."""
    if stack.config.smokeTest.resource:
        return stack.config.smokeTest.resource
    canaries = canary_pools(stack)
    sharing = stack.config.pool_settings(canaries[0] if canaries else None).sharing
    if stack.nvidia_plugin_serves and sharing.strategy != "none" and sharing.renameByDefault:
        return f"{GPU_RESOURCE}.shared"
    return GPU_RESOURCE


def canary_pools(stack: Stack) -> list[NodePool]:
    """The pools the test runs on: the canary pools whose GPUs are handed out as the test asks
    for its own (`Stack.smoke_test_allocation`, the first canary's)."""
    allocation = stack.smoke_test_allocation
    return [
        pool
        for pool in stack.pools
        if pool.canary and stack.config.pool_settings(pool).gpu_allocation == allocation
    ]


def _affinity(stack: Stack) -> dict[str, Any]:
    """On GPU nodes; with canary pools, on a canary pool's nodes: the test proves the canary
    after its rollout (a node of any canary pool, each pool a term of its own)."""
    canaries = canary_pools(stack)
    if not canaries:
        return gpu_node_affinity(stack)
    terms = [
        gpu_node_affinity(
            stack,
            [
                {"key": key, "operator": "In", "values": [value]}
                for key, value in pool.selector.items()
            ],
        )["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
        for pool in canaries
    ]
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }


def _hashed_config_exclusions(stack: Stack) -> dict[str, Any]:
    pools: Any = {"pools": _unset_pool_fields(stack)} if stack.pools else {"pools"}
    return {
        "metadata": True,
        "extends": True,
        "patches": True,
        "images": {"requireDigests"},
        "nodes": pools,
    }


def name(stack: Stack) -> str:
    """`gpu-smoke-test-<hash>`: a Job's pod template cannot change, so a changed Job must be a new
    object; and a new Job after every change of the stack tests it again. The hash covers what the
    rendering is a function of (gpustack's version, the profile, the config but for the cluster's
    name, the patches as read, a patch file's content included, and the image lock's digests), so
    clusters of a fleet that differ only in name share one Job object."""
    inputs = "\n".join(
        (
            gpustack.__version__,
            stack.profile.model_dump_json(),
            # Without node pools the field is left out, and so is a pool's unset gpuAllocation:
            # a config that does not use a setting hashes as if the model lacked it, so adding a
            # setting to the model renames no Job of a config that leaves it out.
            # images.requireDigests changes no object: only whether render and check pass.
            stack.config.model_dump_json(exclude=_hashed_config_exclusions(stack)),
            _patches_digest(stack),
            # A Job's pod template cannot change: newly pinned images make a new Job. Without a
            # lock nothing is added, for the same reason as above.
            *([json.dumps(sorted(stack.image_digests.items()))] if stack.image_digests else []),
        )
    )
    return f"{NAME}-{hashlib.sha256(inputs.encode()).hexdigest()[:8]}"


def _patches_digest(stack: Stack) -> str:
    """The patches as read, in order: each distinct document serialized once, however often
    its file is named (a large file named hundreds of times costs one pass, not hundreds)."""
    if not stack.patches:
        return "[]"  # a config without patches hashes as if the model had none
    digests: dict[int, str] = {}
    for patch in stack.patches:
        if id(patch.body) not in digests:
            text = json.dumps(patch.body, sort_keys=True, default=str)
            digests[id(patch.body)] = hashlib.sha256(text.encode()).hexdigest()
    return json.dumps([digests[id(patch.body)] for patch in stack.patches])


def _unset_pool_fields(stack: Stack) -> dict[int, set[str]]:
    return {
        index: {"gpuAllocation"}
        for index, pool in enumerate(stack.pools)
        if pool.gpuAllocation is None
    }


def build(stack: Stack) -> list[dict[str, Any]]:
    if not stack.smoke_test_enabled:
        return []
    settings = stack.config.smokeTest
    labels = {**selector_labels(NAME), COMPONENT_LABEL: COMPONENT}
    security: dict[str, Any] = {
        # Pod Security "restricted": the pod needs nothing but the GPU it is allocated.
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if not stack.facts.securityContextConstraints:
        # The sample image runs as root; on OpenShift the SCC picks a uid from the namespace's
        # range instead, and refuses one given here.
        security["runAsUser"] = NON_ROOT_UID
    container: dict[str, Any] = {
        "name": COMPONENT,
        "image": settings.image,
        "resources": {"limits": {resource(stack): 1}},
        "securityContext": security,
    }
    if settings.command:
        container["command"] = list(settings.command)
    job_name = name(stack)
    pod_spec: dict[str, Any] = {}
    objects: list[dict[str, Any]] = []
    if stack.smoke_test_allocation == "dra" and stack.dra_gpus:
        # The claim is the pod's own, made from the template and deleted with the pod; the
        # container runs under the default runtime, which injects the claimed GPU through CDI.
        container["resources"] = {"claims": [{"name": CLAIM}]}
        container.setdefault("command", list(DRA_COMMAND))
        pod_spec["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": job_name}]
        objects.append(_claim_template(stack, job_name, labels))
    elif stack.runtime_class_name:
        pod_spec["runtimeClassName"] = stack.runtime_class_name
    pod_spec.update(
        {
            # Placed like the device plugin: on GPU nodes (a canary pool's, with one), tolerating
            # their taints.
            "affinity": _affinity(stack),
            "tolerations": gpu_tolerations(stack),
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "containers": [container],
        }
    )
    spec: dict[str, Any] = {
        # A crash is retried twice; a pod that cannot start (no free GPU, no image) counts against
        # the deadline instead.
        "backoffLimit": 2,
        "activeDeadlineSeconds": settings.activeDeadlineSeconds,
    }
    if stack.config.gitops.tool == "none":
        # Argo CD deletes a passed hook itself; Flux would re-create a deleted Job and run it again
        # on every reconciliation, so there the finished Job stays.
        spec["ttlSecondsAfterFinished"] = KEEP_FINISHED_SECONDS
    spec["template"] = {"metadata": {"labels": labels}, "spec": pod_spec}
    return [
        *objects,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": job_name, "namespace": stack.namespace, "labels": dict(labels)},
            "spec": spec,
        },
    ]


def _claim_template(stack: Stack, job_name: str, labels: dict[str, str]) -> dict[str, Any]:
    """One whole GPU of the DRA driver (its install guide's `single-gpu` template, docs/
    install.md, v0.4.1). Named as the Job: a template's spec cannot change either."""
    request = {"name": CLAIM, "exactly": {"deviceClassName": workload.GPU_DEVICE_CLASS}}
    return {
        "apiVersion": stack.resource_api_version,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": job_name, "namespace": stack.namespace, "labels": dict(labels)},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
