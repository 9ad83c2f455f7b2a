"""What a cluster already has, as a gpustack config: a GPU Operator ClusterPolicy (as `kubectl get
clusterpolicy -o yaml` prints it, a `List` of them too, or the file kept in a Git repository), the
GPU Operator chart's Helm values, the k8s-device-plugin chart's values, and the device plugin's
config files (on their own, in a ConfigMap, or in the chart's `config.map`).

Pure: parsed documents in (`yamlio.Document`, read bounded by `adoption`), the config's fields
(each with a comment saying where it came from) and a report out. Every field of every input gets one outcome in the report: mapped to a
config field (the config's comment says from where), the same as gpustack's default (left out of
the config), not carried over (with why), or unknown (a field this importer does not know, never
dropped silently). The report names fields, never values: the inputs are untrusted.

A ClusterPolicy or a values override file holds what its author changed; the operator fills in
the rest from its defaults (driver and toolkit on, CDI...). The import starts from the defaults of
the operator release the inputs were written for (`gpu_operator_releases.yaml`, one entry per
release: NVIDIA/gpu-operator deployments/gpu-operator/values.yaml at its tag, and
api/nvidia/v1/clusterpolicy_types.go's defaults), named by `--operator-version`, by the
ClusterPolicy's Helm labels, or else the newest release known, and the report says which.

`import_inputs` runs the mappings of each input kind (`cluster_policy`, `plugin_chart`,
`plugin_configs`, then `leftovers` for what none took) over one `report.Import`, then settles what
depends on every input (the MIG manager's switch, settings of a component that does not run).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpustack.adopt.cluster_policy import map_operator
from gpustack.adopt.inputs import (
    CLUSTER_POLICY,
    OPERATOR_DEFAULTS,
    OPERATOR_VALUES,
    PLUGIN_CONFIG,
    PLUGIN_VALUES,
    Input,
    printable,
)
from gpustack.adopt.leftovers import map_leftovers
from gpustack.adopt.plugin_chart import map_plugin_chart
from gpustack.adopt.plugin_configs import PluginConfig, map_plugin_config, plugin_configs_of
from gpustack.adopt.releases import choose_release, operator_defaults
from gpustack.adopt.report import Entry, Import, Imported
from gpustack.config.commented import Field
from gpustack.config.field_types import API_VERSION
from gpustack.config.profile_model import Profile
from gpustack.read.yamlio import SourceMap


def import_inputs(
    inputs: list[Input],
    profile: Profile,
    profile_reason: str,
    name: str,
    operator_version: str | None = None,
) -> Imported:
    """The config and the report for `inputs` on `profile`; what an operator input leaves out
    is `operator_version`'s default (else the release the inputs name, else the newest)."""
    operator = [each for each in inputs if each.kind in (CLUSTER_POLICY, OPERATOR_VALUES)]
    release, release_reason = choose_release(inputs, operator_version)
    defaults: list[Input] = []
    if operator:
        # Helm renders the ClusterPolicy from the chart's values: a values file leaves the rest
        # to values.yaml; a ClusterPolicy of its own to the operator's code.
        chart = any(each.kind == OPERATOR_VALUES for each in operator)
        defaults = [
            Input(
                OPERATOR_DEFAULTS,
                f"GPU Operator {release.version}'s default",
                operator_defaults(release, chart),
                SourceMap(""),
            )
        ]
    # The defaults come first (every input overrides them) and are reported last.
    state = Import(profile, [*inputs, *defaults], release)
    plugin_configs = plugin_configs_of(inputs)
    for each in [*defaults, *inputs]:
        if each.kind in (CLUSTER_POLICY, OPERATOR_VALUES, OPERATOR_DEFAULTS):
            map_operator(state, each, plugin_configs)
        elif each.kind == PLUGIN_VALUES:
            map_plugin_chart(state, each, plugin_configs)
    for each in inputs:
        reported = any(done[0] == id(each) for done in state.done)
        if each.kind == PLUGIN_CONFIG and not reported:
            map_plugin_config(state, PluginConfig(each, (), each.data), "default")
        map_leftovers(state, each, plugin_configs)
    _mig_manager_auto(state, defaults[0] if defaults else None)
    _without_validator(state)
    _drain_without_selector(state)
    _without_effect(state)
    config = [
        Field("apiVersion", API_VERSION),
        Field("kind", "GPUStack"),
        Field("metadata.name", name),
        Field("platform.profile", profile.metadata.name, printable(profile_reason, 400)),
        *state.config(),
    ]
    # The report in the inputs' order, each input's fields as they are written; of the
    # defaults, what they gave the config or could not (what equals gpustack's own is left out,
    # and so is a default an input's own field replaced).
    given = {path for kind, path in state.paths if kind != OPERATOR_DEFAULTS}
    kept = [
        (order, entry)
        for index, (order, entry) in enumerate(zip(state.order, state.entries))
        if state.paths[index][0] != OPERATOR_DEFAULTS
        or (
            index not in state.hidden
            and entry.outcome != "default"
            and state.paths[index][1] not in given
        )
    ]
    entries = [entry for _, entry in sorted(kept, key=lambda pair: pair[0])]
    return Imported(
        config,
        entries,
        profile.metadata.name,
        profile_reason,
        state.expected,
        release.version if operator else None,
        release_reason if operator else "",
        state.locations,
        sorted(
            {
                text
                for target, (value, _) in state.settings.items()
                if target not in _CHOICES
                for text in _strings(value)
            }
        ),
    )


# Config fields whose values are gpustack's own words (a choice among a few), not an input's.
_CHOICES = {
    "driver.mode",
    "toolkit.enabled",
    "devicePlugin.migStrategy",
    "devicePlugin.deviceListStrategy",
    "devicePlugin.sharing.strategy",
    "migManager.enabled",
    "dcgmExporter.monitor",
    "nfd.mode",
}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


# The switch of each section whose settings act only while its component runs.
_SWITCHES = {
    "driver": "mode",
    "toolkit": "enabled",
    "migManager": "enabled",
    "dcgmExporter": "enabled",
    "gfd": "enabled",
    "validator": "enabled",
    "nodeStatusExporter": "enabled",
}


def _runs(state: Import, section: str) -> bool:
    """Whether the component of a config section runs with the settings imported so far on this
    profile (stack.Stack's rules: driver_container, toolkit_enabled, mig_manager_enabled)."""
    facts = state.profile.facts

    def setting(target: str) -> Any:
        known = state.settings.get(target)
        return known[0] if known is not None else state.gpustack_default(target)

    if section == "driver":
        mode = setting("driver.mode")
        return (facts.driver.default if mode == "auto" else mode) in ("container", "driver-toolkit")
    if section == "toolkit":
        enabled = setting("toolkit.enabled")
        return state.auto("toolkit.enabled") if enabled == "auto" else bool(enabled)
    if section == "migManager":
        enabled = setting("migManager.enabled")
        if enabled == "auto":
            return (
                setting("devicePlugin.migStrategy") != "none"
                and facts.migPartitioning == "mig-manager"
            )
        return bool(enabled)
    return setting(f"{section}.enabled") is not False


def _validator_runs(state: Import) -> bool:
    """gpustack's validator runs where its driver validation finds the driver: a driver
    container, or a host driver at `/` (stack.validator_finds_driver)."""
    known = state.settings.get("validator.enabled")
    enabled = known[0] if known is not None else state.gpustack_default("validator.enabled")
    if enabled != "auto":
        return bool(enabled)
    mode = state.settings.get("driver.mode", (state.gpustack_default("driver.mode"),))[0]
    mode = state.profile.facts.driver.default if mode == "auto" else mode
    root = state.profile.facts.driver.root
    return mode in ("container", "driver-toolkit") or (mode == "preinstalled" and root == "/")


def _without_validator(state: Import) -> None:
    """The node status exporter reports the validator's ready files: where gpustack's validator
    cannot run (its driver validation does not find the platform's driver), the operator's
    exporter is not carried over, and `--check` says it would stop."""
    known = state.settings.get("nodeStatusExporter.enabled")
    if known is None or known[0] is not True or _validator_runs(state):
        return
    for index in state.mapped_at.pop("nodeStatusExporter.enabled", []):
        entry = state.entries[index]
        state.entries[index] = Entry(
            entry.input,
            entry.field,
            entry.location,
            "dropped",
            None,
            "the node status exporter reports the validator's checks, and gpustack's validator "
            "cannot find the driver on this profile",
        )
    del state.settings["nodeStatusExporter.enabled"]
    state.locations.pop("nodeStatusExporter.enabled", None)


def _drain_without_selector(state: Import) -> None:
    """The operator's drain of every pod but DaemonSets' (its upgrade controller sets them aside:
    NVIDIA/k8s-operator-libs pkg/upgrade/drain_manager.go, IgnoreAllDaemonSets) has no
    counterpart here: gpustack's drain is k8s-driver-manager's, which does not set them aside and
    without a pod selector stops at the driver pod (gpustack.resolve.checks.driver.check_drain,
    which refuses it in a config). The switch is read and left out, with why; the GPU pods'
    eviction is a setting of its own."""
    known = state.settings.get("driver.upgrade.drain.enabled")
    selector = state.settings.get("driver.upgrade.drain.podSelector")
    if known is None or known[0] is not True:
        return
    if selector is not None and isinstance(selector[0], str) and selector[0].strip():
        return
    state.leave_out(
        "driver.upgrade.drain.enabled",
        "gpustack's drain is k8s-driver-manager's, which does not set DaemonSet pods aside: "
        "without a pod selector it stops at the driver pod and never succeeds; the GPU pods' "
        "eviction (driver.upgrade.gpuPodEviction) is not affected (set "
        "driver.upgrade.drain.podSelector to drain the pods it matches)",
    )


def _without_effect(state: Import) -> None:
    """A setting of a component that does not run would have no effect, which gpustack refuses
    in a config: the operator's field is read, and left out (a default's, from the report)."""
    for target in sorted(state.settings):
        section, _, rest = target.partition(".")
        switch = _SWITCHES.get(section)
        if switch is None or rest == switch or _runs(state, section):
            continue
        state.leave_out(target, f"no effect: gpustack's {section} does not run with these settings")


def _mig_manager_auto(state: Import, defaults: Input | None) -> None:
    """The MIG manager the operator runs (on MIG-capable nodes, whatever the MIG strategy) is
    `auto` where the final MIG strategy runs gpustack's too, `true` only where none does: an
    earlier input's choice, made before a later one named the strategy, is set right here."""
    known = state.settings.get("migManager.enabled")
    strategy = state.settings.get("devicePlugin.migStrategy", ("none",))[0]
    operator_runs = state.expected.get("migManager image", "not run") != "not run"
    if (
        defaults is not None
        and operator_runs
        and strategy == "none"
        and known is None
        and state.profile.facts.migPartitioning == "mig-manager"
    ):
        state.set(defaults, ("migManager", "enabled"), "migManager.enabled", True)
        return
    if known is None or known[0] is not True or strategy == "none":
        return
    if not state.from_defaults("migManager.enabled"):
        return
    for index in state.mapped_at.pop("migManager.enabled", []):
        state.hidden.add(index)
    del state.settings["migManager.enabled"]
    state.locations.pop("migManager.enabled", None)
