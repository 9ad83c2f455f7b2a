"""device-plugin-config-invalid: the device plugin (and GFD, and the MPS daemon) read their
config file from a ConfigMap; a file that does not parse, or asks for something the plugin
refuses, crash-loops every plugin pod (failOnInitError) and takes GPUs off the nodes.

Facts from NVIDIA/k8s-device-plugin v0.20.0 api/config/v1 and its README:
config `version: v1`; migStrategy none|single|mixed; time-slicing and MPS are exclusive; replicas
must be at least 2; MPS shares only full GPUs (`nvidia.com/gpu`, no MIG).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.objects import describe
from gpustack.validation.lint._objects import (
    Objects,
    Rule,
    containers_running,
    finding,
    mapping,
    sequence,
)
from gpustack.validation.lint._pods import CONFIG_READERS, mounted_configs, parse

MIG_STRATEGIES = ("none", "single", "mixed")


def problems(config: dict[str, Any]) -> list[str]:
    found = []
    if config.get("version") != "v1":
        found.append(f"version is {config.get('version')!r}, the plugin reads only 'v1'")
    strategy = mapping(config.get("flags")).get("migStrategy", "none")
    if strategy not in MIG_STRATEGIES:
        found.append(f"flags.migStrategy {strategy!r} is not one of {', '.join(MIG_STRATEGIES)}")
    sharing = mapping(config.get("sharing"))
    if "timeSlicing" in sharing and "mps" in sharing:
        found.append("sharing sets both timeSlicing and mps; they are exclusive, keep one")
    if "mps" in sharing and strategy not in ("none", None):
        found.append(f"sharing.mps with migStrategy {strategy!r}: MPS shares only full GPUs")
    for method in ("timeSlicing", "mps"):
        seen: set[str] = set()
        for index, resource in enumerate(
            map(mapping, sequence(mapping(sharing.get(method)).get("resources")))
        ):
            where = f"sharing.{method}.resources[{index}]"
            name = str(resource.get("name"))
            replicas = resource.get("replicas")
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 2:
                found.append(
                    f"{where}.replicas is {replicas!r}; sharing needs an integer of at least 2"
                )
            if name in seen:
                found.append(f"{where}: {name} is listed twice")
            seen.add(name)
            if method == "mps" and name != "nvidia.com/gpu":
                found.append(f"{where}: MPS shares only nvidia.com/gpu, not {name}")
            elif not name.startswith("nvidia.com/"):
                found.append(f"{where}: {name} is not an nvidia.com/ resource")
    return found


def check(objects: Objects) -> Iterator[Finding]:
    reported: set[tuple[str, str, str]] = set()
    for pod in objects.pods():
        readers = [c for reader in CONFIG_READERS for c in containers_running(pod, reader)]
        for container in readers:
            for config_map, key, text in mounted_configs(objects, pod, container):
                where = (pod.namespace, str(mapping(config_map.get("metadata")).get("name")), key)
                if where in reported:
                    continue
                reported.add(where)
                config, error = parse(text)
                issues = [error] if error else problems(config or {})
                if issues:
                    yield finding(
                        RULE,
                        config_map,
                        f"{describe(config_map)} key {key!r}, read by {describe(pod.owner)}, "
                        "is not "
                        f"a valid device-plugin config: {'; '.join(issues)}",
                        f"data.{key}",
                    )


RULE = Rule(
    "device-plugin-config-invalid",
    "error",
    "A ConfigMap mounted by the device plugin, GFD or the MPS daemon holds a config that does "
    "not parse or that the plugin refuses: not `version: v1`, an unknown migStrategy, "
    "time-slicing and MPS together, replicas below 2, MPS with MIG or on a resource other than "
    "`nvidia.com/gpu`.",
    "Fix the config file in the ConfigMap (gpustack writes it from `devicePlugin.sharing`).",
    check,
)
