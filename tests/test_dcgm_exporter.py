"""The DCGM exporter as a user meets it: metrics on 9400, found by the platform's Prometheus.

Stacks are built from small config files through gpustack.resolve.load.load_stack; the rendered objects
are checked against the real Kubernetes schemas (kubernetes-validate) and the upstream CRD schemas
of ServiceMonitor and PodMonitoring (jsonschema), which the project does not ship.
"""

from __future__ import annotations

import csv
import json
import posixpath
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from conftest import SHARED, validate_upstream
from manifests import shared_affinity

from gpustack.build.pipeline import render
from gpustack.errors import UserError
from gpustack.resolve.load import load_stack
from gpustack.resolve.stack import Stack

PROFILES = ("kubeadm", "rke2", "openshift", "gke-cos")
EXPORTER = "nvidia-dcgm-exporter"
CRD_SCHEMAS = SHARED / "crd-schemas"


def load(tmp_path: Path, profile: str, dcgm: dict[str, Any] | None = None, **extra: Any) -> Stack:
    config: dict[str, Any] = {
        "apiVersion": "gpustack.dev/v1alpha1",
        "kind": "GPUStack",
        "metadata": {"name": "lab"},
        "platform": {"profile": profile},
        **extra,
    }
    if dcgm is not None:
        config["dcgmExporter"] = dcgm
    path = tmp_path / f"{profile}.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return load_stack(path)


def objects_of(stack: Stack) -> list[dict[str, Any]]:
    return render(stack).objects


def find(objects: list[dict[str, Any]], kind: str, name: str = EXPORTER) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


def kinds(objects: list[dict[str, Any]]) -> set[str]:
    return {o["kind"] for o in objects}


def container(daemonset: dict[str, Any]) -> dict[str, Any]:
    (only,) = daemonset["spec"]["template"]["spec"]["containers"]
    return only


def env_of(daemonset: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(daemonset)["env"]}


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def crd_schema(group: str, kind: str) -> dict[str, Any]:
    return json.loads((CRD_SCHEMAS / group / f"{kind.lower()}_v1.json").read_text())


def parse_counters(text: str) -> list[list[str]]:
    rows = csv.reader(
        line for line in text.splitlines() if line.strip() and not line.startswith("#")
    )
    return [[field.strip() for field in row] for row in rows]


@pytest.mark.parametrize("profile", PROFILES)
def test_exporter_serves_metrics_on_9400_with_pod_mapping(tmp_path, profile):
    stack = load(tmp_path, profile)
    objects = objects_of(stack)
    daemonset = find(objects, "DaemonSet")
    main = container(daemonset)
    assert main["image"] == "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless"
    assert {"name": "metrics", "containerPort": 9400, "protocol": "TCP"} in main["ports"]
    env = env_of(daemonset)
    assert env["DCGM_EXPORTER_LISTEN"] == ":9400"
    assert env["DCGM_EXPORTER_KUBERNETES"] == "true"
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    for probe in ("livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"] == {"path": "/health", "port": "metrics"}
    assert main["resources"]["limits"]["memory"] == "512Mi"
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    # The kubelet's pod-resources socket, read-only, where the exporter looks for it.
    volumes = {v["name"]: v for v in pod["volumes"]}
    socket_dir = "/var/lib/kubelet/pod-resources"
    (mount,) = [m for m in main["volumeMounts"] if m["mountPath"] == socket_dir]
    assert mount["readOnly"] is True
    assert volumes[mount["name"]]["hostPath"]["path"] == socket_dir


@pytest.mark.parametrize("profile", PROFILES)
def test_collectors_file_is_mounted_from_a_config_map_that_exists(tmp_path, profile):
    objects = objects_of(load(tmp_path, profile))
    daemonset = find(objects, "DaemonSet")
    path = env_of(daemonset)["DCGM_EXPORTER_COLLECTORS"]
    folder, key = posixpath.split(path)
    (mount,) = [m for m in container(daemonset)["volumeMounts"] if m["mountPath"] == folder]
    volumes = {v["name"]: v for v in daemonset["spec"]["template"]["spec"]["volumes"]}
    config_map = find(objects, "ConfigMap", volumes[mount["name"]]["configMap"]["name"])
    rows = parse_counters(config_map["data"][key])
    assert rows, "the collectors file lists no counters"
    for row in rows:
        assert len(row) == 3, row
        field, kind, help_text = row
        assert field.startswith("DCGM_FI_"), row
        assert kind in {"gauge", "counter", "label"}, row
        assert help_text, row
    fields = [row[0] for row in rows]
    assert len(fields) == len(set(fields)), "a counter is listed twice"
    # The profiling counters that SYS_ADMIN is granted for.
    assert any(field.startswith("DCGM_FI_PROF_") for field in fields)
    # A content hash on the pod template rolls the exporters when the counters change.
    assert "gpustack.dev/config-hash" in daemonset["spec"]["template"]["metadata"]["annotations"]


@pytest.mark.shared
@pytest.mark.parametrize("profile", PROFILES)
def test_core_objects_pass_strict_kubernetes_schemas(tmp_path, profile):
    objects = objects_of(load(tmp_path, profile, {"monitor": "none"}))
    exporter_objects = [o for o in objects if o["kind"] not in ("Namespace", "RuntimeClass")]
    assert exporter_objects
    for obj in exporter_objects:
        validate_upstream(obj)


@pytest.mark.parametrize("profile", PROFILES)
def test_exporter_is_placed_like_the_other_gpu_workloads(tmp_path, profile):
    objects = objects_of(load(tmp_path, profile))
    pod = find(objects, "DaemonSet")["spec"]["template"]["spec"]
    gpu_workloads = [
        o
        for o in objects
        if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-device-plugin"
    ]
    for other in gpu_workloads:
        other_pod = other["spec"]["template"]["spec"]
        assert shared_affinity(pod) == shared_affinity(other_pod)
        for field in ("tolerations", "runtimeClassName", "priorityClassName"):
            assert pod.get(field) == other_pod.get(field), field
    tolerated = {(t["key"], t["operator"]) for t in pod["tolerations"]}
    assert ("nvidia.com/gpu", "Exists") in tolerated


def test_rke2_exporter_runs_under_the_nvidia_runtime_class(tmp_path):
    objects = objects_of(load(tmp_path, "rke2"))
    pod = find(objects, "DaemonSet")["spec"]["template"]["spec"]
    # Without it the exporter cannot load NVML and crash-loops (seed 003).
    assert pod["runtimeClassName"] == "nvidia"
    # RKE2 creates the RuntimeClass itself (rke2-runtimeclasses chart); gpustack leaves it alone.
    assert not [obj for obj in objects if obj["kind"] == "RuntimeClass"]


@pytest.mark.shared
@pytest.mark.parametrize("profile", ("kubeadm", "rke2", "openshift"))
def test_service_monitor_finds_the_service_and_the_service_finds_only_exporters(tmp_path, profile):
    objects = objects_of(load(tmp_path, profile, {"interval": "30s"}))
    service = find(objects, "Service")
    monitor = find(objects, "ServiceMonitor")
    daemonset = find(objects, "DaemonSet")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    assert matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["interval"] == "30s"
    ports = {p["name"]: p for p in service["spec"]["ports"]}
    assert ports[endpoint["port"]]["port"] == 9400
    container_ports = {p["name"]: p["containerPort"] for p in container(daemonset)["ports"]}
    assert container_ports[ports[endpoint["port"]]["targetPort"]] == 9400
    assert service["spec"]["type"] == "ClusterIP"
    # Exactly the exporter's pods: its own template, no other workload's.
    selector = service["spec"]["selector"]
    for workload in (o for o in objects if o["kind"] == "DaemonSet"):
        selected = matches(selector, workload["spec"]["template"]["metadata"]["labels"])
        assert selected == (workload is daemonset), workload["metadata"]["name"]
    # The exporter collects as often as Prometheus scrapes.
    assert env_of(daemonset)["DCGM_EXPORTER_INTERVAL"] == "30000"
    jsonschema.validate(monitor, crd_schema("monitoring.coreos.com", "ServiceMonitor"))


@pytest.mark.shared
def test_monitor_labels_land_on_the_service_monitor_only(tmp_path):
    release = {"release": "kube-prometheus-stack"}
    objects = objects_of(load(tmp_path, "kubeadm", {"monitorLabels": release}))
    monitor = find(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    # The label selects the ServiceMonitor for Prometheus; it must not narrow what it scrapes.
    assert "release" not in monitor["spec"]["selector"]["matchLabels"]
    service_labels = find(objects, "Service")["metadata"]["labels"]
    assert matches(monitor["spec"]["selector"]["matchLabels"], service_labels)
    jsonschema.validate(monitor, crd_schema("monitoring.coreos.com", "ServiceMonitor"))


@pytest.mark.shared
def test_gke_gets_pod_monitoring_and_the_driver_mount(tmp_path):
    stack = load(tmp_path, "gke-cos", {"interval": "1m30s", "monitorLabels": {"team": "ml"}})
    objects = objects_of(stack)
    assert "ServiceMonitor" not in kinds(objects)
    # Managed Prometheus scrapes pods; a Service would have no user.
    assert "Service" not in kinds(objects)
    monitoring = find(objects, "PodMonitoring")
    daemonset = find(objects, "DaemonSet")
    assert monitoring["metadata"]["namespace"] == daemonset["metadata"]["namespace"]
    assert monitoring["metadata"]["labels"]["team"] == "ml"
    template_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert matches(monitoring["spec"]["selector"]["matchLabels"], template_labels)
    (endpoint,) = monitoring["spec"]["endpoints"]
    assert endpoint["interval"] == "1m30s"
    assert endpoint["port"] in {p["name"] for p in container(daemonset)["ports"]}
    jsonschema.validate(monitoring, crd_schema("monitoring.googleapis.com", "PodMonitoring"))

    pod = daemonset["spec"]["template"]["spec"]
    main = container(daemonset)
    assert "runtimeClassName" not in pod  # no nvidia runtime on GKE
    volumes = {v["name"]: v for v in pod["volumes"]}
    (driver,) = [m for m in main["volumeMounts"] if m["mountPath"] == "/usr/local/nvidia"]
    assert volumes[driver["name"]]["hostPath"]["path"] == "/home/kubernetes/bin/nvidia"
    env = env_of(daemonset)
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"
    assert env["DCGM_EXPORTER_INTERVAL"] == "90000"
    # GKE's own device plugin names GPUs nvidia0, nvidia1, ...
    assert env["DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE"] == "device-name"


def test_openshift_gets_scc_rbac_and_cluster_monitoring_access(tmp_path):
    objects = objects_of(load(tmp_path, "openshift"))
    pod = find(objects, "DaemonSet")["spec"]["template"]["spec"]
    account = pod["serviceAccountName"]
    find(objects, "ServiceAccount", account)
    scc_roles = [
        o
        for o in objects
        if o["kind"] == "Role"
        and {
            "apiGroups": ["security.openshift.io"],
            "resources": ["securitycontextconstraints"],
            "resourceNames": ["privileged"],
            "verbs": ["use"],
        }
        in o["rules"]
    ]
    assert scc_roles, "no Role grants use of SCC privileged"
    bound = [
        o
        for o in objects
        if o["kind"] == "RoleBinding"
        and o["roleRef"]["name"] in {r["metadata"]["name"] for r in scc_roles}
        and {"kind": "ServiceAccount", "name": account, "namespace": pod_namespace(objects)}
        in o["subjects"]
    ]
    assert bound, "the exporter's ServiceAccount may not use SCC privileged"

    prometheus_bindings = [
        o
        for o in objects
        if o["kind"] == "RoleBinding"
        and {
            "kind": "ServiceAccount",
            "name": "prometheus-k8s",
            "namespace": "openshift-monitoring",
        }
        in o["subjects"]
    ]
    (binding,) = prometheus_bindings
    role = find(objects, "Role", binding["roleRef"]["name"])
    granted = {
        (resource, verb)
        for rule in role["rules"]
        if rule["apiGroups"] == [""]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    for resource in ("services", "endpoints", "pods"):
        for verb in ("get", "list", "watch"):
            assert (resource, verb) in granted
    namespace = find(objects, "Namespace", pod_namespace(objects))
    assert namespace["metadata"]["labels"]["openshift.io/cluster-monitoring"] == "true"
    for obj in objects:
        if obj["kind"] in ("Role", "RoleBinding", "ServiceAccount"):
            kubernetes_validate.validate(obj, "1.31", strict=True)


def pod_namespace(objects: list[dict[str, Any]]) -> str:
    return find(objects, "DaemonSet")["metadata"]["namespace"]


@pytest.mark.parametrize("profile", ("kubeadm", "rke2"))
def test_only_sys_admin_is_added_elsewhere(tmp_path, profile):
    objects = objects_of(load(tmp_path, profile))
    security = container(find(objects, "DaemonSet"))["securityContext"]
    assert security["capabilities"] == {"add": ["SYS_ADMIN"], "drop": ["ALL"]}
    assert security["allowPrivilegeEscalation"] is False
    assert not security.get("privileged")
    assert not [
        o
        for o in objects
        if o["kind"] in ("Role", "RoleBinding")
        and o["metadata"]["name"] in (EXPORTER, "prometheus-k8s")
    ]


def test_kubelet_root_comes_from_the_profile(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "k0s.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: Profile\nextends: kubeadm\n"
        "metadata: {name: k0s, description: k0s keeps the kubelet elsewhere}\n"
        "facts: {kubeletRoot: /var/lib/k0s/kubelet}\n"
    )
    config = tmp_path / "k0s-lab.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: k0s}\n"
    )
    objects = objects_of(load_stack(config, profiles_dir=profiles))
    daemonset = find(objects, "DaemonSet")
    (mount,) = [m for m in container(daemonset)["volumeMounts"] if m["name"] == "pod-resources"]
    (volume,) = [
        v for v in daemonset["spec"]["template"]["spec"]["volumes"] if v["name"] == "pod-resources"
    ]
    assert volume["hostPath"]["path"] == "/var/lib/k0s/kubelet/pod-resources"
    assert mount["mountPath"] == "/var/lib/kubelet/pod-resources"


@pytest.mark.parametrize("profile", PROFILES)
def test_monitor_none_emits_no_monitor(tmp_path, profile):
    objects = objects_of(load(tmp_path, profile, {"monitor": "none"}))
    assert not kinds(objects) & {"ServiceMonitor", "PodMonitoring"}
    assert not [o for o in objects if o["metadata"]["name"] == "prometheus-k8s"]
    # What a Prometheus without prometheus-operator discovers.
    service = find(objects, "Service")
    assert service["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    find(objects, "DaemonSet")


def test_monitor_overrides_the_profile(tmp_path):
    on_gke = objects_of(load(tmp_path, "gke-cos", {"monitor": "servicemonitor"}))
    assert {"Service", "ServiceMonitor"} <= kinds(on_gke)
    assert "PodMonitoring" not in kinds(on_gke)
    on_kubeadm = objects_of(load(tmp_path, "kubeadm", {"monitor": "podmonitoring"}))
    assert "PodMonitoring" in kinds(on_kubeadm)
    assert not kinds(on_kubeadm) & {"Service", "ServiceMonitor"}


@pytest.mark.parametrize("profile", PROFILES)
def test_disabled_exporter_emits_nothing(tmp_path, profile):
    objects = objects_of(load(tmp_path, profile, {"enabled": False}))
    assert not [o for o in objects if "dcgm" in o["metadata"]["name"]]
    # The node status exporter (on by default on OpenShift) keeps its own Service and monitor.
    others = [o for o in objects if o["metadata"]["name"] != "nvidia-node-status-exporter"]
    assert not kinds(others) & {"Service", "ServiceMonitor", "PodMonitoring"}
    assert not [o for o in objects if o["metadata"]["name"] == "prometheus-k8s"]


@pytest.mark.parametrize(
    ("interval", "message"),
    [("1.5s", "Prometheus duration"), ("30s1m", "Prometheus duration"), ("0s", "longer than zero")],
)
def test_interval_must_be_a_prometheus_duration(tmp_path, interval, message):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: kubeadm}\n"
        f"dcgmExporter:\n  interval: {interval}\n"
    )
    with pytest.raises(UserError) as caught:
        load_stack(path)
    error = caught.value
    assert error.field == "dcgmExporter.interval"
    assert message in error.message
    assert error.location is not None and error.location.line == 6
