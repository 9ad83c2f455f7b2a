"""The node files of platforms whose GPU nodes come from a cloud's node pool: GKE's node pool
(a gcloud script and a Config Connector object), AKS's pool script, EKS's node group (eksctl,
with Bottlerocket's or AL2023's node settings). Each pool is created with the taints, labels
and driver setting the manifests expect."""

from __future__ import annotations

import json
from typing import Any

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
from gpustack.config.node_pools import AKSNodePool, GKENodePool, NodePool
from gpustack.layout import HEADER
from gpustack.resolve import bottlerocket
from gpustack.resolve.stack import Stack

# Placeholders the user replaces in the GKE node pool files (the README says so).
CLUSTER, LOCATION = "CLUSTER", "LOCATION"
# ... and in the EKS node group file (eksctl ClusterConfig metadata.name and .region, both
# required: eksctl-io/eksctl pkg/apis/eksctl.io/v1alpha5/types.go ClusterMeta).
REGION = "REGION"


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
    labels = [label for label in label_strings(stack) if not label.startswith(f"{GKE_POOL}=")]
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


def gke(stack: Stack) -> tuple[Files, Where, Notes]:
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
            "containernodepool.yaml": as_yaml(_gke_node_pool(stack)),
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
    taints = taint_strings(stack)
    if taints:
        flags.append(f"--node-taints='{','.join(taints)}'")
    labels = label_strings(stack)
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


def aks(stack: Stack) -> tuple[Files, Where, Notes]:
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
            f"{containerd_restart(facts.restartMode)} on each GPU node, new and autoscaled "
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
    labels = node_labels(stack)
    if labels:
        node_group["labels"] = labels
    if stack.config.nodes.taints:
        node_group["taints"] = taint_objects(stack)
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
    labels = label_strings(stack)
    if labels:
        flags.append(f"--node-labels={','.join(labels)}")
    taints = taint_strings(stack)
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


def eks(stack: Stack) -> tuple[Files, Where, Notes]:
    group = stack.config.nodes.eks
    assert group is not None  # config loading requires it on EKS profiles
    on_bottlerocket = stack.facts.devicePluginProvider == "bottlerocket"
    files = {"eksctl-nodegroup.yaml": as_yaml(_eks_node_group(stack))}
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
        files["nodeadm-nodeconfig.yaml"] = as_yaml(_nodeadm_config(stack))
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
