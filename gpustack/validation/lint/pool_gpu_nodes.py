"""pool-outside-gpu-nodes: a node pool whose selector the GPU node placement excludes. The GPU
DaemonSets run only where their required node affinity holds; a pool that asks for a label value
that affinity refuses (`In` other values, `NotIn` that one) can have no node running the GPU
stack, so its settings reach no node.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import (
    Objects,
    Pod,
    Rule,
    finding,
    mapping,
    node_pools,
    sequence,
)


def excluded(selector: dict[str, str], term: list[dict[str, Any]]) -> str | None:
    """The requirement of `term` no node matching `selector` meets, if any."""
    for expression in term:
        key = str(expression.get("key"))
        if key not in selector:
            continue
        values = [str(value) for value in sequence(expression.get("values"))]
        operator = expression.get("operator")
        if (operator == "In" and selector[key] not in values) or (
            operator == "NotIn" and selector[key] in values
        ):
            return f"{key} {operator} ({', '.join(values)})"
        if operator == "DoesNotExist":
            return f"{key} DoesNotExist"
    return None


def check(objects: Objects) -> Iterator[Finding]:
    # The first GPU workload that reads each ConfigMap (by name): its placement is the GPU
    # nodes'. Found in one pass over the pods, not once per ConfigMap.
    first_reader: dict[object, Pod] = {}
    for pod in objects.pods():
        for volume in map(mapping, sequence(pod.spec.get("volumes"))):
            name = mapping(volume.get("configMap")).get("name")
            if isinstance(name, Hashable):
                first_reader.setdefault(name, pod)
    for config_map in objects.of_kind("ConfigMap"):
        pools = node_pools(config_map) or []
        if not pools:
            continue
        name = mapping(config_map.get("metadata")).get("name")
        reader = first_reader.get(name) if isinstance(name, Hashable) else None
        for pod in [reader] if reader else []:
            terms = pod.node_selector_terms()
            for pool in pools:
                reasons = [excluded(pool.selector, term) for term in terms]
                if terms and all(reasons):
                    yield finding(
                        RULE,
                        config_map,
                        f"pool {pool.name} selects {pool.selector}, but {describe(pod.owner)} "
                        f"runs only on nodes with {reasons[0]}: the pool has no GPU node",
                        "metadata.annotations",
                    )


RULE = Rule(
    "pool-outside-gpu-nodes",
    "error",
    "A node pool's selector asks for a label value that the GPU workloads' required node "
    "affinity excludes, so no node of the pool runs the GPU stack.",
    "Select the pool by a label GPU nodes may carry (not one `nodes.selector` or the profile's "
    "GPU node label contradicts).",
    check,
)
