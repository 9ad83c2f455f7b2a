"""gpu-not-requested: a CUDA container without a GPU in its limits (or a claimed one, DRA).

NVIDIA's CUDA images set NVIDIA_VISIBLE_DEVICES=all, so where nvidia is the node's default
runtime such a container sees every GPU of the node, outside the device plugin's allocation, and
elsewhere none (k8s-device-plugin README: "if you don't request GPUs when using the device plugin
with NVIDIA images all the GPUs on the machine will be exposed inside your container"). A GPU smoke
test written this way passes without testing the device plugin, or fails for want of a GPU. An
extended resource in `requests` alone is no request either: the API server refuses it unless the
limit is set (and equal).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import (
    NVIDIA_LABEL_PREFIX,
    Objects,
    Rule,
    finding,
    mapping,
    sequence,
)

# CUDA base images and the CUDA samples (nvcr.io/nvidia/cuda, nvidia/cuda on Docker Hub,
# nvcr.io/nvidia/k8s/cuda-sample), also under a mirror's path.
_CUDA_IMAGE = re.compile(r"(^|/)nvidia/(k8s/)?cuda(-sample)?([:@]|$)")


def check(objects: Objects) -> Iterator[Finding]:
    for pod in objects.pods():
        for key in ("initContainers", "containers"):
            for index, container in enumerate(map(mapping, sequence(pod.spec.get(key)))):
                image = container.get("image")
                if not isinstance(image, str) or not _CUDA_IMAGE.search(image):
                    continue
                if "NVIDIA_VISIBLE_DEVICES" in pod.env(container):
                    continue  # the container chooses its devices itself
                resources = mapping(container.get("resources"))
                limits = mapping(resources.get("limits"))
                if any(str(name).startswith(NVIDIA_LABEL_PREFIX) for name in limits):
                    continue
                if sequence(resources.get("claims")):
                    continue  # a GPU claimed through DRA (a ResourceClaim of the pod)
                yield finding(
                    RULE,
                    pod.owner,
                    f"{describe(pod.owner)} container {container.get('name')!r} runs the CUDA "
                    f"image {image!r} without a GPU in its limits: the image sets "
                    "NVIDIA_VISIBLE_DEVICES=all, so it sees every GPU of a node whose default "
                    "runtime is nvidia (outside the device plugin's allocation) and none "
                    "elsewhere; add nvidia.com/gpu: 1 to resources.limits",
                    f"{pod.path}.{key}.{index}.resources.limits",
                )


RULE = Rule(
    "gpu-not-requested",
    "error",
    "A container runs a CUDA image (`nvidia/cuda`, `nvidia/k8s/cuda-sample`) without an "
    "`nvidia.com/*` resource in its `limits` (e.g. a smoke test with the GPU only in "
    "`requests`, or none): the image sets `NVIDIA_VISIBLE_DEVICES=all`, so it sees every GPU "
    "of a node whose default runtime is nvidia, outside the device plugin's allocation, and "
    "none elsewhere.",
    "Request the GPU in `resources.limits` (`nvidia.com/gpu: 1`) or claim one through DRA "
    "(`resources.claims`), or set "
    "`NVIDIA_VISIBLE_DEVICES` in the container when it must see no or all GPUs on purpose.",
    check,
)
