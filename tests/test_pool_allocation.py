"""Node pools that choose their own `gpuAllocation`: the device plugin on some GPU nodes, NVIDIA's
DRA driver on others, and never both on one node (each would hand out the node's GPUs as free,
over-admitting them: dra-driver-nvidia-gpu v0.4.1 deployments/helm/dra-driver-nvidia-gpu/
templates/validation.yaml refuses GPU allocation beside the plugin for this reason)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, read_manifests, stack_for
from test_node_pools import matches, pod, terms_of

from gpustack.build.components import alerts
from gpustack.build.pipeline import render
from gpustack.errors import UserError

MIXED_OUT = ROOT / "out" / "mixed-allocation"
POOL_KEY = "example.com/gpu-pool"
INFERENCE = {"name": "inference", "selector": {POOL_KEY: "inference"}}
TRAINING = {"name": "training", "selector": {POOL_KEY: "training"}, "gpuAllocation": "dra"}
DRIVER = {"mode": "container", "nodeOS": "ubuntu24.04"}
K8S_1_34 = {"profile": "kubeadm", "kubernetesVersion": "1.34"}
GPU_NODE = {"feature.node.kubernetes.io/pci-10de.present": "true"}
# The GPU DaemonSets that hand out a node's GPUs, or stand in for them on the node.
DEVICE_PLUGIN = "nvidia-device-plugin"
KUBELET_PLUGIN = "dra-driver-nvidia-gpu-kubelet-plugin"


def mixed(tmp_path: Path, **sections: Any) -> Any:
    config: dict[str, Any] = {
        "platform": K8S_1_34,
        "driver": DRIVER,
        "nodes": {"pools": [INFERENCE, TRAINING]},
        **sections,
    }
    return stack_for(tmp_path, "kubeadm", **config)


def daemonsets(stack: Any) -> dict[str, dict[str, Any]]:
    return {
        obj["metadata"]["name"]: obj for obj in render(stack).objects if obj["kind"] == "DaemonSet"
    }


def running_on(objects: dict[str, dict[str, Any]], labels: dict[str, str]) -> set[str]:
    """The DaemonSets whose pods a GPU node with `labels` (and its deploy labels unset) gets."""
    node = {**GPU_NODE, **labels}
    return {
        name
        for name, obj in objects.items()
        if "affinity" in pod(obj)  # GPU DaemonSets; NFD's worker runs on every node
        and matches(terms_of(obj), node)
        and pod(obj).get("nodeSelector", {}).items() <= node.items()
    }


@pytest.mark.parametrize(
    ("cluster", "labels", "plugin", "dra"),
    [
        # Cluster on the device plugin, the training pool on DRA.
        ("device-plugin", {POOL_KEY: "training"}, False, True),
        ("device-plugin", {POOL_KEY: "inference"}, True, False),
        ("device-plugin", {POOL_KEY: "other"}, True, False),
        ("device-plugin", {}, True, False),
        # Cluster on DRA, the inference pool on the device plugin.
        ("dra", {POOL_KEY: "training"}, False, True),
        ("dra", {POOL_KEY: "inference"}, True, False),
        ("dra", {POOL_KEY: "other"}, False, True),
        ("dra", {}, False, True),
    ],
)
def test_each_gpu_node_runs_the_device_plugin_or_the_dra_driver_never_both(
    tmp_path, cluster, labels, plugin, dra
):
    inference = {**INFERENCE, "gpuAllocation": "device-plugin"} if cluster == "dra" else INFERENCE
    training = {**TRAINING, "gpuAllocation": None} if cluster == "dra" else TRAINING
    stack = stack_for(
        tmp_path,
        "kubeadm",
        platform=K8S_1_34,
        driver=DRIVER,
        gpuAllocation=cluster,
        nodes={"pools": [inference, {k: v for k, v in training.items() if v is not None}]},
    )
    objects = daemonsets(stack)
    on_node = running_on(objects, labels)
    assert (DEVICE_PLUGIN in on_node) is plugin
    assert (KUBELET_PLUGIN in on_node) is dra
    # Exactly one validator per node, with the plugin step only where the plugin runs.
    validators = [name for name in on_node if name.startswith("nvidia-operator-validator")]
    assert len(validators) == 1
    steps = [c["name"] for c in pod(objects[validators[0]])["initContainers"]]
    assert ("plugin-validation" in steps) is plugin
    # GFD and the DCGM exporter serve every GPU node whichever hands out its GPUs.
    assert {"gpu-feature-discovery", "nvidia-dcgm-exporter"} <= on_node


def test_the_mps_daemon_follows_the_device_plugin_off_the_dra_pools(tmp_path):
    sharing = {**INFERENCE, "devicePlugin": {"sharing": {"strategy": "mps", "replicas": 2}}}
    stack = mixed(tmp_path, nodes={"pools": [sharing, TRAINING]})
    objects = daemonsets(stack)
    mps = {"nvidia.com/mps.capable": "true"}
    daemon = "nvidia-device-plugin-mps-control-daemon"
    assert daemon in running_on(objects, {POOL_KEY: "inference", **mps})
    assert daemon not in running_on(objects, {POOL_KEY: "training", **mps})


def test_excluding_pools_of_several_labels_keeps_every_other_node(tmp_path):
    """A DRA pool selected by two labels: a node lacking either is outside it (one term each)."""
    two_labels = {**TRAINING, "selector": {POOL_KEY: "training", "example.com/rack": "a"}}
    stack = mixed(tmp_path, nodes={"pools": [INFERENCE, two_labels]})
    objects = daemonsets(stack)
    in_pool = {POOL_KEY: "training", "example.com/rack": "a"}
    other_rack = {POOL_KEY: "training", "example.com/rack": "b"}
    assert running_on(objects, in_pool) >= {KUBELET_PLUGIN}
    assert DEVICE_PLUGIN not in running_on(objects, in_pool)
    assert DEVICE_PLUGIN in running_on(objects, other_rack)
    assert KUBELET_PLUGIN not in running_on(objects, other_rack)


def test_the_smoke_test_asks_as_its_canary_pools_nodes_hand_out(tmp_path):
    on_plugin = mixed(
        tmp_path,
        smokeTest={"enabled": True},
        nodes={"pools": [{**INFERENCE, "canary": True}, TRAINING]},
    )
    (job,) = [obj for obj in render(on_plugin).objects if obj["kind"] == "Job"]
    container = pod(job)["containers"][0]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert matches(terms_of(job), {**GPU_NODE, POOL_KEY: "inference"})
    assert not matches(terms_of(job), {**GPU_NODE, POOL_KEY: "training"})

    on_dra = mixed(
        tmp_path,
        smokeTest={"enabled": True},
        nodes={"pools": [INFERENCE, {**TRAINING, "canary": True}]},
    )
    objects = render(on_dra).objects
    (job,) = [obj for obj in objects if obj["kind"] == "Job"]
    assert pod(job)["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    assert matches(terms_of(job), {**GPU_NODE, POOL_KEY: "training"})
    assert any(obj["kind"] == "ResourceClaimTemplate" for obj in objects)


def test_without_a_canary_the_smoke_test_asks_as_the_cluster_does(tmp_path):
    stack = mixed(tmp_path, smokeTest={"enabled": True})
    (job,) = [obj for obj in render(stack).objects if obj["kind"] == "Job"]
    # The scheduler puts it on a node that advertises nvidia.com/gpu: the device plugin's.
    assert pod(job)["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}


def test_only_the_dra_pools_nodes_register_the_dra_deploy_label(tmp_path):
    """k8s-driver-manager takes its DRA path (claim holders, then the kubelet plugin, leave
    before the driver unloads) on nodes labelled nvidia.com/gpu.deploy.dra-driver
    (k8s-driver-manager cmd/driver-manager/main.go nvidiaDRADriverDeployLabel)."""
    node_files = render(mixed(tmp_path)).node_files
    label = "nvidia.com/gpu.deploy.dra-driver=true"
    assert label in node_files["join-configuration-training.yaml"]
    assert label not in node_files["join-configuration-inference.yaml"]
    assert label not in node_files["join-configuration.yaml"]


def alert_names(stack: Any) -> set[str]:
    rules = alerts.groups(stack, [DEVICE_PLUGIN])
    return {rule["alert"] for group in rules for rule in group["rules"] if "alert" in rule}


def test_alerts_that_read_nvidia_com_gpu_leave_out_what_dra_nodes_never_advertise(tmp_path):
    names = alert_names(mixed(tmp_path))
    # DRA nodes advertise no nvidia.com/gpu: a per-node count would fire on each of them, so they
    # are left out, told by the DRA kubelet plugin's pod (kube-state-metrics kube_pod_info);
    # the device-plugin pools keep the alert (promtool proves it in test_alerts.py).
    assert "GPUsNotAdvertised" in names
    (rule,) = [
        rule
        for group in alerts.groups(mixed(tmp_path), [DEVICE_PLUGIN])
        for rule in group["rules"]
        if rule.get("alert") == "GPUsNotAdvertised"
    ]
    assert 'created_by_name="dra-driver-nvidia-gpu-kubelet-plugin"' in rule["expr"]
    # Pods still wait for nvidia.com/gpu on the plugin's pools.
    assert "GPUsIdleWhilePodsWait" in names
    dra_only = stack_for(tmp_path, "kubeadm", platform=K8S_1_34, driver=DRIVER, gpuAllocation="dra")
    # No kube-state-metrics series tells a pod waiting on a GPU claim from any other.
    assert "GPUsIdleWhilePodsWait" not in alert_names(dra_only)
    plugin_only = stack_for(tmp_path, "kubeadm", driver=DRIVER)
    assert {"GPUsIdleWhilePodsWait", "GPUsNotAdvertised"} <= alert_names(plugin_only)


# --- Refusals ----------------------------------------------------------------------------------


def refused(tmp_path: Path, **sections: Any) -> UserError:
    with pytest.raises(UserError) as raised:
        mixed(tmp_path, **sections)
    return raised.value


def test_a_dra_pool_below_kubernetes_1_34_is_refused(tmp_path):
    problem = refused(tmp_path, platform={"profile": "kubeadm", "kubernetesVersion": "1.33"})
    assert problem.field == "platform.kubernetesVersion"
    assert "nodes.pools.1.gpuAllocation" in problem.hint


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ({"migStrategy": "single"}, "nodes.pools.1.devicePlugin.migStrategy"),
        ({"sharing": {"strategy": "time-slicing"}}, "nodes.pools.1.devicePlugin.sharing"),
    ],
)
def test_device_plugin_settings_on_a_dra_pool_are_refused(tmp_path, setting, field):
    problem = refused(tmp_path, nodes={"pools": [INFERENCE, {**TRAINING, "devicePlugin": setting}]})
    assert problem.field == field
    assert "reads no device plugin settings" in problem.message


def bottlerocket(tmp_path: Path, version: str | None) -> Any:
    group: dict[str, Any] = {"instanceType": "g6.xlarge"}
    if version:
        group["bottlerocketVersion"] = version
    return stack_for(
        tmp_path,
        "eks-bottlerocket",
        platform={"profile": "eks-bottlerocket", "kubernetesVersion": "1.34"},
        nodes={"eks": group, "pools": [INFERENCE, TRAINING]},
    )


def test_a_dra_pool_on_bottlerocket_needs_a_release_that_turns_its_plugin_off(tmp_path):
    """Bottlerocket's NVIDIA variants run the device plugin on every node; from 1.63.0 its
    settings turn it off (amazon-eks-user-guide device-management-nvidia-time-slicing.adoc)."""
    with pytest.raises(UserError) as unknown:
        bottlerocket(tmp_path, None)
    assert unknown.value.field == "nodes.pools.1.gpuAllocation"
    assert "nodes.eks.bottlerocketVersion" in unknown.value.hint
    with pytest.raises(UserError) as older:
        bottlerocket(tmp_path, "1.62.1")
    assert older.value.field == "nodes.eks.bottlerocketVersion"


def test_a_dra_pool_on_bottlerocket_turns_the_hosts_plugin_off_on_its_nodes_only(tmp_path):
    rendered = render(bottlerocket(tmp_path, "1.63.0"))
    settings = {
        name: text
        for name, text in rendered.node_files.items()
        if name.startswith("bottlerocket-settings")
    }
    assert "enabled = false" in settings["bottlerocket-settings-training.toml"]
    assert "enabled" not in settings["bottlerocket-settings-inference.toml"]
    assert "enabled" not in settings["bottlerocket-settings.toml"]
    objects = {
        obj["metadata"]["name"]: obj for obj in rendered.objects if obj["kind"] == "DaemonSet"
    }
    assert KUBELET_PLUGIN in running_on(objects, {POOL_KEY: "training"})
    assert KUBELET_PLUGIN not in running_on(objects, {POOL_KEY: "inference"})
    assert KUBELET_PLUGIN not in running_on(objects, {})


def test_a_device_plugin_pool_with_the_plugin_turned_off_is_refused(tmp_path):
    problem = refused(
        tmp_path,
        gpuAllocation="dra",
        devicePlugin={"enabled": False},
        nodes={"pools": [{**INFERENCE, "gpuAllocation": "device-plugin"}]},
    )
    assert problem.field == "nodes.pools.0.gpuAllocation"


def test_a_refusal_names_the_pools_line(cli, tmp_path):
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        'platform: {profile: kubeadm, kubernetesVersion: "1.34"}\n'
        "nodes:\n  pools:\n  - name: training\n    selector: {example.com/gpu-pool: training}\n"
        "    gpuAllocation: dra\n    devicePlugin:\n      migStrategy: single\n"
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "cluster.yaml:11:20" in result.output
    assert "nodes.pools.0.devicePlugin.migStrategy" in result.output
    assert "Traceback" not in result.output


# --- The committed example ---------------------------------------------------------------------


def test_the_mixed_example_validates_strictly_and_lints_clean(cli):
    result = cli("validate", "--summary", "--kubernetes-version", "1.34", MIXED_OUT)
    assert result.exit_code == 0, result.output
    assert ", Invalid: 0, Errors: 0" in result.stdout
    names = {
        doc["metadata"]["name"]
        for path in MIXED_OUT.glob("daemonset-*.yaml")
        for doc in read_manifests(path.read_text())
    }
    assert {DEVICE_PLUGIN, KUBELET_PLUGIN, "nvidia-operator-validator-dra"} <= names
