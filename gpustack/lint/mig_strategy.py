"""mig-strategy-mismatch: GFD labels nodes for the MIG strategy it is told, the device plugin
advertises resources for its own; when they differ, pods select labels for resources the node
does not offer (k8s-device-plugin static gpu-feature-discovery-daemonset-with-mig-*.yaml)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.lint._objects import Objects, Pod, Rule, containers_running, finding, mapping
from gpustack.lint.device_plugin_config import mounted_configs, parse
from gpustack.objects import describe

DEFAULT = "none"  # k8s-device-plugin flag default


def strategy(objects: Objects, pod: Pod, container: dict[str, Any]) -> str | None:
    """The MIG strategy a plugin or GFD container runs with: its flag, else its MIG_STRATEGY
    env, else its config file, else the default. None when the config differs per node (several
    config files, chosen by node label)."""
    words = pod.command_words(container)
    for index, word in enumerate(words):
        if word.startswith("--mig-strategy="):
            return word.partition("=")[2]
        if word == "--mig-strategy" and index + 1 < len(words):
            return words[index + 1]
    env = pod.env(container)
    if "MIG_STRATEGY" in env:
        return env["MIG_STRATEGY"]
    files = {key: text for _, key, text in mounted_configs(objects, pod, container)}
    wanted = posixpath.basename(env.get("CONFIG_FILE", ""))
    if wanted in files:
        files = {wanted: files[wanted]}
    if len(files) > 1:
        return None
    if not files:
        return DEFAULT
    config, _ = parse(next(iter(files.values())))
    return str(mapping(mapping(config).get("flags")).get("migStrategy", DEFAULT))


def check(objects: Objects) -> Iterator[Finding]:
    plugins: dict[str, str] = {}
    for pod in objects.pods():
        for container in containers_running(pod, "nvidia-device-plugin"):
            found = strategy(objects, pod, container)
            if found is not None:
                plugins.setdefault(found, describe(pod.owner))
    if not plugins:
        return
    for pod in objects.pods():
        for container in containers_running(pod, "gpu-feature-discovery"):
            found = strategy(objects, pod, container)
            if found is None or found in plugins:
                continue
            others = "; ".join(
                f"{owner} uses {value!r}" for value, owner in sorted(plugins.items())
            )
            yield finding(
                RULE,
                pod.owner,
                f"{describe(pod.owner)} labels nodes for MIG strategy {found!r} but {others}; "
                "set the same strategy on both (gpustack: devicePlugin.migStrategy sets both)",
                f"{pod.path}.containers",
            )


RULE = Rule(
    "mig-strategy-mismatch",
    "error",
    "GPU Feature Discovery runs with a MIG strategy (flag, `MIG_STRATEGY` or config file) other "
    "than the device plugin's.",
    "Give both the same strategy: none, single or mixed.",
    check,
)
