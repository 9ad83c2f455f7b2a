"""pool-config-missing: each node pool's nodes select one device plugin config (their
`nvidia.com/device-plugin.config` label) and one MIG layout (`nvidia.com/mig.config`). A name the
ConfigMap does not hold stops the GPU stack on those nodes: k8s-device-plugin's config-manager
fails with "specified config ... does not exist" (cmd/config-manager/main.go updateConfigName,
v0.20.0), so the plugin and GFD pods never start; the MIG manager fails to apply a layout its
mig-parted file lacks (mig-parted v0.15.0) and reports `nvidia.com/mig.config.state=failed`.

The pools come from the `gpustack.dev/node-pools` annotation gpustack writes on the device
plugin's and the MIG manager's ConfigMaps.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import (
    Objects,
    Rule,
    finding,
    mapping,
    node_pools,
    parse_yaml,
)


def _configs(config_map: dict[str, object]) -> set[str]:
    """The configs a node can select from this ConfigMap: the `mig-configs` of a mig-parted file
    (the MIG manager's `config.yaml`), else the keys (the device plugin's named configs)."""
    data = mapping(config_map.get("data"))
    parsed, _ = parse_yaml(str(data.get("config.yaml", "")))
    if "mig-configs" in mapping(parsed):
        return {str(key) for key in mapping(mapping(parsed).get("mig-configs"))}
    return {str(key) for key in data}


def check(objects: Objects) -> Iterator[Finding]:
    for config_map in objects.of_kind("ConfigMap"):
        pools = node_pools(config_map)
        if pools is None:
            continue
        available = _configs(config_map)
        seen: set[str] = set()
        for pool in pools:
            if pool.name in seen:
                yield finding(
                    RULE,
                    config_map,
                    f"{describe(config_map)} names pool {pool.name} twice, with more than one "
                    "config: a pool's nodes carry one label value",
                    "metadata.annotations",
                )
            seen.add(pool.name)
            if pool.config not in available:
                yield finding(
                    RULE,
                    config_map,
                    f"pool {pool.name}'s nodes select config {pool.config!r}, which "
                    f"{describe(config_map)} does not hold ({', '.join(sorted(available))}): the "
                    "GPU stack does not start on those nodes",
                    "data",
                )


RULE = Rule(
    "pool-config-missing",
    "error",
    "A node pool's nodes select a device plugin config or MIG layout (their "
    "`nvidia.com/device-plugin.config` or `nvidia.com/mig.config` label) that its ConfigMap "
    "does not hold, or a pool is named twice.",
    "Render again from the config (gpustack writes every pool's config), or add the config to "
    "the ConfigMap.",
    check,
)
