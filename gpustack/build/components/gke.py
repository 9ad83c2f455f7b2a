"""GKE specifics: Google's driver installer DaemonSet and the quota that admits critical pods.

Facts from GoogleCloudPlatform/container-engine-accelerators @992db812,
nvidia-driver-installer/cos/daemonset-preloaded.yaml and nvidia-driver-installer/ubuntu/
daemonset-preloaded.yaml (the "preloaded" variants: GKE ships the installer image on the node).
The two differ in host namespaces, image, env, hostPaths and the COS-only `partition-gpus` init
container, so the profile's `facts.driver.installerOS` picks one.
"""

from __future__ import annotations

from typing import Any

from gpustack.build import pod
from gpustack.build.pod import host_path_volume
from gpustack.build.workload import daemonset, gpu_node_affinity, gpu_pod_spec
from gpustack.config.profile_model import CriticalPodsQuota
from gpustack.errors import UserError
from gpustack.resolve.stack import Stack

INSTALLER = "nvidia-driver-installer"
# The installers run where upstream runs them: kube-system admits system-node-critical pods
# without a quota.
INSTALLER_NAMESPACE = "kube-system"
CRITICAL_PODS_QUOTA = "critical-pods"
# Google's docs find the installer's logs with `-l k8s-app=nvidia-driver-installer`.
UPSTREAM_LABEL = {"k8s-app": INSTALLER}
# The main container only keeps the pod Running once the init containers have installed the driver.
PAUSE_IMAGE = (
    "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
)
# Where GKE keeps the driver on the host (installer env NVIDIA_INSTALL_DIR_HOST).
DRIVER_DIR = "/home/kubernetes/bin/nvidia"
INSTALLER_CPU = "150m"


def build(stack: Stack) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    # In kube-system the quota is not needed, and it would cap the platform's own critical pods.
    if stack.facts.criticalPodsQuota is not None and stack.namespace != INSTALLER_NAMESPACE:
        objects.append(_critical_pods_quota(stack, stack.facts.criticalPodsQuota))
    if stack.driver_mode == "gke-installer":
        objects.append(_installer(stack))
    return objects


def _critical_pods_quota(stack: Stack, quota: CriticalPodsQuota) -> dict[str, Any]:
    """GKE refuses system-node-critical pods outside kube-system ("insufficient quota to match
    these scopes") unless a ResourceQuota in their namespace is scoped to that PriorityClass."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": CRITICAL_PODS_QUOTA, "namespace": stack.namespace},
        "spec": {
            "hard": {"pods": str(quota.pods)},
            "scopeSelector": {
                "matchExpressions": [
                    {
                        "scopeName": "PriorityClass",
                        "operator": "In",
                        "values": list(quota.priorityClasses),
                    }
                ]
            },
        },
    }


def _installer(stack: Stack) -> dict[str, Any]:
    operating_system = stack.facts.driver.installerOS
    if operating_system is None:
        raise UserError(
            f"profile {stack.profile.metadata.name!r} allows driver mode gke-installer but sets "
            "no facts.driver.installerOS (cos or ubuntu)",
            field="driver.mode",
        )
    extra_affinity: list[dict[str, Any]] = [
        # Pools created with gpu-driver-version=default|latest carry this label: GKE installs
        # the driver there itself.
        {"key": "cloud.google.com/gke-gpu-driver-version", "operator": "DoesNotExist"},
    ]
    if operating_system == "cos":
        # Confidential nodes get upstream's separate `-confidential` installer.
        extra_affinity.append(
            {
                "key": "cloud.google.com/gke-confidential-nodes-instance-type",
                "operator": "DoesNotExist",
            }
        )
    os_label = stack.facts.nodeOSLabel
    if os_label is not None:
        # Upstream selects on no OS label (the change that added one was never merged), so in a
        # cluster with COS and Ubuntu GPU pools both installers would land on every GPU node.
        extra_affinity.append(
            {"key": os_label.key, "operator": os_label.operator, "values": list(os_label.values)}
        )
    # The installer runs before there is a driver for any nvidia runtime to inject.
    pod_spec = gpu_pod_spec(stack, runtime_class=False)
    pod_spec["affinity"] = gpu_node_affinity(stack, extra_affinity)
    # As upstream: a node without a driver is useless to every GPU workload, so no taint, even
    # one this config does not know, may keep the installer off a GPU node.
    pod_spec["tolerations"] = [{"operator": "Exists"}]
    pod_spec.update(_cos() if operating_system == "cos" else _ubuntu())
    pod_spec["containers"] = [
        {
            "name": "pause",
            "image": PAUSE_IMAGE,
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
            },
        }
    ]
    # Named per OS (upstream: nvidia-driver-installer) so that the COS and Ubuntu installers of
    # a cluster with both kinds of pool can coexist in kube-system.
    name = f"{INSTALLER}-{operating_system}"
    installer = daemonset(
        stack, name, pod_spec, component="driver-installer", labels=UPSTREAM_LABEL
    )
    installer["metadata"]["namespace"] = INSTALLER_NAMESPACE
    return installer


def _cos() -> dict[str, Any]:
    """cos/daemonset-preloaded.yaml: cos-gpu-installer installs the default driver of the node's
    COS build into the host's root filesystem, then the pool's MIG partitions are created."""
    return {
        # Upstream runs the COS installer in the host's network and PID namespaces.
        "hostNetwork": True,
        "hostPID": True,
        "initContainers": [
            {
                "name": INSTALLER,
                # Preloaded on COS GPU nodes; pulling it is neither needed nor possible.
                "image": "cos-nvidia-installer:fixed",
                "imagePullPolicy": "Never",
                "command": [
                    "bash",
                    "-c",
                    # Skip nodes whose driver is already loaded (upstream's check).
                    "if lsmod | grep -q nvidia; then exit 0; fi\n"
                    "/cos-gpu-installer install || exit 1\n",
                ],
                "env": [
                    pod.env("NVIDIA_INSTALL_DIR_HOST", DRIVER_DIR),
                    pod.env("NVIDIA_INSTALL_DIR_CONTAINER", "/usr/local/nvidia"),
                    {"name": "VULKAN_ICD_DIR_HOST", "value": f"{DRIVER_DIR}/vulkan/icd.d"},
                    pod.env("VULKAN_ICD_DIR_CONTAINER", "/etc/vulkan/icd.d"),
                    pod.env("ROOT_MOUNT_DIR", "/root"),
                    pod.env("COS_TOOLS_DIR_HOST", "/var/lib/cos-tools"),
                    pod.env("COS_TOOLS_DIR_CONTAINER", "/build/cos-tools"),
                ],
                "resources": {"requests": {"cpu": INSTALLER_CPU}},
                # Privileged: it loads kernel modules and creates /dev/nvidia* on the host.
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    {"name": "nvidia-install-dir-host", "mountPath": "/usr/local/nvidia"},
                    {"name": "vulkan-icd-mount", "mountPath": "/etc/vulkan/icd.d"},
                    {"name": "dev", "mountPath": "/dev"},
                    {"name": "root-mount", "mountPath": "/root"},
                    {"name": "cos-tools", "mountPath": "/build/cos-tools"},
                ],
            },
            {
                # Applies the pool's MIG partition size from /etc/nvidia/gpu_config.json.
                "name": "partition-gpus",
                "image": "gcr.io/gke-release/nvidia-partition-gpu@sha256:"
                "de12f85ebfb4fb6c1893cd30c23aab662a72fa0448f97ef74fccb82d7522ef17",
                "env": [pod.env("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")],
                "resources": {"requests": {"cpu": INSTALLER_CPU}},
                # Privileged: switching MIG mode and creating GPU instances needs full device
                # access through the driver.
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    {"name": "nvidia-install-dir-host", "mountPath": "/usr/local/nvidia"},
                    {"name": "dev", "mountPath": "/dev"},
                    {"name": "nvidia-config", "mountPath": "/etc/nvidia"},
                ],
            },
        ],
        "volumes": [
            host_path_volume("dev", "/dev"),
            host_path_volume("vulkan-icd-mount", f"{DRIVER_DIR}/vulkan/icd.d"),
            host_path_volume("nvidia-install-dir-host", DRIVER_DIR),
            host_path_volume("root-mount", "/"),
            host_path_volume("cos-tools", "/var/lib/cos-tools"),
            host_path_volume("nvidia-config", "/etc/nvidia"),
        ],
    }


def _ubuntu() -> dict[str, Any]:
    """ubuntu/daemonset-preloaded.yaml: the image's entrypoint installs the driver for the running
    kernel; no host namespaces, no env, and no MIG step."""
    return {
        "initContainers": [
            {
                "name": INSTALLER,
                # Preloaded on Ubuntu GPU nodes (upstream sets no pull policy).
                "image": "gke-nvidia-installer:fixed",
                "resources": {"requests": {"cpu": INSTALLER_CPU}},
                # Privileged: it installs kernel modules for the host kernel (from /boot) and
                # writes the driver into the host's root filesystem.
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    {"name": "boot", "mountPath": "/boot"},
                    {"name": "dev", "mountPath": "/dev"},
                    {"name": "root-mount", "mountPath": "/root"},
                ],
            }
        ],
        "volumes": [
            host_path_volume("dev", "/dev"),
            host_path_volume("boot", "/boot"),
            host_path_volume("root-mount", "/"),
        ],
    }
