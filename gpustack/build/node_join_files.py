"""The node files of platforms whose GPU nodes join with a file of their own: kubeadm's join
configuration and containerd drop-in, RKE2's and k3s' agent config, OpenShift's MachineSet
patch and MachineConfigPool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpustack.build import workload
from gpustack.build.node_registration import (
    Files,
    Notes,
    Where,
    as_yaml,
    containerd_restart,
    label_strings,
    node_labels,
    taint_objects,
    taint_strings,
)
from gpustack.layout import HEADER
from gpustack.resolve.stack import Stack

# kubeadm reads v1beta4 from 1.31 on; older kubeadm knows v1beta3 only (kubernetes.io, "kubeadm
# Configuration (v1beta4)", changes listed from v1.31).
KUBEADM_V1BETA4_FROM = (1, 31)
# NFD's label for a node's RHCOS build, which each pinned driver DaemonSet selects (gpu-operator
# internal/state/nodepool.go nfdOSTreeVersionLabelKey, v26.7.0).
OSTREE_VERSION_LABEL = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"


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
        "taints": taint_objects(stack),
    }
    labels = label_strings(stack)
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


def kubeadm(stack: Stack) -> tuple[Files, Where, Notes]:
    join = {
        "apiVersion": _kubeadm_api(stack),
        "kind": "JoinConfiguration",
        "nodeRegistration": _node_registration(stack),
    }
    files = {"join-configuration.yaml": as_yaml(join)}
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
        files["init-configuration.yaml"] = as_yaml(init)
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
            f"`{facts.configFile}` and {containerd_restart(facts.restartMode)} on each GPU "
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


def rancher(stack: Stack) -> tuple[Files, Where, Notes]:
    names = _RANCHER[stack.facts.taintMechanism]
    product = names.product
    config: dict[str, Any] = {"node-taint": taint_strings(stack)}
    labels = label_strings(stack)
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
        {names.node_file: as_yaml(config)},
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
# OpenShift: machines get taints and labels from their MachineSet's template.


def openshift(stack: Stack) -> tuple[Files, Where, Notes]:
    template_spec: dict[str, Any] = {}
    labels = node_labels(stack)
    pool = stack.gpu_machine_config_pool
    if pool:
        # The role the GPU MachineConfigPool selects nodes by; the Machine API puts the
        # template's spec.metadata.labels on each new machine's node (nodelink controller).
        labels[workload.NODE_ROLE_PREFIX + pool] = ""
    if labels:
        template_spec["metadata"] = {"labels": labels}
    template_spec["taints"] = taint_objects(stack)
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
    return {"machineset-patch.yaml": as_yaml(patch)}, where, notes


def _rhcos_builds(stack: Stack) -> list[str]:
    """The RHCOS builds the driver DaemonSets are pinned to (none: one for every node)."""
    driver = stack.config.driver
    if stack.driver_mode != "driver-toolkit":
        return []
    if driver.rhcosBuilds:
        return [build.rhcosVersion for build in driver.rhcosBuilds]
    return [driver.rhcosVersion] if driver.rhcosVersion else []
