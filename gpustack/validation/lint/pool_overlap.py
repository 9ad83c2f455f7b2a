"""pool-selector-overlap: two node pools whose selectors can both match one node. Two matchLabels
selectors overlap unless some key is in both with a different value: a node carrying the labels
of both is in both pools, and would be given two device plugin configs, two MIG layouts and two
driver pods (one per pool's driver DaemonSet), which fight over the GPUs.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import Budget, Objects, Rule, finding, node_pools
from gpustack.validation.lint._pods import Placement, Placements


def _placement(selector: dict[str, str]) -> Placement:
    return [{key: ("In", frozenset([value])) for key, value in selector.items()}]


def check(objects: Objects) -> Iterator[Finding]:
    """Each pool whose selector overlaps an earlier pool's is reported once, naming the first
    such; selectors are looked up in an index (Placements), not compared pair by pair, since an
    annotation may list any number of pools."""
    budget = Budget("node pools' selectors")
    for config_map in objects.of_kind("ConfigMap"):
        pools = node_pools(config_map) or []
        placements = [_placement(pool.selector) for pool in pools]
        index = Placements(placements, budget)
        for number, pool in enumerate(pools):
            other = next(
                (
                    pools[earlier]
                    for earlier in index.sharing(placements[number], below=number)
                    if pools[earlier].name != pool.name
                ),
                None,
            )
            if other is not None:
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
