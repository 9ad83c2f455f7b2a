"""The k8s-device-plugin chart's values (NVIDIA/k8s-device-plugin
deployments/helm/nvidia-device-plugin/values.yaml, v0.20.0) mapped to config fields: the chart
runs the device plugin, and GFD with `gfd.enabled`, nothing else of the stack."""

from __future__ import annotations

from typing import Any

from gpustack.adopt.inputs import PLUGIN_VALUES, SECTIONS, Input, value_at
from gpustack.adopt.plugin_configs import PluginConfig, expected_plugin, map_plugin_config
from gpustack.adopt.releases import PLUGIN_CHART_IMAGE, UPSTREAM_REGISTRY
from gpustack.adopt.report import Import


def map_plugin_chart(
    state: Import, source: Input, plugin_configs: dict[tuple[str, str], PluginConfig]
) -> None:
    data = source.data
    plugin_on = value_at(data, ("devicePlugin", "enabled"))
    if isinstance(plugin_on, bool):
        state.set(source, ("devicePlugin", "enabled"), "devicePlugin.enabled", plugin_on)
    for key, target in (
        ("migStrategy", "devicePlugin.migStrategy"),
        ("deviceListStrategy", "devicePlugin.deviceListStrategy"),
    ):
        if isinstance(data.get(key), str):
            state.set(source, (key,), target, data[key])
    strategy = data.get("migStrategy")
    state.expected["plugin migStrategy"] = strategy if isinstance(strategy, str) else "none"
    state.expected["plugin sharing"] = "none"
    list_strategy = data.get("deviceListStrategy")
    state.expected["CDI"] = (
        "on" if isinstance(list_strategy, str) and list_strategy.startswith("cdi") else "off"
    )
    # The chart runs the plugin (and GFD with gfd.enabled), nothing else of the stack.
    for component in SECTIONS:
        if component not in ("devicePlugin", "gfd"):
            state.expected.setdefault(f"{component} image", "not run")
    if value_at(data, ("gfd", "enabled")) is not True:
        state.expected.setdefault("gfd image", "not run")
    tag = value_at(data, ("image", "tag"))
    if isinstance(tag, str) and tag:
        state.set(source, ("image", "tag"), "devicePlugin.version", tag)
    repository = value_at(data, ("image", "repository"))
    upstream_repository, upstream_tag = PLUGIN_CHART_IMAGE
    plugin_image = f"{repository or upstream_repository}:{tag or upstream_tag}"
    state.expected["devicePlugin image"] = plugin_image
    if value_at(data, ("gfd", "enabled")) is True:
        state.expected["gfd image"] = plugin_image
    if isinstance(repository, str):
        suffix = upstream_repository.removeprefix(UPSTREAM_REGISTRY)
        if repository == upstream_repository:
            state.default(source, ("image", "repository"), "upstream's repository")
        elif repository.endswith(suffix):
            state.set(
                source, ("image", "repository"), "images.registry", repository[: -len(suffix)]
            )
        else:
            state.dropped(
                source,
                ("image", "repository"),
                "a repository path other than upstream's: images.registry keeps each image's path",
            )
    secrets = data.get("imagePullSecrets")
    if isinstance(secrets, list) and secrets:
        names = sorted(
            str(item.get("name")) if isinstance(item, dict) else str(item) for item in secrets
        )
        state.set(source, ("imagePullSecrets",), "images.pullSecrets", names)
        state.expected["pull secrets"] = ", ".join(names)
    if isinstance(value_at(data, ("gfd", "enabled")), bool):
        state.set(source, ("gfd", "enabled"), "gfd.enabled", data["gfd"]["enabled"])
    resources = data.get("resources")
    if isinstance(resources, dict) and resources:
        state.set(source, ("resources",), "devicePlugin.resources", resources)
    tolerations = data.get("tolerations")
    if isinstance(tolerations, list):
        state.dropped(
            source,
            ("tolerations",),
            "gpustack tolerates nodes.taints (the profile's nvidia.com/gpu taint by default) "
            "and runs its DaemonSets system-node-critical",
        )
    config = data.get("config")
    if isinstance(config, dict):
        _chart_plugin_configs(state, source, config, plugin_configs)
    # The chart's per-flag values: null is unset (the plugin's own default).
    for path, value in list(state.leaves(source)):
        if value is None or value == {} or value == [] or value == "":
            state.default(source, path, "unset")


def _chart_plugin_configs(
    state: Import,
    source: Input,
    config: dict[str, Any],
    plugin_configs: dict[tuple[str, str], PluginConfig],
) -> None:
    """The chart's `config`: the plugin configs of its `config.map` or of the ConfigMap it
    names, the default one (`config.default`, else the only one) mapped, the others not."""
    mine = {
        entry: each
        for (owner, entry), each in plugin_configs.items()
        if owner in (PLUGIN_VALUES, str(config.get("name") or "-"))
    }
    default = config.get("default")
    chosen = str(default) if default else (next(iter(mine)) if len(mine) == 1 else "")
    if chosen and chosen not in mine:
        state.dropped(
            source,
            ("config", "default"),
            "names a plugin config that is not among the inputs",
        )
        chosen = ""
    for entry, each in sorted(mine.items()):
        map_plugin_config(state, each, "default" if entry == chosen else "other")
        if entry == chosen:
            expected_plugin(state, each.data)
    for key in ("name", "default"):
        if key in config and (id(source), ("config", key)) not in state.done:
            if config[key]:
                state.record(source, ("config", key), "mapped", "devicePlugin")
            else:
                state.default(source, ("config", key), "no plugin config: gpustack's own")
    if "map" in config and not mine:
        state.default(source, ("config", "map"), "empty")
