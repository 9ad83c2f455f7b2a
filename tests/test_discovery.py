"""GPU Feature Discovery and Node Feature Discovery, as users of the rendered manifests see them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from conftest import SHARED, is_core, read_manifests, stack_for, validate_upstream
from kubernetes_validate.utils import SchemaNotFoundError
from manifests import shared_affinity
from ruamel.yaml import YAML

from gpustack.build.pipeline import render
from gpustack.resolve.stack import Stack

KUBECTL = Path(sys.executable).parent / "kubectl"
GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"
FEATURES_D = "/etc/kubernetes/node-feature-discovery/features.d"
PROFILES = ["openshift", "gke-cos", "gke-ubuntu", "rke2", "kubeadm"]
# Profiles whose defaults deploy NVIDIA's device plugin and GFD (GKE brings its own stack).
GFD_PROFILES = ["openshift", "rke2", "kubeadm"]


def load(tmp_path: Path, profile: str, **sections: Any) -> Stack:
    return stack_for(tmp_path, profile, **sections)


def objects(tmp_path: Path, profile: str, **sections: Any) -> list[dict[str, Any]]:
    return render(load(tmp_path, profile, **sections)).objects


def registered(tmp_path: Path, profile: str, **sections: Any) -> dict[str, str]:
    """The labels a GPU node registers with from the node/ files (nodes.selector, and the
    nvidia.com/gpu.deploy.* labels where a driver container or the MIG manager is rendered)."""
    return render(load(tmp_path, profile, **sections)).node_labels


def find(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in items if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def kinds(items: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in items}


def container(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]["containers"][0]


def env(workload: dict[str, Any]) -> dict[str, Any]:
    return {
        item["name"]: item.get("value", item.get("valueFrom"))
        for item in container(workload).get("env", [])
    }


def host_paths(workload: dict[str, Any]) -> dict[str, str]:
    """hostPath -> mount path in the first container."""
    pod = workload["spec"]["template"]["spec"]
    by_name = {v["name"]: v["hostPath"]["path"] for v in pod.get("volumes", []) if "hostPath" in v}
    mounts = container(workload).get("volumeMounts", [])
    return {by_name[m["name"]]: m for m in mounts if m["name"] in by_name}


def schedulable(pod: dict[str, Any], labels: dict[str, str], taints: list[dict[str, str]]) -> bool:
    """Would the scheduler place `pod` on a node with these labels and taints? (nodeSelector,
    required node affinity with In/NotIn/Exists/DoesNotExist, tolerations as in the Kubernetes
    docs)."""
    if any(labels.get(key) != value for key, value in pod.get("nodeSelector", {}).items()):
        return False
    required = (
        pod.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if required:

        def holds(expr: dict[str, Any]) -> bool:
            value = labels.get(expr["key"])
            if expr["operator"] == "NotIn":
                return value not in expr["values"]
            if expr["operator"] == "DoesNotExist":
                return value is None
            return value is not None and (expr["operator"] == "Exists" or value in expr["values"])

        def term_matches(term: dict[str, Any]) -> bool:
            return all(holds(expr) for expr in term["matchExpressions"])

        if not any(term_matches(term) for term in required["nodeSelectorTerms"]):
            return False

    def tolerated(taint: dict[str, str]) -> bool:
        for toleration in pod.get("tolerations", []):
            if toleration.get("key") not in (None, taint["key"]):
                continue
            if toleration.get("effect") not in (None, taint["effect"]):
                continue
            if toleration["operator"] == "Exists" or toleration.get("value") == taint.get("value"):
                return True
        return False

    return all(tolerated(taint) for taint in taints if taint["effect"] != "PreferNoSchedule")


# ---------------------------------------------------------------------------------------------
# GFD


@pytest.mark.parametrize("profile", GFD_PROFILES)
@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
def test_gfd_mig_strategy_is_the_device_plugins(tmp_path, profile, strategy):
    rendered = objects(tmp_path, profile, devicePlugin={"migStrategy": strategy})
    gfd = find(rendered, "DaemonSet", "gpu-feature-discovery")
    assert container(gfd)["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    assert container(gfd)["command"] == ["/usr/bin/gpu-feature-discovery"]
    variables = env(gfd)
    assert variables["MIG_STRATEGY"] == strategy
    plugin_config = YAML(typ="safe").load(
        find(rendered, "ConfigMap", "nvidia-device-plugin-config")["data"]["config.yaml"]
    )
    assert plugin_config["flags"]["migStrategy"] == variables["MIG_STRATEGY"]
    if strategy == "none":
        assert "NVIDIA_MIG_MONITOR_DEVICES" not in variables
    else:
        assert variables["NVIDIA_MIG_MONITOR_DEVICES"] == "all"


def test_gfd_image_follows_the_device_plugin_version(tmp_path):
    rendered = objects(tmp_path, "kubeadm", devicePlugin={"version": "v0.19.3"})
    gfd = find(rendered, "DaemonSet", "gpu-feature-discovery")
    plugin = find(rendered, "DaemonSet", "nvidia-device-plugin")
    assert container(gfd)["image"] == container(plugin)["image"]
    assert container(gfd)["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.19.3"


@pytest.mark.parametrize(
    ("profile", "mode"),
    [("kubeadm", "deploy"), ("rke2", "deploy"), ("kubeadm", "external"), ("openshift", "deploy")],
)
def test_gfd_publishes_node_features_where_nfd_reads_them(tmp_path, profile, mode):
    rendered = objects(tmp_path, profile, nfd={"mode": mode})
    gfd = find(rendered, "DaemonSet", "gpu-feature-discovery")
    variables = env(gfd)
    assert variables["USE_NODE_FEATURE_API"] == "true"
    assert variables["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert variables["NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert FEATURES_D not in host_paths(gfd)
    # GFD's service account may create and update NodeFeature objects in its namespace.
    account = gfd["spec"]["template"]["spec"]["serviceAccountName"]
    binding = find(rendered, "RoleBinding", "gpu-feature-discovery")
    assert {
        "kind": "ServiceAccount",
        "name": account,
        "namespace": gfd["metadata"]["namespace"],
    } in binding["subjects"]
    role = find(rendered, binding["roleRef"]["kind"], binding["roleRef"]["name"])
    assert role["metadata"]["namespace"] == gfd["metadata"]["namespace"]
    granted = {
        verb
        for rule in role["rules"]
        if "nfd.k8s-sigs.io" in rule["apiGroups"] and "nodefeatures" in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {"get", "create", "update"} <= granted
    # ...with a token to reach the API server.
    assert find(rendered, "ServiceAccount", account)["automountServiceAccountToken"] is True


@pytest.mark.shared
@pytest.mark.parametrize("profile", ["kubeadm", "rke2"])
def test_gfd_node_features_are_owned_so_its_labels_go_with_it(tmp_path, profile):
    """GFD makes its NodeFeature owned by its pod and DaemonSet only when it knows its pod's name
    and may read the pod; without an owner the nvidia.com/gpu.* labels outlive GFD. The GPU
    Operator's GFD asset is the oracle: every downward-API variable and every pod permission it
    gives GFD, ours has too."""
    upstream_root = SHARED / "refs" / "gpu-operator"
    upstream = YAML(typ="safe").load(
        (upstream_root / "gpu-feature-discovery__0500_daemonset.yaml").read_text()
    )
    [upstream_gfd] = [
        c
        for c in upstream["spec"]["template"]["spec"]["containers"]
        if c["name"] == "gpu-feature-discovery"
    ]
    upstream_env = {
        item["name"]: item["valueFrom"] for item in upstream_gfd["env"] if "valueFrom" in item
    }
    assert "POD_NAME" in upstream_env
    rendered = objects(tmp_path, profile)
    gfd = find(rendered, "DaemonSet", "gpu-feature-discovery")
    for name, source in upstream_env.items():
        assert env(gfd)[name] == source, name
    upstream_role = YAML(typ="safe").load(
        (upstream_root / "gpu-feature-discovery__0200_role.yaml").read_text()
    )
    wanted = {
        verb
        for rule in upstream_role["rules"]
        if "pods" in rule["resources"]
        for verb in rule["verbs"]
    }
    role = find(rendered, "Role", "gpu-feature-discovery")
    granted = {
        verb
        for rule in role["rules"]
        if rule["apiGroups"] == [""] and "pods" in rule["resources"]
        for verb in rule["verbs"]
    }
    assert wanted and wanted <= granted


@pytest.mark.parametrize(
    ("profile", "sections"),
    [
        ("openshift", {}),  # Red Hat's NFD operator: features.d (gpu-operator PR #2066)
        ("kubeadm", {"nfd": {"mode": "disabled"}, "nodes": {"selector": {"gpu": "true"}}}),
        ("gke-cos", {"gfd": {"enabled": True}}),
    ],
)
def test_gfd_writes_the_features_file_otherwise(tmp_path, profile, sections):
    rendered = objects(tmp_path, profile, **sections)
    gfd = find(rendered, "DaemonSet", "gpu-feature-discovery")
    variables = env(gfd)
    assert variables["USE_NODE_FEATURE_API"] == "false"
    assert "NODE_NAME" not in variables
    mount = host_paths(gfd)[FEATURES_D]
    assert mount["mountPath"] == FEATURES_D
    assert not mount.get("readOnly", False)
    # No API access to NodeFeature objects: GFD does not need it here.
    roles = [
        o
        for o in rendered
        if o["kind"] == "Role" and o["metadata"]["name"] == "gpu-feature-discovery"
    ]
    assert not [r for role in roles for r in role["rules"] if "nodefeatures" in r["resources"]]
    # Nor any API access at all, so its privileged pod carries no token.
    account = gfd["spec"]["template"]["spec"]["serviceAccountName"]
    assert find(rendered, "ServiceAccount", account)["automountServiceAccountToken"] is False


def test_openshift_gfd_may_use_the_privileged_scc(tmp_path):
    rendered = objects(tmp_path, "openshift")
    gfd = find(rendered, "DaemonSet", "gpu-feature-discovery")
    assert container(gfd)["securityContext"]["privileged"] is True
    role = find(rendered, "Role", "gpu-feature-discovery")
    assert {
        "apiGroups": ["security.openshift.io"],
        "resources": ["securitycontextconstraints"],
        "resourceNames": ["privileged"],
        "verbs": ["use"],
    } in role["rules"]
    assert (
        find(rendered, "RoleBinding", "gpu-feature-discovery")["subjects"][0]["name"]
        == (gfd["spec"]["template"]["spec"]["serviceAccountName"])
    )


def test_gfd_on_gke_sees_the_driver_gke_mounts(tmp_path):
    gfd = find(
        objects(tmp_path, "gke-cos", gfd={"enabled": True}), "DaemonSet", "gpu-feature-discovery"
    )
    mount = host_paths(gfd)["/home/kubernetes/bin/nvidia"]
    assert mount["mountPath"] == "/usr/local/nvidia"
    assert env(gfd)["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"


@pytest.mark.parametrize("profile", PROFILES)
def test_gfd_is_placed_like_every_other_gpu_workload(tmp_path, profile):
    rendered = objects(
        tmp_path,
        profile,
        gfd={"enabled": True},
        nodes={
            "selector": {"pool": "gpu"},
            "taints": [{"key": "nodetype", "value": "gpu", "effect": "NoSchedule"}],
        },
    )
    gfd = find(rendered, "DaemonSet", "gpu-feature-discovery")["spec"]["template"]["spec"]
    others = [
        o
        for o in rendered
        if o["kind"] == "DaemonSet"
        and o["metadata"]["name"] in ("nvidia-device-plugin", "dcgm-exporter")
    ]

    for other in others:
        spec = other["spec"]["template"]["spec"]
        assert shared_affinity(gfd) == shared_affinity(spec)
        for field in ("tolerations", "runtimeClassName", "priorityClassName"):
            assert gfd.get(field) == spec.get(field), field
    gpu_node = {
        **registered(tmp_path, profile, gfd={"enabled": True}, nodes={"selector": {"pool": "gpu"}}),
        GPU_LABEL: "true",
        "cloud.google.com/gke-accelerator": "nvidia-l4",
    }
    taints = [{"key": "nodetype", "value": "gpu", "effect": "NoSchedule"}]
    assert schedulable(gfd, gpu_node, taints)
    assert not schedulable(gfd, {"pool": "gpu"}, taints)  # not (yet) recognised as a GPU node


def test_gfd_reads_the_sharing_config_so_replicas_are_labelled(tmp_path):
    rendered = objects(
        tmp_path, "kubeadm", devicePlugin={"sharing": {"strategy": "time-slicing", "replicas": 4}}
    )
    gfd = find(rendered, "DaemonSet", "gpu-feature-discovery")
    volumes = gfd["spec"]["template"]["spec"]["volumes"]
    config_volume = next(v for v in volumes if "configMap" in v)
    config_map = find(rendered, "ConfigMap", config_volume["configMap"]["name"])
    mount = next(m for m in container(gfd)["volumeMounts"] if m["name"] == config_volume["name"])
    file_name = Path(env(gfd)["CONFIG_FILE"])
    assert str(file_name.parent) == mount["mountPath"] and file_name.name in config_map["data"]
    assert "timeSlicing" in YAML(typ="safe").load(config_map["data"][file_name.name])["sharing"]
    # A change of the sharing config rolls GFD too.
    other = objects(
        tmp_path, "kubeadm", devicePlugin={"sharing": {"strategy": "time-slicing", "replicas": 8}}
    )
    annotations = gfd["spec"]["template"]["metadata"]["annotations"]
    assert (
        annotations
        != find(other, "DaemonSet", "gpu-feature-discovery")["spec"]["template"]["metadata"][
            "annotations"
        ]
    )


def test_gfd_disabled_emits_nothing_of_gfd(tmp_path):
    rendered = objects(tmp_path, "kubeadm", gfd={"enabled": False})
    assert not [o for o in rendered if o["metadata"]["name"] == "gpu-feature-discovery"]


# ---------------------------------------------------------------------------------------------
# NFD


def node_feature_rules(rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in rendered if o["kind"] == "NodeFeatureRule"]


NFD_DEPLOYED = {
    ("CustomResourceDefinition", "nodefeatures.nfd.k8s-sigs.io"),
    ("CustomResourceDefinition", "nodefeaturerules.nfd.k8s-sigs.io"),
    ("CustomResourceDefinition", "nodefeaturegroups.nfd.k8s-sigs.io"),
    ("Deployment", "nfd-master"),
    ("DaemonSet", "nfd-worker"),
    ("Deployment", "nfd-gc"),
    ("ServiceAccount", "nfd-master"),
    ("ServiceAccount", "nfd-worker"),
    ("ServiceAccount", "nfd-gc"),
    ("ClusterRole", "nfd-master"),
    ("ClusterRoleBinding", "nfd-master"),
    ("ClusterRole", "nfd-gc"),
    ("ClusterRoleBinding", "nfd-gc"),
    ("Role", "nfd-worker"),
    ("RoleBinding", "nfd-worker"),
    ("ConfigMap", "nfd-master-conf"),
    ("ConfigMap", "nfd-worker-conf"),
}


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("mode", ["deploy", "external", "disabled"])
def test_nfd_modes(tmp_path, profile, mode):
    rendered = objects(tmp_path, profile, nfd={"mode": mode}, nodes={"selector": {"gpu": "true"}})
    present = kinds(rendered)
    rules = node_feature_rules(rendered)
    if mode == "deploy":
        assert present >= NFD_DEPLOYED
        namespace = "nvidia-gpu" if profile == "openshift" else "gpu-system"
        for kind, name in NFD_DEPLOYED:
            if kind not in ("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"):
                assert find(rendered, kind, name)["metadata"]["namespace"] == namespace
    else:
        assert not NFD_DEPLOYED & present
    if mode == "disabled":
        assert rules == []
    else:
        assert len(rules) == 1


def test_nfd_images_are_the_configured_version(tmp_path):
    rendered = objects(tmp_path, "kubeadm", nfd={"mode": "deploy", "version": "v0.19.1"})
    for kind, name in [
        ("Deployment", "nfd-master"),
        ("DaemonSet", "nfd-worker"),
        ("Deployment", "nfd-gc"),
    ]:
        assert container(find(rendered, kind, name))["image"] == (
            "registry.k8s.io/nfd/node-feature-discovery:v0.19.1"
        )


@pytest.mark.parametrize("profile", ["kubeadm", "rke2", "openshift"])
def test_node_feature_rule_sets_the_label_gpu_workloads_select(tmp_path, profile):
    rendered = objects(tmp_path, profile)
    (rule,) = node_feature_rules(rendered)
    (only,) = rule["spec"]["rules"]
    assert only["labels"] == {"feature.node.kubernetes.io/pci-10de.present": "true"}
    (term,) = only["matchFeatures"]
    assert term["feature"] == "pci.device"
    assert term["matchExpressions"]["vendor"] == {"op": "In", "value": ["10de"]}
    # Both GPU classes: 0300 (VGA) and 0302 (3D controller, data-center GPUs).
    assert term["matchExpressions"]["class"]["op"] == "InRegexp"
    pattern = term["matchExpressions"]["class"]["value"][0]
    assert re.search(pattern, "0302") and re.search(pattern, "0300")
    assert not re.search(pattern, "0200")
    # The label the rule sets is the one the device plugin selects on.
    plugin = find(rendered, "DaemonSet", "nvidia-device-plugin")["spec"]["template"]["spec"]
    node = registered(tmp_path, profile)
    assert schedulable(plugin, {**node, **only["labels"]}, [])
    assert not schedulable(
        plugin, {**node, "feature.node.kubernetes.io/pci-0302_10de.present": "true"}, []
    )


# The group the NFD in charge serves NodeFeatureRule in. Upstream NFD, which gpustack deploys
# (and which kubeadm's and RKE2's external NFD is), serves nfd.k8s-sigs.io. Red Hat's NFD operator
# (OperatorHub, OpenShift's external NFD) serves nfd.openshift.io in every release: up to 4.18 its
# only group, the one its nfd-master reads (openshift/cluster-nfd-operator release-4.18 manifests/
# stable/manifests, openshift/node-feature-discovery release-4.18 api/nfd/v1alpha1/register.go);
# from 4.19 beside nfd.k8s-sigs.io, into which the operator copies each nfd.openshift.io rule
# (cluster-nfd-operator release-4.19 internal/controllers/nodefeaturerule_reconciler.go). A rule
# in a group the cluster does not serve fails to apply ("no matches for kind").
NODE_FEATURE_RULE_GROUPS = [
    ("openshift", "external", "nfd.openshift.io"),
    ("openshift", "deploy", "nfd.k8s-sigs.io"),
    ("kubeadm", "external", "nfd.k8s-sigs.io"),
    ("kubeadm", "deploy", "nfd.k8s-sigs.io"),
    ("rke2", "deploy", "nfd.k8s-sigs.io"),
]


@pytest.mark.parametrize(("profile", "mode", "group"), NODE_FEATURE_RULE_GROUPS)
def test_node_feature_rule_is_in_the_group_its_nfd_serves(tmp_path, profile, mode, group):
    rendered = objects(tmp_path, profile, nfd={"mode": mode})
    (rule,) = node_feature_rules(rendered)
    assert rule["apiVersion"] == f"{group}/v1alpha1"
    definitions = [o for o in rendered if o["kind"] == "CustomResourceDefinition"]
    if mode == "deploy":
        # The rule's kind is among the CRDs rendered with it, which the sync applies first.
        served = {
            (d["spec"]["group"], d["spec"]["names"]["kind"], v["name"])
            for d in definitions
            for v in d["spec"]["versions"]
            if v["served"]
        }
        assert (group, "NodeFeatureRule", "v1alpha1") in served
    else:
        assert not definitions


@pytest.mark.parametrize("release", ["4.18", "4.19", "4.22"])
def test_openshift_rule_group_holds_for_every_release(tmp_path, release):
    platform = {"profile": "openshift", "openshiftVersion": release}
    (rule,) = node_feature_rules(objects(tmp_path, "openshift", platform=platform))
    assert rule["apiVersion"] == "nfd.openshift.io/v1alpha1"


@pytest.mark.shared
@pytest.mark.parametrize("mode", ["deploy", "external"])
def test_node_feature_rule_matches_the_upstream_schema(tmp_path, mode):
    schema = json.loads(
        (SHARED / "crd-schemas/nfd.k8s-sigs.io/nodefeaturerule_v1alpha1.json").read_text()
    )
    (rule,) = node_feature_rules(objects(tmp_path, "kubeadm", nfd={"mode": mode}))
    jsonschema.validate(rule, schema)
    broken = json.loads(json.dumps(rule))
    broken["spec"]["rules"][0]["matchFeatures"][0]["matchExpressions"]["vendor"]["op"] = "Equals"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_worker_runs_on_gpu_nodes_before_nfd_labels_them(tmp_path):
    taints = [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "nodetype", "value": "gpu", "effect": "NoSchedule"},
    ]
    rendered = objects(tmp_path, "kubeadm", nodes={"selector": {"pool": "gpu"}, "taints": taints})
    worker = find(rendered, "DaemonSet", "nfd-worker")["spec"]["template"]["spec"]
    fresh_gpu_node = {"pool": "gpu"}  # no NFD label yet
    assert schedulable(worker, fresh_gpu_node, taints)
    assert not schedulable(worker, {"pool": "cpu"}, [])  # nodes.selector restricts it
    other_taint = {"key": "other", "effect": "NoExecute"}
    assert not schedulable(worker, fresh_gpu_node, [*taints, other_taint])
    assert "runtimeClassName" not in worker  # the RuntimeClass would add the GPU label selector
    assert GPU_LABEL not in json.dumps(worker)
    # Any nvidia.com/gpu taint, whatever its value or effect.
    assert schedulable(
        worker, fresh_gpu_node, [{"key": "nvidia.com/gpu", "value": "x", "effect": "NoExecute"}]
    )


def test_worker_without_node_selector_runs_on_every_node(tmp_path):
    worker = find(objects(tmp_path, "rke2"), "DaemonSet", "nfd-worker")["spec"]["template"]["spec"]
    assert "nodeSelector" not in worker and "affinity" not in worker
    assert schedulable(
        worker, {}, [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    )


def test_master_and_gc_run_on_a_single_tainted_gpu_control_plane(tmp_path):
    taints = [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "nodetype", "value": "gpu", "effect": "NoSchedule"},
    ]
    rendered = objects(tmp_path, "kubeadm", nodes={"controlPlane": True, "taints": taints})
    control_plane = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    node_taints = [*taints, control_plane]
    for kind, name in [
        ("Deployment", "nfd-master"),
        ("Deployment", "nfd-gc"),
        ("DaemonSet", "nfd-worker"),
    ]:
        spec = find(rendered, kind, name)["spec"]["template"]["spec"]
        assert schedulable(spec, {"node-role.kubernetes.io/control-plane": ""}, node_taints), name


def test_master_accepts_gfd_labels(tmp_path):
    rendered = objects(tmp_path, "kubeadm")
    master = find(rendered, "Deployment", "nfd-master")
    volume = next(v for v in master["spec"]["template"]["spec"]["volumes"] if "configMap" in v)
    mount = next(m for m in container(master)["volumeMounts"] if m["name"] == volume["name"])
    assert mount["mountPath"] == "/etc/kubernetes/node-feature-discovery"
    config_map = find(rendered, "ConfigMap", volume["configMap"]["name"])
    config = YAML(typ="safe").load(config_map["data"]["nfd-master.conf"])
    assert "nvidia.com" in config["extraLabelNs"]
    assert "gpustack.dev/config-hash" in master["spec"]["template"]["metadata"]["annotations"]


def test_nfd_runs_with_least_privilege(tmp_path):
    rendered = objects(tmp_path, "kubeadm")
    for kind, name in [
        ("Deployment", "nfd-master"),
        ("DaemonSet", "nfd-worker"),
        ("Deployment", "nfd-gc"),
    ]:
        workload = find(rendered, kind, name)
        security = container(workload)["securityContext"]
        assert security["runAsNonRoot"] is True
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert "privileged" not in security
        account = workload["spec"]["template"]["spec"]["serviceAccountName"]
        assert account == name
    worker = find(rendered, "DaemonSet", "nfd-worker")
    assert all(mount.get("readOnly") for mount in container(worker)["volumeMounts"])


def test_openshift_deployed_worker_may_mount_host_paths(tmp_path):
    role = find(objects(tmp_path, "openshift", nfd={"mode": "deploy"}), "Role", "nfd-worker")
    assert {
        "apiGroups": ["security.openshift.io"],
        "resources": ["securitycontextconstraints"],
        "resourceNames": ["hostmount-anyuid"],
        "verbs": ["use"],
    } in role["rules"]


@pytest.mark.parametrize("profile", PROFILES)
def test_no_two_daemonsets_share_a_selector(tmp_path, profile):
    rendered = objects(
        tmp_path,
        profile,
        gfd={"enabled": True},
        nfd={"mode": "deploy"},
        devicePlugin={"sharing": {"strategy": "mps"}}
        if profile in GFD_PROFILES
        else {"enabled": False},
    )
    daemonsets = [o for o in rendered if o["kind"] == "DaemonSet"]
    assert len(daemonsets) >= 2
    for daemonset in daemonsets:
        selector = daemonset["spec"]["selector"]["matchLabels"]
        selected = [
            other["metadata"]["name"]
            for other in daemonsets
            if selector.items() <= other["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert selected == [daemonset["metadata"]["name"]]


# ---------------------------------------------------------------------------------------------
# Schemas and kustomize


@pytest.mark.shared
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("mode", ["deploy", "external"])
def test_every_object_validates_strictly(tmp_path, profile, mode):
    rendered = objects(tmp_path, profile, gfd={"enabled": True}, nfd={"mode": mode})
    checked = set()
    for obj in rendered:
        try:
            kubernetes_validate.validate(obj, "1.31", strict=True)
            checked.add(obj["kind"])
        except SchemaNotFoundError:
            assert not is_core(obj["apiVersion"]), obj["kind"]
            validate_upstream(obj)
    assert {"DaemonSet", "Role", "RoleBinding", "ServiceAccount"} <= checked
    if mode == "deploy":
        assert {"CustomResourceDefinition", "Deployment", "ConfigMap", "ClusterRole"} <= checked


def test_a_wrong_field_would_fail_strict_validation(tmp_path):
    gfd = find(objects(tmp_path, "kubeadm"), "DaemonSet", "gpu-feature-discovery")
    container(gfd)["securityContext"]["privilged"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(gfd, "1.31", strict=True)


def _without_descriptions(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_descriptions(v) for k, v in value.items() if k != "description"}
    if isinstance(value, list):
        return [_without_descriptions(v) for v in value]
    return value


@pytest.mark.shared
def test_crds_define_the_upstream_api(tmp_path):
    upstream = {
        doc["metadata"]["name"]: doc
        for doc in YAML(typ="safe").load_all(
            (SHARED / "refs/node-feature-discovery/nfd-api-crds.yaml").read_text()
        )
    }
    ours = {
        o["metadata"]["name"]: o
        for o in objects(tmp_path, "kubeadm")
        if o["kind"] == "CustomResourceDefinition"
    }
    assert set(ours) == set(upstream)
    for name, crd in ours.items():
        expected = upstream[name]["spec"]
        assert crd["spec"]["group"] == expected["group"]
        assert crd["spec"]["scope"] == expected["scope"]
        assert crd["spec"]["names"] == expected["names"]
        assert _without_descriptions(crd["spec"]["versions"]) == _without_descriptions(
            expected["versions"]
        ), name


def test_node_feature_rule_crd_admits_the_rule_and_rejects_a_bad_operator(tmp_path):
    rendered = objects(tmp_path, "kubeadm")
    crd = find(rendered, "CustomResourceDefinition", "nodefeaturerules.nfd.k8s-sigs.io")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    (rule,) = node_feature_rules(rendered)
    jsonschema.validate(rule, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {
                **rule,
                "spec": {
                    "rules": [
                        {
                            "name": "x",
                            "matchFeatures": [
                                {
                                    "feature": "pci.device",
                                    "matchExpressions": {"vendor": {"op": "Equals"}},
                                }
                            ],
                        }
                    ]
                },
            },
            schema,
        )


@pytest.mark.parametrize("profile", PROFILES)
def test_rendered_folder_builds_with_kustomize(cli, tmp_path, profile):
    config = tmp_path / "cluster.yaml"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "gpustack.dev/v1alpha1",
                "kind": "GPUStack",
                "metadata": {"name": "lab"},
                "platform": {"profile": profile},
                "gfd": {"enabled": True},
                "nfd": {"mode": "deploy"},
            }
        )
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    built = subprocess.run(
        [str(KUBECTL), "kustomize", str(tmp_path / "out" / "lab")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    documents = read_manifests(built)
    built_kinds = {(d["kind"], d["metadata"]["name"]) for d in documents}
    assert built_kinds >= NFD_DEPLOYED
    assert ("NodeFeatureRule", "nvidia-gpu-pci-10de") in built_kinds
    assert ("DaemonSet", "gpu-feature-discovery") in built_kinds


@pytest.mark.parametrize("profile", ["kubeadm", "rke2", "openshift"])
def test_without_nfd_gpu_workloads_select_on_the_configured_labels_alone(tmp_path, profile, cli):
    """No NFD means no pci-10de label: GPU pods placed on it would never run, and lint refused
    the render. With nfd.mode disabled the labels in nodes.selector place them alone."""
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        f"platform: {{profile: {profile}}}\nnfd: {{mode: disabled}}\n"
        'nodes:\n  selector: {example.com/gpu: "true"}\n'
    )
    result = cli("render", path, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    workloads = [
        o
        for o in render(
            stack_for(
                tmp_path,
                profile,
                nfd={"mode": "disabled"},
                nodes={"selector": {"example.com/gpu": "true"}},
            )
        ).objects
        if o["kind"] == "DaemonSet"
    ]
    assert workloads
    for workload in workloads:
        affinity = workload["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
        [term] = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        keys = [expression["key"] for expression in term["matchExpressions"]]
        assert "example.com/gpu" in keys
        assert not [key for key in keys if key.startswith("feature.node.kubernetes.io/")]


def test_without_nfd_and_without_a_node_label_is_a_clear_error(tmp_path, cli):
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: kubeadm}\nnfd: {mode: disabled}\n"
    )
    result = cli("render", path, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert f"{path}:5:" in result.output or "cluster.yaml:5:" in result.output
    assert "nfd.mode" in result.output and "nodes.selector" in result.output
    assert not (tmp_path / "out").exists()
