"""The GPU Operator's settings, from a ClusterPolicy or the operator chart's values (the chart
writes the ClusterPolicy's spec from the same keys: NVIDIA/gpu-operator
deployments/gpu-operator/templates/clusterpolicy.yaml, v26.7.0), mapped to config fields: the
driver and its upgrade policy, the toolkit and CDI, the device plugin and its config, the MIG
manager, the DCGM exporter, the other components, the DaemonSets' common settings, images and
registries. What the operator runs for them is recorded as `Import.expected`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpustack.adopt.inputs import CLUSTER_POLICY, SECTIONS, Input, env_list, value_at
from gpustack.adopt.plugin_configs import PluginConfig, expected_plugin, map_plugin_config
from gpustack.adopt.releases import (
    UPSTREAM_REGISTRY,
    VALIDATOR_IMAGE,
    Image,
    labelled_release,
    short_tag,
)
from gpustack.adopt.report import Import
from gpustack.config.field_types import duration_ms
from gpustack.config.model import field_accepts
from gpustack.errors import UserError
from gpustack.read.yamlio import Path_


@dataclass(frozen=True)
class _Spec:
    """The operator's settings in one input (a ClusterPolicy's spec, or the chart's values):
    a value by its path, and the path in the input of a field."""

    source: Input
    data: dict[str, Any]

    def get(self, *path: str) -> Any:
        return value_at(self.data, path)

    def at(self, *path: str | int) -> Path_:
        return (*self.source.root, *path)

    def present(self, *path: str) -> bool:
        parent = value_at(self.data, path[:-1])
        return isinstance(parent, dict) and path[-1] in parent


def map_operator(
    state: Import, source: Input, plugin_configs: dict[tuple[str, str], PluginConfig]
) -> None:
    """Map the operator's settings of one input (a ClusterPolicy, or the chart's values)."""
    data = value_at(source.data, source.root)
    if not isinstance(data, dict):
        if source.kind == CLUSTER_POLICY:
            raise UserError(
                "the ClusterPolicy has no spec mapping",
                source.location(("spec",)),
                field="spec",
            )
        return
    spec = _Spec(source, data)
    _operator_version(state, source)
    _driver(state, spec)
    _toolkit_and_cdi(state, spec)
    _device_plugin(state, spec, plugin_configs)
    _mig_manager(state, spec)
    _dcgm_exporter(state, spec)
    _other_components(state, spec)


def _driver(state: Import, spec: _Spec) -> None:
    """The driver: its mode, version, build and upgrade policy, and its manager's settings."""
    source = spec.source
    facts = state.profile.facts
    enabled = spec.get("driver", "enabled")
    ocp_toolkit = spec.get("operator", "use_ocp_driver_toolkit") is True
    mode: str
    if enabled is False:
        mode = "preinstalled" if "preinstalled" in facts.driver.modes else facts.driver.default
        state.set(source, spec.at("driver", "enabled"), "driver.mode", mode)
    elif enabled is True or not spec.present("driver", "enabled"):
        # driver.enabled defaults to true (clusterpolicy_types.go DriverSpec.Enabled).
        if "container" in facts.driver.modes:
            mode = "container"
        elif "driver-toolkit" in facts.driver.modes:
            mode = "driver-toolkit"
        else:
            mode = ""
        if mode and spec.present("driver", "enabled"):
            state.set(source, spec.at("driver", "enabled"), "driver.mode", mode)
        elif spec.present("driver", "enabled"):
            state.dropped(
                source,
                spec.at("driver", "enabled"),
                f"the {state.profile.metadata.name} profile installs the driver its own way "
                f"({facts.driver.default})",
            )
    if spec.present("operator", "use_ocp_driver_toolkit"):
        if ocp_toolkit and "driver-toolkit" in facts.driver.modes:
            state.default(
                source,
                spec.at("operator", "use_ocp_driver_toolkit"),
                "gpustack builds the driver with the Driver Toolkit (driver.mode driver-toolkit)",
            )
        else:
            state.default(source, spec.at("operator", "use_ocp_driver_toolkit"), "not used here")
    driver_on = enabled is not False and state.settings.get("driver.mode", ("",))[0] in (
        "container",
        "driver-toolkit",
        "",
    )
    _versions(state, source, spec.data, driver_on)
    if spec.get("driver", "usePrecompiled") is True:
        state.dropped(
            source,
            spec.at("driver", "usePrecompiled"),
            "gpustack renders one precompiled image per kernel and the input names no "
            "kernel: set driver.precompiled: true with driver.kernelVersion (the nodes' "
            "`uname -r`); until then the driver is built on the node",
        )
    elif spec.present("driver", "usePrecompiled"):
        state.default(source, spec.at("driver", "usePrecompiled"), "built on the node")
    module_type = spec.get("driver", "kernelModuleType")
    if spec.present("driver", "kernelModuleType"):
        state.dropped(
            source,
            spec.at("driver", "kernelModuleType"),
            "gpustack sets no KERNEL_MODULE_TYPE: the driver container chooses (open modules "
            "on GPUs that support them)"
            + (
                "; a `patches:` entry can set KERNEL_MODULE_TYPE on the driver container"
                if module_type in ("open", "proprietary")
                else ""
            ),
        )
    _upgrade(state, source, spec.data)
    _manager_env(
        state, source, spec.get("driver", "manager", "env"), spec.at("driver", "manager", "env")
    )


def _toolkit_and_cdi(state: Import, spec: _Spec) -> None:
    """The Container Toolkit and CDI, which the toolkit's specs hand GPUs over by."""
    source = spec.source
    facts = state.profile.facts
    profile = state.profile.metadata.name
    if spec.get("toolkit", "enabled") is True and facts.runtime.toolkit is None:
        state.dropped(
            source,
            spec.at("toolkit", "enabled"),
            f"gpustack does not deploy the Container Toolkit on {profile}: the platform's "
            "runtime reaches the GPUs without it",
        )
    elif isinstance(spec.get("toolkit", "enabled"), bool):
        state.set(
            source, spec.at("toolkit", "enabled"), "toolkit.enabled", spec.get("toolkit", "enabled")
        )
    _toolkit_env(state, source, spec.get("toolkit", "env"), spec.at("toolkit", "env"))
    cdi = spec.get("cdi", "enabled")
    if isinstance(cdi, bool):
        if cdi:
            state.default(
                source,
                spec.at("cdi", "enabled"),
                "gpustack hands GPUs over by CDI where it renders the toolkit "
                "(devicePlugin.deviceListStrategy auto)",
            )
        else:
            state.set(
                source, spec.at("cdi", "enabled"), "devicePlugin.deviceListStrategy", "envvar"
            )
    if spec.present("cdi", "default"):
        state.default(
            source, spec.at("cdi", "default"), "deprecated in the operator; cdi.enabled decides"
        )
    # cdi.enabled defaults to true (clusterpolicy_types.go CDIConfigSpec.Enabled, v26.7.0); the
    # toolkit writes the CDI specs.
    if (
        spec.present("toolkit", "enabled")
        or spec.present("cdi", "enabled")
        or "CDI" not in state.expected
    ):
        toolkit_on = spec.get("toolkit", "enabled") is not False
        state.expected["CDI"] = "on" if toolkit_on and cdi is not False else "off"


def _device_plugin(
    state: Import, spec: _Spec, plugin_configs: dict[tuple[str, str], PluginConfig]
) -> None:
    """The device plugin, the MIG strategy and the plugin's config."""
    source = spec.source
    facts = state.profile.facts
    profile = state.profile.metadata.name
    if spec.get("devicePlugin", "enabled") is True and facts.devicePluginProvider != "nvidia":
        state.dropped(
            source,
            spec.at("devicePlugin", "enabled"),
            f"the platform's own device plugin serves nvidia.com/gpu on {profile}; gpustack "
            "does not deploy NVIDIA's there",
        )
    elif isinstance(spec.get("devicePlugin", "enabled"), bool):
        state.set(
            source,
            spec.at("devicePlugin", "enabled"),
            "devicePlugin.enabled",
            spec.get("devicePlugin", "enabled"),
        )
    strategy = spec.get("mig", "strategy")
    if strategy in ("none", "single", "mixed"):
        state.set(source, spec.at("mig", "strategy"), "devicePlugin.migStrategy", strategy)
    # What a later input (a kustomize patch) leaves out keeps an earlier input's value.
    if isinstance(strategy, str):
        state.expected["plugin migStrategy"] = strategy
    state.expected.setdefault("plugin migStrategy", "none")
    state.expected.setdefault("plugin sharing", "none")
    _device_plugin_config(state, source, spec.data, plugin_configs)


def _mig_manager(state: Import, spec: _Spec) -> None:
    """The MIG manager and its default MIG config."""
    source = spec.source
    facts = state.profile.facts
    profile = state.profile.metadata.name
    mig_enabled = spec.get("migManager", "enabled")
    partitioning = facts.migPartitioning
    if mig_enabled is True and partitioning != "mig-manager":
        state.dropped(
            source,
            spec.at("migManager", "enabled"),
            f"on {profile} the {'node OS' if partitioning == 'node-settings' else 'node pool'} "
            "creates the MIG partitions itself",
        )
    elif isinstance(mig_enabled, bool):
        # The operator runs it on MIG-capable nodes (nvidia.com/mig.capable) whatever the MIG
        # strategy; gpustack's `auto` runs it with a strategy, `true` without one.
        with_strategy = state.settings.get("devicePlugin.migStrategy", ("none",))[0] != "none"
        state.set(
            source,
            spec.at("migManager", "enabled"),
            "migManager.enabled",
            ("auto" if with_strategy else True) if mig_enabled else False,
            "runs with a MIG strategy" if mig_enabled and with_strategy else "",
        )
    default_config = spec.get("migManager", "config", "default")
    if isinstance(default_config, str) and default_config:
        state.set(
            source,
            spec.at("migManager", "config", "default"),
            "migManager.defaultConfig",
            default_config,
        )
    if spec.get("migManager", "config", "name"):
        state.dropped(
            source,
            spec.at("migManager", "config", "name"),
            "a ConfigMap of mig-parted configs: save its config.yaml as a file and set "
            "migManager.config.file",
        )
    for env_name, env_value in env_list(spec.get("migManager", "env")):
        if env_name == "WITH_REBOOT":
            state.set(
                source,
                spec.at("migManager", "env"),
                "migManager.withReboot",
                str(env_value).lower() == "true",
            )


def _dcgm_exporter(state: Import, spec: _Spec) -> None:
    """The DCGM exporter, its counters and its ServiceMonitor."""
    source = spec.source
    if isinstance(spec.get("dcgmExporter", "enabled"), bool):
        state.set(
            source,
            spec.at("dcgmExporter", "enabled"),
            "dcgmExporter.enabled",
            spec.get("dcgmExporter", "enabled"),
        )
    counters = spec.get("dcgmExporter", "config", "name")
    if counters:
        state.dropped(
            source,
            spec.at("dcgmExporter", "config", "name"),
            "a ConfigMap of custom counters: gpustack renders its own counters list (the one "
            "its alerts and dashboard read); a `patches:` entry can change it",
        )
    if counters:
        state.expected["exporter counters"] = f"ConfigMap {counters}"
    state.expected.setdefault("exporter counters", "the exporter image's default counters")
    monitor = spec.get("dcgmExporter", "serviceMonitor", "enabled")
    if isinstance(monitor, bool):
        state.set(
            source,
            spec.at("dcgmExporter", "serviceMonitor", "enabled"),
            "dcgmExporter.monitor",
            "servicemonitor" if monitor else "none",
        )
    interval = spec.get("dcgmExporter", "serviceMonitor", "interval")
    if isinstance(interval, str) and interval:
        state.set(
            source,
            spec.at("dcgmExporter", "serviceMonitor", "interval"),
            "dcgmExporter.interval",
            interval,
        )
    labels = spec.get("dcgmExporter", "serviceMonitor", "additionalLabels")
    if isinstance(labels, dict) and labels:
        state.set(
            source,
            spec.at("dcgmExporter", "serviceMonitor", "additionalLabels"),
            "dcgmExporter.monitorLabels",
            {str(key): str(value) for key, value in labels.items()},
        )


def _other_components(state: Import, spec: _Spec) -> None:
    """GFD, NFD, the node status exporter, the validator's workloads, the runtime class, the
    DaemonSets' common settings, registries and pull secrets."""
    source = spec.source
    for section in ("gfd", "nodeStatusExporter"):
        if isinstance(spec.get(section, "enabled"), bool):
            state.set(
                source,
                spec.at(section, "enabled"),
                f"{section}.enabled",
                spec.get(section, "enabled"),
            )
    if isinstance(spec.get("nfd", "enabled"), bool):
        state.set(
            source,
            spec.at("nfd", "enabled"),
            "nfd.mode",
            "deploy" if spec.get("nfd", "enabled") else "external",
        )
    for part, target in (
        ("plugin", "validator.pluginWorkload"),
        ("cuda", "validator.cudaWorkload"),
    ):
        for env_name, env_value in env_list(spec.get("validator", part, "env")):
            if env_name == "WITH_WORKLOAD":
                state.set(
                    source,
                    spec.at("validator", part, "env"),
                    target,
                    str(env_value).lower() == "true",
                )
    # Runtime class, common DaemonSet settings, registries and pull secrets, resources.
    runtime_class = spec.get("operator", "runtimeClass")
    if isinstance(runtime_class, str) and runtime_class:
        state.set(source, spec.at("operator", "runtimeClass"), "runtimeClass.name", runtime_class)
    if isinstance(runtime_class, str) and runtime_class:
        state.expected["runtime class"] = runtime_class
    state.expected.setdefault("runtime class", "nvidia")
    _daemonsets(state, source, spec.data)
    _registries(state, source, spec.data)


def _operator_version(state: Import, source: Input) -> None:
    labelled = labelled_release(source)
    if labelled is None:
        return
    version = state.release.version
    if labelled[0] == version:
        why = f"installed by GPU Operator {version}, whose defaults fill in what it leaves out"
    else:
        why = f"GPU Operator {version}'s defaults fill in what the ClusterPolicy leaves out"
    state.default(source, ("metadata", "labels"), why)


def _image(state: Import, spec: dict[str, Any], component: str) -> Image:
    """(repository, image, version) the operator runs for a component of the spec."""
    repository, image, version = state.release.images[component]
    section = value_at(spec, tuple(component.split(".")))
    if isinstance(section, dict):
        repository = str(section.get("repository") or repository)
        image = str(section.get("image") or image)
        version = str(section.get("version") or version)
    return repository, image, version


def _versions(state: Import, source: Input, spec: dict[str, Any], driver_on: bool) -> None:
    root = source.root
    for component, section in SECTIONS.items():
        path = tuple(component.split("."))
        node = value_at(spec, path)
        repository, image, version = _image(state, spec, component)
        if component.startswith("driver") and not driver_on:
            state.expected[f"{component} image"] = "not run"
            if isinstance(node, dict) and "version" in node:
                state.default(
                    source,
                    (*root, *path, "version"),
                    "no driver container here: the driver is the host's",
                )
            continue
        off = isinstance(node, dict) and node.get("enabled") is False
        # The node status exporter is off unless enabled (clusterpolicy_types.go IsEnabled).
        if component == "nodeStatusExporter" and not (
            isinstance(node, dict) and node.get("enabled") is True
        ):
            off = True
        aspect = f"{component} image"
        explicit = isinstance(node, dict) and bool(
            {"enabled", "repository", "image", "version"} & set(node)
        )
        if explicit or aspect not in state.expected:
            state.expected[aspect] = "not run" if off else f"{repository}/{image}:{version}"
        if not isinstance(node, dict) or "version" not in node:
            continue
        where = (*root, *path, "version")
        written = node.get("version")
        if not isinstance(written, str) or not written:
            state.default(source, where, f"unset: the operator's default ({state.release.version})")
            continue
        if component == "gfd":
            plugin = short_tag("devicePlugin", _image(state, spec, "devicePlugin")[2])[0]
            if short_tag("gfd", written)[0] == plugin:
                state.default(source, where, "GFD runs the device plugin's image and version")
            else:
                state.dropped(
                    source,
                    where,
                    "gpustack runs GFD at the device plugin's version (devicePlugin.version)",
                )
            continue
        if component == "driver" and not re.fullmatch(r"[0-9]+\.[0-9]+(\.[0-9]+)?", written):
            state.dropped(
                source,
                where,
                "not a driver version such as 595.91.07 (a digest or a custom tag): gpustack "
                "names the driver image by version and node OS",
            )
            continue
        tag, why = short_tag(component, written)
        if not tag and off:
            state.default(source, where, "the component is off")
            continue
        if not tag:
            state.dropped(source, where, why or "")
            continue
        state.set(source, where, f"{section}.version", tag, why or "")


def _registries(state: Import, source: Input, spec: dict[str, Any]) -> None:
    """Each component's repository (and image name) against upstream's: one registry that
    replaces nvcr.io for all of them is images.registry; pull secrets are images.pullSecrets."""
    root = source.root
    registries: dict[str, list[Path_]] = {}
    secrets: list[str] = []
    for component, (upstream_repository, upstream_image, _) in state.release.images.items():
        path = tuple(component.split("."))
        node = value_at(spec, path)
        if not isinstance(node, dict):
            continue
        repository, image = node.get("repository"), node.get("image")
        if "image" in node:
            if not image or image == upstream_image:
                state.default(source, (*root, *path, "image"), "upstream's image name")
            elif component in VALIDATOR_IMAGE and image == "gpu-operator-validator":
                state.dropped(
                    source,
                    (*root, *path, "image"),
                    "the validator image of GPU Operator releases before v25.10.0: gpustack's "
                    "validator runs nvidia-validator from the operator's own image",
                )
            else:
                state.dropped(
                    source,
                    (*root, *path, "image"),
                    "a renamed image: images.registry keeps upstream's image names (a "
                    "`patches:` entry can set another)",
                )
        if "repository" in node:
            where = (*root, *path, "repository")
            if not repository or repository == upstream_repository:
                state.default(source, where, "upstream's repository")
            elif isinstance(repository, str) and repository.endswith(
                upstream_repository.removeprefix(UPSTREAM_REGISTRY)
            ):
                registry = repository[
                    : len(repository) - len(upstream_repository.removeprefix(UPSTREAM_REGISTRY))
                ]
                registries.setdefault(registry, []).append(where)
            else:
                state.dropped(
                    source,
                    where,
                    "a repository path other than upstream's: images.registry replaces the "
                    f"registry host ({UPSTREAM_REGISTRY}) and keeps each image's path",
                )
        pulled = node.get("imagePullSecrets")
        if "imagePullSecrets" in node:
            names = [str(item) for item in pulled] if isinstance(pulled, list) else []
            if names:
                for name in names:
                    if name not in secrets:
                        secrets.append(name)
                state.record(
                    source, (*root, *path, "imagePullSecrets"), "mapped", "images.pullSecrets"
                )
            else:
                state.default(source, (*root, *path, "imagePullSecrets"), "none")
    for registry, paths in sorted(registries.items()):
        for where in paths:
            state.set(source, where, "images.registry", registry)
    if secrets:
        value = sorted(name for name in secrets if field_accepts("images.pullSecrets", [name]))
        known = state.settings.get("images.pullSecrets")
        merged = sorted({*value, *(known[0] if known else [])})
        if not merged:
            return
        state.locations.setdefault("images.pullSecrets", []).append(
            source.location((*root, "imagePullSecrets"))
        )
        state.settings["images.pullSecrets"] = (
            merged,
            [*(known[1] if known else []), f"{source.name} imagePullSecrets"],
        )
        state.expected["pull secrets"] = ", ".join(merged)


def _upgrade(state: Import, source: Input, spec: dict[str, Any]) -> None:
    """driver.upgradePolicy (NVIDIA/k8s-operator-libs api/upgrade/v1alpha1
    DriverUpgradePolicySpec) as the driver DaemonSet's rolling update and k8s-driver-manager's
    eviction and drain."""
    base = (*source.root, "driver", "upgradePolicy")
    policy = value_at(spec, ("driver", "upgradePolicy"))
    if not isinstance(policy, dict):
        return
    parallel = policy.get("maxParallelUpgrades")
    if isinstance(parallel, int) and not isinstance(parallel, bool) and parallel >= 1:
        state.set(
            source,
            (*base, "maxParallelUpgrades"),
            "driver.upgrade.maxUnavailable",
            parallel,
            "nodes upgraded at a time",
        )
    if parallel == 0 and not isinstance(parallel, bool):
        state.dropped(
            source,
            (*base, "maxParallelUpgrades"),
            "0, no limit: the driver's rolling update takes maxUnavailable nodes at a time",
        )
    unavailable = policy.get("maxUnavailable")
    if "maxUnavailable" in policy:
        if isinstance(parallel, int) and parallel >= 1:
            state.dropped(
                source,
                (*base, "maxUnavailable"),
                "the DaemonSet's rolling update takes maxParallelUpgrades nodes at a time",
            )
        elif isinstance(unavailable, (int, str)):
            state.set(
                source, (*base, "maxUnavailable"), "driver.upgrade.maxUnavailable", unavailable
            )
    if "autoUpgrade" in policy:
        if policy["autoUpgrade"] is True:
            state.default(source, (*base, "autoUpgrade"), "a new driver rolls out node by node")
        else:
            state.dropped(
                source,
                (*base, "autoUpgrade"),
                "gpustack rolls a driver change out at once (the DaemonSet's rolling update); "
                "hold a change back in Git instead",
            )
    drain = policy.get("drain")
    if isinstance(drain, dict):
        names = {
            "enable": "driver.upgrade.drain.enabled",
            "timeoutSeconds": "driver.upgrade.drain.timeoutSeconds",
            "podSelector": "driver.upgrade.drain.podSelector",
            "deleteEmptyDir": "driver.upgrade.drain.deleteEmptyDir",
            "force": "driver.upgrade.drain.force",
        }
        for key, target in names.items():
            if key in drain and drain[key] is not None:
                state.set(source, (*base, "drain", key), target, drain[key])
    for key in ("podDeletion", "gpuPodDeletion"):
        deletion = policy.get(key)
        if isinstance(deletion, dict):
            for name in deletion:
                state.dropped(
                    source,
                    (*base, key, str(name)),
                    "k8s-driver-manager evicts GPU pods within the drain's timeout and "
                    "options (driver.upgrade.drain)",
                )
    if "waitForCompletion" in policy:
        state.dropped(
            source,
            (*base, "waitForCompletion"),
            "the operator's upgrade controller waits for jobs; gpustack's DaemonSet update "
            "does not",
        )


# k8s-driver-manager's environment (NVIDIA/k8s-driver-manager v0.12.0 cmd/driver-manager) that
# gpustack's settings write.
_MANAGER_ENV = {
    "ENABLE_GPU_POD_EVICTION": "driver.upgrade.gpuPodEviction",
    "ENABLE_AUTO_DRAIN": "driver.upgrade.drain.enabled",
    "DRAIN_USE_FORCE": "driver.upgrade.drain.force",
    "DRAIN_POD_SELECTOR_LABEL": "driver.upgrade.drain.podSelector",
    "DRAIN_TIMEOUT_SECONDS": "driver.upgrade.drain.timeoutSeconds",
    "DRAIN_DELETE_EMPTYDIR_DATA": "driver.upgrade.drain.deleteEmptyDir",
}


# What Go's strconv.ParseBool reads as true and as false.
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")


_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _manager_env(state: Import, source: Input, env: Any, path: Path_) -> None:
    if not isinstance(env, list):
        return
    for index, (name, value) in enumerate(env_list(env)):
        target = _MANAGER_ENV.get(name)
        where = (*path, index)
        if target is None:
            state.dropped(source, where, "no gpustack setting for this driver-manager variable")
            continue
        if target.endswith("timeoutSeconds"):
            # A count of seconds, or a duration as the driver manager reads it and the operator
            # writes it (`0s`: a Go duration flag, k8s-driver-manager v0.12.0 main.go).
            text = str(value).strip()
            if re.fullmatch(r"[0-9]+", text):
                text += "s"
            if not re.fullmatch(r"([0-9]+(h|m|s|ms))+", text) or duration_ms(text) % 1000:
                state.dropped(source, where, "not a whole number of seconds")
                continue
            setting: Any = duration_ms(text) // 1000
        elif target.endswith("podSelector"):
            setting = str(value or "")
        else:
            # As the driver manager reads it (urfave/cli v2 BoolFlag: empty is false, else Go's
            # strconv.ParseBool); anything else stops the manager, which gpustack's would not.
            text = "" if value is None else str(value)
            if text not in _GO_TRUE and text not in _GO_FALSE and text != "":
                state.dropped(source, where, "not a boolean the driver manager reads")
                continue
            setting = text in _GO_TRUE
        state.set(source, where, target, setting)
    state.done.add((id(source), path))


# The Container Toolkit's runtime variables and the profile facts that decide them.
_TOOLKIT_FACTS = {
    "CONTAINERD_CONFIG": "configFile",
    "RUNTIME_CONFIG": "configFile",
    "CONTAINERD_SOCKET": "socket",
    "RUNTIME_SOCKET": "socket",
    "RUNTIME_DROP_IN_CONFIG": "dropInConfigFile",
    "RUNTIME_RESTART_MODE": "restartMode",
}


def _toolkit_env(state: Import, source: Input, env: Any, path: Path_) -> None:
    if not isinstance(env, list):
        return
    toolkit = state.profile.facts.runtime.toolkit
    profile = state.profile.metadata.name
    for index, (name, value) in enumerate(env_list(env)):
        where = (*path, index)
        if name in _TOOLKIT_FACTS or name in ("CONTAINERD_RUNTIME_CLASS", "RUNTIME_CLASS"):
            state.expected[f"toolkit {name}"] = str(value)
        fact = _TOOLKIT_FACTS.get(name)
        if name in ("CONTAINERD_RUNTIME_CLASS", "RUNTIME_CLASS"):
            state.set(source, where, "runtimeClass.handler", str(value))
        elif fact is not None and toolkit is not None:
            if getattr(toolkit, fact) == value:
                state.default(source, where, f"the {profile} profile's too")
            else:
                state.dropped(
                    source,
                    where,
                    f"the {profile} profile decides it (facts.runtime.toolkit.{fact}); a "
                    "profile of your own (--profiles-dir) can say otherwise",
                )
        elif name in ("CONTAINERD_SET_AS_DEFAULT", "NVIDIA_RUNTIME_SET_AS_DEFAULT"):
            state.dropped(
                source,
                where,
                "gpustack keeps runc the default runtime and names the nvidia runtime "
                "through runtimeClass",
            )
        else:
            state.dropped(source, where, "no gpustack setting for this toolkit variable")
    state.done.add((id(source), path))


def _device_plugin_config(
    state: Import,
    source: Input,
    spec: dict[str, Any],
    plugin_configs: dict[tuple[str, str], PluginConfig],
) -> None:
    base = (*source.root, "devicePlugin", "config")
    config = value_at(spec, ("devicePlugin", "config"))
    if not isinstance(config, dict):
        return
    name, default = config.get("name"), config.get("default")
    # The operator chart's own ConfigMap (devicePlugin.config.create and .data), or one the
    # ClusterPolicy names.
    chart_data = isinstance(config.get("data"), dict) and bool(config["data"])
    owner = source.name if chart_data else str(name or "")
    if not owner:
        for key in config:
            state.default(source, (*base, str(key)), "no plugin config: gpustack's own")
        return
    mine = {
        entry: each for (config_map, entry), each in plugin_configs.items() if config_map == owner
    }
    if not mine:
        # The operator's plugin shares GPUs as that config says, which only its ConfigMap
        # tells: `--check` says so rather than compare with the default's `none`.
        state.expected["plugin sharing"] = (
            "its plugin config's (the ConfigMap devicePlugin.config.name names, not among the "
            "inputs)"
        )
        state.dropped(
            source,
            (*base, "name"),
            "the ConfigMap is not among the inputs: give its YAML too "
            "(`kubectl get configmap NAME -o yaml`) to import its plugin configs",
        )
        for key in config:
            if key != "name":
                state.dropped(source, (*base, str(key)), "its ConfigMap is not among the inputs")
        return
    chosen = str(default) if default else (next(iter(mine)) if len(mine) == 1 else "")
    if chosen not in mine:
        chosen = ""
    for key in config:
        if key in ("name", "default", "create", "data"):
            state.record(
                source,
                (*base, str(key)),
                "mapped" if chosen else "dropped",
                "devicePlugin" if chosen else None,
                None if chosen else "names no plugin config among the inputs as the default",
            )
        else:
            state.dropped(source, (*base, str(key)), "no gpustack setting")
    for entry, each in sorted(mine.items()):
        map_plugin_config(state, each, "default" if entry == chosen else "other")
        if entry == chosen:
            expected_plugin(state, each.data)


def _daemonsets(state: Import, source: Input, spec: dict[str, Any]) -> None:
    base = (*source.root, "daemonsets")
    daemonsets = value_at(spec, ("daemonsets",))
    if not isinstance(daemonsets, dict):
        return
    tolerations = daemonsets.get("tolerations")
    if isinstance(tolerations, list):
        _tolerations(state, source, tolerations, (*base, "tolerations"))
    if "priorityClassName" in daemonsets:
        if daemonsets["priorityClassName"] in ("system-node-critical", "", None):
            state.default(source, (*base, "priorityClassName"), "system-node-critical")
        else:
            state.dropped(
                source,
                (*base, "priorityClassName"),
                "gpustack's GPU DaemonSets run system-node-critical (a `patches:` entry can "
                "change it)",
            )
    for key in ("labels", "annotations"):
        if key in daemonsets:
            if daemonsets[key]:
                state.dropped(
                    source,
                    (*base, key),
                    f"no gpustack setting: a `patches:` entry can add {key} to the DaemonSets",
                )
            else:
                state.default(source, (*base, key), "none")
    if "updateStrategy" in daemonsets:
        if daemonsets["updateStrategy"] == "RollingUpdate":
            state.default(source, (*base, "updateStrategy"), "RollingUpdate")
        else:
            state.dropped(source, (*base, "updateStrategy"), "gpustack's DaemonSets roll")
    rolling = daemonsets.get("rollingUpdate")
    if isinstance(rolling, dict):
        for key in rolling:
            if str(rolling[key]) == "1":
                state.default(source, (*base, "rollingUpdate", str(key)), "one node at a time")
            else:
                state.dropped(
                    source,
                    (*base, "rollingUpdate", str(key)),
                    "gpustack rolls its DaemonSets one node at a time (the driver: "
                    "driver.upgrade.maxUnavailable)",
                )


def _tolerations(state: Import, source: Input, tolerations: list[Any], base: Path_) -> None:
    """Each toleration of a GPU node taint (a key and an effect) is a taint of nodes.taints:
    gpustack's GPU workloads tolerate them and the node/ files apply them. Any other item
    (no key: every taint; no effect: every effect of the key) is said on its own, and the others
    are still carried over."""
    taints: list[dict[str, str]] = []
    mapped: list[int] = []
    for index, toleration in enumerate(tolerations):
        key = toleration.get("key") if isinstance(toleration, dict) else None
        effect = toleration.get("effect") if isinstance(toleration, dict) else None
        if not isinstance(toleration, dict) or not key:
            state.dropped(
                source,
                (*base, index),
                "a toleration without a key tolerates every taint: gpustack's GPU workloads "
                "tolerate nodes.taints (and nvidia.com/gpu); add a node's other taints there",
            )
            continue
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            state.dropped(
                source,
                (*base, index),
                "a toleration without an effect tolerates every effect of its key: gpustack "
                "tolerates each of nodes.taints with its effect",
            )
            continue
        taint = {"key": str(key)}
        if toleration.get("operator") != "Exists" and toleration.get("value"):
            taint["value"] = str(toleration["value"])
        elif str(key) == "nvidia.com/gpu":
            taint["value"] = "present"  # gpustack's taint: the node/ files write it
        taint["effect"] = str(effect)
        taints.append(taint)
        mapped.append(index)
    state.done.add((id(source), base))
    if not taints:
        return
    if not field_accepts("nodes.taints", taints):
        for index in mapped:
            state.dropped(source, (*base, index), "not a taint gpustack's nodes.taints takes")
        return
    for index in mapped:
        state.set(
            source,
            (*base, index),
            "nodes.taints",
            taints,
            "GPU workloads tolerate them, and the node/ files apply them",
        )
