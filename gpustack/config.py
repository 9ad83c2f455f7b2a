"""From config files on disk to a resolved `Stack`: read, follow `extends:`, merge the profile's
defaults beneath, validate, and map every validation error back to the file, line and column.

This is the only module that reads config files; everything after it works on plain data.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from gpustack import bottlerocket, gke_accelerators, mig
from gpustack import patches as patching
from gpustack import profiles as profile_store
from gpustack.errors import (
    Location,
    UserError,
    closest,
    describe,
    did_you_mean,
    display_path,
    real_path,
)
from gpustack.layers import (
    Layer,
    locate,
    merge,
    merge_layers,
    nearest,
    validate,
)
from gpustack.model import (
    GKENodePool,
    GPUStack,
    NodePool,
    NodeSelectorRequirement,
    PatchEntry,
    Profile,
    ProfileFacts,
    Strict,
    WithResources,
)
from gpustack.patterns import linear_regex
from gpustack.reading import MAX_FILE_BYTES, decode, read_bounded
from gpustack.yamlio import (
    Document,
    SourceMap,
    load_all_text,
    load_file,
    load_text,
)

_MAX_EXTENDS_DEPTH = 16
# Bases in all, counted as they are applied (one named twice, or by two files, counts twice): each
# costs a merge, so files that name each other's bases many times over would cost minutes and
# gigabytes (a base-repetition bomb). A real fleet's chain is a handful.
MAX_LAYERS = 64
# Labels only Node Feature Discovery sets: with nfd.mode disabled nothing puts them on a node.
NFD_LABEL_PREFIX = "feature.node.kubernetes.io/"
# Driver modes in which NVIDIA's driver container installs the driver.
DRIVER_CONTAINER_MODES = ("container", "driver-toolkit")
# Where a driver container's root filesystem appears on the host (NVIDIA/gpu-operator
# controllers/object_controls.go DefaultDriverInstallDir, v26.7.0).
DRIVER_CONTAINER_ROOT = "/run/nvidia/driver"
# NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.1,
# docs/prerequisites.md): Kubernetes v1.34.2 or later, where DRA is GA and on by default; driver
# 565 or later for GPU allocation, 570.158.01 or later for ComputeDomains.
DRA_MINIMUM_KUBERNETES = (1, 34)
DRA_MINIMUM_DRIVER = {"gpus": "565", "computeDomains": "570.158.01"}
# resource.k8s.io/v1 is served from Kubernetes 1.34 (DRA GA, KEP-4381); the chart picks the
# highest version the live cluster serves (templates/_helpers.tpl resourceApiVersion).
RESOURCE_API_V1_FROM = (1, 34)
# Distributions whose driver images are tagged by major version only (NVIDIA/gpu-operator
# internal/state/nodepool.go getOSTag and controllers/state_manager.go getGPUNodeOSInfo, v26.7.0).
MAJOR_VERSION_TAGGED = ("ol", "rocky", "rhel")


def split_node_os(node_os: str) -> tuple[str, str]:
    """`rhel9.6` -> ('rhel', '9.6'): NFD's system-os_release.ID and VERSION_ID labels."""
    os_id = node_os.rstrip("0123456789.")
    return os_id, node_os.removeprefix(os_id)


def driver_os_tag(node_os: str) -> str:
    """The OS suffix of the driver image tag the GPU Operator pulls for nodes of `node_os`:
    ID and VERSION_ID, the major version only for RHEL, Rocky and Oracle Linux (`rhel9.6` ->
    `rhel9`, `rhcos4.18` -> `rhcos4.18`)."""
    os_id, version = split_node_os(node_os)
    if os_id in MAJOR_VERSION_TAGGED:
        version = version.split(".")[0]
    return f"{os_id}{version}"


@dataclass(frozen=True)
class Stack:
    """A validated config with its profile: everything the components need, and nothing on disk."""

    config: GPUStack
    profile: Profile
    source: str
    entitlement_pem: bytes | None = None
    # The MIG configs of migManager.config.file, checked (gpustack.mig).
    user_mig_configs: mig.Configs | None = None
    # Settings left out because they do not apply to the profile: (field path, why).
    left_out: tuple[tuple[str, str], ...] = ()
    entitlement_mode: int | None = None  # the PEM file's permission bits
    # `patches:` of the bases then the config, read and parsed (gpustack.patches applies them).
    patches: tuple[patching.Patch, ...] = ()
    # Set on a view of the stack as one node pool's nodes see it (gpustack.components.node):
    # the pool, and the device plugin config its nodes select.
    pool: NodePool | None = None
    pool_plugin_config: str | None = None

    @property
    def name(self) -> str:
        return self.config.metadata.name

    @property
    def namespace(self) -> str:
        return self.config.namespace

    @property
    def facts(self) -> ProfileFacts:
        return self.profile.facts

    @property
    def gpu_node_selector(self) -> list[NodeSelectorRequirement]:
        """The profile's GPU node requirements that something sets: NFD's labels only while
        NFD runs (nfd.mode disabled leaves GPU nodes to nodes.selector and platform labels)."""
        return _gpu_node_selector(self.config, self.profile)

    @property
    def mig_manager_enabled(self) -> bool:
        return _mig_manager_enabled(self.config, self.profile)

    @property
    def mig_configs(self) -> mig.Configs:
        """Every MIG config the MIG manager knows: the built-in ones, then the user's."""
        return {**mig.builtin_configs(), **(self.user_mig_configs or {})}

    @property
    def pools(self) -> list[NodePool]:
        return list(self.config.nodes.pools)

    @property
    def driver_mode(self) -> str:
        mode = self.config.driver.mode
        return self.profile.facts.driver.default if mode == "auto" else mode

    @property
    def driver_container(self) -> bool:
        """The driver runs in a container that gpustack deploys (NVIDIA's driver image)."""
        return self.driver_mode in DRIVER_CONTAINER_MODES

    @property
    def driver_root(self) -> str:
        """Where the driver's files are on the host: every component's nvidiaDriverRoot."""
        return DRIVER_CONTAINER_ROOT if self.driver_container else self.facts.driver.root

    @property
    def dev_root(self) -> str:
        """Where the /dev holding the GPU device nodes is on the host. A driver container creates
        them under its root (k8s-device-plugin `--dev-root`: '/' or '/run/nvidia/driver');
        upstream defaults the dev root to the driver root (api/config/v1/config.go)."""
        if self.driver_container:
            return DRIVER_CONTAINER_ROOT
        return self.facts.driver.devRoot or self.facts.driver.root

    @property
    def node_os(self) -> str:
        """The GPU nodes' OS as `<os-release ID><VERSION_ID>`: the platform's for its version
        (OpenShift: RHCOS of `platform.openshiftVersion`), else `driver.nodeOS`. Load refuses a
        platform version the profile does not know (check_platform_os)."""
        by_version = self.facts.driver.nodeOS
        if by_version:
            return by_version[self.config.platform.openshiftVersion or ""]
        return self.config.driver.nodeOS

    @property
    def dra_enabled(self) -> bool:
        """NVIDIA's DRA driver runs (`gpuAllocation: dra`, the cluster's or some pool's)."""
        return "dra" in self.gpu_allocations

    @property
    def gpu_allocations(self) -> set[str]:
        """How pods get GPUs on some GPU node: `device-plugin`, `dra` or both (node pools)."""
        config = self.config
        return {config.gpuAllocation} | {config.pool_gpu_allocation(pool) for pool in self.pools}

    @property
    def smoke_test_allocation(self) -> str:
        """How the smoke test gets its GPU: as its first canary pool's nodes do, where it runs,
        else as the cluster's nodes do."""
        canaries = [pool for pool in self.pools if pool.canary]
        return self.config.pool_gpu_allocation(canaries[0] if canaries else None)

    @property
    def dra_gpus(self) -> bool:
        """The DRA driver allocates GPUs (its `gpus` kubelet plugin)."""
        return self.dra_enabled and self.config.dra.gpus.enabled

    @property
    def dra_compute_domains(self) -> bool:
        return self.dra_enabled and self.config.dra.computeDomains.enabled

    @property
    def resource_api_version(self) -> str:
        """The resource.k8s.io version of the DRA objects, pinned by the target Kubernetes
        version where the chart asks the live cluster."""
        return resource_api_version(self.config.platform.kubernetesVersion)

    @property
    def toolkit_enabled(self) -> bool:
        enabled = self.config.toolkit.enabled
        facts = self.facts.runtime.toolkit
        if enabled == "auto":
            return facts is not None and (self.driver_container or facts.required)
        return bool(enabled)

    @property
    def validator_enabled(self) -> bool:
        enabled = self.config.validator.enabled
        if enabled == "auto":
            return validator_finds_driver(self.config, self.profile)
        return bool(enabled)

    @property
    def device_list_strategy(self) -> list[str]:
        """How the device plugin hands GPUs to the runtime. `auto` with the toolkit: CDI through
        annotations and the CRI field both, as the GPU Operator sets DEVICE_LIST_STRATEGY
        (controllers/object_controls.go, v26.7.0): the CRI field (CDIDevices) reaches the
        runtime only from Kubernetes 1.29 (KEP-4009), the annotations on every version."""
        strategy = self.config.devicePlugin.deviceListStrategy
        if strategy == "auto":
            return ["cdi-annotations", "cdi-cri"] if self.toolkit_enabled else ["envvar"]
        return [strategy]

    @property
    def nvidia_plugin_serves(self) -> bool:
        """NVIDIA's device plugin advertises the GPUs as the `devicePlugin` section says:
        gpustack's DaemonSet, or the node OS's own plugin configured from `node/` (Bottlerocket).
        False where the platform's plugin (GKE's) reads its own settings."""
        return self.config.devicePlugin.enabled or self.facts.devicePluginProvider == "bottlerocket"

    @property
    def uses_cdi(self) -> bool:
        """GPUs reach containers as CDI devices, so the runtime must resolve them: the device
        plugin's CDI strategies, or the DRA driver, which hands out nothing but CDI devices
        (dra-driver-nvidia-gpu docs/prerequisites.md: "CDI enabled in your container runtime")."""
        if self.dra_enabled:
            return True
        return any(strategy.startswith("cdi") for strategy in self.device_list_strategy)

    @property
    def gpu_machine_config_pool(self) -> str | None:
        """The MachineConfigPool of the GPU nodes gpustack renders (`worker-gpu`), or None: not
        OpenShift, or gpustack's MachineConfigs target the whole worker pool."""
        if not self.facts.machineConfigOperator:
            return None
        pool = self.config.nodes.machineConfigPool
        return None if pool == "worker" else pool

    @property
    def machine_config_role(self) -> str:
        """The `machineconfiguration.openshift.io/role` of gpustack's MachineConfigs."""
        return self.gpu_machine_config_pool or "worker"

    @property
    def monitor(self) -> str:
        monitor = self.config.dcgmExporter.monitor
        return self.profile.facts.monitoring if monitor == "auto" else monitor

    @property
    def runtime_class_enabled(self) -> bool:
        enabled = self.config.runtimeClass.enabled
        if enabled == "auto":
            need = self.profile.facts.runtime.runtimeClass
            # With CDI the toolkit adds an `nvidia` runtime handler that the GPU stack's own pods
            # run under (gpu-operator assets/pre-requisites/0220_runtime_class_cdi.yaml).
            return need in ("required", "optional") or (need == "cdi-only" and self.toolkit_enabled)
        return bool(enabled)

    @property
    def runtime_class_name(self) -> str | None:
        """The runtimeClassName every GPU pod sets, or None when the default runtime serves."""
        return self.config.runtimeClass.name if self.runtime_class_enabled else None

    @property
    def smoke_test_enabled(self) -> bool:
        enabled = self.config.smokeTest.enabled
        if enabled == "auto":
            return self.config.gitops.tool != "none"
        return bool(enabled)

    @property
    def component_resources(self) -> dict[str, dict[str, dict[str, str]]]:
        """The `resources` the config sets, by the component label of the workloads they go to."""
        result: dict[str, dict[str, dict[str, str]]] = {}
        for name in type(self.config).model_fields:
            section = getattr(self.config, name)
            if isinstance(section, WithResources) and section.resources is not None:
                for component in section.components:
                    result[component] = section.resources.as_pod_spec()
        return result


def kubernetes_minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def resource_api_version(kubernetes_version: str) -> str:
    if kubernetes_minor(kubernetes_version) >= RESOURCE_API_V1_FROM:
        return "resource.k8s.io/v1"
    # Kubernetes 1.33 serves v1beta2, 1.32 v1beta1 (docs/prerequisites.md); the DRA driver is
    # refused below 1.34 (check_dra), so nothing renders with these.
    return (
        "resource.k8s.io/v1beta2"
        if kubernetes_minor(kubernetes_version) >= (1, 33)
        else ("resource.k8s.io/v1beta1")
    )


def _dra_serves_gpus(data: dict[str, Any]) -> bool:
    """Whether the merged config data asks the DRA driver for every GPU node's GPUs (before
    validation): the cluster's `gpuAllocation` is `dra` and no pool chooses the device plugin."""
    dra = data.get("dra")
    gpus = dra.get("gpus") if isinstance(dra, dict) else None
    enabled = gpus.get("enabled", True) if isinstance(gpus, dict) else True
    nodes = data.get("nodes")
    pools = nodes.get("pools") if isinstance(nodes, dict) else None
    plugin_pools = [
        pool
        for pool in (pools if isinstance(pools, list) else [])
        if isinstance(pool, dict) and pool.get("gpuAllocation") == "device-plugin"
    ]
    return data.get("gpuAllocation") == "dra" and enabled is not False and not plugin_pools


class _OverrideSource(SourceMap):
    """Where `--set` values come from: the option itself, each value as the user typed it."""

    def __init__(self, written: dict[tuple[str | int, ...], str]) -> None:
        where = Location("--set")
        paths = {path[:end] for path in written for end in range(1, len(path) + 1)}
        super().__init__("--set", dict.fromkeys(paths, where), dict.fromkeys(paths, where))
        self.typed = written

    def written(self, path: tuple[str | int, ...]) -> str | None:
        return self.typed.get(tuple(path))

    def nearest(self, path: tuple[str | int, ...]) -> Location:
        return Location("--set")


def overrides(assignments: list[str] | tuple[str, ...]) -> Layer | None:
    """`--set path=value` options as one config layer above the files (last one wins).

    A value is read as YAML, as if written in the file at that path (`replicas=8` a number,
    `enabled=false` a boolean, `kubernetesVersion="1.30"` a string), so it is typed and checked
    like the file, with the same messages. A key holding dots is written with `\\.`.
    """
    if not assignments:
        return None
    data: dict[str, Any] = {}
    written: dict[tuple[str | int, ...], str] = {}
    for assignment in assignments:
        path_text, equals, value = assignment.partition("=")
        path = tuple(part.replace("\0", ".") for part in path_text.replace("\\.", "\0").split("."))
        if path[0] == "extends":
            raise UserError(
                "extends cannot be set with --set: bases are files the config names",
                Location("--set"),
                "extends",
                hint="name the base in the config's extends:, or give another --set per field",
            )
        if not equals or not all(path):
            raise UserError(
                f"expected FIELD=VALUE, got {assignment!r}",
                Location("--set"),
                hint="e.g. --set devicePlugin.sharing.replicas=8",
            )
        try:
            parsed = load_text(value, "--set").data if value.strip() else None
        except UserError as problem:
            raise UserError(
                f"{value!r} is not a YAML value: {problem.message}",
                Location("--set"),
                ".".join(path),
            ) from None
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = parsed
        written[path] = value
    return Layer(data, _OverrideSource(written))


def load_stack(
    path: Path | None,
    profile_name: str | None = None,
    profiles_dir: Path | None = None,
    leave_out_inapplicable: bool = False,
    override: Layer | None = None,
    document: Document | None = None,
) -> Stack:
    """Load one cluster config (or the embedded example when `path` is None).

    `leave_out_inapplicable` (comparing one config on several profiles): a setting the profile
    refuses (e.g. `platform.openshiftVersion` on rke2) is left out, back to the profile's
    default, and named in `Stack.left_out`, instead of being an error. `override` (`--set`)
    goes above the file. `document`: the config already read (`gpustack import` checks the
    config it writes before writing it), standing for the file at `path`, which extends nothing.
    """
    if path is None:
        path = profile_store.data_dir("examples") / "kubeadm.yaml"
    layers = (
        _config_layers(path)
        if document is None
        else [Layer(document.data, document.source, (), path.parent, path)]
    )
    file_layer = layers[-1]
    if override is not None:
        layers.append(override)
    combined = merge_layers(layers)
    _check_is_config(combined, file_layer)
    platform = combined.get("platform")
    name = profile_name or (platform.get("profile") if isinstance(platform, dict) else None)
    if not isinstance(name, str):
        top = layers[-1]
        raise UserError(
            "required field missing",
            locate(layers, ("platform", "profile")) or top.source.nearest(()),
            field="platform.profile",
            hint=f"one of: {', '.join(profile_store.available(profiles_dir))}",
        )
    # Where the profile was named is looked up only when it is unknown (positions cost a parse).
    known = profile_store.exists(name, profiles_dir)
    profile, profile_layer = profile_store.load(
        name,
        profiles_dir,
        None
        if known
        else Location("--profile")
        if profile_name
        else locate(layers, ("platform", "profile")),
    )
    if profile_name:
        combined = merge(combined, {"platform": {"profile": profile_name}})
    all_layers = [profile_layer, *layers]
    patch_entries = _patch_entries(layers)
    merged = merge(profile_layer.data, combined)
    if (
        _dra_serves_gpus(merged)
        and isinstance(merged.get("devicePlugin"), dict)
        and not _set_by_user(all_layers, ("devicePlugin", "enabled"))
    ):
        # The DRA driver takes the GPUs: the profile's device plugin gives way (both on one
        # node over-admit GPUs; a plugin the user asks for is refused in check_dra).
        merged = merge(merged, {"devicePlugin": {"enabled": False}})
    if patch_entries:
        merged["patches"] = [entry for entry, _, _ in patch_entries]
    config = validate(GPUStack, merged, all_layers)
    left_out: list[tuple[str, str]] = []
    while True:
        try:
            _check_against_profile(config, profile, all_layers)
            _check_gke_node_pool(config, profile, all_layers)
            _check_aks_node_pool(config, profile, all_layers)
            _check_eks_node_group(config, profile, all_layers)
            break
        except UserError as problem:
            done = {field for field, _ in left_out}
            if not leave_out_inapplicable or problem.field is None or problem.field in done:
                raise
            merged = _without(merged, tuple(problem.field.split(".")), profile_layer.data)
            left_out.append((problem.field, problem.message))
            config = validate(GPUStack, merged, all_layers)
    pem, mode = _read_pem(config, all_layers) if config.entitlement.enabled else (None, None)
    user_mig_configs = (
        _read_mig_configs(config, all_layers) if config.migManager.config.file else None
    )
    _check_mig_manager(config, profile, all_layers, user_mig_configs)
    _check_pools(config, profile, all_layers)
    read_patches = tuple(
        patch for entry, layer, index in patch_entries for patch in _read_patch(entry, layer, index)
    )
    return Stack(
        config,
        profile,
        display_path(path),
        pem,
        user_mig_configs=user_mig_configs,
        left_out=tuple(left_out),
        entitlement_mode=mode,
        patches=read_patches,
    )


class _PatchList(Strict):
    """One layer's `patches:`, validated on its own so that errors point into that layer."""

    patches: list[PatchEntry]


def _patch_entries(layers: list[Layer]) -> list[tuple[Any, Layer, int]]:
    """Every layer's `patches:` entries in order (bases first): patches add up, where other
    lists in a config replace the base's."""
    entries: list[tuple[Any, Layer, int]] = []
    for layer in layers:
        value = layer.data.get("patches")
        if value is None:
            continue
        validate(_PatchList, {"patches": value}, [layer])
        entries += [(entry, layer, index) for index, entry in enumerate(value)]
    return entries


def _read_patch(entry: Any, layer: Layer, index: int) -> list[patching.Patch]:
    """The patch documents of one `patches:` entry, each with where it was written."""
    model = PatchEntry.model_validate(entry)
    where = (*layer.prefix, "patches", index)
    location = layer.source.value((*where, "path" if model.path else "patch")) or (
        layer.source.nearest(where)
    )
    if model.path is not None:
        base = layer.directory if layer.directory else Path.cwd()
        file = base / model.path
        try:
            text = decode(read_bounded(file, what="a patch file", location=location), str(file))
            documents = [d for d in load_all_text(text, display_path(file)) if d.data is not None]
        except UserError as error:
            if error.message.endswith("file not found"):
                error = UserError(f"patch file {display_path(file)} not found", location)
            elif error.location is not None and error.location.line:
                # The file may be anything: named with the place, never quoted.
                error = UserError(
                    "not valid YAML, expected a patch; its content is not shown", error.location
                )
            raise UserError(error.message, error.location, f"patches.{index}.path") from None
        found = [(d.data, d.source.nearest(())) for d in documents]
    else:
        try:
            documents = [
                d for d in load_all_text(model.patch or "", str(location)) if d.data is not None
            ]
        except UserError as error:
            raise UserError(
                f"the patch is not valid YAML: {error.message}",
                location,
                f"patches.{index}.patch",
            ) from None
        found = [(d.data, location) for d in documents]
    if not found:
        raise UserError("the patch is empty", location, f"patches.{index}")
    target = _patch_target(model, layer, where)
    return [_one_patch(body, at, target, model.path is not None, index) for body, at in found]


def _patch_target(
    model: PatchEntry, layer: Layer, where: tuple[str | int, ...]
) -> tuple[patching.Target | None, dict[str, Any]]:
    if model.target is None:
        return None, {}
    target = patching.Target(**model.target.model_dump())
    regexes = {}
    for key in ("group", "version", "kind", "name", "namespace"):
        pattern = getattr(target, key)
        if pattern is None:
            continue
        field = f"patches.{where[-1]}.target.{key}"
        try:
            regexes[key] = linear_regex(pattern, field)
        except UserError as error:
            raise UserError(
                error.message, layer.source.nearest((*where, "target", key)), field, error.hint
            ) from None
    for key in ("labelSelector", "annotationSelector"):
        selector = getattr(target, key)
        if selector is None:
            continue
        try:
            patching.parse_selector(selector)
        except ValueError as problem:
            raise UserError(
                f"not a Kubernetes label selector: {problem}",
                layer.source.nearest((*where, "target", key)),
                f"patches.{where[-1]}.target.{key}",
                hint="e.g. `app=nvidia-device-plugin,tier in (gpu)` or `!example.com/skip`",
            ) from None
    return target, regexes


def _one_patch(
    body: Any,
    location: Location,
    target: tuple[patching.Target | None, dict[str, Any]],
    from_file: bool,
    index: int,
) -> patching.Patch:
    selector, regexes = target
    field = f"patches.{index}"
    if isinstance(body, list):
        # kustomize: a list is a JSON 6902 patch, which needs a target.
        if not all(isinstance(op, dict) and isinstance(op.get("op"), str) for op in body):
            raise UserError(
                "a JSON 6902 patch is a list of operations, each a mapping with `op` and `path`",
                location,
                field,
            )
        if selector is None:
            raise UserError(
                "a JSON 6902 patch needs a target (the objects it applies to)",
                location,
                field,
                hint="add target: {kind: DaemonSet, name: nvidia-device-plugin}",
            )
    elif isinstance(body, dict):
        meta = body.get("metadata")
        if selector is None and not (
            isinstance(body.get("apiVersion"), str)
            and isinstance(body.get("kind"), str)
            and isinstance(meta, dict)
            and isinstance(meta.get("name"), str)
        ):
            raise UserError(
                "a strategic-merge patch without a target names its object: apiVersion, kind "
                "and metadata.name (and metadata.namespace)",
                location,
                field,
                hint="or give target: {kind: ..., name: ...}",
            )
    else:
        raise UserError(
            "a patch is a mapping (strategic merge) or a list of operations (JSON 6902)",
            location,
            field,
        )
    return patching.Patch(body, location, selector, from_file, regexes)


def _without(data: dict[str, Any], path: tuple[str, ...], defaults: Any) -> dict[str, Any]:
    """`data` with the value at `path` back to the one in `defaults`, or removed."""
    head, *rest = path
    result = dict(data)
    default = defaults.get(head) if isinstance(defaults, dict) else None
    if rest and isinstance(result.get(head), dict):
        result[head] = _without(result[head], tuple(rest), default)
    elif default is not None:
        result[head] = default
    else:
        result.pop(head, None)
    return result


def _check_is_config(data: dict[str, Any], top: Layer) -> None:
    """Refuse a file that is not a gpustack config at all (a Kubernetes manifest, some other
    tool's YAML) before its fields are judged as a config's."""
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if kind == "GPUStack" or (isinstance(api_version, str) and api_version.startswith("gpustack.")):
        return
    if isinstance(kind, str) and closest(kind, ["GPUStack"]):
        return  # a typo of GPUStack: the field error suggests the fix
    found = f"its kind is {describe(kind)}" if kind is not None else "it has no kind"
    hint = "a config has apiVersion: gpustack.dev/v1alpha1 and kind: GPUStack; `gpustack init` writes one"
    if kind is not None and api_version is not None:
        hint += "; `gpustack validate` checks Kubernetes manifests"
    raise UserError(
        f"not a gpustack config: {found}, not GPUStack",
        top.source.value(("kind",)) or top.source.nearest(()),
        hint=hint,
    )


def read_document(path: Path) -> Document:
    """A config file, parsed once per process however many configs of a fleet extend it.

    Callers treat the result as read-only (merge() copies what it changes).
    """
    try:
        stat = path.stat()
    except OSError:
        return load_file(path)  # reports the problem exactly as an uncached read does
    return _read_unchanged(os.path.abspath(path), stat.st_mtime_ns, stat.st_size, os.getcwd())


@cache  # a bounded cache would evict a large fleet's files before rendering
def _read_unchanged(path: str, mtime_ns: int, size: int, cwd: str) -> Document:
    # mtime and size in the key: an edited file is read again; cwd: positions name the file as
    # the user would type it from there.
    return load_file(Path(path))


# A config path of `-` reads the config from standard input (bases relative to the working folder).
STDIN = "-"
_stdin: list[tuple[Any, Document]] = []  # read once per stdin: diff may load a config twice


def _stdin_document() -> Document:
    for stream, document in _stdin:
        if stream is sys.stdin:
            return document
    text = sys.stdin.read(MAX_FILE_BYTES + 1)
    if len(text.encode("utf-8", errors="replace")) > MAX_FILE_BYTES:
        raise UserError(
            f"standard input holds more than {MAX_FILE_BYTES} bytes; a config may have at most "
            "1 MiB",
            Location("<stdin>"),
        )
    document = load_text(text, "<stdin>")
    _stdin[:] = [(sys.stdin, document)]
    return document


def bases(path: Path) -> set[Path]:
    """The (resolved) files `path` extends, directly or not; a missing or cyclic base raises."""
    return {real_path(layer.path) for layer in _config_layers(path)[:-1] if layer.path}


@dataclass(frozen=True)
class Inputs:
    """What a cluster config reads, found from its `extends:` chain without validating or
    rendering it (gpustack.changes maps changed files to the clusters they affect)."""

    name: str | None  # metadata.name, when the layers give one
    profile: str | None  # platform.profile, when the layers give one
    files: frozenset[Path]  # resolved: the config, its bases, PEMs, MIG configs, patch files


def inputs(path: Path) -> Inputs:
    """The files `path` reads and its cluster's name and profile, as far as its layers say. A
    path setting is taken from every layer that writes it (only the last counts in a render):
    more files than needed, never fewer."""
    layers = _config_layers(path)
    files = {real_path(layer.path) for layer in layers if layer.path}
    name = profile = None
    for layer in layers:
        data, directory = layer.data, layer.directory or Path.cwd()
        named = _at(data, ("metadata", "name"))
        name = named if isinstance(named, str) else name
        chosen = _at(data, ("platform", "profile"))
        profile = chosen if isinstance(chosen, str) else profile
        read = [_at(data, ("entitlement", "pemFile")), _at(data, ("migManager", "config", "file"))]
        patches = data.get("patches")
        if isinstance(patches, list):
            read += [entry.get("path") for entry in patches if isinstance(entry, dict)]
        files |= {
            real_path(directory / each)
            for each in read
            if isinstance(each, str) and each and "\x00" not in each
        }
    return Inputs(name, profile, frozenset(files))


def _at(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _config_layers(path: Path) -> list[Layer]:
    """The files `path` extends, bases first, then `path` itself.

    `extends:` is one path or a list of paths, applied in order (a later base overrides an
    earlier one, the file overrides them all); each base may extend others in turn.
    """
    chain: list[Layer] = []
    _add_layers(path, chain, [], None)
    return chain


Reference = tuple[
    Document, tuple[str | int, ...]
]  # the file and the `extends:` entry naming a base


def _add_layers(
    current: Path, chain: list[Layer], seen: list[Path], referencing: Reference | None
) -> None:
    resolved = real_path(current)
    if resolved in seen:
        cycle = " -> ".join(display_path(p) for p in [*seen, resolved])
        raise UserError(
            f"extends forms a cycle: {cycle}", _extends_at(referencing), field="extends"
        )
    if len(seen) >= _MAX_EXTENDS_DEPTH:
        raise UserError("extends chain is too long", _extends_at(referencing), field="extends")
    if len(chain) >= MAX_LAYERS:
        raise UserError(
            f"extends applies more than {MAX_LAYERS} bases in all (counting each time a base is "
            "named, also through other bases)",
            _extends_at(referencing),
            field="extends",
            hint="name each base once; a base that several bases share needs naming only once",
        )
    try:
        document = _stdin_document() if str(current) == STDIN else read_document(current)
    except UserError as error:
        if referencing and error.message == "file not found":
            raise UserError(
                f"base config {display_path(current)} not found",
                _extends_at(referencing),
                field="extends",
            ) from None
        if referencing and (error.location is None or not error.location.line):
            # A problem with the file as a whole (a folder, a FIFO, too large): say so where
            # `extends:` names it.
            raise UserError(
                f"base config {display_path(current)}: {error.message}",
                _extends_at(referencing),
                field="extends",
            ) from None
        raise
    if document.data is None:
        raise UserError(
            "file is empty, expected a GPUStack config",
            document.source.nearest(()),
            hint="`gpustack init` writes a commented starter config",
        )
    if not isinstance(document.data, dict):
        # Named, never quoted: the file may be anything (a PEM named by mistake).
        raise UserError(
            "expected a GPUStack config (a mapping with apiVersion, kind, metadata, ...), "
            f"found {_kind_of_value(document.data)}",
            document.source.nearest(()),
        )
    if referencing is not None:
        _check_is_base(document, current, referencing)
    extends = document.data.get("extends")
    entries: list[tuple[Any, tuple[str | int, ...]]] = (
        [(item, ("extends", index)) for index, item in enumerate(extends)]
        if isinstance(extends, list)
        else []
        if extends is None
        else [(extends, ("extends",))]
    )
    if isinstance(extends, list) and not extends:
        raise UserError(
            "must name at least one base config", document.source.value(("extends",)), "extends"
        )
    for entry, where in entries:
        if not isinstance(entry, str) or not entry:
            problem = "must be a path to a base config, or a list of them"
        elif "\x00" in entry:
            problem = "a file name cannot contain a NUL byte"
        elif not entry.endswith(CONFIG_SUFFIXES):
            problem = "must name a YAML config file (.yaml or .yml)"
        else:
            continue
        # Positions only for the error: a fast read finds them by parsing the file again.
        at = document.source.value(where) or document.source.value(("extends",))
        raise UserError(problem, at, ".".join(str(part) for part in where))
    named = [real_path(current.parent / entry) for entry, _ in entries]
    for index, (entry, where) in enumerate(entries):
        if named[index] in named[:index]:
            raise UserError(
                f"names the base {entry} a second time; each base is applied once",
                document.source.value(where) or document.source.value(("extends",)),
                ".".join(str(part) for part in where),
            )
    for entry, where in entries:
        _add_layers(current.parent / entry, chain, [*seen, resolved], (document, where))
    chain.append(Layer(document.data, document.source, (), current.parent, current))


CONFIG_SUFFIXES = (".yaml", ".yml")
_CONFIG_FIELDS = frozenset(field.alias or name for name, field in GPUStack.model_fields.items()) | {
    "extends"
}


def _check_is_base(document: Document, path: Path, referencing: Reference) -> None:
    """A file `extends:` names must look like a gpustack config before any of it is judged as
    one: an `extends:` may name any YAML file on the machine (a kubeconfig, an agent config with
    a token), and a field error would quote its keys and values."""
    data = document.data
    kind, api_version = data.get("kind"), data.get("apiVersion")
    foreign = (
        (kind is not None and kind != "GPUStack")
        or (api_version is not None and not str(api_version).startswith("gpustack."))
        or not (set(data) & _CONFIG_FIELDS)
    )
    if foreign:
        raise UserError(
            f"base config {display_path(path)} is not a gpustack config (its kind, apiVersion or "
            "fields are another file's); its content is not shown",
            _extends_at(referencing),
            field="extends",
        )


def _kind_of_value(value: Any) -> str:
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return describe(value) if isinstance(value, list) or value is None else "a value"


def _extends_at(referencing: Reference | None) -> Location | None:
    # Positions are looked up only for an error: the fast reader finds them on demand.
    if referencing is None:
        return None
    document, where = referencing
    return document.source.value(where) or document.source.value(("extends",))


def _check_against_profile(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    facts = profile.facts
    name = profile.metadata.name
    if config.driver.mode != "auto" and config.driver.mode not in facts.driver.modes:
        shipped = (
            f": {facts.driver.nodeImage} ships the driver, and a second one cannot load beside it"
            if facts.driver.nodeImage
            else ""
        )
        raise UserError(
            f"driver mode {config.driver.mode!r} is not available on profile {name!r}{shipped}",
            nearest(layers, ("driver", "mode")),
            field="driver.mode",
            hint=f"allowed: auto, {', '.join(facts.driver.modes)}",
        )
    if config.entitlement.enabled and not facts.machineConfigOperator:
        raise UserError(
            f"entitlement MachineConfigs exist only on OpenShift, not on profile {name!r}",
            nearest(layers, ("entitlement", "enabled")),
            field="entitlement.enabled",
            hint="remove the entitlement section or use profile 'openshift'",
        )
    if not facts.machineConfigOperator and _set_by_user(layers, ("nodes", "machineConfigPool")):
        raise UserError(
            f"MachineConfigPools exist only on OpenShift, not on profile {name!r}",
            nearest(layers, ("nodes", "machineConfigPool")),
            field="nodes.machineConfigPool",
            hint="remove nodes.machineConfigPool or use profile 'openshift'",
        )
    if config.platform.openshiftVersion and not facts.machineConfigOperator:
        raise UserError(
            f"platform.openshiftVersion applies only to OpenShift, not to profile {name!r}",
            nearest(layers, ("platform", "openshiftVersion")),
            field="platform.openshiftVersion",
        )
    if config.devicePlugin.enabled and facts.devicePluginProvider == "gke":
        # NVIDIA's plugin on GKE works only as NVIDIA's GKE guide sets it up (cloud-native-docs
        # google-gke.rst): the Container Toolkit installed into /home/kubernetes/bin/nvidia and
        # CDI, driver root /home/kubernetes/bin/nvidia, dev root /. Without the toolkit the plugin
        # defaults its dev root to the driver root (api/config/v1/config.go), hands out device
        # nodes that do not exist, and GPU pods get no driver libraries.
        raise UserError(
            "NVIDIA's device plugin on GKE needs the NVIDIA Container Toolkit with CDI "
            "(NVIDIA's GKE guide), which gpustack does not deploy on GKE; GKE's own device "
            "plugin serves nvidia.com/gpu there",
            nearest(layers, ("devicePlugin", "enabled")),
            field="devicePlugin.enabled",
            hint="set devicePlugin.enabled: false, or install the GPU Operator as NVIDIA's GKE "
            "guide describes",
        )
    if config.devicePlugin.enabled and facts.devicePluginProvider == "bottlerocket":
        # Bottlerocket runs NVIDIA's plugin as a host service on every NVIDIA variant
        # (bottlerocket-core-kit packages/nvidia-k8s-device-plugin): a DaemonSet would register
        # a second plugin for nvidia.com/gpu with the same kubelet.
        raise UserError(
            f"Bottlerocket's NVIDIA variants run NVIDIA's device plugin as a host service; a "
            f"device plugin DaemonSet on profile {name!r} would advertise every GPU a second "
            "time",
            nearest(layers, ("devicePlugin", "enabled")),
            field="devicePlugin.enabled",
            hint="set devicePlugin.enabled: false; the plugin's settings (sharing, MIG, device "
            "list strategy) go to the Bottlerocket settings gpustack writes in node/",
        )
    if not _gpu_node_selector(config, profile) and not config.nodes.selector:
        nfd_labels = ", ".join(item.key for item in facts.gpuNodeSelector)
        raise UserError(
            f"with nfd.mode disabled nothing sets {nfd_labels}, the label profile {name!r} "
            "finds GPU nodes by, so GPU workloads would have no way to find GPU nodes",
            nearest(layers, ("nfd", "mode")),
            field="nfd.mode",
            hint="put a label your GPU nodes carry in nodes.selector (the node/ files apply "
            "it where gpustack writes them), or set nfd.mode: deploy or external",
        )
    handlers = facts.runtime.providedHandlers
    if handlers and config.runtimeClass.handler not in handlers:
        raise UserError(
            f"profile {name!r} configures its runtime's nvidia handlers itself "
            f"({', '.join(handlers)}): no runtime named {config.runtimeClass.handler!r} "
            "would exist, and every GPU pod would fail to start",
            nearest(layers, ("runtimeClass", "handler")),
            field="runtimeClass.handler",
            hint=f"set runtimeClass.handler to one of {', '.join(handlers)}; a runtime of your "
            f"own (a containerd template on the nodes) needs a profile that extends {name!r} "
            "and lists it in facts.runtime.providedHandlers",
        )
    _check_toolkit(config, profile, layers)
    check_dra(config, profile, layers)
    _check_validator(config, profile, layers)
    _check_node_status_exporter(config, profile, layers)
    _check_platform_os(config, profile, layers)
    _check_os_sku(config, profile, layers)


def _check_os_sku(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """A driver container on a platform whose pools are made from OS SKUs (AKS): the image is
    built for driver.nodeOS, so some pool OS must run it."""
    skus = profile.facts.driver.osSkus
    if not skus or not Stack(config, profile, "").driver_container:
        return
    if config.driver.nodeOS not in skus:
        raise UserError(
            f"profile {profile.metadata.name!r} has no node pool OS that runs "
            f"{config.driver.nodeOS}, which the driver container is built for",
            nearest(layers, ("driver", "nodeOS")),
            field="driver.nodeOS",
            hint=f"one of {', '.join(skus)}",
        )
    offered = profile.facts.driver.osSkuKubernetesVersions.get(config.driver.nodeOS)
    version = kubernetes_minor(config.platform.kubernetesVersion)
    if offered and not (
        kubernetes_minor(offered.first) <= version <= kubernetes_minor(offered.last)
    ):
        others = [
            node_os
            for node_os, span in profile.facts.driver.osSkuKubernetesVersions.items()
            if node_os in skus
            and kubernetes_minor(span.first) <= version <= kubernetes_minor(span.last)
        ]
        raise UserError(
            f"profile {profile.metadata.name!r} offers the node pool OS SKU "
            f"{skus[config.driver.nodeOS]} of {config.driver.nodeOS} for Kubernetes "
            f"{offered.first} to {offered.last}, not {config.platform.kubernetesVersion}: "
            "the pool command would be refused",
            nearest(layers, ("driver", "nodeOS")),
            field="driver.nodeOS",
            hint=f"driver.nodeOS: {' or '.join(others)}"
            if others
            else "a platform.kubernetesVersion the OS SKU is offered for",
        )


def _check_platform_os(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """A driver container on a platform whose node OS follows its version (OpenShift): the
    version must be one the profile knows, and NVIDIA must publish the driver for that OS."""
    facts = profile.facts.driver
    stack = Stack(config, profile, "")
    if not facts.nodeOS or not stack.driver_container:
        return
    name = profile.metadata.name
    version = config.platform.openshiftVersion
    known = sorted(facts.nodeOS, key=lambda v: tuple(int(part) for part in v.split(".")))
    if version not in facts.nodeOS:
        raise UserError(
            f"profile {name!r} does not know the node OS of OpenShift {version}, which picks the "
            "driver image"
            if version
            else f"the driver image on profile {name!r} follows platform.openshiftVersion",
            nearest(layers, ("platform", "openshiftVersion")),
            field="platform.openshiftVersion",
            hint=f"one of {known[0]} to {known[-1]}; for another release, a profile of your own "
            f"that extends {name!r} with its facts.driver.nodeOS (`cat /etc/os-release` on a "
            "node: ID and VERSION_ID)",
        )
    published = facts.publishedImages
    tag = driver_os_tag(stack.node_os)
    driver = config.driver.version
    if published and driver in published.drivers and tag not in published.osTags:
        served = [v for v in known if driver_os_tag(facts.nodeOS[v]) in published.osTags]
        upgrade = f"upgrade to OpenShift {served[0]} or later, " if served else ""
        raise UserError(
            f"NVIDIA publishes no driver {driver} image for OpenShift {version} "
            f"(nvcr.io/nvidia/driver:{driver}-{tag}): its tags for this platform are "
            f"{', '.join(published.osTags)}"
            + (f" (OpenShift {served[0]} to {served[-1]})" if served else ""),
            nearest(layers, ("platform", "openshiftVersion")),
            field="platform.openshiftVersion",
            hint=f"{upgrade}set driver.version to a driver whose NGC nvidia/driver tags include "
            f"-{tag}, or install the driver on the nodes (driver.mode: preinstalled)",
        )


def _check_toolkit(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    facts = profile.facts
    name = profile.metadata.name
    if config.toolkit.enabled is True and facts.runtime.toolkit is None:
        shipped = (
            f": {facts.driver.nodeImage} ships it and configures the runtime"
            if facts.driver.nodeImage
            else ""
        )
        raise UserError(
            f"gpustack does not deploy the NVIDIA Container Toolkit on profile {name!r}{shipped}",
            nearest(layers, ("toolkit", "enabled")),
            field="toolkit.enabled",
            hint="set toolkit.enabled: auto",
        )
    stack = Stack(config, profile, "")
    if stack.driver_container and not stack.toolkit_enabled:
        raise UserError(
            "a driver container needs the NVIDIA Container Toolkit DaemonSet: only it points the "
            f"container runtime at the driver in {DRIVER_CONTAINER_ROOT}",
            nearest(layers, ("toolkit", "enabled")),
            field="toolkit.enabled",
            hint="set toolkit.enabled to auto or true",
        )
    if (
        facts.runtime.providedHandlers
        and facts.runtime.toolkit is not None
        and stack.toolkit_enabled
        and not stack.runtime_class_enabled
    ):
        # k3s (and RKE2, which runs k3s' agent) adds the nvidia runtimes it finds when it
        # starts, and refuses to start at all while its `default-runtime` names one it did not
        # find (k3s-io/k3s pkg/agent/containerd/config_linux.go SetupContainerdConfig: "default
        # runtime %s was not found"). The toolkit DaemonSet installs the runtime only once the
        # node runs pods: with `default-runtime: nvidia` in its agent config the node would
        # never start, and without it GPU pods naming no RuntimeClass run under runc.
        raise UserError(
            f"on profile {name!r} the toolkit DaemonSet's nvidia runtime can't be containerd's "
            "default: the node's agent refuses to start while its `default-runtime` names a "
            "runtime it has not found, and that runtime exists only once the toolkit's pod has "
            "run on the node, so GPU pods need the RuntimeClass",
            nearest(layers, ("runtimeClass", "enabled")),
            field="runtimeClass.enabled",
            hint="set runtimeClass.enabled: auto; or install the NVIDIA Container Toolkit on "
            "the hosts before the agent starts (driver.mode: preinstalled), and node/ makes "
            "nvidia the default runtime",
        )
    if config.driver.rhcosBuilds and stack.driver_mode != "driver-toolkit":
        raise UserError(
            f"driver.rhcosBuilds is for driver.mode driver-toolkit (OpenShift); the driver mode "
            f"here is {stack.driver_mode}, which would ignore it",
            nearest(layers, ("driver", "rhcosBuilds")),
            field="driver.rhcosBuilds",
            hint="remove driver.rhcosBuilds, or set driver.mode: driver-toolkit",
        )
    if (config.driver.rhcosBuilds or config.driver.rhcosVersion) and config.nfd.mode == "disabled":
        field = "rhcosBuilds" if config.driver.rhcosBuilds else "rhcosVersion"
        raise UserError(
            "a driver DaemonSet per RHCOS build selects its nodes by NFD's "
            "system-os_release.OSTREE_VERSION label, which nothing sets with nfd.mode disabled",
            nearest(layers, ("driver", field)),
            field=f"driver.{field}",
            hint="set nfd.mode to deploy or external (OpenShift: the NFD operator)",
        )
    pinned = config.driver.driverToolkitImage or config.driver.rhcosBuilds
    if stack.driver_mode == "driver-toolkit" and not pinned:
        if not facts.driver.driverToolkitImage:
            raise UserError(
                f"profile {name!r} names no default Driver Toolkit image",
                nearest(layers, ("driver", "mode")),
                field="driver.driverToolkitImage",
                hint="set driver.rhcosBuilds (or driver.driverToolkitImage)",
            )
        version = config.platform.openshiftVersion or ""
        if version and tuple(int(part) for part in version.split(".")) < (4, 13):
            raise UserError(
                f"OpenShift {version}: the default Driver Toolkit image is RHEL 9 based (4.13 and "
                "later); earlier releases need the cluster's own",
                nearest(layers, ("driver", "mode")),
                field="driver.driverToolkitImage",
                hint="set driver.driverToolkitImage to `oc adm release info "
                "--image-for=driver-toolkit`",
            )


# The driver's checks of its own gates at start (pkg/featuregates/featuregates.go
# ValidateFeatureGates, v0.4.1): a gate that needs another, and gates that exclude each other.
DRA_GATE_NEEDS = {
    "ComputeDomainCliques": "IMEXDaemonsWithDNSNames",
    "DeviceMetadata": "PassthroughSupport",
}
DRA_GATES_EXCLUSIVE = (
    ("DynamicMIG", "PassthroughSupport"),
    ("DynamicMIG", "NVMLDeviceHealthCheck"),
    ("DynamicMIG", "MPSSupport"),
    ("PassthroughSupport", "NVMLDeviceHealthCheck"),
)
# The driver's gates on by default (featuregates.go defaultFeatureGates, Beta, v0.4.1).
DRA_GATES_ON_BY_DEFAULT = (
    "IMEXDaemonsWithDNSNames",
    "ComputeDomainCliques",
    "CrashOnNVLinkFabricErrors",
)
# Kubernetes feature gates a driver gate needs, and the first Kubernetes version that turns them
# on by default: DynamicMIG publishes partitionable devices (SharedCounters, ConsumesCounters),
# which kube-apiserver and kube-scheduler drop without DRAPartitionableDevices, on by default
# from 1.36 (site/content/docs/reference/feature-gates.md; hack/ci/lambda/e2e-test.sh, v0.4.1).
DRA_GATE_NEEDS_CLUSTER = {"DynamicMIG": ("DRAPartitionableDevices", (1, 36))}


def dra_gate_enabled(config: GPUStack, gate: str) -> bool:
    """Whether a driver feature gate is on: as the config sets it, else the driver's default."""
    gates = {str(key): value for key, value in config.dra.featureGates.items()}
    return gates.get(gate, gate in DRA_GATES_ON_BY_DEFAULT)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _dra_choice(config: GPUStack) -> tuple[str | int, ...]:
    """Where the config chooses the DRA driver: the cluster's `gpuAllocation`, else the first
    pool that does."""
    if config.gpuAllocation == "dra":
        return ("gpuAllocation",)
    index = next(
        index
        for index, pool in enumerate(config.nodes.pools)
        if config.pool_gpu_allocation(pool) == "dra"
    )
    return ("nodes", "pools", index, "gpuAllocation")


def check_dra(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """What NVIDIA's DRA driver cannot do on this cluster is refused before anything renders."""
    stack = Stack(config, profile, "")
    if not stack.dra_enabled:
        return
    name = profile.metadata.name
    dra = config.dra
    version = config.platform.kubernetesVersion
    choice = _dra_choice(config)
    chosen = ".".join(str(part) for part in choice)
    mixed = stack.gpu_allocations == {"device-plugin", "dra"}
    if profile.facts.devicePluginProvider == "bottlerocket":
        _check_bottlerocket_dra(config, layers, choice)
    elif profile.facts.devicePluginProvider != "nvidia":
        raise UserError(
            f"the platform's own device plugin serves nvidia.com/gpu on every GPU node of profile "
            f"{name!r}: with the DRA driver beside it the GPUs would be handed out twice",
            nearest(layers, choice),
            field=chosen,
            hint=f"set {chosen}: device-plugin; DRA needs nodes without the platform's device "
            "plugin",
        )
    if kubernetes_minor(version) < DRA_MINIMUM_KUBERNETES:
        first_version = ".".join(map(str, DRA_MINIMUM_KUBERNETES))
        raise UserError(
            f"NVIDIA's DRA driver {dra.version} needs Kubernetes {first_version}.2 or later (DRA is "
            f"GA and on by default from {first_version}, resource.k8s.io/v1); the target is "
            f"{version}" + (f" and {chosen} is dra" if choice != ("gpuAllocation",) else ""),
            nearest(layers, ("platform", "kubernetesVersion")),
            field="platform.kubernetesVersion",
            hint=f'upgrade to Kubernetes {first_version} (platform.kubernetesVersion: "{first_version}"), '
            f"or set {chosen}: device-plugin",
        )
    if dra.gpus.enabled and config.devicePlugin.enabled and not mixed:
        raise UserError(
            "the device plugin and the DRA driver would both hand out the GPUs of the same "
            "nodes: each counts them free, so pods would be admitted to GPUs the other has "
            "already given away (the chart refuses it until KEP-5004 is GA)",
            nearest(layers, ("devicePlugin", "enabled")),
            field="devicePlugin.enabled",
            hint="remove devicePlugin.enabled (gpuAllocation: dra turns the plugin off), or set "
            "dra.gpus.enabled: false to run the DRA driver for ComputeDomains only",
        )
    if not dra.gpus.enabled and not stack.nvidia_plugin_serves:
        raise UserError(
            "with dra.gpus.enabled false and no device plugin, nothing hands GPUs to pods",
            nearest(layers, ("dra", "gpus", "enabled")),
            field="dra.gpus.enabled",
            hint="set dra.gpus.enabled: true, or devicePlugin.enabled: true for GPUs with "
            "the DRA driver serving ComputeDomains only",
        )
    if not dra.gpus.enabled and not dra.computeDomains.enabled:
        raise UserError(
            "gpuAllocation dra with neither dra.gpus nor dra.computeDomains enabled renders "
            "nothing of the DRA driver",
            nearest(layers, ("dra", "gpus", "enabled")),
            field="dra.gpus.enabled",
            hint="enable one of them, or set gpuAllocation: device-plugin",
        )
    _check_pool_allocation(config, layers, mixed=mixed, plugin_serves=stack.nvidia_plugin_serves)
    _check_dra_gates(config, layers)
    if stack.driver_container:
        known_driver = _version_tuple(config.driver.version)
        for feature, minimum in DRA_MINIMUM_DRIVER.items():
            if getattr(dra, feature).enabled and known_driver < _version_tuple(minimum):
                raise UserError(
                    f"dra.{feature} needs NVIDIA driver {minimum} or later; driver.version is "
                    f"{config.driver.version}",
                    nearest(layers, ("driver", "version")),
                    field="driver.version",
                    hint=f"set driver.version to {minimum} or later, or "
                    f"dra.{feature}.enabled: false",
                )
    if stack.smoke_test_allocation == "dra" and dra.gpus.enabled and config.smokeTest.resource:
        raise UserError(
            "with the DRA driver the smoke test claims a GPU of DeviceClass gpu.nvidia.com; "
            "nothing advertises an extended resource to request",
            nearest(layers, ("smokeTest", "resource")),
            field="smokeTest.resource",
            hint="remove smokeTest.resource",
        )


def _check_bottlerocket_dra(
    config: GPUStack, layers: list[Layer], choice: tuple[str | int, ...]
) -> None:
    """Bottlerocket's NVIDIA variants run NVIDIA's device plugin as a host service on every node;
    only a release that can turn it off (`enabled = false` in the node settings, which gpustack
    writes for the DRA nodes) may run the DRA driver."""
    chosen = ".".join(str(part) for part in choice)
    group = config.nodes.eks
    version = group.bottlerocketVersion if group else None
    first = ".".join(map(str, bottlerocket.PLUGIN_OFF_FROM))
    if version is None or _version_tuple(version) < bottlerocket.PLUGIN_OFF_FROM:
        raise UserError(
            "Bottlerocket runs NVIDIA's device plugin on every GPU node as a host service; with "
            "the DRA driver beside it the GPUs would be handed out twice, and only Bottlerocket "
            f"{first} or later can turn it off (settings.kubelet-device-plugins.nvidia.enabled)"
            + (f": nodes.eks.bottlerocketVersion is {version}" if version else ""),
            nearest(layers, ("nodes", "eks", "bottlerocketVersion") if version else choice),
            field="nodes.eks.bottlerocketVersion" if version else chosen,
            hint=f'run Bottlerocket {first} or later and say so (nodes.eks.bottlerocketVersion: "{first}"), '
            f"or set {chosen}: device-plugin",
        )


def _check_pool_allocation(
    config: GPUStack, layers: list[Layer], *, mixed: bool, plugin_serves: bool
) -> None:
    """Each pool's GPUs are handed out by what it chooses, which reads the pool's settings; with
    pools on the device plugin beside pools on the DRA driver (`mixed`), both must run."""
    for index, pool in enumerate(config.nodes.pools):
        here: tuple[str | int, ...] = ("nodes", "pools", index)
        allocation = config.pool_gpu_allocation(pool)
        if mixed and allocation == "dra" and not config.dra.gpus.enabled:
            raise UserError(
                f"pool {pool.name} takes its GPUs from the DRA driver, but dra.gpus.enabled is "
                "false: nothing would hand out the pool's GPUs",
                nearest(layers, (*here, "gpuAllocation")),
                field=f"nodes.pools.{index}.gpuAllocation",
                hint="set dra.gpus.enabled: true, or the pool's gpuAllocation: device-plugin",
            )
        if mixed and allocation == "device-plugin" and not plugin_serves:
            raise UserError(
                f"pool {pool.name} takes its GPUs from the device plugin, but "
                "devicePlugin.enabled is false: nothing would hand out the pool's GPUs",
                nearest(layers, (*here, "gpuAllocation")),
                field=f"nodes.pools.{index}.gpuAllocation",
                hint="remove devicePlugin.enabled: false, or the pool's gpuAllocation",
            )
        plugin = pool.devicePlugin
        if allocation == "dra" and config.dra.gpus.enabled and plugin is not None:
            setting = "migStrategy" if plugin.migStrategy is not None else "sharing"
            raise UserError(
                f"pool {pool.name} takes its GPUs from the DRA driver, which reads no device "
                f"plugin settings: devicePlugin.{setting} would change nothing on its nodes",
                nearest(layers, (*here, "devicePlugin", setting)),
                field=f"nodes.pools.{index}.devicePlugin.{setting}",
                hint="remove the pool's devicePlugin (a DRA claim picks MIG devices by "
                "DeviceClass mig.nvidia.com; the DRA driver's sharing is its feature gates "
                "TimeSlicingSettings and MPSSupport), or set its gpuAllocation: device-plugin",
            )


def _check_dra_gates(config: GPUStack, layers: list[Layer]) -> None:
    gates = config.dra.featureGates

    def at(gate: str) -> Location | None:
        return nearest(layers, ("dra", "featureGates", gate))

    for gate, needed in DRA_GATE_NEEDS.items():
        if dra_gate_enabled(config, gate) and not dra_gate_enabled(config, needed):
            culprit = needed if needed in gates else gate
            raise UserError(
                f"the DRA driver's feature gate {gate} needs {needed}; the driver refuses to "
                "start without it",
                at(culprit),
                field=f"dra.featureGates.{culprit}",
                hint=f"set dra.featureGates.{needed}: true, or {gate}: false",
            )
    for first, second in DRA_GATES_EXCLUSIVE:
        if dra_gate_enabled(config, first) and dra_gate_enabled(config, second):
            raise UserError(
                f"the DRA driver's feature gates {first} and {second} exclude each other; the "
                "driver refuses to start with both",
                at(second),
                field=f"dra.featureGates.{second}",
                hint=f"turn one of {first} and {second} off",
            )
    version = config.platform.kubernetesVersion
    for gate, (cluster_gate, default_from) in DRA_GATE_NEEDS_CLUSTER.items():
        if (
            dra_gate_enabled(config, gate)
            and kubernetes_minor(version) < default_from
            and cluster_gate not in config.dra.clusterFeatureGates
        ):
            since = ".".join(map(str, default_from))
            raise UserError(
                f"the DRA driver's {gate} needs the Kubernetes feature gate {cluster_gate} on "
                f"kube-apiserver and kube-scheduler, off by default before {since}; "
                f"Kubernetes {version} drops the devices {gate} publishes",
                at(gate),
                field=f"dra.featureGates.{gate}",
                hint=f"turn {cluster_gate} on in the control plane and list it in "
                f"dra.clusterFeatureGates, target Kubernetes {since}, or set {gate}: false",
            )


def validator_finds_driver(config: GPUStack, profile: Profile) -> bool:
    """NVIDIA's driver validation looks for nvidia-smi on the host's root (/usr/bin, /usr/sbin,
    /bin, /sbin, /opt/bin) and else in a driver container's root, /run/nvidia/driver
    (NVIDIA/gpu-operator cmd/nvidia-validator/main.go hostNvidiaSMISearchPaths and
    validateDriverContainer, v26.7.0): a driver kept elsewhere (GKE's /home/kubernetes/bin/nvidia)
    it never finds."""
    stack = Stack(config, profile, "")
    return stack.driver_container or (
        stack.driver_mode == "preinstalled" and profile.facts.driver.root == "/"
    )


def _check_validator(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    if config.validator.enabled is True and not validator_finds_driver(config, profile):
        raise UserError(
            f"NVIDIA's validator cannot validate the driver on profile "
            f"{profile.metadata.name!r}: it finds a driver on the host's root or in a driver "
            f"container ({DRIVER_CONTAINER_ROOT}) only, and its runtime validation needs an "
            "nvidia runtime",
            nearest(layers, ("validator", "enabled")),
            field="validator.enabled",
            hint="set validator.enabled: auto",
        )


def _set_by_user(layers: list[Layer], path: tuple[str, ...]) -> bool:
    """Whether a layer above the profile's defaults (the first) sets `path`, read from the
    layers' data: positions are worked out only for an error."""
    for layer in layers[1:]:
        data: Any = layer.data
        for key in path:
            data = data.get(key) if isinstance(data, dict) else None
        if data is not None:
            return True
    return False


def _check_node_status_exporter(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """The exporter reports the validator's ready files: without the validator every node would
    read as failing. A profile's default (the first layer) gives way silently; the user's own
    setting is refused."""
    path = ("nodeStatusExporter", "enabled")
    if not config.nodeStatusExporter.enabled or not _set_by_user(layers, path):
        return
    if not Stack(config, profile, "").validator_enabled:
        raise UserError(
            "nodeStatusExporter.enabled needs NVIDIA's validator, whose ready files it reports; "
            f"the validator is off here (profile {profile.metadata.name!r})",
            nearest(layers[1:], path),
            field="nodeStatusExporter.enabled",
            hint="set nodeStatusExporter.enabled: false, or validator.enabled: true where the "
            "validator finds the driver",
        )


def _gpu_node_selector(config: GPUStack, profile: Profile) -> list[NodeSelectorRequirement]:
    requirements = profile.facts.gpuNodeSelector
    if config.nfd.mode != "disabled":
        return list(requirements)
    return [item for item in requirements if not item.key.startswith(NFD_LABEL_PREFIX)]


def _platform_nodes(
    config: GPUStack,
    profile: Profile,
    layers: list[Layer],
    section: str,
    mechanism: str,
    what: str,
    needs: str,
    hint: str,
) -> Any:
    """`nodes.<section>`, the GPU nodes' settings of the platform whose `node/` files take them
    (its taint mechanism): refused on other profiles, required on its own. None elsewhere."""
    settings = getattr(config.nodes, section)
    name = profile.metadata.name
    if profile.facts.taintMechanism != mechanism:
        if settings is not None:
            raise UserError(
                f"{what} settings do not apply to profile {name!r}",
                nearest(layers, ("nodes", section), key=True),
                field=f"nodes.{section}",
            )
        return None
    if settings is None:
        raise UserError(
            f"profile {name!r} needs {needs}",
            nearest(layers, ("nodes",)),
            field=f"nodes.{section}",
            hint=hint,
        )
    return settings


def _check_gke_node_pool(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """The pool's machine type must take its GPUs, and what the config says about sharing and
    MIG must become pool settings, or be refused: GKE's device plugin reads nothing else."""
    pool = _platform_nodes(
        config,
        profile,
        layers,
        "gke",
        "gke-node-pool",
        "GKE node pool",
        "the GPU node pool's machine type and accelerator",
        "e.g. nodes: {gke: {machineType: g2-standard-8, accelerator: {type: nvidia-l4, count: 1}}}",
    )
    if pool is None:
        return
    _check_gke_accelerator(pool, ("nodes", "gke"), layers)
    _check_gke_translation(config, layers)


def _check_gke_accelerator(
    pool: GKENodePool, where: tuple[str | int, ...], layers: list[Layer]
) -> None:
    """The pool's machine type takes its GPUs, in a count and partition size GKE offers."""
    dotted = ".".join(str(part) for part in where)
    accelerator = pool.accelerator
    here = (*where, "accelerator")
    if accelerator.type not in gke_accelerators.accelerator_types():
        raise UserError(
            f"unknown GKE accelerator type {accelerator.type!r}",
            nearest(layers, (*here, "type")),
            field=f"{dotted}.accelerator.type",
            hint=did_you_mean(accelerator.type, gke_accelerators.accelerator_types())
            or f"one of: {', '.join(gke_accelerators.accelerator_types())}",
        )
    problem = gke_accelerators.machine_type_problem(accelerator.type, pool.machineType)
    if problem:
        raise UserError(problem, nearest(layers, (*where, "machineType")), f"{dotted}.machineType")
    problem = gke_accelerators.count_problem(accelerator.type, pool.machineType, accelerator.count)
    if problem:
        raise UserError(problem, nearest(layers, (*here, "count")), f"{dotted}.accelerator.count")
    size = accelerator.gpuPartitionSize
    sizes = gke_accelerators.partition_sizes(accelerator.type)
    if size is not None and size not in sizes:
        raise UserError(
            f"GKE does not partition {accelerator.type} into {size}"
            if sizes
            else f"GKE does not partition {accelerator.type} GPUs (no MIG)",
            nearest(layers, (*here, "gpuPartitionSize")),
            field=f"{dotted}.accelerator.gpuPartitionSize",
            hint=f"one of: {', '.join(sizes)}" if sizes else None,
        )


def _check_aks_node_pool(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """The AKS pool command in node/ needs the pool's VM size; other platforms take none."""
    _platform_nodes(
        config,
        profile,
        layers,
        "aks",
        "aks-node-pool",
        "AKS node pool",
        "the GPU node pool's VM size",
        "e.g. nodes: {aks: {vmSize: Standard_NC4as_T4_v3}}",
    )


def _check_gke_translation(
    config: GPUStack, layers: list[Layer], pool: NodePool | None = None, index: int = 0
) -> None:
    """The cluster's (or one pool's) sharing and MIG settings as a GKE node pool takes them."""
    plugin = config.devicePlugin
    gke = (pool.gke if pool else None) or config.nodes.gke
    size = gke.accelerator.gpuPartitionSize if gke else None
    mig_strategy, sharing = config.pool_mig_strategy(pool), config.pool_sharing(pool)
    own = pool.devicePlugin if pool else None
    base = ("nodes", "pools", index, "devicePlugin") if own else ("devicePlugin",)
    strategy = (
        (*base, "migStrategy")
        if own is None or own.migStrategy
        else ("devicePlugin", "migStrategy")
    )
    shared = (*base, "sharing") if own is None or own.sharing else ("devicePlugin", "sharing")
    dotted = ".".join(str(part) for part in strategy)
    shared_dotted = ".".join(str(part) for part in shared)
    partition = (
        f"nodes.pools.{index}.gke.accelerator.gpuPartitionSize"
        if pool and pool.gke
        else "nodes.gke.accelerator.gpuPartitionSize"
    )
    if mig_strategy != "none" and size is None:
        raise UserError(
            f"MIG strategy {mig_strategy!r} on GKE needs MIG partitions, which GKE creates "
            "from the node pool's partition size (there is no MIG manager on GKE)",
            nearest(layers, strategy),
            field=dotted,
            hint=f"set {partition}, e.g. 1g.10gb",
        )
    if plugin.enabled:
        return  # NVIDIA's plugin reads its own sharing and MIG settings (its ConfigMap).
    if mig_strategy == "mixed":
        raise UserError(
            "GKE's device plugin advertises every MIG partition as nvidia.com/gpu, which is "
            "strategy 'single'; 'mixed' cannot be set on a GKE node pool",
            nearest(layers, strategy),
            field=dotted,
            hint="use migStrategy: single",
        )
    if size is not None and mig_strategy == "none":
        raise UserError(
            "the node pool partitions its GPUs "
            f"({partition}) and "
            "GKE's device plugin advertises each partition as one nvidia.com/gpu: that is MIG "
            "strategy 'single'",
            nearest(layers, strategy),
            field=dotted,
            hint=f"set {dotted}: single",
        )
    if sharing.strategy != "none" and sharing.renameByDefault:
        raise UserError(
            "GKE's device plugin always advertises shared GPUs as nvidia.com/gpu",
            nearest(layers, (*shared, "renameByDefault")),
            field=f"{shared_dotted}.renameByDefault",
            hint="remove renameByDefault, or run NVIDIA's device plugin on the pool",
        )
    if sharing.strategy == "time-slicing" and not sharing.failRequestsGreaterThanOne:
        raise UserError(
            "GKE refuses containers that request more than one time-shared GPU",
            nearest(layers, (*shared, "failRequestsGreaterThanOne")),
            field=f"{shared_dotted}.failRequestsGreaterThanOne",
            hint="remove failRequestsGreaterThanOne, or run NVIDIA's device plugin on the pool",
        )


def _check_eks_node_group(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """The node group's settings, and on Bottlerocket what the config says about the device
    plugin, must become node settings Bottlerocket honours, or be refused: its plugin reads
    nothing else."""
    group = _platform_nodes(
        config,
        profile,
        layers,
        "eks",
        "eks-node-group",
        "EKS node group",
        "the GPU node group's instance type",
        "e.g. nodes: {eks: {instanceType: g6.xlarge}}",
    )
    if group is None:
        return
    name = profile.metadata.name
    if group.migProfile and profile.facts.migPartitioning != "node-settings":
        raise UserError(
            f"MIG profiles are Bottlerocket settings; on profile {name!r} NVIDIA's MIG manager "
            "partitions the GPUs from the node label nvidia.com/mig.config",
            nearest(layers, ("nodes", "eks", "migProfile"), key=True),
            field="nodes.eks.migProfile",
            hint="remove nodes.eks.migProfile and set migManager.defaultConfig",
        )
    if profile.facts.devicePluginProvider == "bottlerocket":
        _check_bottlerocket_translation(config, layers)


def _check_bottlerocket_translation(config: GPUStack, layers: list[Layer]) -> None:
    plugin = config.devicePlugin
    profiles = config.nodes.eks.migProfile if config.nodes.eks else {}
    strategy = ("devicePlugin", "migStrategy")
    if plugin.migStrategy != "none" and plugin.migStrategy not in bottlerocket.PARTITIONING:
        raise UserError(
            f"Bottlerocket's device plugin knows MIG strategy 'single' only (its "
            f"device-partitioning-strategy 'mig'), not {plugin.migStrategy!r}",
            nearest(layers, strategy),
            field="devicePlugin.migStrategy",
            hint="use migStrategy: single",
        )
    if plugin.migStrategy == "single" and not profiles:
        raise UserError(
            "MIG on Bottlerocket needs the MIG profile of each GPU model, which Bottlerocket's "
            "MIG manager applies at boot (settings.kubelet-device-plugins.nvidia.mig.profile)",
            nearest(layers, strategy),
            field="devicePlugin.migStrategy",
            hint='set nodes.eks.migProfile, e.g. {a100.40gb: 1g.5gb, h100.80gb: "7"}',
        )
    if profiles and plugin.migStrategy == "none":
        raise UserError(
            "has no effect without MIG: Bottlerocket partitions GPUs only with "
            "devicePlugin.migStrategy single",
            nearest(layers, ("nodes", "eks", "migProfile"), key=True),
            field="nodes.eks.migProfile",
            hint="set devicePlugin.migStrategy: single, or remove nodes.eks.migProfile",
        )
    listed = plugin.deviceListStrategy
    if listed != "auto" and listed not in bottlerocket.DEVICE_LIST_STRATEGIES:
        raise UserError(
            f"Bottlerocket's device plugin has no device list strategy {listed!r}",
            nearest(layers, ("devicePlugin", "deviceListStrategy")),
            field="devicePlugin.deviceListStrategy",
            hint=f"one of: auto (Bottlerocket's default, volume-mounts), "
            f"{', '.join(bottlerocket.DEVICE_LIST_STRATEGIES)}",
        )
    version = tuple(int(part) for part in config.platform.kubernetesVersion.split("."))
    if listed == "cdi-cri" and version < bottlerocket.CDI_CRI_FROM:
        raise UserError(
            f"with device list strategy 'cdi-cri' GPUs reach pods only through the CRI's CDI "
            f"field, which the kubelet of Kubernetes {config.platform.kubernetesVersion} drops "
            "(it passes it from 1.29): GPU pods would start without their GPUs",
            nearest(layers, ("devicePlugin", "deviceListStrategy")),
            field="devicePlugin.deviceListStrategy",
            hint="use auto (volume-mounts) or envvar, or target Kubernetes 1.29 or later",
        )
    # Settings of a DaemonSet that does not exist would be dropped silently. The version also
    # names GFD's image, so it stands while gpustack renders GFD.
    for field, why, hint in (
        (
            "resources",
            "Bottlerocket's plugin is a host service, not a pod",
            "remove devicePlugin.resources",
        ),
        (
            "version",
            "Bottlerocket's plugin comes with the Bottlerocket release",
            "remove devicePlugin.version; the node group's Bottlerocket release picks the "
            "plugin's (it names GFD's image only while GFD runs)",
        ),
    ):
        if field == "version" and config.gfd.enabled:
            continue
        if _set_by_user(layers, ("devicePlugin", field)):
            raise UserError(
                f"has no effect: {why}",
                nearest(layers[1:], ("devicePlugin", field), key=True),
                field=f"devicePlugin.{field}",
                hint=hint,
            )


def _mig_manager_enabled(config: GPUStack, profile: Profile) -> bool:
    enabled = config.migManager.enabled
    if enabled == "auto":
        strategies = {config.pool_mig_strategy(pool) for pool in [None, *config.nodes.pools]}
        return strategies != {"none"} and profile.facts.migPartitioning == "mig-manager"
    return enabled


def _check_mig_manager(
    config: GPUStack, profile: Profile, layers: list[Layer], user_configs: mig.Configs | None
) -> None:
    settings = config.migManager
    by_settings = profile.facts.migPartitioning == "node-settings"
    if settings.enabled is True and profile.facts.migPartitioning != "mig-manager":
        raise UserError(
            f"on profile {profile.metadata.name!r} the "
            + ("node OS" if by_settings else "node pool")
            + " creates the MIG partitions itself; NVIDIA's MIG manager would fight it",
            nearest(layers, ("migManager", "enabled")),
            field="migManager.enabled",
            hint="remove migManager.enabled and set "
            + (
                "the node group's MIG profiles (nodes.eks.migProfile)"
                if by_settings
                else "the pool's partition size (nodes.gke.accelerator.gpuPartitionSize)"
            ),
        )
    if not _mig_manager_enabled(config, profile):
        # A setting of a component that is not deployed would be dropped silently. (Looked up
        # in the data first: positions cost a parse, and only an error needs one.)
        for field in ("defaultConfig", "withReboot", "version", "config"):
            if any(
                isinstance(layer.data.get("migManager"), dict) and field in layer.data["migManager"]
                for layer in layers[1:]
            ):
                written = nearest(layers[1:], ("migManager", field), key=True)
                why = (
                    "it runs with a MIG strategy, devicePlugin.migStrategy single or mixed, or "
                    "migManager.enabled: true"
                    if profile.facts.migPartitioning == "mig-manager"
                    else f"on profile {profile.metadata.name!r} the "
                    + ("node OS" if by_settings else "node pool")
                    + " partitions GPUs"
                )
                raise UserError(
                    f"has no effect: the MIG manager is not deployed ({why})",
                    written,
                    field=f"migManager.{field}",
                )
        for index, pool in enumerate(config.nodes.pools):
            if pool.migManager is not None:
                raise UserError(
                    f"pool {pool.name}: has no effect: the MIG manager is not deployed",
                    nearest(layers, ("nodes", "pools", index, "migManager"), key=True),
                    field=f"nodes.pools.{index}.migManager",
                )
        return
    known = {**mig.builtin_configs(), **(user_configs or {})}
    if settings.defaultConfig not in known:
        raise UserError(
            f"no MIG config named {settings.defaultConfig!r} (neither built in nor in "
            "migManager.config.file)",
            nearest(layers, ("migManager", "defaultConfig")),
            field="migManager.defaultConfig",
            hint=did_you_mean(settings.defaultConfig, sorted(known)),
        )
    for index, pool in enumerate(config.nodes.pools):
        layout = pool.migManager.defaultConfig if pool.migManager else None
        if layout is not None and layout not in known:
            raise UserError(
                f"pool {pool.name}: no MIG config named {layout!r} (neither built in nor in "
                "migManager.config.file)",
                nearest(layers, ("nodes", "pools", index, "migManager", "defaultConfig")),
                field=f"nodes.pools.{index}.migManager.defaultConfig",
                hint=did_you_mean(layout, sorted(known)),
            )


def _read_mig_configs(config: GPUStack, layers: list[Layer]) -> mig.Configs:
    path = ("migManager", "config", "file")
    owner = next(
        (
            layer
            for layer in reversed(layers)
            if isinstance(layer.data.get("migManager"), dict)
            and isinstance(layer.data["migManager"].get("config"), dict)
            and "file" in layer.data["migManager"]["config"]
        ),
        None,
    )
    base = owner.directory if owner and owner.directory else Path.cwd()
    file = base / str(config.migManager.config.file)
    location = nearest(layers, path)
    try:
        text = decode(read_bounded(file, what="a mig-parted config", location=location), str(file))
        document = load_text(text, display_path(file))
    except UserError as error:
        if error.message.endswith("file not found"):
            error = UserError(f"MIG config file {display_path(file)} not found", location)
        elif error.location is not None and error.location.line:
            # A YAML error may quote what it stumbled on (a key, a tag, an alias): the file
            # is named with the place, never with its content.
            error = UserError(
                "not valid YAML, expected a mig-parted config; its content is not shown",
                error.location,
            )
        raise UserError(
            error.message, error.location, "migManager.config.file", error.hint
        ) from None
    return mig.parse_user_configs(document)


def _read_pem(config: GPUStack, layers: list[Layer]) -> tuple[bytes, int]:
    """The PEM's bytes and permission bits. Nothing of its content is ever quoted in an error."""
    path = ("entitlement", "pemFile")
    owner = next(
        (layer for layer in reversed(layers) if layer.source.value((*layer.prefix, *path))), None
    )
    base = owner.directory if owner and owner.directory else Path.cwd()
    pem_path = base / str(config.entitlement.pemFile)
    location = nearest(layers, path)
    try:
        content = read_bounded(pem_path, 1024 * 1024, "an entitlement PEM", location=location)
        mode = stat.S_IMODE(os.stat(pem_path).st_mode)
    except UserError as error:
        if error.message.endswith("file not found"):
            error = UserError(f"entitlement PEM {display_path(pem_path)} not found", location)
        raise UserError(error.message, error.location, "entitlement.pemFile") from None
    except OSError:
        raise UserError(
            f"cannot read entitlement PEM {display_path(pem_path)}", location, "entitlement.pemFile"
        ) from None
    if b"-----BEGIN" not in content:
        raise UserError(
            f"{display_path(pem_path)} is not a PEM file (no '-----BEGIN' line)",
            location,
            "entitlement.pemFile",
        )
    return content, mode


# Label namespaces a kubelet may not put on its own Node (the kubelet refuses such
# `--node-labels` at start and the NodeRestriction admission plugin refuses the update: KEP
# "Bounding Self-Labeling Kubelets"), except the labels and namespaces it allows
# (k8s.io/kubelet pkg/apis well_known_labels.go kubeletLabels, kubeletLabelNamespaces and
# IsKubeletLabel, Kubernetes v1.31).
_RESTRICTED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
_KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    }
)
_KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
# The profiles whose node files make the kubelet label its own Node (--node-labels).
_SELF_LABELLING = ("kubeadm-join", "rke2-agent-config")


def kubelet_may_set(key: str) -> bool:
    """Whether a kubelet may put this label on its own Node (NodeRestriction)."""
    domain = key.partition("/")[0] if "/" in key else ""

    def within(namespaces: tuple[str, ...]) -> bool:
        return any(domain == each or domain.endswith("." + each) for each in namespaces)

    return (
        not within(_RESTRICTED_LABEL_DOMAINS)
        or key in _KUBELET_LABELS
        or within(_KUBELET_LABEL_NAMESPACES)
    )


def selectors_overlap(first: dict[str, str], second: dict[str, str]) -> bool:
    """Whether one node can carry both matchLabels selectors' labels: unless some key has a
    different value in each, a node with the union of both label sets matches both."""
    return all(second[key] == value for key, value in first.items() if key in second)


def _check_pools(config: GPUStack, profile: Profile, layers: list[Layer]) -> None:
    """Each pool's settings apply to the profile, and each GPU node belongs to one pool at most."""
    pools = config.nodes.pools
    name = profile.metadata.name
    stack = Stack(config, profile, "")
    gpu_nodes = _gpu_node_selector(config, profile)
    for index, pool in enumerate(pools):
        here: tuple[str | int, ...] = ("nodes", "pools", index)
        dotted = f"nodes.pools.{index}"
        if pool.driver and pool.driver.version and not stack.driver_container:
            raise UserError(
                f"pool {pool.name}: a driver version applies only where gpustack runs the driver "
                f"as a container (driver.mode container or driver-toolkit); here the driver mode "
                f"is {stack.driver_mode}, whose driver the nodes or the platform install",
                nearest(layers, (*here, "driver", "version")),
                field=f"{dotted}.driver.version",
                hint="remove the pool's driver section, and install that driver on the pool's "
                "nodes",
            )
        own_driver = pool.canary or (pool.driver and pool.driver.version)
        if own_driver and stack.driver_container:
            # The pool's driver DaemonSet is `nvidia-driver-daemonset-<pool>[-<RHCOS build>]`
            # (gpustack.components.driver), its name also a label value: at most 63 characters.
            builds = [build.rhcosVersion for build in config.driver.rhcosBuilds] or [
                config.driver.rhcosVersion or ""
            ]
            longest = max(len(build) + 1 if build else 0 for build in builds)
            if len(f"nvidia-driver-daemonset-{pool.name}") + longest > 63:
                raise UserError(
                    f"pool {pool.name} gets a driver DaemonSet of its own, whose name "
                    f"(nvidia-driver-daemonset-{pool.name}"
                    + ("-<RHCOS build>" if longest else "")
                    + ") would be longer than 63 characters",
                    nearest(layers, (*here, "name")),
                    field=f"{dotted}.name",
                    hint=f"a pool name of at most {63 - 24 - longest} characters",
                )
        if pool.gke is not None and profile.facts.taintMechanism != "gke-node-pool":
            raise UserError(
                f"GKE node pool settings do not apply to profile {name!r}",
                nearest(layers, (*here, "gke"), key=True),
                field=f"{dotted}.gke",
            )
        if profile.facts.taintMechanism == "gke-node-pool":
            if pool.gke is not None:
                _check_gke_accelerator(pool.gke, (*here, "gke"), layers)
            _check_gke_translation(config, layers, pool, index)
        if profile.facts.taintMechanism in _SELF_LABELLING:
            for key in pool.selector:
                if not kubelet_may_set(key):
                    raise UserError(
                        f"pool {pool.name}: the kubelet may not label its own Node with {key} "
                        "(the NodeRestriction admission plugin keeps kubernetes.io and k8s.io "
                        "labels for the control plane), so the pool's node files could never "
                        "give its nodes this label",
                        nearest(layers, (*here, "selector", key), key=True),
                        field=f"{dotted}.selector",
                        hint="use a label of your own domain, e.g. example.com/gpu-pool: "
                        f"{pool.name}",
                    )
        for key, value in pool.selector.items():
            wanted = config.nodes.selector.get(key)
            allowed = next(
                (
                    list(each.values)
                    for each in gpu_nodes
                    if each.key == key and each.operator == "In"
                ),
                None,
            )
            if (wanted is not None and wanted != value) or (
                allowed is not None and value not in allowed
            ):
                shown = wanted if wanted is not None else ", ".join(allowed or [])
                raise UserError(
                    f"pool {pool.name} selects {key}={value}, but GPU nodes carry {key}={shown} "
                    "(nodes.selector and the profile's GPU node label): the pool can have no "
                    "GPU node",
                    nearest(layers, (*here, "selector", key)),
                    field=f"{dotted}.selector",
                    hint="select the pool's nodes by a label that GPU nodes may carry",
                )
        for other in pools[:index]:
            if selectors_overlap(other.selector, pool.selector):
                raise UserError(
                    f"pools {other.name} and {pool.name} can both claim a node: their selectors "
                    "differ in no key's value, so a node with both sets of labels is in both, "
                    "and would get two device plugin configs and MIG layouts",
                    nearest(layers, (*here, "selector")),
                    field=f"{dotted}.selector",
                    hint="give both pools the same label key with a different value each, e.g. "
                    f"example.com/gpu-pool: {other.name} and example.com/gpu-pool: {pool.name}",
                )
