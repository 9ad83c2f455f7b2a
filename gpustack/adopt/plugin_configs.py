"""Device plugin configs (`version: v1` files, on their own, in a ConfigMap, or in a chart's
values): the default one maps to `devicePlugin`; one that nodes choose by label is not carried
over, since gpustack renders one config for every GPU node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpustack.adopt.inputs import CONFIG_MAP, PLUGIN_CONFIG, PLUGIN_VALUES, Input, value_at
from gpustack.adopt.report import Import
from gpustack.config.model import field_accepts
from gpustack.errors import UserError
from gpustack.read.yamlio import Path_, load_all_text


@dataclass
class PluginConfig:
    source: Input
    path: Path_  # where the text is, in its input (a ConfigMap's data key, or the whole file)
    data: dict[str, Any]


def plugin_configs_of(inputs: list[Input]) -> dict[tuple[str, str], PluginConfig]:
    """Plugin configs by (owner, entry name): the owner is the ConfigMap's name, the chart's
    values (`config.map`, the operator chart's `devicePlugin.config.data`), or '' for a file
    of its own (named by its file name)."""
    found: dict[tuple[str, str], PluginConfig] = {}
    for each in inputs:
        if each.kind == PLUGIN_CONFIG:
            found[("", each.name.removeprefix("plugin config "))] = PluginConfig(
                each, (), each.data
            )
        elif each.kind == CONFIG_MAP:
            found |= _configs_at(each, ("data",), each.name.removeprefix("ConfigMap "))
        elif each.kind == PLUGIN_VALUES:
            found |= _configs_at(each, ("config", "map"), PLUGIN_VALUES)
        else:
            found |= _configs_at(each, (*each.root, "devicePlugin", "config", "data"), each.name)
    return found


def _configs_at(source: Input, base: Path_, owner: str) -> dict[tuple[str, str], PluginConfig]:
    """The plugin configs in the mapping of texts at `base` (an entry that is not one YAML
    mapping is left for the report to name)."""
    entries = value_at(source.data, base)
    found: dict[tuple[str, str], PluginConfig] = {}
    for key, text in entries.items() if isinstance(entries, dict) else ():
        if not isinstance(text, str):
            continue
        path = (*base, str(key))
        try:
            parsed = [
                doc.data
                for doc in load_all_text(text, str(source.location(path)))
                if doc.data is not None
            ]
        except UserError:
            continue
        if len(parsed) == 1 and isinstance(parsed[0], dict):
            found[(owner, str(key))] = PluginConfig(source, path, parsed[0])
    return found


def map_plugin_config(state: Import, config: PluginConfig, role: str) -> None:
    """Map one plugin config: the default one to devicePlugin; any other is not carried."""
    source, base, data = config.source, config.path, config.data
    if role != "default":
        state.dropped(
            source,
            base,
            "a plugin config nodes choose by their nvidia.com/device-plugin.config label; "
            "gpustack renders one config for every GPU node (the default one)",
        )
        return

    def value(*path: str) -> Any:
        return value_at(data, path)

    whole = base != ()  # a ConfigMap entry is one field of its input: say what became of it
    notes: list[str] = []
    flags: dict[str, Any] = value("flags") if isinstance(value("flags"), dict) else {}
    strategy = flags.get("migStrategy")
    if strategy in ("none", "single", "mixed"):
        if whole:
            notes.append(f"flags.migStrategy -> devicePlugin.migStrategy {strategy}")
            _set_quiet(state, source, base, "devicePlugin.migStrategy", strategy)
        else:
            state.set(source, ("flags", "migStrategy"), "devicePlugin.migStrategy", strategy)
    plugin: dict[str, Any] = flags.get("plugin") or {}
    plugin = plugin if isinstance(plugin, dict) else {}
    list_strategy = plugin.get("deviceListStrategy")
    if isinstance(list_strategy, str) and list_strategy in (
        "envvar",
        "cdi-annotations",
        "cdi-cri",
        "volume-mounts",
    ):
        if whole:
            _set_quiet(state, source, base, "devicePlugin.deviceListStrategy", list_strategy)
        else:
            state.set(
                source,
                ("flags", "plugin", "deviceListStrategy"),
                "devicePlugin.deviceListStrategy",
                list_strategy,
            )
    sharing = value("sharing") if isinstance(value("sharing"), dict) else {}
    _sharing(state, config, sharing, notes)
    if whole:
        state.record(
            source,
            base,
            "mapped",
            "devicePlugin",
            "the default plugin config"
            + (": " + "; ".join(notes) if notes else "")
            + "; its other flags are gpustack's (the profile's driver root, CDI)",
        )
        return
    for path, _ in state.leaves(source):
        if path and path[0] == "version":
            state.default(source, path, "the plugin config format gpustack writes too")
        elif path and path[0] in ("flags", "resources", "sharing"):
            state.dropped(
                source,
                path,
                "gpustack writes this plugin flag itself, from the profile and the config",
            )


def _sharing(
    state: Import, config: PluginConfig, sharing: dict[str, Any], notes: list[str]
) -> None:
    """The plugin config's GPU sharing (time-slicing or MPS) as devicePlugin.sharing; what
    gpustack does not share (other resources, renames, device lists) is said in `notes` for a
    ConfigMap entry, else at each field."""
    source, base = config.source, config.path
    whole = base != ()
    for key, strategy_name in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        shared = sharing.get(key)
        if not isinstance(shared, dict):
            continue
        resources = shared.get("resources")
        gpu = next(
            (
                item
                for item in resources or []
                if isinstance(item, dict) and item.get("name") == "nvidia.com/gpu"
            ),
            None,
        )
        replicas = gpu.get("replicas") if gpu else None
        here: Path_ = ("sharing", key)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 2:
            # replicas 0 or 1: the plugin shares nothing (gitops-catalog's no-time-sliced).
            if not whole:
                state.default(source, here, "shares no GPU (fewer than 2 replicas)")
            continue
        targets = {
            "devicePlugin.sharing.strategy": strategy_name,
            "devicePlugin.sharing.replicas": replicas,
        }
        for flag in ("renameByDefault", "failRequestsGreaterThanOne"):
            if isinstance(shared.get(flag), bool):
                targets[f"devicePlugin.sharing.{flag}"] = shared[flag]
        for target, setting in targets.items():
            if whole:
                _set_quiet(state, source, base, target, setting)
            else:
                state.set(source, (*here, "resources"), target, setting)
        # gpustack shares every GPU of a node as nvidia.com/gpu: the other resources of the
        # list, and `rename` and `devices`, are said, each where it is written.
        partial = False
        for index, item in enumerate(resources or []):
            if item is gpu and isinstance(item, dict):
                extras = [str(name) for name in item if name not in ("name", "replicas")]
            else:
                extras = [""]
            for name in extras:
                partial = True
                if not whole:
                    state.dropped(
                        source,
                        (*here, "resources", index, *([name] if name else [])),
                        "gpustack shares every GPU as nvidia.com/gpu, with one replicas count",
                    )
        if partial:
            notes.append(f"sharing.{key}: only nvidia.com/gpu's replicas")
        if not whole:
            for flag in shared:
                if flag not in ("resources", "renameByDefault", "failRequestsGreaterThanOne"):
                    state.dropped(source, (*here, str(flag)), "no gpustack setting")


def _set_quiet(state: Import, source: Input, path: Path_, target: str, value: Any) -> None:
    """Map a value found inside a field (a plugin config in a ConfigMap entry): the entry's own
    outcome is reported once by the caller."""
    if not field_accepts(target, value):
        return  # the entry's outcome says what it maps: gpustack's own stands
    if target in state.settings and state.from_defaults(target):
        # The plugin config the operator runs replaces the operator's default.
        state.hidden.update(state.mapped_at.pop(target, []))
        del state.settings[target]
        state.locations.pop(target, None)
    if state.gpustack_default(target) == value or target in state.settings:
        return
    state.settings[target] = (value, [source.shown(path)])
    state.locations.setdefault(target, []).append(source.location(path))


def expected_plugin(state: Import, data: dict[str, Any]) -> None:
    flags: dict[str, Any] = data.get("flags") or {}
    if isinstance(flags, dict) and flags.get("migStrategy"):
        state.expected["plugin migStrategy"] = str(flags["migStrategy"])
    sharing: dict[str, Any] = data.get("sharing") or {}
    sharing = sharing if isinstance(sharing, dict) else {}
    for key, strategy in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        shared = sharing.get(key)
        if isinstance(shared, dict):
            for item in shared.get("resources") or []:
                if isinstance(item, dict) and item.get("name") == "nvidia.com/gpu":
                    replicas = item.get("replicas")
                    if isinstance(replicas, int) and replicas >= 2:
                        state.expected["plugin sharing"] = f"{strategy} x{replicas}"
