"""The check that what a cluster writes takes effect: a setting that renders nothing on this
cluster (a driver version where the platform installs the driver, sharing settings for GPUs the
DRA driver hands out) is refused with why, where the cluster's own config or `--set` writes it;
what a base writes is a fleet's default, which `config show` marks where it does nothing
(`without_effect`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gpustack.errors import UserError
from gpustack.resolve.checks.context import CheckContext
from gpustack.resolve.layered_settings import Layer, merge, nearest
from gpustack.resolve.stack import Stack


@dataclass(frozen=True)
class _Applies:
    """When the settings of a config section reach the output: `fields` of `section` (None:
    every field but `switches`, which decide whether the section applies) take effect only where
    `applies` holds for the stack; set elsewhere by the user, they are refused with `why`."""

    section: tuple[str, ...]
    applies: Callable[[Stack], bool]
    why: Callable[[Stack], str]
    hint: str
    switches: frozenset[str] = frozenset()
    fields: frozenset[str] | None = None


def _cluster_sharing_used(stack: Stack) -> bool:
    """Some GPU node takes the cluster's `devicePlugin.sharing`: nodes outside pools, or a pool
    without sharing of its own, that get their GPUs from the device plugin."""
    config = stack.config

    def plugin_hands_out(allocation: str) -> bool:
        return allocation == "device-plugin" or not config.dra.gpus.enabled

    return plugin_hands_out(config.gpuAllocation) or any(
        plugin_hands_out(config.pool_settings(pool).gpu_allocation)
        and not (pool.devicePlugin and pool.devicePlugin.sharing)
        for pool in config.nodes.pools
    )


# Every section whose settings some configs render nothing of (tests/test_no_effect.py renders
# each field with and without a value to find them). Each is refused only where the user (a
# config, a base, --set) wrote it: a profile's defaults give way silently.
_APPLIES = (
    _Applies(
        ("driver",),
        lambda stack: stack.driver_container,
        lambda stack: (
            f"the driver is not a container here (driver mode {stack.driver_mode}): "
            "the nodes or the platform install it, and gpustack renders no driver"
        ),
        "remove it, and install that driver on the nodes; or set driver.mode to container or "
        "driver-toolkit where the profile offers them",
        switches=frozenset({"mode"}),
    ),
    _Applies(
        ("driver",),
        lambda stack: not stack.facts.driver.nodeOS,
        lambda stack: (
            "the nodes' OS follows platform.openshiftVersion on profile "
            f"{stack.profile.metadata.name!r} (RHCOS of that release)"
        ),
        "remove driver.nodeOS; set platform.openshiftVersion",
        fields=frozenset({"nodeOS"}),
    ),
    _Applies(
        ("dra",),
        lambda stack: stack.dra_enabled,
        lambda stack: (
            "NVIDIA's DRA driver is not deployed: no node takes its GPUs from it "
            "(gpuAllocation: device-plugin)"
        ),
        "remove it, or set gpuAllocation: dra",
    ),
    _Applies(
        ("devicePlugin", "sharing"),
        _cluster_sharing_used,
        lambda stack: (
            "no GPU node takes its GPUs from the device plugin with the cluster's "
            "sharing settings (gpuAllocation: dra; pools have their own)"
        ),
        "remove devicePlugin.sharing; with the DRA driver, GPUs are shared by its feature gates "
        "TimeSlicingSettings and MPSSupport",
    ),
    _Applies(
        ("devicePlugin", "sharing"),
        lambda stack: stack.config.devicePlugin.sharing.strategy != "none",
        lambda stack: "the cluster's GPUs are not shared (devicePlugin.sharing.strategy: none)",
        "set devicePlugin.sharing.strategy to time-slicing or mps, or remove the setting",
        switches=frozenset({"strategy"}),
    ),
    _Applies(
        ("devicePlugin",),
        lambda stack: stack.nvidia_plugin_serves,
        lambda stack: (
            f"the platform's own device plugin serves the GPUs on profile "
            f"{stack.profile.metadata.name!r}, and reads no device list strategy"
        ),
        "remove devicePlugin.deviceListStrategy",
        fields=frozenset({"deviceListStrategy"}),
    ),
    _Applies(
        ("smokeTest",),
        lambda stack: stack.smoke_test_enabled,
        lambda stack: (
            "the smoke test is not rendered (smokeTest.enabled auto renders it only "
            "with gitops.tool argocd or flux)"
        ),
        "set smokeTest.enabled: true, or remove the setting",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("entitlement",),
        lambda stack: stack.config.entitlement.enabled,
        lambda stack: "entitlement is not enabled",
        "set entitlement.enabled: true, or remove the setting",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("validator",),
        lambda stack: stack.validator_enabled,
        lambda stack: (
            "NVIDIA's validator is not deployed"
            + (
                ""
                if stack.config.validator.enabled is False
                else f" (it cannot find the driver on profile {stack.profile.metadata.name!r})"
            )
        ),
        "remove the setting",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("toolkit",),
        lambda stack: stack.toolkit_enabled,
        lambda stack: "the NVIDIA Container Toolkit DaemonSet is not deployed",
        "remove the setting, or set toolkit.enabled: true where the profile offers it",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("dcgmExporter",),
        lambda stack: stack.config.dcgmExporter.enabled,
        lambda stack: "the DCGM exporter is not deployed (dcgmExporter.enabled: false)",
        "remove the setting, or set dcgmExporter.enabled: true",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("alerts",),
        lambda stack: stack.alerts_enabled,
        lambda stack: (
            "no GPU alert rules are rendered ("
            + (
                "alerts.enabled: false"
                if stack.config.alerts.enabled is False
                else f"the DCGM exporter is off, or monitor {stack.monitor} loads no rule objects"
            )
            + ")"
        ),
        "remove the setting, or set alerts.enabled: true where a Prometheus loads the rules",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("dashboard",),
        lambda stack: stack.dashboard_enabled,
        lambda stack: (
            "no dashboard is rendered (dashboard.enabled false, or no metrics: the "
            "DCGM exporter is off or monitor is none)"
        ),
        "remove the setting, or set dashboard.enabled: true",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("gfd",),
        lambda stack: stack.config.gfd.enabled,
        lambda stack: "GPU Feature Discovery is not deployed (gfd.enabled: false)",
        "remove the setting, or set gfd.enabled: true",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("nodeStatusExporter",),
        lambda stack: stack.config.nodeStatusExporter.enabled,
        lambda stack: (
            "the node status exporter is not deployed (nodeStatusExporter.enabled: false)"
        ),
        "remove the setting, or set nodeStatusExporter.enabled: true",
        switches=frozenset({"enabled"}),
    ),
    _Applies(
        ("nfd",),
        lambda stack: stack.config.nfd.mode == "deploy",
        lambda stack: f"gpustack deploys no NFD (nfd.mode: {stack.config.nfd.mode})",
        "remove the setting, or set nfd.mode: deploy",
        switches=frozenset({"mode"}),
    ),
    _Applies(
        ("runtimeClass",),
        lambda stack: stack.facts.runtime.runtimeClass != "none" or stack.runtime_class_enabled,
        lambda stack: (
            f"profile {stack.profile.metadata.name!r} runs GPU pods with no nvidia "
            "runtime (the platform mounts the driver): no RuntimeClass or runtime handler is "
            "rendered"
        ),
        "remove the setting",
        fields=frozenset({"name", "handler"}),
    ),
    _Applies(
        ("nodes",),
        lambda stack: stack.facts.taintMechanism == "kubeadm-join" and not stack.toolkit_enabled,
        lambda stack: (
            "only the containerd drop-in gpustack writes for kubeadm nodes without "
            "the toolkit DaemonSet reads it (the toolkit, or the platform, configures the runtime "
            "here)"
        ),
        "remove nodes.cgroupDriver",
        fields=frozenset({"cgroupDriver"}),
    ),
    _Applies(
        ("gitops", "argocd"),
        lambda stack: stack.config.gitops.tool == "argocd",
        lambda stack: f"gitops.tool is {stack.config.gitops.tool}, not argocd",
        "set gitops.tool: argocd, or remove gitops.argocd",
    ),
    _Applies(
        ("gitops", "flux"),
        lambda stack: stack.config.gitops.tool == "flux",
        lambda stack: f"gitops.tool is {stack.config.gitops.tool}, not flux",
        "set gitops.tool: flux, or remove gitops.flux",
    ),
)


def check_no_effect(context: CheckContext, left_out: set[str]) -> None:
    """A setting the cluster's own config or `--set` writes that renders nothing on this cluster
    is refused, with why: it would look in force and do nothing (a driver version on a platform
    that installs its own driver, sharing settings for GPUs that the DRA driver hands out).
    A base's settings are a fleet's defaults, which apply to the clusters where they take effect
    (a driver version for those that run the driver container, resources for a component some
    platforms do not run): `config show` marks those that do nothing here. `left_out`: fields
    the loader already took out of the config (comparing profiles), no longer in force."""
    layers = context.layers
    for path, why, hint in _without_effect(context.stack, context.own_layers, left_out):
        raise UserError(
            f"has no effect: {why}",
            nearest(layers[1:], path, key=True),
            field=".".join(path),
            hint=hint,
        )
    _check_pool_sharing(context)


def without_effect(stack: Stack, layers: list[Layer]) -> dict[tuple[str, ...], str]:
    """Every setting a layer above the profile's defaults writes (a base, the config, `--set`)
    that renders nothing on this cluster, with why: what a base holds for other clusters of a
    fleet (`gpustack config show` marks them)."""
    return {path: why for path, why, _ in _without_effect(stack, layers[1:], set())}


def _without_effect(
    stack: Stack, written_in: list[Layer], left_out: set[str]
) -> Iterator[tuple[tuple[str, ...], str, str]]:
    """The settings `written_in` writes that render nothing on this cluster: (path, why, hint),
    in the order of `_APPLIES`."""
    for rule in _APPLIES:
        dotted = ".".join(rule.section)
        written = [
            name
            for name in _written_fields(written_in, rule.section)
            if (rule.fields is None or name in rule.fields)
            and name not in rule.switches
            and f"{dotted}.{name}" not in left_out
            and dotted not in left_out
        ]
        if written and not rule.applies(stack):
            for name in written:
                yield (*rule.section, name), rule.why(stack), rule.hint


def _check_pool_sharing(context: CheckContext) -> None:
    """A pool's own sharing settings, other than its strategy, do nothing while it is `none`.
    The pools are a list, which a later layer replaces whole: the last layer that writes them
    says what was written."""
    config, layers = context.config, context.layers
    owner = next(
        (
            layer
            for layer in reversed(layers[1:])
            if isinstance(layer.data.get("nodes"), dict) and "pools" in layer.data["nodes"]
        ),
        None,
    )
    written = owner.data["nodes"]["pools"] if owner is not None else None
    if not isinstance(written, list):
        return
    for index, pool in enumerate(config.nodes.pools):
        sharing = pool.devicePlugin.sharing if pool.devicePlugin else None
        if sharing is None or sharing.strategy != "none" or index >= len(written):
            continue
        data: Any = written[index]
        for key in ("devicePlugin", "sharing"):
            data = data.get(key) if isinstance(data, dict) else None
        settings = (
            [key for key in data or {} if key != "strategy"] if isinstance(data, dict) else []
        )
        if settings:
            path = ("nodes", "pools", index, "devicePlugin", "sharing", settings[0])
            raise UserError(
                f"pool {pool.name}: has no effect: the pool's GPUs are not shared (its "
                "devicePlugin.sharing.strategy is none)",
                nearest(layers, path, key=True),
                field=".".join(str(part) for part in path),
                hint="set the pool's sharing strategy to time-slicing or mps, or remove the "
                "setting",
            )


def _written_fields(layers: list[Layer], section: tuple[str, ...]) -> list[str]:
    """The fields of `section` that `layers` write with a value, merged as the loader merges
    them (a later layer's null takes a base's setting away)."""
    merged: Any = {}
    for layer in layers:
        data: Any = layer.data
        for key in section:
            if not isinstance(data, dict) or key not in data:
                break
            data = data[key]
        else:
            merged = merge(merged, data)
    if not isinstance(merged, dict):
        return []
    return [key for key, value in merged.items() if value is not None]
