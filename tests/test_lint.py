"""The GPU-stack lint rules: each catches a real mistake and stays quiet on correct manifests.

Mistakes come from two places: hand-made manifests that differ from a correct set by exactly one
mistake, and the upstream files in ../shared/refs/ (each test says which file breaks which rule
and why). Correct output is both that hand-made set and gpustack's own rendering per profile.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, SHARED, example_base, yaml_documents
from ruamel.yaml import YAML

from gpustack.build import pipeline
from gpustack.resolve.load import load_stack
from gpustack.resolve.starter import starter
from gpustack.validation import lint

REFS = SHARED / "refs"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PCI_10DE = "feature.node.kubernetes.io/pci-10de.present"
PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"


def refs(*names: str) -> list[dict[str, Any]]:
    objects = []
    for name in names:
        documents = yaml_documents((REFS / name).read_text())
        objects += [d for d in documents if isinstance(d, dict) and "kind" in d]
    return objects


def rules_hit(
    objects: list[dict[str, Any]], version: str | None = "1.31", **context: Any
) -> dict[str, list[str]]:
    """{rule id: [names of the objects it reports]}."""
    hits: dict[str, list[str]] = {}
    for found in lint.run(objects, version, **context):
        assert found.object is not None
        hits.setdefault(found.rule, []).append(found.object[3])
    return hits


def daemonset(
    name: str, image: str, *, labels: dict[str, str] | None = None, **pod: Any
) -> dict[str, Any]:
    selector = {"app.kubernetes.io/name": name}
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": PCI_10DE, "operator": "In", "values": ["true"]}
                            ]
                        }
                    ]
                }
            }
        },
        "tolerations": [GPU_TOLERATION],
        "containers": [{"name": name, "image": image}],
        **pod,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "gpu"},
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": {**selector, **(labels or {})}}, "spec": spec},
        },
    }


def correct_stack() -> list[dict[str, Any]]:
    """A hand-made GPU stack with no mistake: every rule has something to look at."""
    plugin = daemonset(
        "device-plugin",
        PLUGIN_IMAGE,
        runtimeClassName="nvidia",
        volumes=[{"name": "config", "configMap": {"name": "plugin-config"}}],
    )
    plugin["spec"]["template"]["spec"]["containers"][0].update(
        env=[{"name": "CONFIG_FILE", "value": "/config/config.yaml"}],
        volumeMounts=[{"name": "config", "mountPath": "/config"}],
    )
    gfd = daemonset("gfd", PLUGIN_IMAGE)
    gfd["spec"]["template"]["spec"]["containers"][0].update(
        command=["gpu-feature-discovery"], env=[{"name": "MIG_STRATEGY", "value": "single"}]
    )
    exporter = daemonset(
        "dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04"
    )
    exporter["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "metrics", "containerPort": 9400}
    ]
    exporter_labels = {"app.kubernetes.io/name": "dcgm-exporter"}
    # MIG strategy single: the MIG manager creates the MIG devices the plugin advertises.
    mig_manager = daemonset(
        "mig-manager",
        "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0",
        runtimeClassName="nvidia",
    )
    return [
        mig_manager,
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "nvidia"},
            "handler": "nvidia",
        },
        {
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeatureRule",
            "metadata": {"name": "nvidia-gpu"},
            "spec": {
                "rules": [{"name": "nvidia", "labels": {PCI_10DE: "true"}, "matchFeatures": []}]
            },
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "plugin-config", "namespace": "gpu"},
            "data": {
                "config.yaml": "version: v1\nflags:\n  migStrategy: single\n"
                "sharing:\n  timeSlicing:\n    resources:\n"
                "    - name: nvidia.com/gpu\n      replicas: 4\n"
            },
        },
        plugin,
        gfd,
        exporter,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "dcgm-exporter", "namespace": "gpu", "labels": exporter_labels},
            "spec": {"selector": exporter_labels, "ports": [{"name": "metrics", "port": 9400}]},
        },
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": {"name": "dcgm-exporter", "namespace": "gpu"},
            "spec": {
                "selector": {"matchLabels": exporter_labels},
                "endpoints": [{"port": "metrics"}],
            },
        },
        {
            "apiVersion": "monitoring.googleapis.com/v1",
            "kind": "PodMonitoring",
            "metadata": {"name": "dcgm-exporter", "namespace": "gpu"},
            "spec": {
                "selector": {"matchLabels": exporter_labels},
                "endpoints": [{"port": "metrics"}],
            },
        },
    ]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


# --- the registry and its docs ---------------------------------------------------------------


def test_every_rule_has_a_kebab_case_id_severity_and_fix():
    ids = [rule.id for rule in lint.RULES]
    assert len(ids) == len(set(ids))
    for rule in lint.RULES:
        assert re.fullmatch(r"[a-z]+(-[a-z]+)+", rule.id)
        assert rule.severity in ("error", "warning") and rule.description and rule.fix


def test_the_correct_hand_made_stack_is_quiet():
    assert rules_hit(correct_stack()) == {}
    assert rules_hit(correct_stack(), None) == {}


# --- gpustack's own output -------------------------------------------------------------------

PROFILES = ["kubeadm", "rke2", "openshift", "gke-cos", "gke-ubuntu"]


def own_rendering(config: Path):
    stack = load_stack(config)
    return stack, pipeline.render(stack)


VARIANTS = {
    "mig-single": "devicePlugin:\n  migStrategy: single\n",
    "mps": "devicePlugin:\n  sharing: {strategy: mps, replicas: 8}\n",
}


@pytest.mark.parametrize("config", ["example", *PROFILES, *VARIANTS])
def test_gpustack_output_is_quiet_for_every_profile(config, tmp_path):
    path = tmp_path / "gpustack.yaml"
    if config == "example":
        path = EXAMPLES / "kubeadm.yaml"
    elif config in VARIANTS:
        path.write_text(f"extends: {example_base(tmp_path)}\n{VARIANTS[config]}")
    else:
        path.write_text(starter(config, f"lint-{config}"))
    stack, rendering = own_rendering(path)
    findings = lint.run_for_stack(stack, rendering.objects)
    assert [f"{f.rule}: {f.message}" for f in findings] == []


# --- taint-not-tolerated ---------------------------------------------------------------------


@pytest.mark.shared
def test_taints_upstream_dcgm_exporter_and_gfd_and_nfd_worker_do_not_tolerate_the_gpu_taint():
    # NVIDIA/dcgm-exporter dcgm-exporter.yaml has no tolerations at all (dcgm-exporter #731),
    # k8s-device-plugin's static GFD DaemonSet neither, and NFD's default overlay leaves the
    # nfd-worker off tainted GPU nodes, so those nodes never get their pci label.
    assert rules_hit(refs("dcgm-exporter/dcgm-exporter.yaml"))["taint-not-tolerated"] == [
        "dcgm-exporter"
    ]
    assert rules_hit(refs("k8s-device-plugin/gpu-feature-discovery-daemonset.yaml"))[
        "taint-not-tolerated"
    ] == ["gpu-feature-discovery"]
    nfd = rules_hit(refs("node-feature-discovery/nfd-v0.19.0-overlays-default.rendered.yaml"))
    assert nfd["taint-not-tolerated"] == [
        "nfd-worker"
    ]  # not nfd-master / nfd-gc: they are not node agents


@pytest.mark.shared
def test_taints_upstream_device_plugin_tolerates_any_gpu_taint():
    assert "taint-not-tolerated" not in rules_hit(
        refs("k8s-device-plugin/nvidia-device-plugin.yml")
    )


def test_taints_configured_taint_must_be_tolerated_unless_the_runtime_class_does():
    objects = correct_stack()
    taint = {"key": "nodetype", "value": "gpu", "effect": "NoSchedule"}
    hits = rules_hit(objects, taints=[taint])
    assert sorted(hits["taint-not-tolerated"]) == [
        "dcgm-exporter",
        "device-plugin",
        "gfd",
        "mig-manager",
    ]
    # RuntimeClass.scheduling.tolerations are merged into the pods that use the class.
    find(objects, "RuntimeClass", "nvidia")["scheduling"] = {
        "tolerations": [
            {"key": "nodetype", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
        ]
    }
    assert sorted(rules_hit(objects, taints=[taint])["taint-not-tolerated"]) == [
        "dcgm-exporter",
        "gfd",
    ]


def test_taints_an_equal_toleration_with_the_wrong_value_is_not_enough():
    objects = correct_stack()
    pod_spec(find(objects, "DaemonSet", "gfd"))["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    assert rules_hit(objects, taints=[taint])["taint-not-tolerated"] == ["gfd"]


# --- node-label-unsourced --------------------------------------------------------------------


@pytest.mark.shared
def test_labels_upstream_gfd_selects_labels_nothing_sets():
    # The static GFD DaemonSet ORs pci-10de.present, cpu-model.vendor_id and gpu.present: alone,
    # with no NFD and no rule, none of them is ever set.
    hits = rules_hit(refs("k8s-device-plugin/gpu-feature-discovery-daemonset.yaml"))
    assert hits["node-label-unsourced"] == ["gpu-feature-discovery"]


@pytest.mark.shared
def test_labels_nfd_default_labels_are_pci_class_vendor_not_pci_vendor():
    # k8s-device-plugin #1213: NFD's default worker config labels pci-0302_10de.present, so a
    # workload that needs pci-10de.present shows 0 desired pods until a rule sets it.
    nfd = refs("node-feature-discovery/nfd-v0.19.0-overlays-default.rendered.yaml")
    plugin = daemonset("device-plugin", PLUGIN_IMAGE)
    assert rules_hit([*nfd, plugin])["node-label-unsourced"] == ["device-plugin"]
    # The composed NodeFeatureRule (refs/examples) is the fix.
    assert "node-label-unsourced" not in rules_hit(
        [*nfd, plugin, *refs("examples/nodefeaturerule-nvidia-gpu.yaml")]
    )
    # NFD's own default label is set by the worker.
    default_label = copy.deepcopy(plugin)
    expression = pod_spec(default_label)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"][0]
    expression["key"] = "feature.node.kubernetes.io/pci-0302_10de.present"
    assert "node-label-unsourced" not in rules_hit([*nfd, default_label])


@pytest.mark.shared
def test_labels_upstream_gpu_operator_selects_labels_only_its_controller_sets():
    # gpu-operator's asset DaemonSets select nvidia.com/gpu.deploy.device-plugin=true, which the
    # operator's controller writes; applied as manifests, with GFD present, they never schedule.
    objects = refs("gpu-operator/state-device-plugin__0500_daemonset.yaml")
    gfd = refs(
        "k8s-device-plugin/gpu-feature-discovery-daemonset.yaml",
        "examples/nodefeaturerule-nvidia-gpu.yaml",
    )
    assert rules_hit([*objects, *gfd])["node-label-unsourced"] == ["nvidia-device-plugin-daemonset"]
    # Beside k8s-driver-manager (or the MIG manager), which take GPU DaemonSets off a node through
    # those labels without an operator, the nodes register with them (gpustack's node/ files).
    driver = refs("gpu-operator/golden__driver-minimal.yaml")
    assert "node-label-unsourced" not in rules_hit([*objects, *gfd, *driver])


def test_labels_gfd_labels_need_gfd_and_user_labels_count_as_set():
    objects = correct_stack()
    mps = daemonset(
        "mps-control-daemon", PLUGIN_IMAGE, nodeSelector={"nvidia.com/mps.capable": "true"}
    )
    assert "node-label-unsourced" not in rules_hit([*objects, mps])
    without_gfd = [o for o in objects if o["metadata"]["name"] != "gfd"]
    assert rules_hit([*without_gfd, mps])["node-label-unsourced"] == ["mps-control-daemon"]
    assert "node-label-unsourced" not in rules_hit(
        [*without_gfd, mps], node_labels=["nvidia.com/mps.capable"]
    )


# --- runtime-class-missing -------------------------------------------------------------------


@pytest.mark.shared
def test_runtime_class_must_be_among_the_manifests():
    objects = correct_stack()
    pod_spec(find(objects, "DaemonSet", "device-plugin"))["runtimeClassName"] = "nvidia-cdi"
    assert rules_hit(objects)["runtime-class-missing"] == ["device-plugin"]
    # gpu-operator's pre-requisites ship the nvidia-cdi RuntimeClass.
    objects += refs("gpu-operator/pre-requisites__0220_runtime_class_cdi.yaml")
    assert "runtime-class-missing" not in rules_hit(objects)


def test_gpustack_marks_workloads_that_use_a_runtime_class_the_platform_ships(tmp_path):
    # RKE2 creates RuntimeClass nvidia itself (rke2-runtimeclasses), so gpustack renders none and
    # says so on each workload that names it: the rendered folder stays valid on its own.
    config = tmp_path / "rke2.yaml"
    config.write_text(starter("rke2", "lint-rke2"))
    _, rendering = own_rendering(config)
    users = [
        obj
        for obj in rendering.objects
        if obj["kind"] == "DaemonSet" and pod_spec(obj).get("runtimeClassName") == "nvidia"
    ]
    assert users and not [obj for obj in rendering.objects if obj["kind"] == "RuntimeClass"]
    for obj in users:
        assert obj["metadata"]["annotations"][lint.IGNORE_ANNOTATION] == "runtime-class-missing"
    assert "runtime-class-missing" not in rules_hit(rendering.objects)
    for obj in users:
        del obj["metadata"]["annotations"][lint.IGNORE_ANNOTATION]
    assert rules_hit(rendering.objects)["runtime-class-missing"]


# --- monitor-target-missing ------------------------------------------------------------------


@pytest.mark.shared
def test_monitor_upstream_service_monitor_needs_the_exporter_service():
    # dcgm-exporter's service-monitor.yaml alone scrapes nothing; with dcgm-exporter.yaml's
    # Service (port "metrics") it matches.
    assert rules_hit(refs("dcgm-exporter/service-monitor.yaml"))["monitor-target-missing"] == [
        "dcgm-exporter"
    ]
    both = refs("dcgm-exporter/service-monitor.yaml", "dcgm-exporter/dcgm-exporter.yaml")
    assert "monitor-target-missing" not in rules_hit(both)
    gpu_operator = refs(
        "gpu-operator/state-dcgm-exporter__0400_service.yaml",
        "gpu-operator/state-dcgm-exporter__0500_service_monitor.yaml",
    )
    assert "monitor-target-missing" not in rules_hit(gpu_operator)


@pytest.mark.shared
def test_monitor_port_name_must_exist_on_the_service():
    # gpu-operator names the Service port gpu-metrics; a ServiceMonitor for "metrics" (the name
    # dcgm-exporter's own manifests use) finds the Service but scrapes nothing.
    gpu_operator = refs(
        "gpu-operator/state-dcgm-exporter__0400_service.yaml",
        "gpu-operator/state-dcgm-exporter__0500_service_monitor.yaml",
    )
    gpu_operator[1]["spec"]["endpoints"][0]["port"] = "metrics"
    assert rules_hit(gpu_operator)["monitor-target-missing"] == ["nvidia-dcgm-exporter"]


def test_monitor_service_monitor_in_another_namespace_needs_a_namespace_selector():
    objects = correct_stack()
    monitor = find(objects, "ServiceMonitor", "dcgm-exporter")
    monitor["metadata"]["namespace"] = "monitoring"
    assert rules_hit(objects)["monitor-target-missing"] == ["dcgm-exporter"]
    monitor["spec"]["namespaceSelector"] = {"matchNames": ["gpu"]}
    assert "monitor-target-missing" not in rules_hit(objects)


@pytest.mark.shared
def test_monitor_pod_monitoring_port_must_be_a_container_port():
    gmp = refs("gke/gmp-nvidia-dcgm-exporter.yaml", "gke/gmp-nvidia-dcgm-clusterpodmonitoring.yaml")
    assert "monitor-target-missing" not in rules_hit(gmp)
    gmp[-1]["spec"]["endpoints"][0]["port"] = "prometheus"
    assert rules_hit(gmp)["monitor-target-missing"] == ["nvidia-dcgm-exporter"]


# --- config-map-missing ----------------------------------------------------------------------


@pytest.mark.shared
def test_config_map_upstream_gpu_operator_plugin_needs_its_entrypoint_config_map():
    # state-device-plugin/0500_daemonset.yaml mounts nvidia-device-plugin-entrypoint, which is a
    # separate asset (0400_configmap.yaml): applied without it, the pods never start.
    daemonset_only = refs("gpu-operator/state-device-plugin__0500_daemonset.yaml")
    assert rules_hit(daemonset_only)["config-map-missing"] == ["nvidia-device-plugin-daemonset"]
    with_config = refs(
        "gpu-operator/state-device-plugin__0400_configmap.yaml",
        "gpu-operator/state-device-plugin__0500_daemonset.yaml",
    )
    assert "config-map-missing" not in rules_hit(with_config)


def test_config_map_in_another_namespace_or_a_missing_key_is_reported():
    objects = correct_stack()
    find(objects, "ConfigMap", "plugin-config")["metadata"]["namespace"] = "kube-system"
    assert "device-plugin" in rules_hit(objects)["config-map-missing"]
    objects = correct_stack()
    pod_spec(find(objects, "DaemonSet", "device-plugin"))["volumes"][0]["configMap"]["items"] = [
        {"key": "time-slicing.yaml", "path": "config.yaml"}
    ]
    assert rules_hit(objects)["config-map-missing"] == ["device-plugin"]


def test_config_map_kubernetes_keeps_in_every_namespace_needs_no_manifest():
    # kube-controller-manager publishes kube-root-ca.crt (key ca.crt) into every namespace; the
    # kubelet's own kube-api-access volumes project it. Another key of it does not exist.
    def with_projected(key: str) -> list[dict[str, Any]]:
        objects = correct_stack()
        source = {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": key, "path": key}]}}
        pod_spec(find(objects, "DaemonSet", "device-plugin"))["volumes"].append(
            {"name": "api", "projected": {"sources": [source]}}
        )
        return objects

    assert "config-map-missing" not in rules_hit(with_projected("ca.crt"))
    assert rules_hit(with_projected("service-ca.crt"))["config-map-missing"] == ["device-plugin"]


# --- device-plugin-config-invalid ------------------------------------------------------------

BROKEN_CONFIGS = {
    "time-slicing and MPS together": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - {name: nvidia.com/gpu, replicas: 4}\n  mps:\n    resources:\n"
    "    - {name: nvidia.com/gpu, replicas: 4}\n",
    "one replica": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - {name: nvidia.com/gpu, replicas: 1}\n",
    "MPS with MIG": "version: v1\nflags: {migStrategy: single}\nsharing:\n  mps:\n    resources:\n"
    "    - {name: nvidia.com/gpu, replicas: 4}\n",
    "unknown MIG strategy": "version: v1\nflags: {migStrategy: all}\n",
    "no version": "flags: {migStrategy: none}\n",
    "not YAML": "version: v1\nflags: [migStrategy: none\n",
}


@pytest.mark.parametrize("mistake", BROKEN_CONFIGS)
def test_device_plugin_config_that_the_plugin_refuses(mistake):
    objects = correct_stack()
    find(objects, "ConfigMap", "plugin-config")["data"]["config.yaml"] = BROKEN_CONFIGS[mistake]
    # The GFD container has its strategy in env; the plugin's file is unusable.
    assert rules_hit(objects)["device-plugin-config-invalid"] == ["plugin-config"]


@pytest.mark.shared
def test_device_plugin_config_composed_examples_are_valid():
    # refs/examples/device-plugin-config-sharing.yaml: a time-slicing and an MPS config, both valid.
    documents = list(
        YAML(typ="safe").load_all((REFS / "examples/device-plugin-config-sharing.yaml").read_text())
    )
    from gpustack import emit

    for document in documents:
        objects = correct_stack()
        find(objects, "ConfigMap", "plugin-config")["data"]["config.yaml"] = emit.dump(document)
        assert "device-plugin-config-invalid" not in rules_hit(objects)


# --- mig-strategy-mismatch -------------------------------------------------------------------


@pytest.mark.shared
def test_mig_upstream_mig_single_gfd_next_to_the_default_plugin():
    # gpu-feature-discovery-daemonset-with-mig-single.yaml labels for MIG "single" while the static
    # nvidia-device-plugin.yml runs with the default "none".
    mismatch = refs(
        "k8s-device-plugin/nvidia-device-plugin.yml",
        "k8s-device-plugin/gpu-feature-discovery-daemonset-with-mig-single.yaml",
    )
    assert rules_hit(mismatch)["mig-strategy-mismatch"] == ["gpu-feature-discovery"]
    matching = refs(
        "k8s-device-plugin/nvidia-device-plugin.yml",
        "k8s-device-plugin/gpu-feature-discovery-daemonset.yaml",
    )
    assert "mig-strategy-mismatch" not in rules_hit(matching)


def test_mig_strategy_from_the_plugin_config_file():
    objects = correct_stack()  # plugin: config file says single; GFD: MIG_STRATEGY=single
    find(objects, "DaemonSet", "gfd")["spec"]["template"]["spec"]["containers"][0]["env"][0][
        "value"
    ] = "mixed"
    assert rules_hit(objects)["mig-strategy-mismatch"] == ["gfd"]


# --- mig-strategy-without-partitions --------------------------------------------------------


def without_mig_manager() -> list[dict[str, Any]]:
    return [o for o in correct_stack() if o["metadata"]["name"] != "mig-manager"]


def test_mig_strategy_without_a_mig_manager():
    # Plugin (config file) and GFD (MIG_STRATEGY) both say single; nothing cuts the GPUs.
    hits = rules_hit(without_mig_manager())
    assert sorted(hits["mig-strategy-without-partitions"]) == ["device-plugin", "gfd"]


def test_mig_strategy_with_nodes_labelled_for_a_mig_manager_elsewhere():
    hits = rules_hit(without_mig_manager(), node_labels={"nvidia.com/mig.config"})
    assert "mig-strategy-without-partitions" not in hits


def test_mig_strategy_on_a_gke_partitioned_pool():
    objects = without_mig_manager()
    for name in ("device-plugin", "gfd"):
        pod_spec(find(objects, "DaemonSet", name))["nodeSelector"] = {
            "cloud.google.com/gke-gpu-partition-size": "1g.5gb"
        }
    assert "mig-strategy-without-partitions" not in rules_hit(objects)


@pytest.mark.shared
def test_mig_upstream_static_gfd_with_mig_has_no_partitioner():
    # The static MIG manifests of k8s-device-plugin assume MIG devices exist already.
    objects = refs("k8s-device-plugin/gpu-feature-discovery-daemonset-with-mig-mixed.yaml")
    assert rules_hit(objects)["mig-strategy-without-partitions"] == ["gpu-feature-discovery"]
    assert "mig-strategy-without-partitions" not in rules_hit(
        refs("k8s-device-plugin/gpu-feature-discovery-daemonset.yaml")
    )


def test_mig_strategy_without_partitions_is_suppressible():
    objects = without_mig_manager()
    for name in ("device-plugin", "gfd"):
        find(objects, "DaemonSet", name)["metadata"]["annotations"] = {
            "gpustack.dev/ignore": "mig-strategy-without-partitions"
        }
    assert "mig-strategy-without-partitions" not in rules_hit(objects)


# --- duplicate-device-plugin -----------------------------------------------------------------


@pytest.mark.shared
def test_duplicate_upstream_nvidia_plugin_next_to_gke_plugin():
    # NVIDIA's static plugin has no node selector; GKE's own plugin runs on every GPU node.
    both = refs("gke/nvidia-device-plugin-static.yml", "gke/gke-nvidia-gpu-device-plugin.yaml")
    assert rules_hit(both)["duplicate-device-plugin"] == ["nvidia-gpu-device-plugin"]


@pytest.mark.shared
def test_duplicate_plugins_with_disjoint_placement_are_fine():
    nvidia, gke = refs(
        "gke/nvidia-device-plugin-static.yml", "gke/gke-nvidia-gpu-device-plugin.yaml"
    )
    label = "gke-no-default-nvidia-gpu-device-plugin"
    pod_spec(nvidia)["nodeSelector"] = {label: "true"}
    terms = pod_spec(gke)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    terms["nodeSelectorTerms"][0]["matchExpressions"].append(
        {"key": label, "operator": "NotIn", "values": ["true"]}
    )
    assert "duplicate-device-plugin" not in rules_hit([nvidia, gke])


# --- api-version-not-served ------------------------------------------------------------------


def test_api_versions_removed_apis_are_reported_with_the_replacement():
    cron = {
        "apiVersion": "batch/v1beta1",
        "kind": "CronJob",
        "metadata": {"name": "gc"},
        "spec": {
            "schedule": "@daily",
            "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}},
        },
    }
    psp = {"apiVersion": "policy/v1beta1", "kind": "PodSecurityPolicy", "metadata": {"name": "gpu"}}
    findings = [f for f in lint.run([cron, psp], "1.31") if f.rule == "api-version-not-served"]
    assert [f.object[3] for f in findings] == ["gc", "gpu"]
    assert "use batch/v1" in findings[0].message
    assert "no longer exists" in findings[1].message


def test_api_versions_depend_on_the_target_version():
    # flowcontrol.apiserver.k8s.io/v1beta3 was served up to 1.31 and removed in 1.32.
    flow = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1beta3",
        "kind": "FlowSchema",
        "metadata": {"name": "gpu"},
    }
    assert "api-version-not-served" not in rules_hit([flow], "1.31")
    assert rules_hit([flow], "1.32")["api-version-not-served"] == ["gpu"]
    assert "api-version-not-served" not in rules_hit([flow], None)


@pytest.mark.shared
def test_api_versions_of_custom_resources_follow_their_crd():
    crds = refs("node-feature-discovery/nfd-api-crds.yaml")
    rule = refs("examples/nodefeaturerule-nvidia-gpu.yaml")
    assert "api-version-not-served" not in rules_hit([*crds, *rule])
    rule[0]["apiVersion"] = "nfd.k8s-sigs.io/v1beta1"
    assert rules_hit([*crds, *rule])["api-version-not-served"] == ["nvidia-gpu-pci-10de"]


def test_api_versions_upstream_files_use_served_apis():
    # The operator's Go templates (`{{ .Driver.Name }}`) are not YAML until the operator fills them.
    every = sorted(
        p.relative_to(REFS).as_posix() for p in REFS.rglob("*.y*ml") if "{{" not in p.read_text()
    )
    objects = refs(*every)
    assert "api-version-not-served" not in rules_hit(objects, "1.31")


# --- image-not-pinned ------------------------------------------------------------------------


@pytest.mark.shared
def test_images_upstream_operator_templates_have_untagged_images():
    # gpu-operator's assets carry the placeholder image "FILLED BY THE OPERATOR": applied as they
    # are, a reference with no tag means :latest.
    hits = rules_hit(refs("gpu-operator/state-dcgm__0400_dcgm.yml"))
    assert hits["image-not-pinned"] == ["nvidia-dcgm", "nvidia-dcgm"]  # its two containers


@pytest.mark.shared
def test_images_latest_is_reported_and_digests_are_pinned():
    objects = correct_stack()
    pod_spec(find(objects, "DaemonSet", "gfd"))["containers"][0]["image"] = (
        "nvcr.io/nvidia/k8s-device-plugin:latest"
    )
    assert rules_hit(objects)["image-not-pinned"] == ["gfd"]
    # GKE's plugin is pinned by digest; a registry port is not a tag.
    assert "image-not-pinned" not in rules_hit(refs("gke/gke-nvidia-gpu-device-plugin.yaml"))
    pod_spec(find(objects, "DaemonSet", "gfd"))["containers"][0]["image"] = "registry:5000/gfd"
    assert rules_hit(objects)["image-not-pinned"] == ["gfd"]


# --- daemonset-selector-overlap --------------------------------------------------------------


def test_daemonsets_sharing_a_selector_are_reported():
    objects = correct_stack()
    shared = {"app": "nvidia"}
    for name in ("device-plugin", "gfd"):
        ds = find(objects, "DaemonSet", name)
        ds["spec"]["selector"] = {"matchLabels": shared}
        ds["spec"]["template"]["metadata"]["labels"].update(shared)
    assert rules_hit(objects)["daemonset-selector-overlap"] == ["gfd"]


def test_daemonset_selector_that_matches_another_template_is_reported():
    # The selector of one need only match the other's pod labels: then it adopts those pods.
    objects = correct_stack()
    find(objects, "DaemonSet", "gfd")["spec"]["template"]["metadata"]["labels"][
        "app.kubernetes.io/name"
    ] = "gfd"
    broad = find(objects, "DaemonSet", "dcgm-exporter")
    broad["spec"]["selector"] = {
        "matchExpressions": [{"key": "app.kubernetes.io/name", "operator": "Exists"}]
    }
    # The broad selector matches the pods of the other DaemonSets, the MIG manager's included:
    # one finding on it, naming the first and counting the others.
    assert rules_hit(objects)["daemonset-selector-overlap"] == ["dcgm-exporter"]
    (found,) = [f for f in lint.run(objects) if f.rule == "daemonset-selector-overlap"]
    assert "(and 2 more) select each other's pods" in found.message


@pytest.mark.shared
def test_daemonsets_in_different_namespaces_may_share_a_selector():
    upstream = refs("k8s-device-plugin/nvidia-device-plugin.yml")
    copy_elsewhere = copy.deepcopy(upstream[0])
    copy_elsewhere["metadata"]["namespace"] = "nvidia-device-plugin"
    assert "daemonset-selector-overlap" not in rules_hit([*upstream, copy_elsewhere])


# --- suppression -----------------------------------------------------------------------------


@pytest.mark.shared
def test_ignore_annotation_suppresses_only_the_named_rules_on_that_object():
    objects = refs("dcgm-exporter/dcgm-exporter.yaml", "gpu-operator/state-dcgm__0400_dcgm.yml")
    assert set(rules_hit(objects)) == {
        "taint-not-tolerated",
        "image-not-pinned",
        "node-label-unsourced",
    }
    objects[0]["metadata"]["annotations"] = {
        "gpustack.dev/ignore": "taint-not-tolerated, image-not-pinned"
    }
    objects[-1]["metadata"]["annotations"] = {"gpustack.dev/ignore": "image-not-pinned"}
    assert rules_hit(objects) == {"node-label-unsourced": ["nvidia-dcgm"]}


def test_rules_tolerate_objects_of_any_shape():
    odd = [
        {"kind": "DaemonSet"},
        {"kind": "DaemonSet", "spec": {"template": {"spec": {"containers": "x"}}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": None},
        "not an object",
    ]
    assert lint.run(odd, "1.31") == []  # type: ignore[arg-type]
