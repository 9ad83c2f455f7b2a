"""Node pools (`nodes.pools`): per-pool device plugin configs picked by node label through the
plugin's config manager, per-pool MIG layouts and node files, a driver DaemonSet per pool where
the pool needs its own, and the canary pool first in both GitOps tools.

The config manager's contract is checked against upstream: the GPU Operator's device plugin
DaemonSet (shared refs) for its env, and k8s-device-plugin cmd/config-manager for how it finds the
process it signals (argv[0]) and the configs (every ConfigMap key is a config name).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, SHARED, read_manifest, read_manifests, stack_for

from gpustack.build.decorate import SYNC_WAVE
from gpustack.build.pipeline import files, render
from gpustack.errors import UserError

MULTI_POOL = ROOT / "out" / "multi-pool"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_LABEL = "nvidia.com/mig.config"

INFERENCE = {
    "name": "inference",
    "selector": {"example.com/gpu-pool": "inference"},
    "canary": True,
    "devicePlugin": {"sharing": {"strategy": "time-slicing", "replicas": 4}},
}
TRAINING = {
    "name": "training",
    "selector": {"example.com/gpu-pool": "training"},
    "devicePlugin": {"migStrategy": "single"},
    "migManager": {"defaultConfig": "all-1g.10gb"},
}
CONTAINER_DRIVER = {"mode": "container", "nodeOS": "ubuntu22.04"}


def objects_of(stack: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in render(stack).objects}


def pod(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value") for item in container.get("env", [])}


def config_managers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        container
        for container in [*spec.get("initContainers", []), *spec["containers"]]
        if container.get("command") == ["config-manager"]
    ]


def matches(terms: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    """Whether a node with `labels` meets required node affinity terms (ORed)."""

    def holds(expression: dict[str, Any]) -> bool:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values", [])
        if operator == "In":
            return labels.get(key) in values
        if operator == "NotIn":
            return labels.get(key) not in values
        if operator == "Exists":
            return key in labels
        return key not in labels

    return any(all(holds(e) for e in term["matchExpressions"]) for term in terms)


def terms_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = pod(obj)["affinity"]["nodeAffinity"]
    terms: list[dict[str, Any]] = affinity["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    return terms


def test_an_empty_pool_list_renders_as_no_pools(tmp_path):
    """`nodes.pools: []` is the same cluster as no pools at all, to the byte."""
    without = stack_for(tmp_path, "kubeadm", driver=CONTAINER_DRIVER)
    empty = stack_for(tmp_path, "kubeadm", driver=CONTAINER_DRIVER, nodes={"pools": []})
    assert files(render(empty)) == files(render(without))


def pool_labels(stack: Any, pool: str) -> str:
    join = yaml.safe_load(render(stack).node_files[f"join-configuration-{pool}.yaml"])
    value: str = join["nodeRegistration"]["kubeletExtraArgs"][0]["value"]
    return value


def test_each_pool_selects_a_config_of_its_own(tmp_path):
    alike = {**INFERENCE, "name": "batch", "canary": False}
    alike["selector"] = {"example.com/gpu-pool": "batch"}
    plain = {"name": "plain", "selector": {"example.com/gpu-pool": "plain"}}
    stack = stack_for(tmp_path, "kubeadm", nodes={"pools": [INFERENCE, TRAINING, alike, plain]})
    config_map = objects_of(stack)[("ConfigMap", "nvidia-device-plugin-config")]
    assert sorted(config_map["data"]) == ["batch", "default", "inference", "plain", "training"]
    inference = yaml.safe_load(config_map["data"]["inference"])
    assert inference["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 4}
    ]
    assert yaml.safe_load(config_map["data"]["training"])["flags"]["migStrategy"] == "single"
    assert "sharing" not in yaml.safe_load(config_map["data"]["default"])
    assert config_map["data"]["plain"] == config_map["data"]["default"]
    for pool in ("inference", "training", "batch", "plain"):
        assert f"{CONFIG_LABEL}={pool}" in pool_labels(stack, pool)
    assert f"{MIG_LABEL}=all-1g.10gb" in pool_labels(stack, "training")
    assert f"{MIG_LABEL}=all-disabled" in pool_labels(stack, "inference")


def test_a_pools_config_name_does_not_move_when_another_pool_changes(tmp_path):
    """A node keeps the label it registered with: what `batch` nodes select must still be
    batch's config after `inference`, alike before, changes its sharing."""
    alike = {**INFERENCE, "name": "batch", "canary": False}
    alike["selector"] = {"example.com/gpu-pool": "batch"}
    before = stack_for(tmp_path, "kubeadm", nodes={"pools": [INFERENCE, alike]})
    changed = {
        **INFERENCE,
        "devicePlugin": {"sharing": {"strategy": "time-slicing", "replicas": 8}},
    }
    after = stack_for(tmp_path, "kubeadm", nodes={"pools": [changed, alike]})
    data_before = objects_of(before)[("ConfigMap", "nvidia-device-plugin-config")]["data"]
    data_after = objects_of(after)[("ConfigMap", "nvidia-device-plugin-config")]["data"]
    assert pool_labels(before, "batch") == pool_labels(after, "batch")
    assert data_before["batch"] == data_after["batch"]
    assert "replicas: 8" in data_after["inference"]


def test_every_label_a_node_files_give_names_a_config_that_exists():
    """What the config manager and the MIG manager would find for each pool's nodes, read from
    the committed render: a label value that is not a config stops the stack on the node."""
    plugin = read_manifest(
        (MULTI_POOL / "workloads/configmap-nvidia-device-plugin-config.yaml").read_text()
    )
    mig = read_manifest(
        (MULTI_POOL / "workloads/configmap-nvidia-mig-manager-config.yaml").read_text()
    )
    layouts = yaml.safe_load(mig["data"]["config.yaml"])["mig-configs"]
    for pool in ("inference", "training"):
        join = yaml.safe_load((MULTI_POOL / f"node/join-configuration-{pool}.yaml").read_text())
        labels = dict(
            item.split("=", 1)
            for item in join["nodeRegistration"]["kubeletExtraArgs"][0]["value"].split(",")
        )
        assert labels["example.com/gpu-pool"] == pool
        assert labels[CONFIG_LABEL] in plugin["data"]
        assert labels[MIG_LABEL] in layouts


@pytest.mark.shared
def test_the_config_manager_runs_as_the_gpu_operator_runs_it(tmp_path):
    """Every env var of the operator's config-manager containers, with its values for the node
    label, the signal and one-shot mode (gpu-operator assets/state-device-plugin)."""
    upstream = read_manifest(
        (SHARED / "refs/gpu-operator/state-device-plugin__0500_daemonset.yaml").read_text()
    )
    upstream_env = {
        container["name"]: env(container) for container in config_managers(pod(upstream))
    }
    init, sidecar = upstream_env["config-manager-init"], upstream_env["config-manager"]
    stack = stack_for(tmp_path, "kubeadm", nodes={"pools": [INFERENCE]})
    for name in ("nvidia-device-plugin", "gpu-feature-discovery"):
        ours = config_managers(pod(objects_of(stack)[("DaemonSet", name)]))
        ours_init, ours_sidecar = env(ours[0]), env(ours[1])
        assert set(upstream_env["config-manager"]) <= set(ours_sidecar)
        assert set(init) <= set(ours_init)
        for key in ("ONESHOT", "NODE_LABEL", "SEND_SIGNAL"):
            assert ours_init[key] == init[key]
            assert ours_sidecar[key] == sidecar[key]
        assert ours_sidecar["SIGNAL"] == sidecar["SIGNAL"] == "1"


@pytest.mark.shared
def test_the_config_manager_falls_back_as_the_plugin_chart_does(tmp_path):
    """k8s-device-plugin v0.20.0 deployments/helm/nvidia-device-plugin/values.yaml
    `config.fallbackStrategies` (templates/daemonset-device-plugin.yml FALLBACK_STRATEGIES): a
    config manager whose DEFAULT_CONFIG is emptied (by a patch) picks the config named `default`
    rather than failing or running the plugin unconfigured."""
    values = yaml.safe_load((SHARED / "refs/k8s-device-plugin/helm-values.yaml").read_text())
    chart = ",".join(values["config"]["fallbackStrategies"])
    stack = stack_for(tmp_path, "kubeadm", nodes={"pools": [INFERENCE]})
    found = objects_of(stack)
    for name in ("nvidia-device-plugin", "gpu-feature-discovery"):
        for container in config_managers(pod(found[("DaemonSet", name)])):
            assert env(container)["FALLBACK_STRATEGIES"] == chart, (name, container["name"])
    # `named` finds a config of that name: the ConfigMap holds one.
    assert "default" in found[("ConfigMap", "nvidia-device-plugin-config")]["data"]


@pytest.mark.parametrize(
    "daemonset",
    ["nvidia-device-plugin", "gpu-feature-discovery", "nvidia-device-plugin-mps-control-daemon"],
)
def test_the_sidecar_signals_a_process_that_runs_in_the_pod(tmp_path, daemonset):
    """config-manager finds the process to signal by argv[0] in the pod's shared PID namespace
    (findPidToSignal), and links config.yaml into the configs folder: every container that reads
    the link sees that folder at the same path."""
    mps = {**INFERENCE, "devicePlugin": {"sharing": {"strategy": "mps", "replicas": 4}}}
    stack = stack_for(tmp_path, "kubeadm", nodes={"pools": [mps, TRAINING]})
    spec = pod(objects_of(stack)[("DaemonSet", daemonset)])
    assert spec["shareProcessNamespace"] is True
    sidecar = config_managers(spec)[1]
    argv0 = {c["command"][0] for c in spec["containers"] if c is not sidecar}
    assert env(sidecar)["PROCESS_TO_SIGNAL"] in argv0
    destination = env(sidecar)["CONFIG_FILE_DST"].rpartition("/")[0]
    source = env(sidecar)["CONFIG_FILE_SRCDIR"]
    for container in [*spec.get("initContainers", []), *spec["containers"]]:
        paths = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
        if destination in paths:
            assert paths.get(source) == "available-configs", container["name"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["available-configs"]["configMap"]["name"] == "nvidia-device-plugin-config"
    assert "emptyDir" in volumes["config"]


def test_only_the_config_manager_reaches_the_api_server(tmp_path):
    stack = stack_for(tmp_path, "kubeadm", nodes={"pools": [INFERENCE]})
    objects = objects_of(stack)
    spec = pod(objects[("DaemonSet", "nvidia-device-plugin")])
    token = "/var/run/secrets/kubernetes.io/serviceaccount"
    with_token = {
        container["name"]
        for container in [*spec.get("initContainers", []), *spec["containers"]]
        if any(m["mountPath"] == token for m in container.get("volumeMounts", []))
    }
    assert with_token == {c["name"] for c in config_managers(spec)}
    assert (
        objects[("ServiceAccount", "nvidia-device-plugin")]["automountServiceAccountToken"] is False
    )
    rules = objects[("ClusterRole", "nvidia-device-plugin")]["rules"]
    assert rules == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]
    binding = objects[("ClusterRoleBinding", "nvidia-device-plugin")]
    assert binding["subjects"][0]["name"] == spec["serviceAccountName"]


def test_gfd_takes_the_mig_strategy_from_the_nodes_config(tmp_path):
    """An env var would override the config file's migStrategy (api/config/v1 NewConfig), so
    the MIG pool's nodes would be labelled for the cluster's strategy."""
    stack = stack_for(tmp_path, "kubeadm", nodes={"pools": [INFERENCE, TRAINING]})
    gfd = pod(objects_of(stack)[("DaemonSet", "gpu-feature-discovery")])
    main = next(c for c in gfd["containers"] if c["name"] == "gpu-feature-discovery")
    assert "MIG_STRATEGY" not in env(main)
    assert env(main)["CONFIG_FILE"] == env(config_managers(gfd)[1])["CONFIG_FILE_DST"]


def test_pool_taints_are_tolerated_and_applied(tmp_path):
    tainted = {**TRAINING, "taints": [{"key": "example.com/training", "effect": "NoSchedule"}]}
    stack = stack_for(tmp_path, "kubeadm", nodes={"pools": [tainted]})
    plugin = pod(objects_of(stack)[("DaemonSet", "nvidia-device-plugin")])
    assert {"key": "example.com/training", "operator": "Exists", "effect": "NoSchedule"} in plugin[
        "tolerations"
    ]
    join = yaml.safe_load(render(stack).node_files["join-configuration-training.yaml"])
    assert {"key": "example.com/training", "effect": "NoSchedule"} in join["nodeRegistration"][
        "taints"
    ]
    # The cluster-wide file does not taint nodes in no pool.
    plain = yaml.safe_load(render(stack).node_files["join-configuration.yaml"])
    assert all(t["key"] != "example.com/training" for t in plain["nodeRegistration"]["taints"])


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"example.com/gpu-pool": "inference"}, "nvidia-driver-daemonset-inference"),
        ({"example.com/gpu-pool": "training"}, "nvidia-driver-daemonset-training"),
        ({"example.com/gpu-pool": "other"}, "nvidia-driver-daemonset"),
        ({}, "nvidia-driver-daemonset"),
    ],
)
def test_each_gpu_node_gets_exactly_one_driver_pod(tmp_path, labels, expected):
    training = {**TRAINING, "driver": {"version": "580.178.04"}}
    stack = stack_for(
        tmp_path, "kubeadm", driver=CONTAINER_DRIVER, nodes={"pools": [INFERENCE, training]}
    )
    node = {
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        **labels,
    }
    drivers = [
        obj
        for obj in render(stack).objects
        if obj["kind"] == "DaemonSet"
        and obj["metadata"]["labels"].get("app.kubernetes.io/component") == "nvidia-driver"
    ]
    assert [d["metadata"]["name"] for d in drivers if matches(terms_of(d), node)] == [expected]
    images = {d["metadata"]["name"]: pod(d)["containers"][0]["image"] for d in drivers}
    assert images["nvidia-driver-daemonset-training"].endswith(":580.178.04-ubuntu22.04")
    # The canary pool runs the cluster's version, through its own DaemonSet.
    assert images["nvidia-driver-daemonset-inference"] == images["nvidia-driver-daemonset"]


class Node:
    """A GPU node as a driver pod's scripts see it, under a folder: the host's
    /run/nvidia/validations, the nvidia module's refcount file (there while the module is loaded),
    an nvidia-smi that answers while the driver does, and the driver pod's handover folder (its
    emptyDir shared with the GPU pod eviction container)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.validations = root / "validations"
        self.handover = root / "handover"
        self.handover.mkdir(parents=True)
        self.refcount = root / "refcnt"
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        self.answering(True)

    def load_module(self) -> None:
        self.refcount.write_text("1\n")

    def answering(self, answers: bool) -> None:
        smi = self.bin / "nvidia-smi"
        smi.write_text(f"#!/bin/sh\nexit {0 if answers else 9}\n")
        smi.chmod(0o755)

    def daemons(self, status: str) -> None:
        """What the driver container's script writes as its daemons start and run
        (gpu-driver-container ubuntu22.04/nvidia-driver _set_daemons_status)."""
        self.validations.mkdir(exist_ok=True)
        (self.validations / ".driver-daemons-status").write_text(status + "\n")

    @property
    def ready_file(self) -> Path:
        return self.validations / ".driver-ctr-ready"


class DriverPod:
    """One driver pod's probe and preStop scripts, run by a real shell on a `Node`."""

    def __init__(self, obj: dict[str, Any], node: Node) -> None:
        (container,) = [c for c in pod(obj)["containers"] if c["name"] == "nvidia-driver-ctr"]
        self.node = node
        self.labels: dict[str, str] = obj["spec"]["template"]["metadata"]["labels"]
        self.spec = pod(obj)
        self.scripts = {
            "startup": container["startupProbe"]["exec"]["command"],
            "ready": container["readinessProbe"]["exec"]["command"],
            "preStop": container["lifecycle"]["preStop"]["exec"]["command"],
        }

    def run(self, step: str) -> int:
        command = self.scripts[step]
        assert command[:2] == ["sh", "-c"], command
        script = (
            command[2]
            .replace("/run/nvidia/validations", str(self.node.validations))
            .replace("/sys/module/nvidia/refcnt", str(self.node.refcount))
            .replace("/run/driver-handover", str(self.node.handover))
        )
        env = {"PATH": f"{self.node.bin}:/usr/bin:/bin"}
        return subprocess.run(
            ["sh", "-c", script], env=env, check=False, capture_output=True
        ).returncode

    def repels(self, other: DriverPod) -> bool:
        """Whether the scheduler keeps this pod off a node where `other` runs: a required pod
        anti-affinity term, per node, whose selector matches the other pod's labels."""
        terms = (
            self.spec.get("affinity", {})
            .get("podAntiAffinity", {})
            .get("requiredDuringSchedulingIgnoredDuringExecution", [])
        )
        return any(
            term["topologyKey"] == "kubernetes.io/hostname"
            and selects(term["labelSelector"], other.labels)
            for term in terms
        )


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions, ANDed) against labels."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    return matches([{"matchExpressions": selector.get("matchExpressions", [])}], labels)


def test_the_driver_is_ready_only_once_its_daemons_are(tmp_path):
    """gpu-operator v26.7.0 assets/state-driver/0400_configmap.yaml startup-probe.sh: the ready
    file, which the toolkit, the validator and the device plugin wait for, is written only once
    the module is loaded and the driver's daemons (persistenced, the fabric manager on NVSwitch
    systems) report Ready; until the fabric manager runs, an HGX node's GPUs fail every CUDA call
    (error 802), so no GPU may be advertised before."""
    stack = stack_for(tmp_path, "kubeadm", driver=CONTAINER_DRIVER)
    node = Node(tmp_path / "node")
    driver = DriverPod(objects_of(stack)["DaemonSet", "nvidia-driver-daemonset"], node)
    # No module loaded yet (the driver is building): not ready, even if some nvidia-smi answers.
    assert driver.run("startup") != 0
    assert not node.ready_file.exists()
    node.load_module()
    node.daemons("NotReady")  # the script starts persistenced and the fabric manager
    assert driver.run("startup") != 0
    assert not node.ready_file.exists(), "ready before the driver's daemons"
    node.daemons("Ready")
    node.answering(False)
    assert driver.run("startup") != 0
    node.answering(True)
    assert driver.run("startup") == 0
    assert driver.run("ready") == 0
    # The validator reads the file as a YAML map of the driver's extra components
    # (cmd/nvidia-validator/main.go validateAdditionalDriverComponents): none is on.
    assert yaml.safe_load(node.ready_file.read_text()) == {
        "GDRCOPY_ENABLED": False,
        "GDS_ENABLED": False,
        "GPU_DIRECT_RDMA_ENABLED": False,
    }
    # A driver image that writes no status file is judged by its module and nvidia-smi, as
    # upstream's probe judges it.
    (node.validations / ".driver-daemons-status").unlink()
    node.ready_file.unlink()
    assert driver.run("startup") == 0 and node.ready_file.exists()


def test_a_node_moving_to_a_pools_driver_runs_one_driver_pod_at_a_time(tmp_path):
    """Marking a pool canary moves its nodes from the cluster's driver DaemonSet to the pool's.
    As the GPU Operator's DaemonSet does (assets/state-driver/0500_daemonset.yaml
    podAntiAffinity, v26.7.0), the arriving pod is not scheduled while the leaving pod runs, so
    its driver manager never unmounts a driver root the leaving pod still serves; once the
    leaving pod's preStop has run, the arriving pod turns Ready only when its own daemons are."""
    training = {**TRAINING, "driver": {"version": "580.178.04"}}
    stack = stack_for(
        tmp_path, "kubeadm", driver=CONTAINER_DRIVER, nodes={"pools": [INFERENCE, training]}
    )
    found = objects_of(stack)
    node = Node(tmp_path / "node")
    names = [
        "nvidia-driver-daemonset",
        *(f"nvidia-driver-daemonset-{pool}" for pool in ("inference", "training")),
    ]
    pods = {name: DriverPod(found["DaemonSet", name], node) for name in names}
    for name, arriving in pods.items():
        for other, running in pods.items():
            assert arriving.repels(running), f"{name} would start beside {other}"
    # Nothing else is kept off the node: the plugin's pods carry other labels.
    plugin = found["DaemonSet", "nvidia-device-plugin"]
    assert not any(
        selects(term["labelSelector"], plugin["spec"]["template"]["metadata"]["labels"])
        for term in pod(found["DaemonSet", "nvidia-driver-daemonset"])["affinity"][
            "podAntiAffinity"
        ]["requiredDuringSchedulingIgnoredDuringExecution"]
    )
    leaving, arriving = pods["nvidia-driver-daemonset"], pods["nvidia-driver-daemonset-inference"]
    node.load_module()
    node.daemons("Ready")
    assert leaving.run("startup") == 0 and node.ready_file.exists()
    # The leaving pod stops. Its GPU pod eviction container has taken the GPU pods off the node
    # (the order tests/test_driver_stop.py proves with the real driver manager), so the driver
    # container's preStop takes the ready file and the daemons' status with it and returns.
    (node.handover / "gpu-pods-gone").touch()
    assert leaving.run("preStop") == 0
    assert (node.handover / "driver-withdrawn").exists()
    assert not node.ready_file.exists()
    assert arriving.run("ready") != 0
    # The arriving pod's script starts its daemons (NotReady), then reports them Ready.
    node.daemons("NotReady")
    assert arriving.run("startup") != 0
    node.daemons("Ready")
    assert arriving.run("startup") == 0
    assert arriving.run("ready") == 0


def test_two_pool_selectors_a_node_can_both_meet_are_refused(tmp_path):
    overlapping = {"name": "spot", "selector": {"example.com/capacity": "spot"}}
    with pytest.raises(UserError) as error:
        stack_for(tmp_path, "kubeadm", nodes={"pools": [INFERENCE, overlapping]})
    assert error.value.field == "nodes.pools.1.selector"
    assert "can both claim a node" in error.value.message


def test_a_driver_version_needs_a_driver_container(tmp_path):
    pinned = {**INFERENCE, "driver": {"version": "580.178.04"}}
    with pytest.raises(UserError) as error:
        stack_for(tmp_path, "kubeadm", nodes={"pools": [pinned]})
    assert error.value.field == "nodes.pools.0.driver.version"
    assert "preinstalled" in error.value.message


def test_a_kubelet_cannot_give_itself_a_kubernetes_io_label(tmp_path):
    """NodeRestriction: the kubelet may set no kubernetes.io or k8s.io label but its own few;
    a pool selected by one could never be given it by its node files."""
    role = {"name": "gpu", "selector": {"node-role.kubernetes.io/gpu": ""}}
    with pytest.raises(UserError) as error:
        stack_for(tmp_path, "kubeadm", nodes={"pools": [role]})
    assert "NodeRestriction" in error.value.message
    allowed = {"name": "gpu", "selector": {"node.kubernetes.io/instance-type": "p4d"}}
    stack_for(tmp_path, "kubeadm", nodes={"pools": [allowed]})


def test_gke_pools_are_node_pools_of_their_own(tmp_path):
    gke = {
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "gke": {
            "machineType": "a2-highgpu-1g",
            "accelerator": {"type": "nvidia-tesla-a100", "count": 1},
        },
        "pools": [
            {
                "name": "l4",
                "selector": {"cloud.google.com/gke-nodepool": "l4-shared"},
                "gke": {
                    "machineType": "g2-standard-8",
                    "accelerator": {"type": "nvidia-l4", "count": 1},
                },
                "devicePlugin": {"sharing": {"strategy": "time-slicing", "replicas": 2}},
            }
        ],
    }
    stack = stack_for(tmp_path, "gke-cos", nodes=gke)
    script = render(stack).node_files["gke-node-pool-l4.sh"]
    assert "node-pools create l4-shared" in script
    assert "--machine-type=g2-standard-8" in script
    assert "gpu-sharing-strategy=time-sharing,max-shared-clients-per-gpu=2" in script
    # GKE sets its own pool label; it is not one a pool can be created with.
    assert "gke-nodepool" not in script.split("node-pools create")[1].split("\n", 1)[1]


def gitops_objects(tmp_path: Path, tool: str, wait: bool = True) -> list[dict[str, Any]]:
    gitops: dict[str, Any] = {"tool": tool}
    if tool == "argocd":
        gitops["argocd"] = {"repoURL": "https://example.com/fleet.git"}
    else:
        gitops["flux"] = {
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
            "wait": wait,
        }
    stack = stack_for(
        tmp_path,
        "kubeadm",
        driver=CONTAINER_DRIVER,
        nodes={"pools": [INFERENCE, TRAINING]},
        gitops=gitops,
    )
    rendering = render(stack)
    return [*rendering.objects, *rendering.gitops_objects]


def test_argocd_syncs_the_canary_driver_before_every_other_workload(tmp_path):
    objects = gitops_objects(tmp_path, "argocd")
    waves = {
        (obj["kind"], obj["metadata"]["name"]): int(obj["metadata"]["annotations"][SYNC_WAVE])
        for obj in objects
        if obj["kind"] not in ("Application",)
    }
    canary = waves[("DaemonSet", "nvidia-driver-daemonset-inference")]
    # NFD labels the nodes the canary's driver selects (pci-10de.present, system-os_release):
    # on a first install it must run before the canary is applied, or the canary schedules no
    # pod, is healthy at once and gates nothing.
    discovery = [
        wave
        for (kind, name), wave in waves.items()
        if name.startswith("nfd-") or kind == "NodeFeatureRule"
    ]
    assert ("DaemonSet", "nfd-worker") in waves
    assert ("NodeFeatureRule", "nvidia-gpu-pci-10de") in waves
    assert discovery and max(discovery) < canary
    others = [
        wave
        for (kind, name), wave in waves.items()
        if kind == "DaemonSet" and not name.endswith("-inference") and not name.startswith("nfd-")
    ]
    assert others and canary < min(others)
    # What the canary's driver pod needs is there by its wave.
    for needed in (("ServiceAccount", "nvidia-driver"), ("ClusterRoleBinding", "nvidia-driver")):
        assert waves[needed] <= canary
    job = next(obj for obj in objects if obj["kind"] == "Job")
    assert waves[("Job", job["metadata"]["name"])] > max(others)
    assert matches(terms_of(job), {**pool_node(), "example.com/gpu-pool": "inference"})
    assert not matches(terms_of(job), {**pool_node(), "example.com/gpu-pool": "training"})


def pool_node() -> dict[str, str]:
    return {"feature.node.kubernetes.io/pci-10de.present": "true"}


def test_flux_applies_the_rest_only_once_the_canary_stage_is_ready(tmp_path):
    objects = gitops_objects(tmp_path, "flux")
    kustomizations = {
        obj["metadata"]["name"].removeprefix("gpustack-lab-"): obj["spec"]
        for obj in objects
        if obj["kind"] == "Kustomization"
    }
    assert kustomizations["canary"]["wait"] is True
    assert kustomizations["canary"]["path"].endswith("/canary")
    assert kustomizations["workloads"]["dependsOn"] == [{"name": "gpustack-lab-canary"}]
    assert kustomizations["canary"]["dependsOn"] == [{"name": "gpustack-lab-foundation"}]
    # NFD comes with the foundation, which then waits for it: the canary's driver selects its
    # nodes by NFD's labels.
    assert kustomizations["foundation"]["wait"] is True
    all_files = set(
        files(
            render(
                stack_for(
                    tmp_path,
                    "kubeadm",
                    driver=CONTAINER_DRIVER,
                    nodes={"pools": [INFERENCE, TRAINING]},
                    gitops={"tool": "flux", "flux": {"sourceRef": {"name": "flux-system"}}},
                )
            )
        )
    )
    rendering_files = {name for name in all_files if name.startswith("canary/")}
    assert "canary/daemonset-nvidia-driver-daemonset-inference.yaml" in rendering_files
    assert "foundation/daemonset-nfd-worker.yaml" in all_files
    assert "foundation/nodefeaturerule-nvidia-gpu-pci-10de.yaml" in all_files
    assert "canary/serviceaccount-nvidia-driver.yaml" in rendering_files
    assert not any("device-plugin" in name for name in rendering_files)


def test_the_committed_multi_pool_render_is_canary_first():
    """out/multi-pool (Flux): the canary stage holds the canary's driver, the workloads depend
    on it."""
    workloads = read_manifest(
        (MULTI_POOL / "gitops/kustomization-gpustack-multi-pool-workloads.yaml").read_text()
    )
    assert workloads["spec"]["dependsOn"] == [{"name": "gpustack-multi-pool-canary"}]
    canary = read_manifests((MULTI_POOL / "canary/kustomization.yaml").read_text())[0]
    assert "daemonset-nvidia-driver-daemonset-inference.yaml" in canary["resources"]


def test_a_pool_without_mig_keeps_its_gpus_whole_in_a_mig_cluster(tmp_path):
    """The cluster partitions its GPUs; a pool whose plugin uses no MIG must not have them cut
    (it would advertise full GPUs that are MIG partitioned), unless it names a layout."""
    shared = {
        "name": "shared",
        "selector": {"example.com/gpu-pool": "shared"},
        "devicePlugin": {"migStrategy": "none", "sharing": {"strategy": "mps"}},
    }
    stack = stack_for(
        tmp_path,
        "kubeadm",
        devicePlugin={"migStrategy": "single"},
        migManager={"defaultConfig": "all-1g.10gb"},
        nodes={"pools": [shared, TRAINING]},
    )
    node_files = render(stack).node_files
    shared_labels = yaml.safe_load(node_files["join-configuration-shared.yaml"])
    assert (
        f"{MIG_LABEL}=all-disabled"
        in shared_labels["nodeRegistration"]["kubeletExtraArgs"][0]["value"]
    )
    cluster = yaml.safe_load(node_files["join-configuration.yaml"])
    assert f"{MIG_LABEL}=all-1g.10gb" in cluster["nodeRegistration"]["kubeletExtraArgs"][0]["value"]


def test_the_canary_stage_waits_even_where_the_others_do_not(tmp_path):
    """dependsOn waits for the canary Kustomization to be Ready; without `wait` it is Ready once
    applied, and the other pools would get the new driver before the canary runs it."""
    objects = gitops_objects(tmp_path, "flux", wait=False)
    waits = {
        obj["metadata"]["name"].removeprefix("gpustack-lab-"): obj["spec"]["wait"]
        for obj in objects
        if obj["kind"] == "Kustomization"
    }
    assert waits["canary"] is True
    assert waits["workloads"] is False


def test_node_readme_labels_the_nodes_that_exist_as_new_ones_register():
    """Existing nodes get, by one command per pool, the same config labels the pool's node file
    gives nodes that join later."""
    readme = (MULTI_POOL / "node/README.md").read_text()
    for pool in ("inference", "training"):
        join = yaml.safe_load((MULTI_POOL / f"node/join-configuration-{pool}.yaml").read_text())
        registered = dict(
            item.split("=", 1)
            for item in join["nodeRegistration"]["kubeletExtraArgs"][0]["value"].split(",")
        )
        command = next(
            line
            for line in readme.splitlines()
            if f"kubectl label nodes -l example.com/gpu-pool={pool} " in line
        )
        for key in (CONFIG_LABEL, MIG_LABEL):
            assert f"{key}={registered[key]}" in command
    assert (
        "kubectl taint nodes -l example.com/gpu-pool=training example.com/training:NoSchedule"
        in readme
    )


def test_openshift_pools_stay_in_the_gpu_machine_config_pool(tmp_path):
    """Each pool's MachineSet patch gives its machines the GPU pool's role, so gpustack's
    MachineConfigs (role worker-gpu) reach the pools' nodes and reboot no other worker."""
    stack = stack_for(
        tmp_path,
        "openshift",
        platform={"profile": "openshift", "openshiftVersion": "4.18"},
        nodes={"pools": [INFERENCE, TRAINING]},
    )
    rendering = render(stack)
    for pool in ("inference", "training"):
        patch = yaml.safe_load(rendering.node_files[f"machineset-patch-{pool}.yaml"])
        labels = patch["spec"]["template"]["spec"]["metadata"]["labels"]
        assert labels["node-role.kubernetes.io/worker-gpu"] == ""
        assert labels[CONFIG_LABEL] == pool
    pool = next(obj for obj in rendering.objects if obj["kind"] == "MachineConfigPool")
    assert pool["spec"]["nodeSelector"]["matchLabels"] == {"node-role.kubernetes.io/worker-gpu": ""}


def driver_on(stack: Any, labels: dict[str, str]) -> tuple[str, dict[str, int]]:
    """The driver DaemonSet that runs on a node with `labels`, and every driver DaemonSet's
    Argo CD sync wave."""
    node = {
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        **labels,
    }
    drivers = [
        obj
        for obj in render(stack).objects
        if obj["kind"] == "DaemonSet"
        and obj["metadata"]["labels"].get("app.kubernetes.io/component") == "nvidia-driver"
    ]
    (name,) = [d["metadata"]["name"] for d in drivers if matches(terms_of(d), node)]
    return name, {
        d["metadata"]["name"]: int(d["metadata"]["annotations"][SYNC_WAVE]) for d in drivers
    }


def test_running_nodes_become_a_canary_in_two_commits_without_stalling(tmp_path):
    """docs/day-two.md: a node that moves to another driver DaemonSet gets its new pod only once
    the old one is gone (anti-affinity), which the old DaemonSet's update does, in its wave. A
    move into a DaemonSet of an earlier wave stalls the sync (that wave waits for pods a later
    one would free): marking running nodes a canary in one commit does; a pool first given its
    own driver at the cluster's version, then marked canary, never moves a node that way."""
    argocd = {"tool": "argocd", "argocd": {"repoURL": "https://git.example.com/gpu.git"}}
    driver = {**CONTAINER_DRIVER, "version": "580.178.04"}
    pool = {"name": "inference", "selector": {"example.com/gpu-pool": "inference"}}
    node = {"example.com/gpu-pool": "inference"}

    def on(**changes: Any) -> tuple[str, dict[str, int]]:
        nodes = {"pools": [{**pool, **changes}]}
        stack = stack_for(tmp_path, "kubeadm", driver=driver, nodes=nodes, gitops=argocd)
        return driver_on(stack, node)

    def stalls(before: tuple[str, dict[str, int]], after: tuple[str, dict[str, int]]) -> bool:
        """The old DaemonSet frees the node in its wave: updated in the new render's wave, or
        pruned in the wave it has live (the only object pruned here)."""
        (old, live), (new, waves) = before, after
        return new != old and waves[new] < waves.get(old, live[old])

    running = on()
    own = on(driver={"version": "580.178.04"})
    canary = on(driver={"version": "580.178.04"}, canary=True)
    assert running[0] == "nvidia-driver-daemonset"
    # One commit: into the canary's DaemonSet, a wave before the update that frees the node.
    assert stalls(running, on(canary=True))
    # Two commits: a move within one wave, then the same DaemonSet in the canary's wave.
    assert own[0] != running[0] and not stalls(running, own)
    assert canary[0] == own[0] and not stalls(own, canary)
    # Back: dropping canary from a pool without a driver of its own prunes its DaemonSet in the
    # canary's wave, after the cluster's took its nodes in an earlier one; in steps, never.
    assert stalls(on(canary=True), running)
    assert not stalls(canary, own) and not stalls(own, running)


def test_a_pool_s_settings_are_its_own_over_the_cluster_s(tmp_path):
    """`GPUStack.pool_settings`, the one answer to what a pool's nodes run with: what the pool
    gives, else the cluster's; the nodes in no pool run with the cluster's."""
    whole = {**INFERENCE, "devicePlugin": {"migStrategy": "none", **INFERENCE["devicePlugin"]}}
    plain = {"name": "plain", "selector": {"example.com/gpu-pool": "plain"}, "gpuAllocation": "dra"}
    stack = stack_for(
        tmp_path,
        "kubeadm",
        nodes={
            "selector": {"example.com/gpu": "true"},
            "taints": [{"key": "example.com/gpu", "effect": "NoSchedule"}],
            "pools": [
                {
                    **TRAINING,
                    "taints": [{"key": "example.com/training", "effect": "NoExecute"}],
                    "driver": {"version": "570.172.08"},
                },
                whole,
                plain,
            ],
        },
        driver=CONTAINER_DRIVER,
        devicePlugin={"migStrategy": "mixed"},
        migManager={"defaultConfig": "all-balanced"},
        platform={"profile": "kubeadm", "kubernetesVersion": "1.34"},
    )
    training, inference, other = stack.pools
    cluster = stack.config.pool_settings(None)
    assert (cluster.selector, [taint.key for taint in cluster.taints]) == (
        {"example.com/gpu": "true"},
        ["example.com/gpu"],
    )
    assert (cluster.mig_strategy, cluster.mig_config, cluster.sharing.strategy) == (
        "mixed",
        "all-balanced",
        "none",
    )
    assert (cluster.gpu_allocation, cluster.driver_version) == ("device-plugin", "595.91.07")

    own = stack.config.pool_settings(training)
    assert own.selector == {"example.com/gpu": "true", "example.com/gpu-pool": "training"}
    assert [taint.key for taint in own.taints] == ["example.com/gpu", "example.com/training"]
    assert (own.mig_strategy, own.mig_config, own.driver_version) == (
        "single",
        "all-1g.10gb",
        "570.172.08",
    )
    assert own.gpu_allocation == "device-plugin"

    # A pool whose plugin uses no MIG in a MIG cluster keeps its GPUs whole.
    shared = stack.config.pool_settings(inference)
    assert (shared.sharing.strategy, shared.sharing.replicas) == ("time-slicing", 4)
    assert (shared.mig_strategy, shared.mig_config) == ("none", "all-disabled")

    rest = stack.config.pool_settings(other)
    assert (rest.mig_strategy, rest.mig_config, rest.sharing.strategy) == (
        "mixed",
        "all-balanced",
        "none",
    )
    assert (rest.gpu_allocation, rest.driver_version) == ("dra", "595.91.07")
