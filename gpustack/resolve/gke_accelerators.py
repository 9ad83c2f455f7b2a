"""Which GPUs a GKE node pool can attach to which machine types (`gke_accelerators.yaml`)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

DATA = Path(__file__).with_name("gke_accelerators.yaml")


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(DATA.read_text())
    return data


def accelerator_types() -> list[str]:
    return sorted(_data()["accelerators"])


def machine_type_problem(accelerator: str, machine_type: str) -> str | None:
    """Why `accelerator` cannot be attached to `machine_type`, or None when it can."""
    prefixes = _data()["accelerators"][accelerator]["machineTypes"]
    if machine_type.startswith(tuple(prefixes)):
        return None
    wanted = " or ".join(f"{prefix}*" for prefix in prefixes)
    return f"{accelerator} attaches only to {wanted} machine types, not {machine_type}"


def count_problem(accelerator: str, machine_type: str, count: int) -> str | None:
    """Why `machine_type` cannot have `count` GPUs of `accelerator`, or None when it can."""
    info = _data()["accelerators"][accelerator]
    fixed = _data()["machineTypeGPUs"].get(machine_type)
    suffix = re.search(r"-([0-9]+)g$", machine_type)
    if fixed is None and suffix and not machine_type.startswith("n1-"):
        fixed = int(suffix.group(1))
    if fixed is not None and count != fixed:
        return f"{machine_type} comes with {fixed} {accelerator} GPU(s), not {count}"
    allowed = info.get("counts")
    if allowed and count not in allowed:
        return (
            f"an N1 machine attaches {', '.join(map(str, allowed))} {accelerator} GPUs, not {count}"
        )
    return None


def partition_sizes(accelerator: str) -> list[str]:
    sizes: list[str] = _data()["accelerators"][accelerator].get("gpuPartitionSizes", [])
    return sizes
