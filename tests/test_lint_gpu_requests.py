"""gpu-not-requested: CUDA containers must take their GPU through the device plugin's limits."""

from __future__ import annotations

from typing import Any

import pytest
from test_lint import correct_stack, rules_hit

SAMPLE = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"


def job(image: str, **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "gpu-test", "namespace": "gpu"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "containers": [{"name": "test", "image": image, **container}],
                }
            }
        },
    }


@pytest.mark.parametrize(
    "resources",
    [
        None,
        {"requests": {"nvidia.com/gpu": 1}},  # requests alone: refused by the API server
        {"limits": {"cpu": "1"}},
    ],
)
@pytest.mark.parametrize(
    "image",
    [
        SAMPLE,
        "nvcr.io/nvidia/cuda:12.8.0-base-ubi9",
        "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
        "registry.example.com:5000/gpu-mirror/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0",
    ],
)
def test_a_cuda_container_without_a_gpu_limit_is_reported(image, resources):
    extra = {"resources": resources} if resources else {}
    assert rules_hit([*correct_stack(), job(image, **extra)]) == {"gpu-not-requested": ["gpu-test"]}


@pytest.mark.parametrize(
    "container",
    [
        {"resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}},
        # The container decides itself which GPUs it sees.
        {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]},
    ],
)
def test_a_gpu_limit_or_an_explicit_device_choice_is_fine(container):
    assert rules_hit([*correct_stack(), job(SAMPLE, **container)]) == {}


def test_gpu_stack_images_see_their_gpus_without_a_request():
    """The exporter, GFD and the device plugin watch every GPU of their node on purpose."""
    assert rules_hit(correct_stack()) == {}
    assert rules_hit([*correct_stack(), job("nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3")]) == {}
