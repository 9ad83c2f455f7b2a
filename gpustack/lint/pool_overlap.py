"""pool-selector-overlap: two node pools whose selectors can both match one node. Two matchLabels
selectors overlap unless some key is in both with a different value: a node carrying the labels
of both is in both pools, and would be given two device plugin configs, two MIG layouts and two
driver pods (one per pool's driver DaemonSet), which fight over the GPUs.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.lint._objects import Objects, Rule, finding, node_pools
from gpustack.objects import describe


def overlap(first: dict[str, str], second: dict[str, str]) -> bool:
    return all(second[key] == value for key, value in first.items() if key in second)


def check(objects: Objects) -> Iterator[Finding]:
    for config_map in objects.of_kind("ConfigMap"):
        pools = node_pools(config_map) or []
        for index, pool in enumerate(pools):
            for other in pools[:index]:
                if other.name != pool.name and overlap(other.selector, pool.selector):
                    yield finding(
                        RULE,
                        config_map,
                        f"pools {other.name} and {pool.name} ({describe(config_map)}) can both "
                        "claim a node: their selectors differ in no key's value",
                        "metadata.annotations",
                    )


RULE = Rule(
    "pool-selector-overlap",
    "error",
    "Two node pools' selectors can match the same node (no key with a different value in each), "
    "so a node could get two pools' configs and driver pods.",
    "Give the pools one label key with a different value each (e.g. `example.com/gpu-pool`).",
    check,
)
