"""GPU-stack lint rules that look across objects (taints tolerated, selectors labelled, ...).

Contract used by render, check and validate:
    run(objects, kubernetes_version=None, *, taints=None, node_labels=()) -> list[Finding]
Each rule has an id, a severity and a message that says how to fix it; an object annotated
`gpustack.dev/ignore: <rule-id>[,<rule-id>...]` is exempt from those rules.

The rules work on any manifests, not only gpustack's: what a config would say (which taints GPU
nodes carry, which labels the user puts on them) is passed in when known, and otherwise inferred
from the objects or from the conventions of the NVIDIA stack (GPU nodes are tainted
`nvidia.com/gpu`). One module per rule; `RULES` lists them for docs and SARIF metadata.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gpustack.build.decorate import IGNORE_ANNOTATION
from gpustack.findings import Finding
from gpustack.objects import annotations_of, identity
from gpustack.validation.lint import (
    api_versions,
    cdi_cri,
    cdi_toolkit,
    config_maps,
    daemonset_selectors,
    dcgm_metrics,
    device_plugin_config,
    device_plugins,
    dra_device_plugin,
    dra_extended_resource,
    driver_containers,
    gpu_requests,
    images,
    metadata,
    mig_partitions,
    mig_strategy,
    monitors,
    node_labels,
    pool_configs,
    pool_gpu_nodes,
    pool_overlap,
    runtime_class,
    taints,
    validation_wait,
)
from gpustack.validation.lint._objects import Objects, Rule

if TYPE_CHECKING:
    from gpustack.resolve.stack import (
        Stack,  # for the annotation only: validate loads no config model
    )

__all__ = ["IGNORE_ANNOTATION", "RULES", "Rule", "run", "run_for_stack"]


RULES: tuple[Rule, ...] = tuple(
    module.RULE
    for module in (
        taints,
        node_labels,
        runtime_class,
        monitors,
        dcgm_metrics,
        config_maps,
        device_plugin_config,
        mig_strategy,
        mig_partitions,
        device_plugins,
        dra_device_plugin,
        dra_extended_resource,
        cdi_toolkit,
        cdi_cri,
        driver_containers,
        api_versions,
        images,
        metadata,
        daemonset_selectors,
        gpu_requests,
        validation_wait,
        pool_configs,
        pool_overlap,
        pool_gpu_nodes,
    )
)


def run(
    objects: list[dict[str, Any]],
    kubernetes_version: str | None = None,
    *,
    taints: Iterable[Mapping[str, Any]] | None = None,
    node_labels: Iterable[str] = (),
) -> list[Finding]:
    """Findings of every rule, minus those the objects suppress with `gpustack.dev/ignore`.

    `taints`: the taints GPU nodes carry (a config's nodes.taints), checked in addition to the
    `nvidia.com/gpu` taint every GPU workload must tolerate. `node_labels`: label keys the user
    puts on GPU nodes (a config's nodes.selector), which count as set by some source.
    """
    view = Objects(
        [obj for obj in objects if _well_formed(obj)],
        kubernetes_version,
        [dict(taint) for taint in taints or ()],
        set(node_labels),
    )
    ignored = {identity(obj): _ignored_rules(obj) for obj in view.objects}
    findings = [
        found
        for rule in RULES
        for found in rule.check(view)
        if found.object is None or rule.id not in ignored.get(found.object, set())
    ]
    return findings


def run_for_stack(stack: Stack, objects: list[dict[str, Any]]) -> list[Finding]:
    """Lint a rendering with what its config says about the GPU nodes (their labels: the
    selector and the deploy labels they register with)."""
    # workload loads the config model, which `validate` never needs.
    from gpustack.build.workload import deploy_node_labels

    config = stack.config
    return run(
        objects,
        config.platform.kubernetesVersion,
        taints=[taint.model_dump(exclude_none=True) for taint in config.nodes.taints],
        node_labels={**config.nodes.selector, **deploy_node_labels(stack)},
    )


def _well_formed(obj: Any) -> bool:
    """Objects the rules can reason about; anything less is schema validation's to report."""
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("apiVersion"), str)
        and isinstance(obj.get("kind"), str)
        and isinstance(obj.get("metadata", {}), dict)
    )


def _ignored_rules(obj: dict[str, Any]) -> set[str]:
    annotations = annotations_of(obj)
    value = annotations.get(IGNORE_ANNOTATION)
    if not isinstance(value, str):
        return set()
    return {part.strip() for part in value.split(",") if part.strip()}
