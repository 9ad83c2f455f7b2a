"""Host-side artifacts kubectl does not apply: they go to `node/` beside the manifests.

Each profile's taint mechanism decides what is written (docs/profiles.md, the profile table); the README
there says where each file goes. Taints and labels come from the same `nodes.taints` and
`nodes.selector` the workloads tolerate and select on, so nodes and manifests cannot disagree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from gpustack import emit
from gpustack.build import device_plugin_config, workload
from gpustack.build.workload import (
    deploy_label_keys,
    deploy_labels_used,
    deploy_node_labels,
)
from gpustack.layout import GENERATED, HEADER
from gpustack.resolve import bottlerocket, mig
from gpustack.resolve.node_pools import AKSNodePool, GKENodePool, NodePool
from gpustack.resolve.stack import Stack

# kubeadm reads v1beta4 from 1.31 on; older kubeadm knows v1beta3 only (kubernetes.io, "kubeadm
# Configuration (v1beta4)", changes listed from v1.31).
KUBEADM_V1BETA4_FROM = (1, 31)
# NFD's label for a node's RHCOS build, which each pinned driver DaemonSet selects (gpu-operator
# internal/state/nodepool.go nfdOSTreeVersionLabelKey, v26.7.0).
OSTREE_VERSION_LABEL = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"
# Placeholders the user replaces in the GKE node pool files (the README says so).
CLUSTER, LOCATION = "CLUSTER", "LOCATION"
# ... and in the EKS node group file (eksctl ClusterConfig metadata.name and .region, both
# required: eksctl-io/eksctl pkg/apis/eksctl.io/v1alpha5/types.go ClusterMeta).
REGION = "REGION"

Files = dict[str, str]
Where = list[tuple[str, str]]  # (file name, where it goes and what it does)
Notes = list[str]  # what the README adds that is not a file


def build(stack: Stack) -> Files:
    writer = _WRITERS[stack.facts.taintMechanism]
    files, where, notes = writer(stack)
    for pool in stack.pools:
        pool_files, pool_where, _ = writer(pool_view(stack, pool))
        renamed = {_pool_file(name, pool.name): text for name, text in pool_files.items()}
        files.update(renamed)
        where += [
            (_pool_file(name, pool.name), f"pool {pool.name}, as `{name}` for the pool's nodes")
            for name, _ in pool_where
            if name in pool_files
        ]
    if stack.pools:
        notes.append(_pools_note(stack))
    if stack.mig_manager_enabled:
        notes.append(_mig_note(stack))
    if deploy_labels_used(stack):
        notes.append(_deploy_note(stack))
    files["README.md"] = _readme(stack, where, notes)
    return files


def pool_view(stack: Stack, pool: NodePool) -> Stack:
    """The stack as one pool's nodes see it: the cluster's config with the pool's effective
    settings (`GPUStack.pool_settings`: its labels and taints added to the cluster's, its GKE
    machine, allocation, sharing, MIG strategy and layout and driver version over the
    cluster's) in place of the cluster's. The node files of a pool are the cluster's, written
    from this view."""
    config = stack.config
    settings = config.pool_settings(pool)
    nodes = config.nodes.model_copy(
        update={
            "selector": settings.selector,
            "taints": settings.taints,
            "gke": settings.gke,
            "pools": [],
        }
    )
    plugin = config.devicePlugin.model_copy(
        update={"migStrategy": settings.mig_strategy, "sharing": settings.sharing}
    )
    # The MIG manager runs as the cluster says, on every pool's MIG-capable nodes.
    mig_manager = config.migManager.model_copy(
        update={"enabled": stack.mig_manager_enabled, "defaultConfig": settings.mig_config}
    )
    driver = config.driver.model_copy(update={"version": settings.driver_version})
    view = config.model_copy(
        update={
            "gpuAllocation": settings.gpu_allocation,
            "nodes": nodes,
            "devicePlugin": plugin,
            "migManager": mig_manager,
            "driver": driver,
        }
    )
    return replace(stack, config=view, pool=pool)


def _pool_file(name: str, pool: str) -> str:
    stem, dot, suffix = name.partition(".")
    return f"{stem}-{pool}{dot}{suffix}"


def _pools_note(stack: Stack) -> str:
    """How the nodes that exist already join their pools: the files above label new nodes."""
    lines = [
        "Node pools: each pool's files above give new nodes the pool's labels and taints when "
        "they register. Nodes that exist already keep theirs: label (and taint) each pool's "
        "nodes once, after giving them the pool's own label by hand where they lack it "
        "(`kubectl label node NODE <selector>`):",
        "",
    ]
    for pool in stack.pools:
        view = pool_view(stack, pool)
        selector = ",".join(f"{key}={value}" for key, value in pool.selector.items())
        labels = {
            key: value
            for key, value in _node_labels(view).items()
            if key in (mig.CONFIG_LABEL, device_plugin_config.CONFIG_LABEL)
        }
        command = f"kubectl label nodes -l {selector} --overwrite " + " ".join(
            f"{key}={value}" for key, value in labels.items()
        )
        lines.append(f"- pool `{pool.name}`: `{command}`" if labels else f"- pool `{pool.name}`")
        for taint in pool.taints:
            value = f"={taint.value}" if taint.value is not None else ""
            lines.append(
                f"  and `kubectl taint nodes -l {selector} {taint.key}{value}:{taint.effect}`"
            )
    lines += [
        "",
        f"The device plugin and GFD read the config a node's `{device_plugin_config.CONFIG_LABEL}` "
        "label names (a node without it: `default`, the cluster's) and restart with the new "
        "one when the label changes; a name the ConfigMap `nvidia-device-plugin-config` does "
        "not hold keeps them from starting on that node.",
    ]
    return "\n".join(lines)


def _deploy_note(stack: Stack) -> str:
    labels = deploy_node_labels(stack) or dict.fromkeys(deploy_label_keys(stack), "true")
    both = stack.driver_container and stack.mig_manager_enabled
    managers = " and ".join(
        name
        for name, used in (
            (
                "k8s-driver-manager (the driver pod's init container, before it unloads a driver: "
                "`paused-for-driver-upgrade`)",
                stack.driver_container,
            ),
            (
                "the MIG manager (while it repartitions the GPUs: `paused-for-mig-change`)",
                stack.mig_manager_enabled,
            ),
        )
        if used
    )
    patch = f"`kubectl patch node NODE -p '{json.dumps({'metadata': {'labels': labels}})}'`"
    starter = (
        "The driver pod's `deploy-labels` init container"
        if stack.driver_container
        else "The MIG manager pod's `deploy-labels` init container"
    )
    started = (
        f"{starter} sets them all to `true` on its node while every one is absent or empty, as "
        "the GPU Operator's controller does; a node whose labels are partly set (one `false` by "
        "hand, the others absent) is left as it is: label it, " + patch + "."
    )
    if stack.facts.nodeLabelsReapplied:
        return (
            "Deploy labels: the Machine API copies a MachineSet's labels onto its nodes again "
            "whenever a node changes, which would undo every pause, so the MachineSet does not "
            f"carry the `nvidia.com/gpu.deploy.*` labels. They are taken off a node by {managers}, "
            "setting them to a paused value, which needs them `true` first. " + started
        )
    return (
        "Deploy labels: GPU nodes register with "
        + ", ".join(f"`{key}={value}`" for key, value in labels.items())
        + f". {managers[0].upper() + managers[1:]} {'set' if both else 'sets'} them to a paused value on the "
        f"node, {'wait' if both else 'waits'} until the GPU DaemonSets' pods are gone and "
        f"{'set' if both else 'sets'} them back. A GPU DaemonSet leaves a node only while its "
        "label is paused or `false`, so a node that joined without the labels still runs the "
        "stack. " + started
    )


def _mig_note(stack: Stack) -> str:
    default = stack.config.migManager.defaultConfig
    return (
        f"MIG: GPU nodes register with the label `{mig.CONFIG_LABEL}={default}`. The "
        "nvidia-mig-manager DaemonSet applies the MIG config a node's label names (from its "
        "ConfigMap `nvidia-mig-manager-config`) and reports progress in "
        f"`{mig.STATE_LABEL}` (`pending`, then `success` or `failed`). To repartition a node, "
        f"change the label: `kubectl label node NODE {mig.CONFIG_LABEL}=all-1g.10gb --overwrite`; "
        "the device plugin, GFD and the DCGM exporter leave the node while it changes and "
        "come back when it is done."
    )


def _taint_strings(stack: Stack) -> list[str]:
    """`key=value:Effect` (or `key:Effect`), the kubelet's --register-with-taints syntax."""
    return [
        f"{taint.key}={taint.value}:{taint.effect}"
        if taint.value is not None
        else f"{taint.key}:{taint.effect}"
        for taint in stack.config.nodes.taints
    ]


def _taint_objects(stack: Stack) -> list[dict[str, Any]]:
    """Taints as core/v1 Node spec.taints entries (kubeadm and MachineSets use that shape)."""
    return [
        {
            "key": taint.key,
            **({"value": taint.value} if taint.value is not None else {}),
            "effect": taint.effect,
        }
        for taint in stack.config.nodes.taints
    ]


def _node_labels(stack: Stack) -> dict[str, str]:
    """The labels GPU nodes register with: nodes.selector; with the MIG manager the MIG config it
    applies (nvidia.com/mig.config); with the driver manager or the MIG manager the
    `nvidia.com/gpu.deploy.*` labels set to "true" (the GPU Operator's controller would set both
    on every GPU node). The kubelet, RKE2 and the Machine API set them when the node registers
    only, so the managers' later changes to them stand."""
    labels = dict(stack.config.nodes.selector)
    if stack.pool is not None and stack.config.devicePlugin.enabled:
        # A pool's nodes pick its device plugin config (the config manager reads the label).
        labels[device_plugin_config.CONFIG_LABEL] = device_plugin_config.pool_config_name(
            stack.pool
        )
    if stack.mig_manager_enabled:
        labels[mig.CONFIG_LABEL] = stack.config.migManager.defaultConfig
    labels.update(deploy_node_labels(stack))
    return labels


def _label_strings(stack: Stack) -> list[str]:
    return [f"{key}={value}" for key, value in _node_labels(stack).items()]


def _yaml(*documents: dict[str, Any]) -> str:
    return HEADER + "---\n".join(emit.dump(document) for document in documents)


# ---------------------------------------------------------------------------------------------
# kubeadm: nodeRegistration at `kubeadm join` (and `kubeadm init` when the GPU node is the
# control plane), and the containerd runtime the RuntimeClass's handler names.


def _v1beta4(stack: Stack) -> bool:
    major, minor = stack.config.platform.kubernetesVersion.split(".")
    return (int(major), int(minor)) >= KUBEADM_V1BETA4_FROM


def _kubeadm_api(stack: Stack) -> str:
    return f"kubeadm.k8s.io/{'v1beta4' if _v1beta4(stack) else 'v1beta3'}"


def _node_registration(stack: Stack) -> dict[str, Any]:
    registration: dict[str, Any] = {
        "criSocket": f"unix://{stack.facts.runtime.containerdSocket}",
        # kubeadm: omitted taints mean the control-plane default, a list replaces it.
        "taints": _taint_objects(stack),
    }
    labels = _label_strings(stack)
    if labels:
        value = ",".join(labels)
        # kubeadm v1beta4 turned kubeletExtraArgs into a list of {name, value} (kubernetes #125029);
        # in v1beta3 it is a map of flag to value.
        registration["kubeletExtraArgs"] = (
            [{"name": "node-labels", "value": value}] if _v1beta4(stack) else {"node-labels": value}
        )
    return registration


def _containerd_drop_in(stack: Stack) -> str:
    """The stanza `nvidia-ctk runtime configure --runtime=containerd` writes, in containerd config
    version 2: containerd 1.7 reads it as is, and containerd 2.x migrates a version 2 drop-in when
    it loads it but refuses a drop-in whose version is above its root config's (containerd
    cmd/containerd/server/config/config.go), so version 2 is the one file that fits both.

    nvidia-ctk copies runc's options into the nvidia runtime, so its cgroup driver is the node's
    (`nodes.cgroupDriver`; a runtime whose driver differs from the kubelet's fails to start pods).
    Without a RuntimeClass on GPU pods it makes nvidia the default (`--set-as-default`)."""
    handler = stack.config.runtimeClass.handler
    containerd = 'plugins."io.containerd.grpc.v1.cri".containerd'
    table = f"{containerd}.runtimes.{handler}"
    systemd = "true" if stack.config.nodes.cgroupDriver == "systemd" else "false"
    default = ""
    if stack.uses_cdi:
        # The device plugin hands out CDI devices: containerd resolves them from these folders
        # (containerd 1.7 CRI config `enable_cdi`, `cdi_spec_dirs`; k8s-device-plugin docs/cdi.md).
        default += (
            '[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'
            '  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n\n'
        )
    if not stack.runtime_class_enabled:
        default += f'[{containerd}]\n  default_runtime_name = "{handler}"\n\n'
    return (
        HEADER
        + "# containerd config version 2 (containerd 1.7; containerd 2.x migrates it on load).\n"
        + "version = 2\n\n"
        + default
        + f"[{table}]\n"
        + '  runtime_type = "io.containerd.runc.v2"\n'
        + f"  [{table}.options]\n"
        + '    BinaryName = "/usr/bin/nvidia-container-runtime"\n'
        + f"    SystemdCgroup = {systemd}\n"
    )


def _containerd_restart(mode: str | None) -> str:
    """How the toolkit gets containerd to load the drop-in (profile fact `restartMode`)."""
    if mode in (None, "signal"):
        # containerd does not handle SIGHUP: it exits, and its unit (containerd's own
        # containerd.service: Restart=always, KillMode=process) starts it again.
        return (
            "restarts containerd (SIGHUP: containerd exits and systemd starts it again, as the "
            "`Restart=always` of containerd's unit does; running containers keep running)"
        )
    if mode == "systemd":
        return "restarts containerd (`systemctl restart containerd` on the host)"
    return "leaves containerd running: restart it once on each GPU node (`restartMode: none`)"


def _kubeadm(stack: Stack) -> tuple[Files, Where, Notes]:
    join = {
        "apiVersion": _kubeadm_api(stack),
        "kind": "JoinConfiguration",
        "nodeRegistration": _node_registration(stack),
    }
    files = {"join-configuration.yaml": _yaml(join)}
    where = [
        (
            "join-configuration.yaml",
            "merge `nodeRegistration` into the JoinConfiguration each GPU worker joins with "
            "(`kubeadm join --config`, with your `discovery` section); kubelet applies the taints "
            "when the node registers, so later edits need `kubectl taint`. It is "
            f"`{_kubeadm_api(stack)}`, what kubeadm {stack.config.platform.kubernetesVersion} "
            "reads (`platform.kubernetesVersion`: v1beta4 from 1.31, v1beta3 before)",
        ),
    ]
    if not stack.toolkit_enabled:
        # With the toolkit DaemonSet, it writes this drop-in itself.
        files["99-nvidia.toml"] = _containerd_drop_in(stack)
        where.append(
            (
                "99-nvidia.toml",
                "copy to `/etc/containerd/conf.d/99-nvidia.toml` on each GPU node (what `nvidia-ctk "
                f"runtime configure --runtime=containerd` writes), make sure "
                f"`{stack.facts.runtime.containerdConfig}` "
                'has `imports = ["/etc/containerd/conf.d/*.toml"]`, then `systemctl restart '
                "containerd`. It is containerd config version 2, which containerd 1.7 reads and "
                "containerd 2.x migrates on load (a version 3 file would break containerd 1.7). "
                f"The nvidia runtime uses the `{stack.config.nodes.cgroupDriver}` cgroup driver "
                "(`nodes.cgroupDriver`), as runc and the kubelet must"
                + (
                    "; it is containerd's default runtime, since GPU pods name no RuntimeClass"
                    if not stack.runtime_class_enabled
                    else ""
                ),
            )
        )
    if stack.config.nodes.controlPlane:
        # A single-node cluster's node is made by `kubeadm init`, not join. Its registration lists
        # the GPU taints only, which drops kubeadm's default control-plane taint: the only node
        # must run every pod, and the control-plane taint would turn away all that do not
        # tolerate it. The GPU workloads here tolerate it anyway.
        init = {
            "apiVersion": _kubeadm_api(stack),
            "kind": "InitConfiguration",
            "nodeRegistration": _node_registration(stack),
        }
        files["init-configuration.yaml"] = _yaml(init)
        taints = (
            "The GPU taints stay, and they turn away every pod that does not tolerate them, "
            "CoreDNS included: on a single-node cluster consider `nodes.taints: []`"
            if stack.config.nodes.taints
            else "With no GPU taints (`nodes.taints: []`) the list is empty, so the node takes "
            "every pod"
        )
        where.insert(
            0,
            (
                "init-configuration.yaml",
                "merge `nodeRegistration` into the InitConfiguration of `kubeadm init --config` on "
                "the GPU control-plane node. It lists the GPU taints only, which drops kubeadm's "
                "default `node-role.kubernetes.io/control-plane:NoSchedule` taint (a taint list "
                "replaces the default): on a single-node cluster the only node must run every pod. "
                f"To keep the control-plane taint (several control-plane nodes), add it to the "
                f"list. {taints}",
            ),
        )
    notes = []
    if stack.toolkit_enabled:
        facts = stack.facts.runtime.toolkit
        assert facts is not None
        notes.append(
            "containerd: the NVIDIA Container Toolkit DaemonSet writes the `nvidia` runtime to "
            f"`{facts.dropInConfigFile}`, adds its folder to the `imports` of "
            f"`{facts.configFile}` and {_containerd_restart(facts.restartMode)} on each GPU "
            "node, new and autoscaled ones included; nothing to copy by hand (remove a "
            "`99-nvidia.toml` written earlier by `nvidia-ctk`, the toolkit replaces it)."
        )
    plugins = '"NodeRestriction,ExtendedResourceToleration"'
    extra_args = (
        f"[{{name: enable-admission-plugins, value: {plugins}}}]"
        if _v1beta4(stack)
        else f"{{enable-admission-plugins: {plugins}}}"
    )
    notes += [
        "ExtendedResourceToleration: this kube-apiserver admission plugin (off by default) gives "
        "every pod that requests `nvidia.com/gpu` a toleration for the `nvidia.com/gpu` taint, "
        f"as GKE does. Enable it in the `{_kubeadm_api(stack)}` ClusterConfiguration with "
        f"`apiServer.extraArgs: {extra_args}` "
        "(keep NodeRestriction: the value replaces kubeadm's default). Other taints, such as a "
        "custom `nodetype=gpu`, still need tolerations in your pods."
    ]
    return files, where, notes


# ---------------------------------------------------------------------------------------------
# RKE2 and k3s: the agent's config file; they find the nvidia runtime themselves once the toolkit
# is there (RKE2 runs k3s' agent code: pkg/agent/containerd findNvidiaContainerRuntimes).


@dataclass(frozen=True)
class _Rancher:
    """How one of Rancher's distributions names what the node files talk about."""

    product: str  # as its docs write it
    config_file: str  # the agent's config file (`node-taint`, `node-label`, `default-runtime`)
    node_file: str  # the file gpustack writes into node/
    agent: str  # its systemd units: the agent's, the server's
    server: str
    # What ships its RuntimeClasses and when they are missing, and what to do then.
    runtime_classes_from: str
    runtime_classes_fix: str


_RANCHER = {
    # rke2-docs install/configuration.md, rancher/rke2 bundle/lib/systemd/system, #7242.
    "rke2-agent-config": _Rancher(
        "RKE2",
        "/etc/rancher/rke2/config.yaml",
        "rke2-agent-config.yaml",
        "rke2-agent",
        "rke2-server",
        "through its `rke2-runtimeclasses` chart in RKE2 v1.29.13, v1.30.9, v1.31.5, v1.32.1 "
        "and later (rancher/rke2 #7242). On an older RKE2",
        "upgrade RKE2",
    ),
    # k3s docs installation/configuration.md (config file), k3s.service and the install
    # script's k3s-agent.service, advanced.md ("K3s includes Kubernetes RuntimeClass
    # definitions for all supported alternative runtimes": manifests/runtimes.yaml).
    "k3s-agent-config": _Rancher(
        "k3s",
        "/etc/rancher/k3s/config.yaml",
        "k3s-agent-config.yaml",
        "k3s-agent",
        "k3s",
        "from its packaged `runtimes` manifest (k3s-io/k3s manifests/runtimes.yaml). On a k3s "
        "started with `--disable runtimes`",
        "let k3s deploy its `runtimes` manifest",
    ),
}


def _rancher(stack: Stack) -> tuple[Files, Where, Notes]:
    names = _RANCHER[stack.facts.taintMechanism]
    product = names.product
    config: dict[str, Any] = {"node-taint": _taint_strings(stack)}
    labels = _label_strings(stack)
    if labels:
        config["node-label"] = labels
    if not stack.runtime_class_enabled:
        # GPU pods name no RuntimeClass: `default-runtime` makes nvidia containerd's default
        # (rke2-docs, agent configuration; k3s `--default-runtime`, k3s-io/k3s #8700).
        config["default-runtime"] = stack.config.runtimeClass.handler
    runtime = (
        f"{product} adds the nvidia runtime to containerd's config itself each time it starts "
        "and finds `nvidia-container-runtime`: the toolkit DaemonSet puts it there and restarts "
        f"{product}"
        if stack.toolkit_enabled
        else f"{product} adds the nvidia runtime to containerd's config itself when it starts and "
        f"finds the NVIDIA Container Toolkit on the host (install it before {product} starts, or "
        f"restart `{names.agent}` once after)"
    )
    default = (
        f"; `default-runtime: {stack.config.runtimeClass.handler}` makes it containerd's default "
        "runtime, since GPU pods name no RuntimeClass"
        if not stack.runtime_class_enabled
        else ""
    )
    notes = []
    if stack.toolkit_enabled:
        notes.append(_rancher_toolkit_note(stack, names))
    name = stack.config.runtimeClass.name
    if stack.runtime_class_enabled and name in stack.facts.runtime.providedRuntimeClasses:
        notes.append(
            f"RuntimeClass `{name}`: GPU pods name it and {product} provides it, "
            f"{names.runtime_classes_from} `kubectl get runtimeclass {name}` finds nothing and "
            f"every GPU pod is refused: {names.runtime_classes_fix}, or set `runtimeClass.name` to "
            "another name so that gpustack renders the class."
        )
    return (
        {names.node_file: _yaml(config)},
        [
            (
                names.node_file,
                f"merge into `{names.config_file}` on each GPU agent before it first joins "
                f"(node-taint and node-label apply when the node registers){default}. {runtime}, "
                f"so leave `{stack.facts.runtime.containerdConfig}` alone ({product} regenerates "
                f"it at every start; to customise it, {product} reads a template beside it, "
                "`config-v3.toml.tmpl` with containerd 2 or `config.toml.tmpl`)",
            )
        ],
        notes,
    )


def _rancher_toolkit_note(stack: Stack, names: _Rancher) -> str:
    """What the toolkit DaemonSet does to RKE2 or k3s on every GPU node, so that nobody has to."""
    facts = stack.facts.runtime.toolkit
    assert facts is not None  # toolkit_enabled implies it
    generated = stack.facts.runtime.containerdConfig
    product = names.product
    return (
        "Container runtime: nothing to do by hand on any GPU node, new or autoscaled. The NVIDIA "
        "Container Toolkit DaemonSet installs the toolkit into `/usr/local/nvidia/toolkit`, then "
        f"sends SIGHUP to {product}'s containerd through `{facts.socket}`: containerd exits, "
        f"{product} exits with it and systemd starts `{names.agent}` (`{names.server}` on a "
        "server node) again (`Restart=always`), which finds the runtime and adds `nvidia` to "
        f"`{generated}`. Running pods keep running; the kubelet and containerd are back "
        "within seconds. It happens again each time a toolkit pod starts (after a reboot, on a "
        f"toolkit upgrade). Check it with `grep nvidia {generated}`. The toolkit also writes "
        f"`{facts.dropInConfigFile}` and an `imports` line in `{facts.configFile}`, its defaults, "
        f"which {product}'s containerd does not read."
    )


# ---------------------------------------------------------------------------------------------
# GKE: the node pool is created with its taints, labels, image type and driver setting.

# gcloud's and the GKE API's spelling of the taint effects (GKE NodeTaint.Effect).
_GKE_EFFECTS = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}


def _gke_image_type(stack: Stack) -> str:
    return "COS_CONTAINERD" if stack.facts.driver.installerOS == "cos" else "UBUNTU_CONTAINERD"


# GKE's GPU sharing strategies, as gcloud (--accelerator gpu-sharing-strategy) and the GKE API
# (GPUSharingConfig.GPUSharingStrategy) spell them, for devicePlugin.sharing.strategy.
_GKE_SHARING = {"time-slicing": ("time-sharing", "TIME_SHARING"), "mps": ("mps", "MPS")}


def _gke_sharing(stack: Stack) -> tuple[tuple[str, str], int] | None:
    """The pool's GPU sharing: GKE's own device plugin shares GPUs only as the pool says (with
    NVIDIA's plugin its ConfigMap does, and the pool shares nothing)."""
    plugin = stack.config.devicePlugin
    if plugin.enabled or plugin.sharing.strategy == "none":
        return None
    return _GKE_SHARING[plugin.sharing.strategy], plugin.sharing.replicas


# The label GKE gives every node of a node pool, its pool's name (GKE docs, "Node pool
# labels"); a gpustack pool that selects on it is that GKE node pool, created under that name.
GKE_POOL = "cloud.google.com/gke-nodepool"


def _gke_pool_name(pool: NodePool) -> str:
    return pool.selector.get(GKE_POOL, pool.name)


def _gke_pool(stack: Stack) -> GKENodePool:
    pool = stack.config.nodes.gke
    if pool is None:  # config loading requires it on GKE profiles
        raise ValueError("nodes.gke is not set")
    return pool


def _gke_script(stack: Stack) -> str:
    # gpu-driver-version=disabled leaves the driver to the installer DaemonSet (gke component).
    driver = "disabled" if stack.driver_mode == "gke-installer" else "default"
    pool = _gke_pool(stack)
    accelerator = [
        f"type={pool.accelerator.type}",
        f"count={pool.accelerator.count}",
        f"gpu-driver-version={driver}",
    ]
    if pool.accelerator.gpuPartitionSize:
        accelerator.append(f"gpu-partition-size={pool.accelerator.gpuPartitionSize}")
    sharing = _gke_sharing(stack)
    if sharing:
        (strategy, _), clients = sharing
        accelerator += [f"gpu-sharing-strategy={strategy}", f"max-shared-clients-per-gpu={clients}"]
    flags = [
        '--cluster="${CLUSTER:?set CLUSTER}"',
        '--location="${LOCATION:?set LOCATION (zone or region)}"',
        f"--machine-type={pool.machineType}",
        f"--image-type={_gke_image_type(stack)}",
        f"--accelerator={','.join(accelerator)}",
    ]
    taints = [f"{t.key}={t.value or ''}:{t.effect}" for t in stack.config.nodes.taints]
    if taints:
        flags.append(f"--node-taints='{','.join(taints)}'")
    labels = [label for label in _label_strings(stack) if not label.startswith(f"{GKE_POOL}=")]
    if labels:
        flags.append(f"--node-labels='{','.join(labels)}'")
    name = '"${POOL:-gpu}"' if stack.pool is None else _gke_pool_name(stack.pool)
    lines = [
        HEADER.rstrip("\n"),
        f"# The GPU node pool of {stack.name} ({stack.profile.metadata.name}). Run with CLUSTER "
        "and LOCATION set.",
        f"gcloud container node-pools create {name} \\",
        *[f"  {flag} \\" for flag in flags[:-1]],
        f"  {flags[-1]}",
    ]
    return "\n".join(lines) + "\n"


def _gke_node_pool(stack: Stack) -> dict[str, Any]:
    """The same pool as a Config Connector ContainerNodePool (container.cnrm.cloud.google.com)."""
    driver = "INSTALLATION_DISABLED" if stack.driver_mode == "gke-installer" else "DEFAULT"
    pool = _gke_pool(stack)
    accelerator: dict[str, Any] = {
        "type": pool.accelerator.type,
        "count": pool.accelerator.count,
        "gpuDriverInstallationConfig": {"gpuDriverVersion": driver},
    }
    if pool.accelerator.gpuPartitionSize:
        accelerator["gpuPartitionSize"] = pool.accelerator.gpuPartitionSize
    sharing = _gke_sharing(stack)
    if sharing:
        (_, strategy), clients = sharing
        accelerator["gpuSharingConfig"] = {
            "gpuSharingStrategy": strategy,
            "maxSharedClientsPerGpu": clients,
        }
    node_config: dict[str, Any] = {
        "machineType": pool.machineType,
        "imageType": _gke_image_type(stack),
        "guestAccelerator": [accelerator],
    }
    labels = {key: value for key, value in stack.config.nodes.selector.items() if key != GKE_POOL}
    if labels:
        node_config["labels"] = labels
    if stack.config.nodes.taints:
        node_config["taint"] = [
            {"key": t.key, "value": t.value or "", "effect": _GKE_EFFECTS[t.effect]}
            for t in stack.config.nodes.taints
        ]
    return {
        "apiVersion": "container.cnrm.cloud.google.com/v1beta1",
        "kind": "ContainerNodePool",
        "metadata": {
            "name": f"{stack.name}-gpu" if stack.pool is None else _gke_pool_name(stack.pool)
        },
        "spec": {"clusterRef": {"name": CLUSTER}, "location": LOCATION, "nodeConfig": node_config},
    }


def _gke(stack: Stack) -> tuple[Files, Where, Notes]:
    installer = stack.driver_mode == "gke-installer"
    driver_text = (
        "`gpu-driver-version=disabled`: the `nvidia-driver-installer-"
        f"{stack.facts.driver.installerOS}` DaemonSet in kube-system installs the driver"
        if installer
        else "`gpu-driver-version=default`: GKE installs the driver"
    )
    return (
        {
            "gke-node-pool.sh": _gke_script(stack),
            "containernodepool.yaml": _yaml(_gke_node_pool(stack)),
        },
        [
            (
                "gke-node-pool.sh",
                f"`sh gke-node-pool.sh` with CLUSTER and LOCATION (and optionally POOL) set creates "
                f"the GPU node pool ({_gke_pool(stack).machineType} with "
                f"{_gke_pool(stack).accelerator.count} {_gke_pool(stack).accelerator.type}) with the "
                f"taints and labels the manifests expect and {driver_text}. GKE taints GPU pools "
                "itself only when the cluster already has a non-GPU pool, so the taint is set "
                "explicitly",
            ),
            (
                "containernodepool.yaml",
                "the same pool as a Config Connector `ContainerNodePool`, for clusters managed "
                "declaratively: replace CLUSTER and LOCATION and apply it where Config "
                "Connector runs (not to the GPU cluster)",
            ),
        ],
        _gke_notes(stack),
    )


def _gke_notes(stack: Stack) -> Notes:
    """What the pool does with its GPUs that the workloads rely on."""
    pool = _gke_pool(stack)
    parts = []
    if pool.accelerator.gpuPartitionSize:
        parts.append(
            f"cuts every GPU into {pool.accelerator.gpuPartitionSize} MIG partitions (each one "
            "`nvidia.com/gpu`, MIG strategy single)"
        )
    sharing = _gke_sharing(stack)
    if sharing:
        (strategy, _), clients = sharing
        shared = "partition" if pool.accelerator.gpuPartitionSize else "GPU"
        parts.append(f"lets up to {clients} containers share each {shared} ({strategy})")
    if not parts:
        return []
    return [
        "GKE's device plugin reads these from the pool, not from a config file: the pool "
        + " and ".join(parts)
        + ". GKE fixes these when it creates the pool; changing them means "
        "a new pool."
    ]


# ---------------------------------------------------------------------------------------------
# AKS: the GPU node pool is created with its taints, labels, VM size and driver setting.

# Placeholders the user sets before running the AKS pool script (the README says so).
RESOURCE_GROUP = "RESOURCE_GROUP"


def _aks_pool(stack: Stack) -> AKSNodePool:
    pool = stack.config.nodes.aks
    if pool is None:  # config loading requires it on the AKS profile
        raise ValueError("nodes.aks is not set")
    return pool


def _aks_script(stack: Stack) -> str:
    pool = _aks_pool(stack)
    flags = [
        f'--resource-group="${{{RESOURCE_GROUP}:?set {RESOURCE_GROUP}}}"',
        f'--cluster-name="${{{CLUSTER}:?set {CLUSTER}}}"',
        '--name="${POOL:-gpu}"',
        '--node-count="${NODE_COUNT:-1}"',
        f"--node-vm-size={pool.vmSize}",
    ]
    if stack.driver_container:
        # No driver from AKS: NVIDIA's driver container installs it (Azure CLI 2.72.2 and later;
        # it replaces the older --skip-gpu-driver-install, learn.microsoft.com azure/aks
        # nvidia-gpu-operator). The node then gets AKS's runc-only containerd config.
        flags.append("--gpu-driver=none")
        # The Ubuntu release the driver image is built for (profile fact driver.osSkus).
        flags.append(f"--os-sku={stack.facts.driver.osSkus[stack.config.driver.nodeOS]}")
    # `--node-taints`: comma-separated key=value:Effect; `--labels`: space-separated key=value
    # (az aks nodepool add reference).
    taints = _taint_strings(stack)
    if taints:
        flags.append(f"--node-taints='{','.join(taints)}'")
    labels = _label_strings(stack)
    if labels:
        flags.append(f"--labels {' '.join(labels)}")
    lines = [
        HEADER.rstrip("\n"),
        f"# The GPU node pool of {stack.name} ({stack.profile.metadata.name}). Run with "
        f"{RESOURCE_GROUP} and {CLUSTER} set.",
        "az aks nodepool add \\",
        *[f"  {flag} \\" for flag in flags[:-1]],
        f"  {flags[-1]}",
    ]
    return "\n".join(lines) + "\n"


def _aks(stack: Stack) -> tuple[Files, Where, Notes]:
    pool = _aks_pool(stack)
    driver_text = (
        "`--gpu-driver none`: AKS installs no driver (Azure CLI 2.72.2 or later), the "
        "`nvidia-driver-daemonset` does, and the toolkit DaemonSet makes its `"
        f"{stack.config.runtimeClass.handler}` runtime containerd's default"
        if stack.driver_container
        else "AKS's driver and NVIDIA Container Toolkit, with `nvidia-container-runtime` as "
        "containerd's default runtime, so GPU pods need no RuntimeClass"
    )
    notes = [
        "AKS-managed GPU pools (preview, `gpuProfile.nvidia.managementMode: Managed`) run AKS's "
        "own device plugin and DCGM exporter on their nodes: gpustack's would register "
        "`nvidia.com/gpu` a second time and export the same GPUs twice. The pool command here "
        "never asks for one; keep gpustack's GPU DaemonSets off any managed pool (its nodes "
        "carry `kubernetes.azure.com/dcgm-exporter=enabled`), e.g. with a `nodes.selector` "
        "label that only the pools created here carry."
    ]
    if stack.toolkit_enabled:
        facts = stack.facts.runtime.toolkit
        assert facts is not None
        notes.append(
            "containerd: the NVIDIA Container Toolkit DaemonSet writes the `"
            f"{stack.config.runtimeClass.handler}` runtime to `{facts.dropInConfigFile}`, adds "
            f"its folder to the `imports` of `{facts.configFile}` and "
            f"{_containerd_restart(facts.restartMode)} on each GPU node, new and autoscaled "
            "ones included; nothing to do by hand."
        )
    return (
        {"aks-node-pool.sh": _aks_script(stack)},
        [
            (
                "aks-node-pool.sh",
                f"`sh aks-node-pool.sh` with {RESOURCE_GROUP} and {CLUSTER} (and optionally POOL, "
                f"NODE_COUNT) set creates the GPU node pool ({pool.vmSize}) with the taints and "
                f"labels the manifests expect and {driver_text}. AKS sets a pool's taints and "
                "driver mode when it creates the pool: a change means a new pool",
            )
        ],
        notes,
    )


# ---------------------------------------------------------------------------------------------
# OpenShift: machines get taints and labels from their MachineSet's template.


def _openshift(stack: Stack) -> tuple[Files, Where, Notes]:
    template_spec: dict[str, Any] = {}
    labels = _node_labels(stack)
    pool = stack.gpu_machine_config_pool
    if pool:
        # The role the GPU MachineConfigPool selects nodes by; the Machine API puts the
        # template's spec.metadata.labels on each new machine's node (nodelink controller).
        labels[workload.NODE_ROLE_PREFIX + pool] = ""
    if labels:
        template_spec["metadata"] = {"labels": labels}
    template_spec["taints"] = _taint_objects(stack)
    patch = {"spec": {"template": {"spec": template_spec}}}
    where = [
        (
            "machineset-patch.yaml",
            "`oc patch machineset NAME -n openshift-machine-api --type merge --patch-file "
            "machineset-patch.yaml` on each GPU MachineSet. A merge patch replaces the "
            "MachineSet's taint list; machines created afterwards get the taints (scale the "
            "MachineSet down and up, or taint existing nodes with `oc adm taint`)",
        )
    ]
    notes = []
    builds = _rhcos_builds(stack)
    if builds:
        notes.append(
            "RHCOS builds: the driver runs only on nodes whose NFD label "
            f"`{OSTREE_VERSION_LABEL}` is one of {', '.join(f'`{b}`' for b in builds)} (one "
            f"driver DaemonSet each). `oc get nodes -L {OSTREE_VERSION_LABEL}` shows each "
            "node's build. A node of another build gets no driver pod: its toolkit pod waits in "
            "`Init` for the driver and the node offers no `nvidia.com/gpu`. Before an OpenShift "
            "upgrade add the new build (`gpustack driver-toolkit-builds` reads the cluster's "
            "`driver-toolkit` ImageStream), and remove the old one once no node runs it."
        )
    if pool:
        notes.append(
            f"GPU MachineConfigPool: the MachineConfigPool `{pool}` (with the manifests) takes "
            f"the nodes labelled `{workload.NODE_ROLE_PREFIX}{pool}`, with the worker pool's "
            "MachineConfigs and gpustack's own, so a GPU-side MachineConfig reboots GPU nodes "
            "only. The MachineSet patch labels the machines created afterwards; label the GPU "
            f"nodes that exist now yourself, before gpustack's MachineConfigs target `{pool}`: "
            f"`oc label node NODE {workload.NODE_ROLE_PREFIX}{pool}=`. Each node keeps its "
            "worker role label."
        )
    if stack.entitlement_pem is not None:
        who = f"the `{pool}` pool's GPU nodes" if pool else "the workers"
        notes.append(
            "Entitlement: the three MachineConfigs (`50-rhsm-conf`, `50-entitlement-pem`, "
            "`50-entitlement-key-pem`) are with the manifests, not here. Applying them makes the "
            f"Machine Config Operator drain and reboot {who} one by one (as many at a time as "
            "the pool's `maxUnavailable` allows, default 1): plan for it."
        )
    return {"machineset-patch.yaml": _yaml(patch)}, where, notes


def _rhcos_builds(stack: Stack) -> list[str]:
    """The RHCOS builds the driver DaemonSets are pinned to (none: one for every node)."""
    driver = stack.config.driver
    if stack.driver_mode != "driver-toolkit":
        return []
    if driver.rhcosBuilds:
        return [build.rhcosVersion for build in driver.rhcosBuilds]
    return [driver.rhcosVersion] if driver.rhcosVersion else []


# ---------------------------------------------------------------------------------------------
# EKS: a managed node group carries the taints and labels (EKS CreateNodegroup `taints` and
# `labels`, amazon-eks-user-guide node-taints-managed-node-groups.adoc), written as eksctl's
# ClusterConfig; on Bottlerocket the node settings of its device plugin go with it.


# The AMI families for whose GPU node groups eksctl installs NVIDIA's device plugin itself
# (eksctl-io/eksctl pkg/eks/tasks.go ClusterTasksForNodeGroups: "Only AL2/AL2023 requires the
# NVIDIA device plugin"; 99984ad).
EKSCTL_NVIDIA_PLUGIN_AMI_FAMILIES = ("AmazonLinux2", "AmazonLinux2023")


def _eks_node_group(stack: Stack) -> dict[str, Any]:
    """One eksctl managed node group (eksctl-io/eksctl pkg/apis/eksctl.io/v1alpha5/types.go
    ManagedNodeGroup, NodeGroupBase, NodeGroupTaint, NodeGroupBottlerocket; 99984ad)."""
    group = stack.config.nodes.eks
    if group is None:  # config loading requires it on EKS profiles
        raise ValueError("nodes.eks is not set")
    node_group: dict[str, Any] = {
        "name": f"{stack.name}-gpu",
        # eksctl picks the family's NVIDIA AMI for a GPU instance type (pkg/ami/auto_resolver.go
        # IsNvidiaInstanceType; ssm_resolver.go AL2023 .../nvidia/recommended, Bottlerocket
        # aws-k8s-<version>-nvidia).
        "amiFamily": stack.facts.amiFamily,
        "instanceType": group.instanceType,
    }
    labels = _node_labels(stack)
    if labels:
        node_group["labels"] = labels
    if stack.config.nodes.taints:
        node_group["taints"] = _taint_objects(stack)
    if stack.facts.devicePluginProvider == "bottlerocket":
        node_group["bottlerocket"] = {"settings": _bottlerocket_settings(stack)["settings"]}
    return {
        "apiVersion": "eksctl.io/v1alpha5",
        "kind": "ClusterConfig",
        "metadata": {
            "name": CLUSTER,
            "region": REGION,
            "version": stack.config.platform.kubernetesVersion,
        },
        "managedNodeGroups": [node_group],
    }


def _nodeadm_config(stack: Stack) -> dict[str, Any]:
    """The kubelet flags nodeadm appends to its defaults (awslabs/amazon-eks-ami
    nodeadm/api/v1alpha1/nodeconfig_types.go KubeletOptions.Flags, group node.eks.aws; 81fec2e):
    the taints and labels of a node no managed node group or Karpenter NodePool registers."""
    flags = []
    labels = _label_strings(stack)
    if labels:
        flags.append(f"--node-labels={','.join(labels)}")
    taints = _taint_strings(stack)
    if taints:
        flags.append(f"--register-with-taints={','.join(taints)}")
    return {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"kubelet": {"flags": flags}},
    }


def _bottlerocket_settings(stack: Stack) -> dict[str, Any]:
    settings: dict[str, Any] = bottlerocket.device_plugin_settings(stack.config)
    for key in reversed(bottlerocket.SETTINGS):
        settings = {key: settings}
    return settings


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))  # a TOML basic string is a JSON string


def _toml_key(key: str) -> str:
    return key if all(c.isalnum() or c in "-_" for c in key) else json.dumps(key)


def _toml(table: dict[str, Any], path: tuple[str, ...] = ()) -> list[str]:
    """TOML tables for nested mappings of strings, numbers and booleans: what Bottlerocket's
    user data takes."""
    lines: list[str] = []
    scalars = {key: value for key, value in table.items() if not isinstance(value, dict)}
    if scalars and path:
        lines.append(f"[{'.'.join(_toml_key(part) for part in path)}]")
    lines += [f"{_toml_key(key)} = {_toml_value(value)}" for key, value in scalars.items()]
    for key, value in table.items():
        if isinstance(value, dict):
            if lines:
                lines.append("")
            lines += _toml(value, (*path, key))
    return lines


def _eks(stack: Stack) -> tuple[Files, Where, Notes]:
    group = stack.config.nodes.eks
    assert group is not None  # config loading requires it on EKS profiles
    on_bottlerocket = stack.facts.devicePluginProvider == "bottlerocket"
    files = {"eksctl-nodegroup.yaml": _yaml(_eks_node_group(stack))}
    # eksctl installs its own copy of NVIDIA's device plugin (kube-system
    # nvidia-device-plugin-daemonset) with a node group of GPU instances on these AMI families
    # unless told not to (eksctl-io/eksctl pkg/eks/tasks.go ClusterTasksForNodeGroups,
    # pkg/ctl/cmdutils/nodegroup_flags.go `--install-nvidia-plugin`, default true; 99984ad):
    # beside gpustack's plugin or DRA driver it would advertise the same GPUs a second time.
    ours = stack.config.devicePlugin.enabled or stack.dra_enabled
    no_eksctl_plugin = (
        " --install-nvidia-plugin=false"
        if ours and stack.facts.amiFamily in EKSCTL_NVIDIA_PLUGIN_AMI_FAMILIES
        else ""
    )
    why_no_eksctl_plugin = (
        ". `--install-nvidia-plugin=false` keeps eksctl from installing its own NVIDIA device "
        "plugin (`nvidia-device-plugin-daemonset` in `kube-system`), which would advertise the "
        f"GPUs a second time beside gpustack's {'DRA driver' if stack.dra_enabled else 'plugin'}"
        "; where eksctl created GPU node groups before, it is there: `kubectl -n kube-system "
        "delete daemonset nvidia-device-plugin-daemonset`"
        if no_eksctl_plugin
        else ""
    )
    where = [
        (
            "eksctl-nodegroup.yaml",
            f"replace CLUSTER and REGION and run `eksctl create nodegroup -f "
            f"eksctl-nodegroup.yaml{no_eksctl_plugin}`: a managed node "
            f"group of {group.instanceType} with the "
            f"`{stack.facts.amiFamily}` AMI family, for which eksctl picks the NVIDIA AMI, and "
            "the taints and labels the manifests expect. EKS applies them to each node when it "
            "registers; to change them later, update the node group (EKS "
            "`UpdateNodegroupConfig`, or the EKS console). Merge "
            "`managedNodeGroups` into your own ClusterConfig to keep one file per cluster"
            + why_no_eksctl_plugin,
        )
    ]
    notes = []
    if on_bottlerocket:
        files["bottlerocket-settings.toml"] = (
            HEADER + "\n".join(_toml(_bottlerocket_settings(stack))) + "\n"
        )
        where.append(
            (
                "bottlerocket-settings.toml",
                "the same device plugin settings as Bottlerocket user data, for nodes eksctl does "
                "not create: a Karpenter `EC2NodeClass` takes it as `spec.userData` (with the "
                "taints and labels in the NodePool's `spec.template`), a launch template of "
                "self-managed nodes as its user data. Bottlerocket merges it over its defaults "
                "when the node boots",
            )
        )
        notes.append(_bottlerocket_note(stack))
    else:
        files["nodeadm-nodeconfig.yaml"] = _yaml(_nodeadm_config(stack))
        where.append(
            (
                "nodeadm-nodeconfig.yaml",
                "for self-managed nodes (a launch template of your own): the same taints and "
                "labels as kubelet flags, a `NodeConfig` document to add to the user data beside "
                "the one naming the cluster (nodeadm merges them); managed node groups and "
                "Karpenter, whose NodePool `spec.template` carries taints and labels, need none",
            )
        )
        image = stack.facts.driver.nodeImage or "the node image"
        notes.append(
            f"Container runtime: nothing to do on the nodes. {image[0].upper()}{image[1:]} ships "
            "the driver and the NVIDIA Container Toolkit, and nodeadm makes `nvidia` "
            f"containerd's default runtime at every boot (`{stack.facts.runtime.containerdConfig}`"
            "), so GPU pods name no RuntimeClass. The AMI is the unit of upgrade: a new AMI "
            "release (a managed node group update) brings a new driver and toolkit and replaces "
            "the nodes."
        )
    return files, where, notes


def _bottlerocket_note(stack: Stack) -> str:
    plugin = stack.config.devicePlugin
    if stack.config.gpuAllocation == "dra" and stack.config.dra.gpus.enabled:
        return (
            "Device plugin: NVIDIA's DRA driver hands out these nodes' GPUs, so "
            "`enabled = false` turns off the device plugin Bottlerocket runs as the host "
            "service `nvidia-k8s-device-plugin` (Bottlerocket 1.63.0 or later: an older release "
            "refuses user data that names a setting it lacks). Roll the node group to move its "
            "nodes from one to the other."
        )
    parts = [
        "Device plugin: Bottlerocket runs NVIDIA's device plugin as the host service "
        "`nvidia-k8s-device-plugin`, configured by `settings.kubelet-device-plugins.nvidia`; "
        "gpustack renders no plugin DaemonSet, and the `devicePlugin` section of the config "
        "becomes these settings. Bottlerocket restarts the service when a setting changes "
        "(`apiclient set` on a running node); a new setting in the node group's user data "
        "reaches new nodes, so roll the node group."
    ]
    if plugin.migStrategy == "single":
        parts.append(
            "MIG: Bottlerocket's MIG manager (`nvidia-migmanager.service`) partitions the GPUs "
            "at boot from `mig.profile`; a changed profile takes effect when the node reboots."
        )
    return " ".join(parts)


_WRITERS = {
    "eks-node-group": _eks,
    "kubeadm-join": _kubeadm,
    "rke2-agent-config": _rancher,
    "k3s-agent-config": _rancher,
    "gke-node-pool": _gke,
    "aks-node-pool": _aks,
    "openshift-machineset": _openshift,
}


def _readme(stack: Stack, where: Where, notes: Notes) -> str:
    lines = [
        f"<!-- {GENERATED} -->",
        f"# Node-side settings for {stack.name} ({stack.profile.metadata.name})",
        "",
        "kubectl does not apply these files and `kustomization.yaml` does not list them: they",
        "configure the GPU nodes themselves, so that the taints the manifests tolerate and the",
        "labels they select on exist.",
        "",
    ]
    lines += [f"- `{name}`: {text}." for name, text in where]
    for note in notes:
        lines += ["", note]
    return "\n".join(lines) + "\n"
