"""NVIDIA's node status exporter: rendered where the GPU Operator would run it, with what its
`metrics` component needs on a node (the validator's ready files, the driver's roots, its node
from the API server), a monitor the cluster's Prometheus finds, and alerts that fire on a node
whose bring-up stopped at a step.

Upstream facts: NVIDIA/gpu-operator v26.7.0 assets/state-node-status-exporter/ (DaemonSet,
Service, ServiceMonitor, PrometheusRule), deployments/gpu-operator/values.yaml and the OpenShift
bundle's ClusterPolicy (`nodeStatusExporter.enabled`), all in shared/refs/gpu-operator.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import PROMTOOL, ROOT, SHARED, read_manifest, stack_for, validate_upstream
from test_alerts import expected, promtool, rule_file, series

from gpustack.build.components import build_all
from gpustack.errors import UserError

NAME = "nvidia-node-status-exporter"
REFS = SHARED / "refs/gpu-operator"
CLUSTER = {"devicePlugin": {"enabled": True}, "nfd": {"mode": "deploy"}}


def objects(tmp_path: Path, profile: str = "kubeadm", **sections: Any) -> list[dict[str, Any]]:
    return build_all(stack_for(tmp_path, profile, **{**CLUSTER, **sections}))


def find(objs: list[dict[str, Any]], kind: str, name: str = NAME) -> dict[str, Any]:
    [found] = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def ref(name: str) -> Any:
    return yaml.safe_load((REFS / name).read_text())


def upstream_daemonset() -> dict[str, Any]:
    return ref("state-node-status-exporter__0700_daemonset.yaml")  # type: ignore[no-any-return]


# --- where it runs --------------------------------------------------------------------------------


@pytest.mark.shared
def test_profiles_default_as_the_gpu_operator_does() -> None:
    # The helm chart leaves it off; the OpenShift bundle's ClusterPolicy turns it on.
    helm = ref("helm__values.yaml")["nodeStatusExporter"]["enabled"]
    openshift = ref("bundle__csv-alm-example__clusterpolicy-openshift.yaml")
    bundle = openshift["spec"]["nodeStatusExporter"]["enabled"]
    for cluster, upstream in (("kubeadm-lab", helm), ("openshift-entitled", bundle)):
        rendered = (ROOT / "out" / cluster / f"daemonset-{NAME}.yaml").exists()
        assert rendered is upstream, cluster


def test_rendered_on_request_and_gone_without_the_validator(tmp_path: Path, cli) -> None:
    on = objects(tmp_path, nodeStatusExporter={"enabled": True})
    assert find(on, "DaemonSet")
    # Where the validator is off (GKE), asking for the exporter is refused at the line that asks
    # (below); turning the validator off where it runs is refused itself (test_validator).
    # Asked for where no validator runs (GKE): refused at the line that asks.
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: gke-cos}\nnodeStatusExporter:\n  enabled: true\n"
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "cluster.yaml:6:" in result.output and "nodeStatusExporter.enabled" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(UserError):
        stack_for(tmp_path, "gke-ubuntu", nodeStatusExporter={"enabled": True})


# --- the DaemonSet does its job on a node --------------------------------------------------------


def _container(daemonset: dict[str, Any]) -> dict[str, Any]:
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    return container  # type: ignore[no-any-return]


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def _mounts(daemonset: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """Container path -> host path of each hostPath mount."""
    volumes = {v["name"]: v for v in daemonset["spec"]["template"]["spec"]["volumes"]}
    return {
        m["mountPath"]: volumes[m["name"]]["hostPath"]["path"]
        for m in container["volumeMounts"]
        if "hostPath" in volumes[m["name"]]
    }


@pytest.mark.shared
@pytest.mark.parametrize("profile", ["kubeadm", "openshift"])
def test_daemonset_runs_the_metrics_component_as_upstream(tmp_path: Path, profile: str) -> None:
    objs = objects(tmp_path, profile, nodeStatusExporter={"enabled": True})
    daemonset = find(objs, "DaemonSet")
    validate_upstream(daemonset)
    container = _container(daemonset)
    upstream = upstream_daemonset()["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == upstream["command"]
    env, upstream_env = _env(container), _env(upstream)
    for name in ("COMPONENT", "NVIDIA_VISIBLE_DEVICES", "METRICS_PORT", "NODE_NAME"):
        assert env[name] == upstream_env[name], name
    # The port it listens on is the one it declares, the Service targets and upstream's.
    assert container["ports"][0]["containerPort"] == int(env["METRICS_PORT"])
    assert container["ports"][0]["name"] == upstream["ports"][0]["name"]
    assert container["securityContext"]["privileged"] is True
    # The image upstream's values give it (the operator's, as the validator's).
    values = ref("helm__values.yaml")["nodeStatusExporter"]
    assert container["image"].startswith(f"{values['repository']}/{values['image']}:")


@pytest.mark.parametrize("profile", ["kubeadm", "openshift"])
def test_it_sees_the_ready_files_the_validator_writes(tmp_path: Path, profile: str) -> None:
    objs = objects(tmp_path, profile, nodeStatusExporter={"enabled": True})
    exporter = find(objs, "DaemonSet")
    validator = find(objs, "DaemonSet", "nvidia-operator-validator")
    written = {
        path: host
        for c in validator["spec"]["template"]["spec"]["initContainers"]
        for path, host in _mounts(validator, c).items()
        if path.endswith("validations")
    }
    seen = _mounts(exporter, _container(exporter))
    # The same host folder, at the path nvidia-validator reads by default (--output-dir).
    assert written == {"/run/nvidia/validations": "/run/nvidia/validations"}
    assert seen["/run/nvidia/validations"] == "/run/nvidia/validations"
    # The driver validation finds a host driver under /host, a driver container's root under
    # /run/nvidia/driver (main.go defaults), as the validator's own driver validation does.
    assert seen["/host"] == "/"
    assert seen["/run/nvidia/driver"] == "/run/nvidia/driver"
    driver_mounts = {m["mountPath"]: m for m in _container(exporter)["volumeMounts"]}
    assert driver_mounts["/run/nvidia/driver"]["mountPropagation"] == "HostToContainer"


def test_rbac_lets_it_read_its_node_and_the_driver_daemonsets(tmp_path: Path) -> None:
    objs = objects(tmp_path, "openshift")
    cluster_role = find(objs, "ClusterRole")
    assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]} in cluster_role["rules"]
    role = find(objs, "Role")
    assert any(r["resources"] == ["daemonsets"] and "list" in r["verbs"] for r in role["rules"])
    assert any(r["resources"] == ["securitycontextconstraints"] for r in role["rules"])
    binding = find(objs, "ClusterRoleBinding")
    assert (
        binding["subjects"][0]["name"]
        == find(objs, "DaemonSet")["spec"]["template"]["spec"]["serviceAccountName"]
    )


# --- Prometheus finds it --------------------------------------------------------------------------


@pytest.mark.shared
def test_service_monitor_scrapes_the_exporter_pods(tmp_path: Path) -> None:
    objs = objects(
        tmp_path,
        "openshift",
        dcgmExporter={"monitorLabels": {"release": "kube-prometheus-stack"}},
    )
    monitor, service = find(objs, "ServiceMonitor"), find(objs, "Service")
    daemonset = find(objs, "DaemonSet")
    for obj in (monitor, service):
        validate_upstream(obj)
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    upstream = ref("state-node-status-exporter__0600_service_monitor.yaml")["spec"]["endpoints"][0]
    endpoint = monitor["spec"]["endpoints"][0]
    assert (endpoint["port"], endpoint["path"]) == (upstream["port"], upstream["path"])
    assert service["spec"]["ports"][0]["name"] == endpoint["port"]
    # No relabelling onto `node`: the samples carry their node already.
    assert "relabelings" not in endpoint


@pytest.mark.shared
def test_managed_prometheus_gets_a_pod_monitoring(tmp_path: Path) -> None:
    objs = objects(
        tmp_path, nodeStatusExporter={"enabled": True}, dcgmExporter={"monitor": "podmonitoring"}
    )
    monitoring = find(objs, "PodMonitoring")
    validate_upstream(monitoring)
    assert [o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == NAME] == []
    assert monitoring["spec"]["endpoints"][0]["port"] == "node-status"
    # A `node` target label would rename the samples' own node label to exported_node.
    assert "targetLabels" not in monitoring["spec"]


# --- the alerts -----------------------------------------------------------------------------------


def rules(tmp_path: Path, profile: str = "openshift", **sections: Any) -> dict[str, Any]:
    [obj] = [o for o in objects(tmp_path, profile, **sections) if o["kind"] == "PrometheusRule"]
    return obj


NODE_ALERTS = {
    "GPUNodeDriverValidationFailed",
    "GPUNodeToolkitNotReady",
    "GPUNodeCUDANotReady",
    "GPUNodeNoDevicesAdvertised",
}


def alert_rules(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in obj["spec"]["groups"] for r in g["rules"] if "alert" in r}


def test_node_alerts_come_with_the_exporter_only(tmp_path: Path) -> None:
    assert set(alert_rules(rules(tmp_path))) >= NODE_ALERTS
    assert not NODE_ALERTS & set(alert_rules(rules(tmp_path, "kubeadm")))
    # The exporter's absence from a GPU node is itself watched.
    watched = alert_rules(rules(tmp_path))["GPUNodeDaemonSetNotRunning"]["expr"]
    assert NAME in watched


@pytest.mark.shared
def test_node_alerts_use_the_metrics_upstream_alerts_on(tmp_path: Path) -> None:
    upstream = (
        REFS / "state-node-status-exporter__0800_prometheus_rule_openshift.yaml"
    ).read_text()
    served = set(re.findall(r"gpu_operator_[a-z_]+", upstream))
    used = {
        metric
        for name in NODE_ALERTS
        for metric in re.findall(
            r"gpu_operator_[a-z_]+", alert_rules(rules(tmp_path))[name]["expr"]
        )
    }
    assert used and used <= served
    # And the same wait as upstream's: 30 minutes unless alerts.thresholds says otherwise.
    assert {alert_rules(rules(tmp_path))[n]["for"] for n in NODE_ALERTS} == {"30m"}
    shorter = rules(tmp_path, alerts={"thresholds": {"nodeValidationFor": "5m"}})
    assert {alert_rules(shorter)[n]["for"] for n in NODE_ALERTS} == {"5m"}


def status(name: str, node: str, values: str) -> dict[str, str]:
    # As the exporter serves it (its own node label), scraped through the ServiceMonitor.
    return series(name, f'node="{node}", job="{NAME}", pod="{NAME}-{node}"', values)


NODE_UNIT_TESTS: dict[str, tuple[list[dict[str, str]], str, str]] = {
    "GPUNodeDriverValidationFailed": (
        [
            # n1's driver stops answering at minute 10; n2's stays healthy.
            status("gpu_operator_node_driver_validation", "n1", "1x10 0x50"),
            status("gpu_operator_node_driver_validation", "n2", "1x60"),
        ],
        "A GPU node's driver fails its validation.",
        "nvidia-smi has not run on node n1 (host driver or driver container) for 30m.",
    ),
    "GPUNodeToolkitNotReady": (
        [
            status("gpu_operator_node_driver_validation", "n1", "1x60"),
            status("gpu_operator_node_toolkit_ready", "n1", "0x60"),
            # A broken driver is the driver alert's, not this one's.
            status("gpu_operator_node_driver_validation", "n2", "0x60"),
            status("gpu_operator_node_toolkit_ready", "n2", "0x60"),
        ],
        "A GPU node's container runtime cannot run GPU containers.",
        "The driver works on node n1, but the validator's toolkit validation has not passed "
        "for 30m: GPU DaemonSets wait there.",
    ),
    "GPUNodeCUDANotReady": (
        [
            status("gpu_operator_node_driver_validation", "n1", "1x60"),
            status("gpu_operator_node_cuda_ready", "n1", "0x60"),
            status("gpu_operator_node_driver_validation", "n2", "1x60"),
            status("gpu_operator_node_cuda_ready", "n2", "1x60"),
        ],
        "CUDA applications cannot run on a GPU node.",
        "The driver works on node n1, but the validator's CUDA validation has not passed for 30m.",
    ),
    "GPUNodeNoDevicesAdvertised": (
        [
            status("gpu_operator_node_driver_validation", "n1", "1x60"),
            status("gpu_operator_node_device_plugin_devices_total", "n1", "0x60"),
            status("gpu_operator_node_driver_validation", "n2", "1x60"),
            status("gpu_operator_node_device_plugin_devices_total", "n2", "8x60"),
        ],
        "A GPU node advertises no GPUs.",
        "The driver works on node n1, but the node has advertised no nvidia.com/gpu or MIG "
        "device for 30m.",
    ),
}


@pytest.mark.promtool
def test_promtool_checks_and_fires_each_node_alert(tmp_path: Path) -> None:
    obj = rules(tmp_path)
    path = rule_file(tmp_path, obj)
    checked = promtool("check", "rules", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tests = []
    for alert, (inputs, summary, description) in NODE_UNIT_TESTS.items():
        labels = {"severity": "warning", "node": "n1", "job": NAME, "pod": f"{NAME}-n1"}
        tests.append(
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [
                    # Not yet: the step has failed for less than 30 minutes.
                    {"eval_time": "25m", "alertname": alert, "exp_alerts": []},
                    {
                        "eval_time": "45m",
                        "alertname": alert,
                        "exp_alerts": [expected(labels, summary, description)],
                    },
                ],
            }
        )
    test_file = tmp_path / "tests.yaml"
    test_file.write_text(
        yaml.safe_dump({"rule_files": [path.name], "evaluation_interval": "1m", "tests": tests})
    )
    result = promtool("test", "rules", test_file)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.promtool
def test_committed_openshift_rules_carry_the_node_alerts() -> None:
    assert PROMTOOL
    obj = read_manifest(
        (ROOT / "out/openshift-entitled/prometheusrule-gpustack-gpu-alerts.yaml").read_text()
    )
    assert set(alert_rules(obj)) >= NODE_ALERTS
