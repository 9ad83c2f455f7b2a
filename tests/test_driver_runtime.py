"""Who installs the driver, who configures the container runtime, and whether every component
agrees with them: the device plugin, GFD, the DCGM exporter and the Container Toolkit must look
for the driver and the device nodes where the driver really is, and hand GPUs over the way the
runtime is configured to take them.

Expectations come from upstream facts, not from gpustack's code:
- a driver container installs the driver into /run/nvidia/driver (NVIDIA/gpu-operator
  controllers/object_controls.go `DefaultDriverInstallDir`, v26.7.0), a host driver is at `/`
  (k8s-device-plugin `--driver-root` default), GKE's at /home/kubernetes/bin/nvidia with its
  device nodes on the host's /dev (NVIDIA/cloud-native-docs google-gke.rst);
- the device plugin's dev root defaults to its driver root (k8s-device-plugin v0.20.0
  api/config/v1/config.go);
- CDI strategies need a CDI-enabled runtime with the toolkit installed (k8s-device-plugin
  docs/cdi.md), which the GPU Operator's toolkit turns on with `CDI_ENABLED=true`
  (transformToolkitCtrForCDI);
- GPU Operator v26.7.0 ships driver 595.91.07 and toolkit v1.20.0 (deployments/gpu-operator/
  values.yaml).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED, stack_for, validate_upstream, yaml_documents
from manifests import schedulable
from ruamel.yaml import YAML

from gpustack.build.pipeline import Rendering, render
from gpustack.errors import UserError
from gpustack.validation import lint

HOST = "/"
CONTAINER_ROOT = "/run/nvidia/driver"
GKE_ROOT = "/home/kubernetes/bin/nvidia"
DRIVER_IMAGE = "nvcr.io/nvidia/driver"
TOOLKIT_IMAGE = "nvcr.io/nvidia/k8s/container-toolkit"
DRIVER_DAEMONSET = "nvidia-driver-daemonset"
CONTAINER = {"driver": {"mode": "container"}}

# What the GPU Operator sets where its toolkit turns CDI on: the annotations work on every
# Kubernetes version, the CRI field from 1.29 (gpu-operator controllers/object_controls.go,
# DEVICE_LIST_STRATEGY; k8s-device-plugin README, DEVICE_LIST_STRATEGY).
CDI = ["cdi-annotations", "cdi-cri"]

# profile, config sections, who installs the driver, who configures the runtime,
# driver root, dev root, device list strategy (None: no NVIDIA device plugin).
CASES = [
    ("kubeadm", {}, "host", "node/99-nvidia.toml", HOST, HOST, "envvar"),
    (
        "kubeadm",
        CONTAINER,
        "nvidia-driver-daemonset",
        "nvidia-container-toolkit-daemonset",
        CONTAINER_ROOT,
        CONTAINER_ROOT,
        CDI,
    ),
    # RKE2 writes its own containerd config once the toolkit is on the host (rke2-docs).
    ("rke2", {}, "host", "platform", HOST, HOST, "envvar"),
    (
        "rke2",
        CONTAINER,
        "nvidia-driver-daemonset",
        "nvidia-container-toolkit-daemonset",
        CONTAINER_ROOT,
        CONTAINER_ROOT,
        CDI,
    ),
    # OpenShift: the GPU Operator's way, DTK driver and the toolkit configuring CRI-O.
    (
        "openshift",
        {},
        "nvidia-driver-daemonset",
        "nvidia-container-toolkit-daemonset",
        CONTAINER_ROOT,
        CONTAINER_ROOT,
        CDI,
    ),
    (
        "openshift",
        {"driver": {"mode": "preinstalled"}},
        "host",
        "nvidia-container-toolkit-daemonset",
        HOST,
        HOST,
        CDI,
    ),
    ("gke-cos", {}, "GKE", "platform", None, None, None),
    (
        "gke-ubuntu",
        {"driver": {"mode": "gke-installer"}},
        "nvidia-driver-installer-ubuntu",
        "platform",
        None,
        None,
        None,
    ),
]


def daemonsets(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in rendering.objects if o["kind"] == "DaemonSet"}


def pod(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


# The driver pod's container that evicts the GPU pods as the pod stops (tests/test_driver_stop.py);
# the others install the driver.
EVICTION = "gpu-pod-eviction"


def installers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod's containers, the driver pod's eviction container left out."""
    return [c for c in pod(workload)["containers"] if c["name"] != EVICTION]


def images(workload: dict[str, Any]) -> list[str]:
    return [c["image"] for c in installers(workload)]


def driver_installer(rendering: Rendering) -> str:
    for name, workload in daemonsets(rendering).items():
        if any(
            image.startswith(DRIVER_IMAGE + ":") or "nvidia-installer" in image
            for image in [
                *images(workload),
                *(c["image"] for c in pod(workload).get("initContainers", [])),
            ]
        ):
            return name
    pool = rendering.node_files.get("gke-node-pool.sh", "")
    return "GKE" if "gpu-driver-version=default" in pool else "host"


def runtime_configurer(rendering: Rendering) -> str:
    for name, workload in daemonsets(rendering).items():
        if any(image.startswith(TOOLKIT_IMAGE + ":") for image in images(workload)):
            return name
    if "99-nvidia.toml" in rendering.node_files:
        return "node/99-nvidia.toml"
    return "platform"


def plugin_flags(rendering: Rendering) -> dict[str, Any] | None:
    for obj in rendering.objects:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "nvidia-device-plugin-config":
            flags: dict[str, Any] = YAML(typ="safe").load(obj["data"]["config.yaml"])["flags"]
            return flags
    return None


def rendered(tmp_path: Path, profile: str, sections: dict[str, Any]) -> Rendering:
    return render(stack_for(tmp_path, profile, **sections))


@pytest.mark.parametrize(
    ("profile", "sections", "installer", "configurer", "driver_root", "dev_root", "strategy"),
    CASES,
    ids=[f"{case[0]}-{case[1].get('driver', {}).get('mode', 'default')}" for case in CASES],
)
def test_who_installs_the_driver_and_configures_the_runtime_and_everyone_agrees(
    tmp_path, profile, sections, installer, configurer, driver_root, dev_root, strategy
):
    rendering = rendered(tmp_path, profile, sections)
    assert driver_installer(rendering) == installer
    assert runtime_configurer(rendering) == configurer
    flags = plugin_flags(rendering)
    if strategy is None:
        assert flags is None
        return
    assert flags is not None
    assert flags["nvidiaDriverRoot"] == driver_root
    assert flags.get("nvidiaDevRoot", flags["nvidiaDriverRoot"]) == dev_root
    assert flags["plugin"]["deviceListStrategy"] == strategy
    workloads = daemonsets(rendering)
    classes = {
        o["metadata"]["name"]: o["handler"]
        for o in rendering.objects
        if o["kind"] == "RuntimeClass"
    }
    plugin = pod(workloads["nvidia-device-plugin"])
    # GFD reads the plugin's config file, so it sees the same roots and strategy.
    gfd = pod(workloads["gpu-feature-discovery"])
    assert env(gfd["containers"][0])["CONFIG_FILE"] == env(plugin["containers"][0])["CONFIG_FILE"]
    runtime_class = plugin.get("runtimeClassName")
    for name in ("gpu-feature-discovery", "nvidia-dcgm-exporter"):
        assert pod(workloads[name]).get("runtimeClassName") == runtime_class, name
    if configurer.endswith("-daemonset"):
        toolkit = env(pod(workloads[configurer])["containers"][0])
        assert toolkit["NVIDIA_DRIVER_ROOT"] == driver_root
        assert toolkit["NVIDIA_DEV_ROOT"] == dev_root
        # CDI strategies need the runtime's CDI turned on by the toolkit (docs/cdi.md).
        assert (toolkit.get("CDI_ENABLED") == "true") == (strategy == CDI)
        # With CDI the GPU stack's own pods run under the nvidia handler, runc stays default.
        assert runtime_class is not None
        handler = classes.get(runtime_class, runtime_class)  # RKE2 ships its own class
        if "CONTAINERD_RUNTIME_CLASS" in toolkit:
            assert toolkit["CONTAINERD_RUNTIME_CLASS"] == handler
        # The driver and the toolkit provide the nvidia runtime: they cannot run under it.
        assert "runtimeClassName" not in pod(workloads[configurer])
    if installer.endswith("-daemonset"):
        assert "runtimeClassName" not in pod(workloads[installer])
        assert configurer != "node/99-nvidia.toml"
    for obj in rendering.objects:
        if obj["kind"] == "DaemonSet" and obj["metadata"]["name"] in (installer, configurer):
            validate_upstream(obj, rendering.kubernetes_version)
    gpu_findings = [
        f
        for f in lint.run(
            rendering.objects,
            rendering.kubernetes_version,
            taints=rendering.taints,
            node_labels=rendering.node_labels,
        )
        if f.severity == "error"
    ]
    assert gpu_findings == []


def test_defaults_are_the_gpu_operators(tmp_path):
    workloads = daemonsets(rendered(tmp_path, "kubeadm", CONTAINER))
    assert images(workloads["nvidia-driver-daemonset"]) == [f"{DRIVER_IMAGE}:595.91.07-ubuntu22.04"]
    assert images(workloads["nvidia-container-toolkit-daemonset"]) == [f"{TOOLKIT_IMAGE}:v1.20.0"]


def test_driver_container_rolls_one_node_at_a_time(tmp_path):
    """Upstream's updates OnDelete (the operator's upgrade controller deletes the pods node by
    node): a rolling restart without anything evicting the GPU pods first would unload the driver
    under them. Here its init container, k8s-driver-manager, evicts them and unloads the old
    driver, so the DaemonSet rolls, `driver.upgrade.maxUnavailable` (1) node at a time."""
    workload = daemonsets(rendered(tmp_path, "rke2", CONTAINER))["nvidia-driver-daemonset"]
    assert workload["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1},
    }
    assert [c["name"] for c in pod(workload)["initContainers"]] == [
        "deploy-labels",
        "k8s-driver-manager",
    ]


@pytest.mark.parametrize("profile", ["kubeadm", "openshift"])
def test_a_restarted_driver_pod_keeps_the_driver_gpu_pods_hold(tmp_path, profile):
    """The driver container unloads the kernel modules when it starts, which fails while GPU pods
    hold them (a crash loop), unless DRIVER_CONFIG_DIGEST equals the digest the running driver
    stored: then it installs only the user-space files (gpu-driver-container
    `_should_skip_kernel_module_reload`; the GPU Operator sets the digest on both containers)."""

    def digests(driver: dict[str, Any], **sections: Any) -> set[str | None]:
        mode = {"mode": "container"} if profile == "kubeadm" else {}
        config = {"driver": {**mode, **driver}, **sections}
        workload = daemonsets(rendered(tmp_path, profile, config))["nvidia-driver-daemonset"]
        return {env(c).get("DRIVER_CONFIG_DIGEST") for c in installers(workload)}

    first = digests({})
    (digest,) = first  # the same on every driver container (the DTK sidecar too)
    assert digest
    assert digests({}) == first
    assert digests({}, nodes={"taints": []}) == first  # not what the driver installs
    assert digests({"version": "580.178.04"}) != first  # a new driver: a full install


def _affinity(workload: dict[str, Any]) -> dict[str, list[str]]:
    (term,) = pod(workload)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return {e["key"]: e.get("values", []) for e in term["matchExpressions"]}


def test_driver_image_lands_only_on_nodes_it_was_built_for(tmp_path):
    workload = daemonsets(
        rendered(tmp_path, "kubeadm", {"driver": {"mode": "container", "nodeOS": "rhel9.6"}})
    )["nvidia-driver-daemonset"]
    assert images(workload) == [f"{DRIVER_IMAGE}:595.91.07-rhel9.6"]
    affinity = _affinity(workload)
    # NFD's default system source labels (os_release ID and VERSION_ID).
    assert affinity["feature.node.kubernetes.io/system-os_release.ID"] == ["rhel"]
    assert affinity["feature.node.kubernetes.io/system-os_release.VERSION_ID"] == ["9.6"]
    # RHEL's driver container needs the host's subscription for kernel headers (gpu-operator
    # SubscriptionPathMap).
    mounts = {m["mountPath"] for m in pod(workload)["containers"][0]["volumeMounts"]}
    assert {"/run/secrets/etc-pki-entitlement", "/run/secrets/rhsm"} <= mounts


def test_precompiled_driver_is_per_kernel(tmp_path):
    # Precompiled tags are <branch>-<kernel>-<os> (gpu-operator golden precompiled render:
    # 535-5.4.0-150-generic-ubuntu22.04, selected on kernel-version.full).
    workload = daemonsets(
        rendered(
            tmp_path,
            "kubeadm",
            {
                "driver": {
                    "mode": "container",
                    "precompiled": True,
                    "kernelVersion": "6.8.0-60-generic",
                    "nodeOS": "ubuntu24.04",
                }
            },
        )
    )["nvidia-driver-daemonset"]
    assert images(workload) == [f"{DRIVER_IMAGE}:595-6.8.0-60-generic-ubuntu24.04"]
    assert _affinity(workload)["feature.node.kubernetes.io/kernel-version.full"] == [
        "6.8.0-60-generic"
    ]


def test_precompiled_drivers_follow_a_rolling_kernel_upgrade(tmp_path):
    """A precompiled image serves one kernel (gpu-operator v26.7.0 golden driver-precompiled
    render: the image `<branch>-<kernel>-<os>`, the DaemonSet on NFD's kernel-version.full; the
    operator's NVIDIADriver renders one DaemonSet per OS and kernel, internal/state/driver.go).
    With the old and the new kernel listed, a node rebooted into the new kernel gets the new
    kernel's driver pod, one not yet rebooted keeps its own: every node has exactly one."""
    kernels = ["6.8.0-60-generic", "6.8.0-62-generic"]
    driver = {
        "mode": "container",
        "precompiled": True,
        "kernelVersions": kernels,
        "nodeOS": "ubuntu24.04",
    }
    pool = {"name": "inference", "selector": {"example.com/gpu-pool": "inference"}, "canary": True}
    workloads = daemonsets(
        rendered(tmp_path, "kubeadm", {"driver": driver, "nodes": {"pools": [pool]}})
    )
    drivers = {
        name: workload
        for name, workload in workloads.items()
        if workload["metadata"]["labels"]["app.kubernetes.io/component"] == "nvidia-driver"
    }
    assert sorted(drivers) == [
        "nvidia-driver-daemonset-6.8.0-60-generic",
        "nvidia-driver-daemonset-6.8.0-62-generic",
        "nvidia-driver-daemonset-inference-6.8.0-60-generic",
        "nvidia-driver-daemonset-inference-6.8.0-62-generic",
    ]
    for kernel in kernels:
        workload = drivers[f"nvidia-driver-daemonset-{kernel}"]
        assert images(workload) == [f"{DRIVER_IMAGE}:595-{kernel}-ubuntu24.04"]

    def runs_on(labels: dict[str, str]) -> list[str]:
        node = {
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
            "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04",
            **labels,
        }
        return [name for name, workload in drivers.items() if schedulable(workload, node)]

    for kernel in kernels:
        labels = {"feature.node.kubernetes.io/kernel-version.full": kernel}
        assert runs_on(labels) == [f"nvidia-driver-daemonset-{kernel}"]
        pool_labels = {**labels, "example.com/gpu-pool": "inference"}
        assert runs_on(pool_labels) == [f"nvidia-driver-daemonset-inference-{kernel}"]
    # A kernel nobody listed gets no driver pod (no image exists for it).
    assert runs_on({"feature.node.kubernetes.io/kernel-version.full": "6.8.0-63-generic"}) == []


def test_the_kernel_list_renames_once_then_never(tmp_path):
    """docs/day-two.md, kernel upgrades: the switch from driver.kernelVersion to the list renames
    every driver DaemonSet, the canary's in an earlier Argo CD wave than the cluster's (Argo CD
    prunes removed objects in the reverse order of their waves, argoproj/gitops-engine
    pkg/sync/sync_context.go: the canary's old DaemonSet goes last, hence the stall the runbook
    works around); adding and dropping kernels afterwards renames none."""
    pool = {"name": "inference", "selector": {"example.com/gpu-pool": "inference"}, "canary": True}
    argocd = {"tool": "argocd", "argocd": {"repoURL": "https://git.example.com/gpu.git"}}

    def drivers(**kernel: Any) -> dict[str, int]:
        driver = {"mode": "container", "precompiled": True, "nodeOS": "ubuntu24.04", **kernel}
        sections = {"driver": driver, "nodes": {"pools": [pool]}, "gitops": argocd}
        return {
            name: int(workload["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"])
            for name, workload in daemonsets(rendered(tmp_path, "kubeadm", sections)).items()
            if workload["metadata"]["labels"]["app.kubernetes.io/component"] == "nvidia-driver"
        }

    single = drivers(kernelVersion="6.8.0-60-generic")
    listed = drivers(kernelVersions=["6.8.0-60-generic"])
    both = drivers(kernelVersions=["6.8.0-60-generic", "6.8.0-62-generic"])
    new = drivers(kernelVersions=["6.8.0-62-generic"])
    assert single == {"nvidia-driver-daemonset-inference": 1, "nvidia-driver-daemonset": 2}
    assert not set(single) & set(listed)
    assert set(listed) <= set(both) and set(new) <= set(both)
    assert listed == {k: v for k, v in both.items() if "6.8.0-60" in k}


@pytest.mark.parametrize(
    ("driver", "field"),
    [
        (
            {
                "mode": "container",
                "precompiled": True,
                "kernelVersion": "6.8.0-60-generic",
                "kernelVersions": ["6.8.0-62-generic"],
            },
            "driver.kernelVersion",
        ),
        ({"mode": "container", "kernelVersions": ["6.8.0-62-generic"]}, "driver.kernelVersions"),
        (
            {
                "mode": "container",
                "precompiled": True,
                "kernelVersions": ["6.8.0-62-generic", "6.8.0-62-generic"],
            },
            "driver.kernelVersions.1",
        ),
    ],
)
def test_kernel_versions_mistakes_are_refused(tmp_path, driver, field):
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, "kubeadm", driver=driver)
    assert raised.value.field == field


@pytest.mark.parametrize(
    ("driver", "field"),
    [
        ({"mode": "container", "precompiled": True}, "driver.kernelVersion"),
        (
            {
                "mode": "container",
                "precompiled": True,
                "kernelVersion": "5.14.0-1-default",
                "nodeOS": "rhel9.6",
            },
            "driver.precompiled",
        ),
    ],
)
def test_precompiled_needs_a_kernel_and_ubuntu(tmp_path, driver, field):
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, "kubeadm", driver=driver)
    assert raised.value.field == field


def test_driver_container_without_toolkit_is_refused(tmp_path):
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, "kubeadm", driver={"mode": "container"}, toolkit={"enabled": False})
    assert raised.value.field == "toolkit.enabled"


def test_no_toolkit_where_gpustack_cannot_deploy_it(tmp_path):
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, "gke-cos", toolkit={"enabled": True})
    assert raised.value.field == "toolkit.enabled"


def test_openshift_driver_toolkit_pairs_the_driver_with_a_dtk_sidecar(tmp_path):
    workload = daemonsets(
        rendered(tmp_path, "openshift", {"platform": {"profile": "openshift", **OCP_4_18}})
    )["nvidia-driver-daemonset"]
    spec = pod(workload)
    driver, dtk = installers(workload)
    assert driver["image"] == f"{DRIVER_IMAGE}:595.91.07-rhcos4.18"
    assert dtk["image"] == "registry.redhat.io/openshift4/driver-toolkit-rhel9:v4.18"
    shared = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    for container in (driver, dtk):
        assert shared & {m["name"] for m in container["volumeMounts"]}, container["name"]
    assert env(driver)["OPENSHIFT_VERSION"] == "4.18"


OCP_4_18 = {"openshiftVersion": "4.18", "kubernetesVersion": "1.31"}
# What each OpenShift release's RHCOS says in /etc/os-release, which NFD labels
# (system-os_release.ID, .VERSION_ID): ID=rhcos and the OpenShift minor up to 4.18 (4.14:
# gpu-operator internal/state/nodepool_test.go, v26.7.0); from 4.19 the RHEL it is built from,
# ID=rhel (OpenShift 4.19 release notes, "RHCOS split into layers"; NVIDIA cloud-native-docs
# openshift/steps-overview.rst: 4.19 to 4.21 RHEL 9.6, 4.22 RHEL 9.8). The tag GPU Operator
# v26.7.0 pulls for it: ID and VERSION_ID, RHEL's major version only (controllers/
# state_manager.go getGPUNodeOSInfo; cloud-native-docs gpu-operator/platform-support.rst,
# "ID=rhel and VERSION_ID=9.8 produce rhel9").
OPENSHIFT_RELEASES = [
    ("4.18", "1.31", "rhcos", "4.18", "595.91.07-rhcos4.18"),
    ("4.19", "1.32", "rhel", "9.6", "595.91.07-rhel9"),
    ("4.20", "1.33", "rhel", "9.6", "595.91.07-rhel9"),
    ("4.21", "1.34", "rhel", "9.6", "595.91.07-rhel9"),
    ("4.22", "1.35", "rhel", "9.8", "595.91.07-rhel9"),
]


@pytest.mark.parametrize(
    ("release", "kubernetes", "os_id", "os_version", "tag"), OPENSHIFT_RELEASES
)
def test_openshift_driver_image_is_the_one_the_gpu_operator_pulls_for_the_release(
    tmp_path, release, kubernetes, os_id, os_version, tag
):
    platform = {
        "profile": "openshift",
        "openshiftVersion": release,
        "kubernetesVersion": kubernetes,
    }
    rendering = rendered(tmp_path, "openshift", {"platform": platform})
    workload = daemonsets(rendering)["nvidia-driver-daemonset"]
    driver, dtk = installers(workload)
    assert driver["image"] == f"{DRIVER_IMAGE}:{tag}"
    assert dtk["image"] == f"registry.redhat.io/openshift4/driver-toolkit-rhel9:v{release}"
    # The driver runs only where NFD's os-release labels say the image fits.
    affinity = _affinity(workload)
    assert affinity["feature.node.kubernetes.io/system-os_release.ID"] == [os_id]
    assert affinity["feature.node.kubernetes.io/system-os_release.VERSION_ID"] == [os_version]
    findings = lint.run(
        rendering.objects,
        rendering.kubernetes_version,
        taints=rendering.taints,
        node_labels=rendering.node_labels,
    )
    assert not [f.message for f in findings if f.severity == "error"]


# NVIDIA publishes the drivers it builds now (gpu-driver-container versions.mk DRIVER_VERSIONS:
# 580.178.04, 595.91.07, 610.57.04) for RHCOS as rhcos4.18 and rhel9 only: the release jobs for
# rhcos4.14 to rhcos4.17 went with commit e21b629 (.nvidia-ci.yml); GPU Operator v26.7.0 supports
# OpenShift 4.18 to 4.22 (bundle/metadata/annotations.yaml).
@pytest.mark.parametrize("release", ["4.14", "4.16", "4.17"])
def test_openshift_release_without_a_driver_image_is_refused(tmp_path, release):
    platform = {"profile": "openshift", "openshiftVersion": release}
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, "openshift", platform=platform)
    assert raised.value.field == "platform.openshiftVersion"
    assert f"595.91.07-rhcos{release}" in str(raised.value)
    for fix in ("driver.version", "driver.mode: preinstalled", "4.18"):
        assert fix in (raised.value.hint or ""), fix


def test_an_older_release_takes_a_driver_published_for_it_or_a_host_driver(tmp_path):
    platform = {"profile": "openshift", "openshiftVersion": "4.16"}
    # NVIDIA/gpu-driver-container added 580.82.07 (commit 2a97658) while its .nvidia-ci.yml
    # released every driver as rhcos4.14 to rhcos4.18.
    older = {"version": "580.82.07"}
    workload = daemonsets(
        render(stack_for(tmp_path, "openshift", platform=platform, driver=older))
    )["nvidia-driver-daemonset"]
    assert pod(workload)["containers"][0]["image"] == f"{DRIVER_IMAGE}:580.82.07-rhcos4.16"
    host = render(
        stack_for(tmp_path, "openshift", platform=platform, driver={"mode": "preinstalled"})
    )
    assert "nvidia-driver-daemonset" not in daemonsets(host)


def test_an_openshift_release_the_profile_does_not_know_is_refused(tmp_path):
    # Its Kubernetes written beside it: the release's node OS is what is unknown.
    platform = {"profile": "openshift", "openshiftVersion": "4.30", "kubernetesVersion": "1.43"}
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, "openshift", platform=platform)
    assert raised.value.field == "platform.openshiftVersion"
    assert "facts.driver.nodeOS" in (raised.value.hint or "")


def test_refused_release_is_reported_at_its_line_and_nothing_is_written(tmp_path, cli):
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        'platform:\n  profile: openshift\n  openshiftVersion: "4.16"\n'
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "cluster.yaml:6:" in result.output and "platform.openshiftVersion" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_rhcos_version_pins_the_driver_to_its_build(tmp_path):
    image = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "0" * 64
    # OSTREE_VERSION of an OpenShift 4.19 node (RHEL 9.6 based RHCOS builds are 9.6.<date>-<n>).
    build = "9.6.20250916-0"
    workload = daemonsets(
        rendered(
            tmp_path,
            "openshift",
            {
                "platform": {"profile": "openshift", "openshiftVersion": "4.19"},
                "driver": {"rhcosVersion": build, "driverToolkitImage": image},
            },
        )
    )[f"nvidia-driver-daemonset-{build}"]  # the GPU Operator's name for a build's DaemonSet
    assert _affinity(workload)["feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"] == [
        build
    ]
    dtk = pod(workload)["containers"][1]
    assert dtk["image"] == image
    assert env(dtk)["RHCOS_VERSION"] == build


def test_rhcos_version_needs_its_dtk_image(tmp_path):
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, "openshift", driver={"rhcosVersion": "416.94.202410211619-0"})
    assert raised.value.field == "driver.driverToolkitImage"


def test_the_default_driver_toolkit_image_is_called_out(tmp_path):
    # Red Hat's per-minor DTK tag carries the newest z-stream's kernel; the build needs the nodes'.
    default = rendered(tmp_path, "openshift", {})
    (warning,) = [
        f.message
        for f in default.findings
        if f.rule == "driver-toolkit-z-stream" and "driver-toolkit-rhel9:v4.20" in f.message
    ]
    assert "newest OpenShift 4.20 z-stream" in warning
    # The fix it names: the cluster's builds, read from its driver-toolkit ImageStream.
    assert "driver.rhcosBuilds" in warning and "gpustack driver-toolkit-builds" in warning
    assert "oc get imagestream driver-toolkit -n openshift -o yaml" in warning
    image = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + "0" * 64
    pinned = rendered(tmp_path, "openshift", {"driver": {"driverToolkitImage": image}})
    builds = {
        "nfd": {"mode": "external"},
        "driver": {
            "rhcosBuilds": [{"rhcosVersion": "9.6.20250916-0", "driverToolkitImage": image}]
        },
    }
    listed = rendered(tmp_path, "openshift", builds)
    for quiet in (pinned, listed):
        assert not [f for f in quiet.findings if f.rule == "driver-toolkit-z-stream"]


def golden_daemonset(name: str) -> dict[str, Any]:
    """The DaemonSet of one of the GPU Operator's golden driver renders (internal/state/testdata)."""
    text = (SHARED / "refs/gpu-operator" / name).read_text()
    return next(d for d in yaml_documents(text) if d and d["kind"] == "DaemonSet")


@pytest.mark.shared
def test_driver_container_mounts_the_host_paths_the_gpu_operators_mounts(tmp_path):
    golden = golden_daemonset("golden__driver-minimal.yaml")

    def host_paths(workload: dict[str, Any]) -> dict[str, str]:
        volumes = {v["name"]: v.get("hostPath", {}).get("path") for v in pod(workload)["volumes"]}
        (container,) = [c for c in pod(workload)["containers"] if c["name"] == "nvidia-driver-ctr"]
        return {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}

    ours = host_paths(
        daemonsets(rendered(tmp_path, "kubeadm", CONTAINER))["nvidia-driver-daemonset"]
    )
    theirs = host_paths(golden)
    # Left out: Mellanox OFED sources (GPUDirect RDMA, not deployed) and the operator's startup
    # probe script (a ConfigMap; gpustack's probe is inline).
    left_out = {
        "/run/mellanox/drivers",
        "/run/mellanox/drivers/usr/src",
        "/usr/local/bin/startup-probe.sh",
    }
    assert {
        path: host for path, host in theirs.items() if path not in left_out
    }.items() <= ours.items()


@pytest.mark.shared
def test_driver_container_env_is_the_gpu_operators(tmp_path):
    """Every variable of the operator's driver container (golden driver-minimal render,
    gpu-operator v26.7.0) but NODE_IP, which no script of the driver images reads
    (NVIDIA/gpu-driver-container: ubuntu22.04, ubuntu24.04, rhel9 nvidia-driver, vgpu-manager);
    set here it would change DRIVER_CONFIG_DIGEST and reload every node's driver for nothing.
    The pod anti-affinity that keeps one driver pod per node is the operator's too."""
    golden = golden_daemonset("golden__driver-minimal.yaml")
    workload = daemonsets(rendered(tmp_path, "kubeadm", CONTAINER))["nvidia-driver-daemonset"]

    def names(workload: dict[str, Any]) -> set[str]:
        (container,) = [c for c in pod(workload)["containers"] if c["name"] == "nvidia-driver-ctr"]
        return {e["name"] for e in container.get("env", [])}

    assert names(golden) - names(workload) == {"NODE_IP"}
    (ours,) = pod(workload)["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    (their_term,) = pod(golden)["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert ours["topologyKey"] == their_term["topologyKey"] == "kubernetes.io/hostname"
    assert ours["labelSelector"] == {
        "matchExpressions": [
            {"key": "app.kubernetes.io/component", "operator": "In", "values": ["nvidia-driver"]}
        ]
    }
    # The operator also keeps its vGPU manager off the node; gpustack runs none.
    assert "nvidia-driver" in their_term["labelSelector"]["matchExpressions"][0]["values"]


@pytest.mark.shared
def test_dtk_driver_matches_the_gpu_operators_openshift_render(tmp_path):
    golden = golden_daemonset("golden__driver-openshift-drivertoolkit.yaml")
    theirs = {c["name"]: c for c in pod(golden)["containers"]}
    ours = {
        c["name"]: c
        for c in installers(daemonsets(rendered(tmp_path, "openshift", {}))[DRIVER_DAEMONSET])
    }
    assert set(ours) == set(theirs)
    for name, container in ours.items():
        assert container["command"] == theirs[name]["command"], name
        if name == "nvidia-driver-ctr":
            assert container["args"] == theirs[name]["args"]
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/mnt/shared-nvidia-driver-toolkit" in mounts, name


@pytest.mark.shared
def test_toolkit_mounts_what_the_gpu_operators_toolkit_mounts(tmp_path):
    upstream = YAML(typ="safe").load(
        (SHARED / "refs/gpu-operator/state-container-toolkit__0500_daemonset.yaml").read_text()
    )
    theirs = pod(upstream)
    their_hosts = {v["name"]: v["hostPath"]["path"] for v in theirs["volumes"] if "hostPath" in v}
    ours = pod(
        daemonsets(rendered(tmp_path, "openshift", {}))["nvidia-container-toolkit-daemonset"]
    )
    our_hosts = {v["name"]: v["hostPath"]["path"] for v in ours["volumes"] if "hostPath" in v}
    (their_main,) = theirs["containers"]
    (our_main,) = ours["containers"]
    assert our_main["name"] == their_main["name"]
    for mount in their_main["volumeMounts"]:
        if mount["name"] not in their_hosts:
            continue  # the operator's entrypoint ConfigMap (it waits for its validator)
        ours_at = {m["mountPath"]: our_hosts.get(m["name"]) for m in our_main["volumeMounts"]}
        path = mount["mountPath"]
        expected = their_hosts[mount["name"]]
        # /driver-root is the driver root (the operator's default: the driver container's).
        assert ours_at.get(path) == expected, path
    assert {
        "name": "NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND",
        "value": "management.nvidia.com/gpu",
    } in our_main["env"]


# ---------------------------------------------------------------------------------------------
# Container mode needs no hand on any node: the toolkit configures the runtime where that
# distribution's containerd reads it and restarts it the way upstream does.
#
# Upstream facts the expectations below come from:
# - the installer (NVIDIA/nvidia-container-toolkit v1.20.0, cmd/nvidia-ctk-installer): containerd
#   defaults config /etc/containerd/config.toml, drop-in /etc/containerd/conf.d/99-nvidia.toml,
#   socket /run/containerd/containerd.sock, restart mode `signal` (runtime/containerd/
#   containerd.go), which sends SIGHUP to the PID behind the socket (containerd_linux.go);
#   it installs the runtime into <ROOT>/toolkit (main.go, toolkitSubDir); it adds
#   `<host folder of RUNTIME_DROP_IN_CONFIG_HOST_PATH>/*.toml` to the top-level config's
#   `imports` (pkg/config/engine/containerd/config_drop_in.go, ensureImports, importPattern);
# - containerd reads /etc/containerd/config.toml by default and does not handle SIGHUP, so it
#   exits and its unit (containerd.service: Restart=always) starts it again;
# - RKE2's containerd listens on /run/k3s/containerd/containerd.sock and NVIDIA's RKE2 setup
#   sets only that socket; "The NVIDIA operator restarts containerd with a hangup call which
#   restarts RKE2" (rke2-docs add-ons/gpu_operators.md); RKE2 regenerates
#   /var/lib/rancher/rke2/agent/etc/containerd/config.toml at every start (rke2-docs
#   advanced.md) and adds the runtimes `nvidia`, `nvidia-experimental` and `nvidia-cdi` when it
#   finds their binaries in /usr/local/nvidia/toolkit (RKE2 runs k3s' agent: k3s-io/k3s
#   pkg/agent/containerd/runtimes.go, `nvidia-cdi` since k3s-io/k3s #11065), but its
#   rke2-runtimeclasses chart has RuntimeClasses for the first two only (rancher/rke2-charts
#   packages/rke2-runtimeclasses/charts/values.yaml); a toolkit pointed at RKE2's config or template replaced it (gpu-operator
#   #623, #992).

RKE2_CONTAINERD_DIR = "/var/lib/rancher/rke2/agent/etc/containerd"
RKE2_RUNTIME_DIR = "/usr/local/nvidia/toolkit"
RKE2_RUNTIMES = {"nvidia", "nvidia-cdi", "nvidia-experimental"}
RKE2_RUNTIME_CLASSES = {"nvidia", "nvidia-experimental"}


def toolkit_pod(rendering: Rendering) -> dict[str, Any]:
    return pod(daemonsets(rendering)["nvidia-container-toolkit-daemonset"])


def host_mount(spec: dict[str, Any], path: str) -> tuple[dict[str, Any], str] | None:
    """The toolkit container's hostPath mount that holds a path (the deepest one) and where
    that path is on the host, or None when no host folder is mounted there."""
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    (main,) = spec["containers"]
    holding = [
        m
        for m in main["volumeMounts"]
        if m["name"] in volumes and Path(path).is_relative_to(m["mountPath"])
    ]
    if not holding:
        return None
    mount = max(holding, key=lambda m: len(Path(m["mountPath"]).parts))
    return mount, str(Path(volumes[mount["name"]]) / Path(path).relative_to(mount["mountPath"]))


def host_path(spec: dict[str, Any], path: str) -> str | None:
    found = host_mount(spec, path)
    return found[1] if found else None


def writable(spec: dict[str, Any], path: str) -> bool:
    found = host_mount(spec, path)
    return found is not None and not found[0].get("readOnly", False)


def test_kubeadm_toolkit_drop_in_is_imported_by_containerds_config_and_loaded(tmp_path):
    spec = toolkit_pod(rendered(tmp_path, "kubeadm", CONTAINER))
    (main,) = spec["containers"]
    variables = env(main)
    # The drop-in lands where the installer says it is on the host, so the `imports` it adds
    # to containerd's own config names the folder the file is really in.
    drop_in = variables["RUNTIME_DROP_IN_CONFIG"]
    assert host_path(spec, drop_in) == variables["RUNTIME_DROP_IN_CONFIG_HOST_PATH"]
    assert host_path(spec, drop_in) == "/etc/containerd/conf.d/99-nvidia.toml"
    import_pattern = str(Path(variables["RUNTIME_DROP_IN_CONFIG_HOST_PATH"]).parent / "*.toml")
    assert import_pattern == "/etc/containerd/conf.d/*.toml"
    # ...and that `imports` goes into the config containerd reads, which the toolkit can write.
    config = variables["CONTAINERD_CONFIG"]
    assert variables["RUNTIME_CONFIG"] == config
    assert host_path(spec, config) == "/etc/containerd/config.toml"
    assert writable(spec, config) and writable(spec, drop_in)
    # Loaded without a hand on the node: SIGHUP through the host's containerd socket to a PID
    # of the host's PID namespace.
    assert host_path(spec, variables["CONTAINERD_SOCKET"]) == "/run/containerd/containerd.sock"
    assert variables["RUNTIME_SOCKET"] == variables["CONTAINERD_SOCKET"]
    assert variables["RUNTIME_RESTART_MODE"] == "signal"
    assert spec["hostPID"] is True


def test_rke2_toolkit_installs_the_runtime_where_rke2_finds_it_and_restarts_rke2(tmp_path):
    rendering = rendered(tmp_path, "rke2", CONTAINER)
    spec = toolkit_pod(rendering)
    (main,) = spec["containers"]
    variables = env(main)
    # RKE2 adds the runtime itself when it finds the binary the toolkit installs.
    assert host_path(spec, variables["ROOT"] + "/toolkit") == RKE2_RUNTIME_DIR
    assert writable(spec, variables["ROOT"] + "/toolkit")
    # It does so when it starts: the toolkit restarts RKE2 through its containerd's socket.
    assert host_path(spec, variables["CONTAINERD_SOCKET"]) == "/run/k3s/containerd/containerd.sock"
    assert variables["RUNTIME_SOCKET"] == variables["CONTAINERD_SOCKET"]
    assert variables["RUNTIME_RESTART_MODE"] == "signal"
    assert spec["hostPID"] is True
    # The handler GPU pods ask for is one RKE2 adds (its RuntimeClass `nvidia` names it).
    assert variables["CONTAINERD_RUNTIME_CLASS"] in RKE2_RUNTIMES
    assert not any(o["kind"] == "RuntimeClass" for o in rendering.objects)
    # The toolkit writes nothing RKE2 generates or renders its containerd config from.
    for name in ("CONTAINERD_CONFIG", "RUNTIME_DROP_IN_CONFIG"):
        written = host_path(spec, variables[name])
        assert written is not None
        assert not written.startswith(RKE2_CONTAINERD_DIR), name
    assert "RUNTIME_CONFIG_SOURCE" not in variables
    # Nothing to put on the node for the runtime: no containerd template or drop-in in node/.
    assert sorted(rendering.node_files) == ["README.md", "rke2-agent-config.yaml"]
    agent = YAML(typ="safe").load(rendering.node_files["rke2-agent-config.yaml"])
    assert set(agent) <= {"node-taint", "node-label"}


def test_rke2_takes_only_the_handlers_rke2_adds(tmp_path):
    # RKE2 adds nvidia, nvidia-experimental and nvidia-cdi; kubeadm's runtime gets whatever
    # handler the toolkit is told to write (CONTAINERD_RUNTIME_CLASS).
    experimental = {**CONTAINER, "runtimeClass": {"handler": "nvidia-experimental"}}
    (main,) = toolkit_pod(rendered(tmp_path, "rke2", experimental))["containers"]
    assert env(main)["CONTAINERD_RUNTIME_CLASS"] == "nvidia-experimental"
    for sections in ({}, CONTAINER):
        cdi = {**sections, "runtimeClass": {"name": "nvidia-cdi", "handler": "nvidia-cdi"}}
        rendering = rendered(tmp_path, "rke2", cdi)
        # RKE2's chart has no nvidia-cdi RuntimeClass: gpustack's is the one GPU pods name.
        (runtime_class,) = [o for o in rendering.objects if o["kind"] == "RuntimeClass"]
        assert runtime_class["metadata"]["name"] == runtime_class["handler"] == "nvidia-cdi"
        assert runtime_class["metadata"]["name"] not in RKE2_RUNTIME_CLASSES
        assert pod(daemonsets(rendering)["nvidia-device-plugin"])["runtimeClassName"] == (
            "nvidia-cdi"
        )
    own = {**CONTAINER, "runtimeClass": {"handler": "nvidia-gpu"}}
    (main,) = toolkit_pod(rendered(tmp_path, "kubeadm", own))["containers"]
    assert env(main)["CONTAINERD_RUNTIME_CLASS"] == "nvidia-gpu"
    with pytest.raises(UserError, match=r"runtimeClass\.handler") as error:
        rendered(tmp_path, "rke2", own)
    assert "nvidia, nvidia-cdi, nvidia-experimental" in str(error.value)


def test_rke2_node_readme_needs_no_restart_by_hand(tmp_path):
    readme = rendered(tmp_path, "rke2", CONTAINER).node_files["README.md"]
    assert "nothing to do by hand on any GPU node, new or autoscaled" in readme
    assert "restart `rke2-agent` once" not in readme
    assert f"grep nvidia {RKE2_CONTAINERD_DIR}/config.toml" in readme
    assert "/run/k3s/containerd/containerd.sock" in readme
    # With the host's toolkit there is no DaemonSet to restart RKE2: the README says when RKE2
    # looks for the runtime.
    host = rendered(tmp_path, "rke2", {}).node_files["README.md"]
    assert "before RKE2 starts, or restart `rke2-agent` once after" in host


@pytest.mark.parametrize(
    ("profile", "sections", "mode"),
    [
        ("kubeadm", CONTAINER, "signal"),
        ("rke2", CONTAINER, "signal"),
        # CRI-O: the installer's default, `systemctl restart crio` (crio.go DefaultRestartMode),
        # as the GPU Operator leaves it on OpenShift.
        ("openshift", {}, None),
    ],
)
def test_no_profile_leaves_the_runtime_restart_to_a_person(tmp_path, profile, sections, mode):
    (main,) = toolkit_pod(rendered(tmp_path, profile, sections))["containers"]
    assert env(main).get("RUNTIME_RESTART_MODE") == mode
    assert env(main).get("RUNTIME_RESTART_MODE") != "none"


# ---------------------------------------------------------------------------------------------
# runtimeClass.enabled: false must make nvidia the runtime's default on the nodes.


def drop_in(rendering: Rendering) -> dict[str, Any]:
    text = rendering.node_files["99-nvidia.toml"]
    return tomllib.loads(text)


def cri_plugin(config: dict[str, Any]) -> dict[str, Any]:
    section: dict[str, Any] = config["plugins"]["io.containerd.grpc.v1.cri"]
    return section


def cri(config: dict[str, Any]) -> dict[str, Any]:
    section: dict[str, Any] = config["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    return section


def test_kubeadm_without_runtime_class_makes_nvidia_containerds_default(tmp_path):
    default = drop_in(rendered(tmp_path, "kubeadm", {}))
    assert "default_runtime_name" not in cri(default)
    without = drop_in(rendered(tmp_path, "kubeadm", {"runtimeClass": {"enabled": False}}))
    assert cri(without)["default_runtime_name"] == "nvidia"
    assert "nvidia" in cri(without)["runtimes"]


def test_rke2_without_runtime_class_sets_its_default_runtime(tmp_path):
    for sections, expected in (({}, None), ({"runtimeClass": {"enabled": False}}, "nvidia")):
        agent = YAML(typ="safe").load(
            rendered(tmp_path, "rke2", sections).node_files["rke2-agent-config.yaml"]
        )
        assert agent.get("default-runtime") == expected


def test_toolkit_without_runtime_class_sets_nvidia_as_default(tmp_path):
    for sections, expected in (
        (CONTAINER, "false"),
        ({**CONTAINER, "runtimeClass": {"enabled": False}}, "true"),
    ):
        toolkit = pod(
            daemonsets(rendered(tmp_path, "kubeadm", sections))[
                "nvidia-container-toolkit-daemonset"
            ]
        )["containers"][0]
        assert env(toolkit)["NVIDIA_RUNTIME_SET_AS_DEFAULT"] == expected


@pytest.mark.parametrize(
    ("driver", "systemd"), [(None, True), ("systemd", True), ("cgroupfs", False)]
)
def test_nvidia_runtime_follows_the_nodes_cgroup_driver(tmp_path, driver, systemd):
    nodes = {"cgroupDriver": driver} if driver else {}
    options = cri(drop_in(rendered(tmp_path, "kubeadm", {"nodes": nodes})))["runtimes"]["nvidia"][
        "options"
    ]
    assert options["SystemdCgroup"] is systemd


def test_no_hand_written_drop_in_where_the_toolkit_writes_it(tmp_path):
    rendering = rendered(tmp_path, "kubeadm", CONTAINER)
    assert "99-nvidia.toml" not in rendering.node_files
    assert "/etc/containerd/conf.d/99-nvidia.toml" in rendering.node_files["README.md"]


# ---------------------------------------------------------------------------------------------
# Lint


def rule_hits(objects: list[dict[str, Any]], rule: str) -> list[str]:
    return [f.message for f in lint.run(objects) if f.rule == rule]


def test_cdi_without_toolkit_is_flagged(tmp_path):
    rendering = rendered(tmp_path, "kubeadm", {"devicePlugin": {"deviceListStrategy": "cdi-cri"}})
    # gpustack's own render turns CDI on in its containerd drop-in (docs/cdi.md: a CDI-enabled
    # runtime), which no manifest shows: the plugin carries the rule's exemption.
    assert cri_plugin(drop_in(rendering))["enable_cdi"] is True
    assert rule_hits(rendering.objects, "cdi-without-toolkit") == []
    for obj in rendering.objects:
        obj["metadata"].pop("annotations", None)
    (message,) = rule_hits(rendering.objects, "cdi-without-toolkit")
    assert "cdi-cri" in message
    with_toolkit = rendered(tmp_path, "kubeadm", CONTAINER)
    assert rule_hits(with_toolkit.objects, "cdi-without-toolkit") == []


@pytest.mark.parametrize("version", ["1.27", "1.28", "1.29", "1.31"])
def test_gpu_pods_get_their_devices_on_every_kubernetes_version(tmp_path, version):
    # The CRI's CDI field reaches the runtime from Kubernetes 1.29 (KEP-4009 beta); before, only
    # the CDI annotations do. gpustack's default with the toolkit sends both, as the GPU Operator.
    sections = {**CONTAINER, "platform": {"profile": "kubeadm", "kubernetesVersion": version}}
    default = rendered(tmp_path, "kubeadm", sections)
    assert plugin_flags(default)["plugin"]["deviceListStrategy"] == CDI
    assert [f for f in lint.run(default.objects, version) if f.rule == "cdi-cri-unsupported"] == []
    sections["devicePlugin"] = {"deviceListStrategy": "cdi-cri"}
    explicit = rendered(tmp_path, "kubeadm", sections)
    found = [f.message for f in lint.run(explicit.objects, version) if f.rule.startswith("cdi-")]
    if version < "1.29":
        (message,) = found
        assert f"Kubernetes {version} does not pass" in message and "cdi-annotations" in message
    else:
        assert found == []


def test_second_driver_container_is_flagged(tmp_path):
    import copy

    objects = rendered(tmp_path, "kubeadm", CONTAINER).objects
    assert rule_hits(objects, "driver-container-conflict") == []
    (driver,) = [o for o in objects if o["metadata"]["name"] == "nvidia-driver-daemonset"]
    second = copy.deepcopy(driver)
    second["metadata"]["name"] = "another-driver"
    assert rule_hits([*objects, second], "driver-container-conflict")


def test_driver_container_beside_a_host_driver_is_flagged(tmp_path):
    host = rendered(tmp_path, "kubeadm", {}).objects
    driver = [
        o
        for o in rendered(tmp_path, "kubeadm", CONTAINER).objects
        if o["metadata"]["name"] == "nvidia-driver-daemonset"
    ]
    (message,) = rule_hits([*host, *driver], "driver-container-conflict")
    assert "nvidiaDriverRoot '/'" in message


def test_without_nfd_the_driver_is_placed_by_the_configured_labels_alone(tmp_path):
    """NFD's os-release labels keep a driver image off nodes it was not built for; with
    nfd.mode disabled nothing sets them, and requiring them would leave the driver unscheduled."""
    workload = daemonsets(
        rendered(
            tmp_path,
            "kubeadm",
            {
                **CONTAINER,
                "nfd": {"mode": "disabled"},
                "nodes": {"selector": {"example.com/gpu": "true"}},
            },
        )
    )["nvidia-driver-daemonset"]
    (term,) = pod(workload)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    # The labels a node must carry (a NotIn, the deploy label's, is met by a node without it).
    required = [e["key"] for e in term["matchExpressions"] if e["operator"] != "NotIn"]
    assert required == ["example.com/gpu"]
