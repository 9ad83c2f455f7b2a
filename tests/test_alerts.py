"""GPU alerts: Prometheus's own checker accepts every rendered rule group, promtool's rule unit
tests fire each alert on synthetic series and keep it quiet on healthy ones, the rule objects pass
the upstream CRD schemas, and every DCGM metric a rule uses is one the exporter collects."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from conftest import (
    PROMTOOL,
    ROOT,
    SHARED,
    read_manifest,
    stack_for,
    validate_upstream,
)

from gpustack.build.components import build_all
from gpustack.config.monitoring_settings import AlertName

CLUSTER = {"devicePlugin": {"enabled": True}, "nfd": {"mode": "deploy"}}
NS = "gpu-system"
A100 = {"gpu": "0", "UUID": "GPU-a", "modelName": "NVIDIA A100-SXM4-80GB"}
GPU0 = 'gpu="0", UUID="GPU-a", modelName="NVIDIA A100-SXM4-80GB"'
GPU1 = 'gpu="1", UUID="GPU-b", modelName="NVIDIA A100-SXM4-80GB"'
ON_GPU0 = "GPU 0 (NVIDIA A100-SXM4-80GB, GPU-a) on node"


def rule_object(tmp_path: Path, profile: str = "kubeadm", **sections: Any) -> dict[str, Any]:
    stack = stack_for(tmp_path, profile, **{**CLUSTER, **sections})
    found = [o for o in build_all(stack) if o["kind"] in ("PrometheusRule", "ClusterRules")]
    assert len(found) == 1
    return found[0]


def alert_names(obj: dict[str, Any]) -> list[str]:
    return [r["alert"] for g in obj["spec"]["groups"] for r in g["rules"] if "alert" in r]


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


def promtool_check_rules(paths: list[Path]) -> dict[Path, str]:
    """`promtool check rules` over several files in one run (it checks each and fails if any
    fails): each file's verdict, and any error promtool printed for it, by path."""
    result = promtool("check", "rules", *paths)
    verdicts: dict[Path, str] = {}
    current: Path | None = None
    for line in result.stdout.splitlines():
        if line.startswith("Checking "):
            current = Path(line.removeprefix("Checking "))
            verdicts[current] = ""
        elif current is not None and line.strip():
            verdicts[current] += line.strip() + "\n"
    for line in result.stderr.splitlines():  # promtool names a failing file in its error
        for path in paths:
            if line.startswith(f"{path}:"):
                verdicts[path] += line + "\n"
    assert list(verdicts) == paths, result.stdout + result.stderr
    assert (result.returncode == 0) == all("SUCCESS" in v for v in verdicts.values()), (
        result.stdout + result.stderr
    )
    return verdicts


def rule_file(tmp_path: Path, obj: dict[str, Any]) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": obj["spec"]["groups"]}))
    return path


# --- Prometheus's checker -----------------------------------------------------------------------


@pytest.mark.promtool
@pytest.mark.parametrize(
    ("profile", "sections"),
    [
        ("kubeadm", {}),
        ("rke2", {"devicePlugin": {"enabled": True, "migStrategy": "single"}}),
        ("openshift", {}),
        ("gke-cos", {"devicePlugin": {"enabled": False}}),
        (
            "kubeadm",
            {
                "devicePlugin": {
                    "enabled": True,
                    "sharing": {"strategy": "time-slicing", "renameByDefault": True},
                },
                "dcgmExporter": {"interval": "1m30s"},
                "alerts": {"runbookURL": "https://wiki.example.com/gpu", "labels": {"team": "ml"}},
            },
        ),
    ],
)
def test_promtool_checks_every_rendered_rule_group(
    tmp_path: Path, profile: str, sections: dict[str, Any]
) -> None:
    obj = rule_object(tmp_path, profile, **sections)
    counts = {}
    for index, group in enumerate(obj["spec"]["groups"]):
        path = tmp_path / f"group-{index}.yaml"
        path.write_text(yaml.safe_dump({"groups": [group]}))
        counts[path] = len(group["rules"])
    verdicts = promtool_check_rules(list(counts))  # each group a file, checked in one run
    for path, count in counts.items():
        assert verdicts[path] == f"SUCCESS: {count} rules found\n", verdicts[path]


@pytest.mark.promtool
def test_promtool_checks_the_committed_rule_files(tmp_path: Path) -> None:
    committed = sorted(ROOT.glob("out/*/*rule*-gpustack-gpu-alerts.yaml"))
    assert {path.parent.name for path in committed} >= {"kubeadm-lab", "gke-cos-managed"}
    rule_files = {}
    for index, path in enumerate(committed):
        obj = read_manifest(path.read_text())
        rule_file = tmp_path / f"{index}-{path.parent.name}.yaml"
        rule_file.write_text(yaml.safe_dump({"groups": obj["spec"]["groups"]}))
        rule_files[rule_file] = path
    verdicts = promtool_check_rules(list(rule_files))  # every file checked in one run
    for rule_file, path in rule_files.items():
        assert verdicts[rule_file].startswith("SUCCESS: "), f"{path}: {verdicts[rule_file]}"


# --- promtool's rule unit tests: each alert fires on a broken GPU, not on a healthy one ---------


def series(name: str, labels: str, values: str) -> dict[str, str]:
    return {"series": f"{name}{{{labels}}}", "values": values}


def dcgm(name: str, node: str, gpu: str, values: str, pod: str = "") -> dict[str, str]:
    # What the exporter emits, with the node label its monitor adds and the pod holding the GPU.
    extra = f', exported_pod="{pod}", exported_namespace="ml"' if pod else ""
    return series(name, f'node="{node}", Hostname="{node}", {gpu}{extra}', values)


def expected(alert_labels: dict[str, str], summary: str, description: str) -> dict[str, Any]:
    return {
        "exp_labels": alert_labels,
        "exp_annotations": {"summary": summary, "description": description},
    }


UNIT_TESTS: dict[str, tuple[list[dict[str, str]], list[dict[str, Any]]]] = {
    "GPUXidError": (
        [
            # XID 43 comes at minute 11 while a pod holds the GPU; then the pod changes.
            dcgm("DCGM_FI_DEV_XID_ERRORS", "n1", GPU0, "0x10 43x10", pod="train-1"),
            dcgm("DCGM_FI_DEV_XID_ERRORS", "n1", GPU0, "_x21 43x20", pod="train-2"),
            # Healthy: no XID ever.
            dcgm("DCGM_FI_DEV_XID_ERRORS", "n1", GPU1, "0x40"),
            # An exporter that starts on a GPU whose last XID is 31.
            dcgm("DCGM_FI_DEV_XID_ERRORS", "n2", GPU0, "_x5 31x35"),
        ],
        [
            {"eval_time": "4m", "alertname": "GPUXidError", "exp_alerts": []},
            {
                "eval_time": "12m",
                "alertname": "GPUXidError",
                "exp_alerts": [
                    expected(
                        {"severity": "warning", "node": "n1", **A100},
                        "A GPU reported an XID error.",
                        f"{ON_GPU0} n1 reported XID 43 within the last 15m.",
                    ),
                    expected(
                        {"severity": "warning", "node": "n2", **A100},
                        "A GPU reported an XID error.",
                        f"{ON_GPU0} n2 reported XID 31 within the last 15m.",
                    ),
                ],
            },
            # The code stays, but no new one came for 15 minutes (and a new pod is no new XID).
            {"eval_time": "35m", "alertname": "GPUXidError", "exp_alerts": []},
        ],
    ),
    "GPUFallenOffBus": (
        [
            dcgm("DCGM_FI_DEV_XID_ERRORS", "n1", GPU0, "0x5 79x20"),
            dcgm("DCGM_FI_DEV_XID_ERRORS", "n1", GPU1, "0x5 43x20"),
        ],
        [
            {"eval_time": "4m", "alertname": "GPUFallenOffBus", "exp_alerts": []},
            {
                "eval_time": "20m",
                "alertname": "GPUFallenOffBus",
                "exp_alerts": [
                    expected(
                        {"severity": "critical", "node": "n1", **A100},
                        "A GPU has fallen off the bus (XID 79).",
                        f"{ON_GPU0} n1 reported XID 79: it no longer answers on PCIe. The node "
                        "needs a reset or a repair.",
                    )
                ],
            },
        ],
    ),
    "GPUsMissing": (
        [
            # Node n1's second GPU stops reporting after minute 10; n2 keeps both.
            dcgm("DCGM_FI_DEV_GPU_TEMP", "n1", GPU0, "40x40"),
            dcgm("DCGM_FI_DEV_GPU_TEMP", "n1", GPU1, "40x10"),
            dcgm("DCGM_FI_DEV_GPU_TEMP", "n2", GPU0, "40x40"),
            dcgm("DCGM_FI_DEV_GPU_TEMP", "n2", GPU1, "40x40"),
        ],
        [
            {"eval_time": "10m", "alertname": "GPUsMissing", "exp_alerts": []},
            {
                "eval_time": "25m",
                "alertname": "GPUsMissing",
                "exp_alerts": [
                    expected(
                        {"severity": "critical", "node": "n1"},
                        "A node's exporter sees fewer GPUs than it did.",
                        "The DCGM exporter on node n1 sees 1 GPUs, fewer than it did within "
                        "the last 1d.",
                    )
                ],
            },
        ],
    ),
    "GPUDoubleBitECCError": (
        [
            dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "n1", GPU0, "0x10 2x30"),
            dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "n1", GPU1, "0x40"),
        ],
        [
            {"eval_time": "9m", "alertname": "GPUDoubleBitECCError", "exp_alerts": []},
            {
                "eval_time": "12m",
                "alertname": "GPUDoubleBitECCError",
                "exp_alerts": [
                    expected(
                        {"severity": "critical", "node": "n1", **A100},
                        "A GPU had an uncorrectable (double-bit) memory error.",
                        f"{ON_GPU0} n1 had 2 double-bit ECC errors in the last 15m.",
                    )
                ],
            },
            {"eval_time": "35m", "alertname": "GPUDoubleBitECCError", "exp_alerts": []},
        ],
    ),
    "GPURowRemapFailure": (
        [
            dcgm("DCGM_FI_DEV_ROW_REMAP_FAILURE", "n1", GPU0, "0x5 1x10"),
            dcgm("DCGM_FI_DEV_ROW_REMAP_FAILURE", "n1", GPU1, "0x15"),
        ],
        [
            {"eval_time": "4m", "alertname": "GPURowRemapFailure", "exp_alerts": []},
            {
                "eval_time": "10m",
                "alertname": "GPURowRemapFailure",
                "exp_alerts": [
                    expected(
                        {"severity": "critical", "node": "n1", **A100},
                        "A GPU could not remap a failing memory row.",
                        f"{ON_GPU0} n1 failed to remap a memory row: its memory can no longer "
                        "be repaired in the field.",
                    )
                ],
            },
        ],
    ),
    "GPUsNotAdvertised": (
        [
            # n1 has two GPUs but advertises one (the plugin reported the other unhealthy).
            dcgm("DCGM_FI_DEV_GPU_TEMP", "n1", GPU0, "40x30"),
            dcgm("DCGM_FI_DEV_GPU_TEMP", "n1", GPU1, "40x30"),
            series(
                "kube_node_status_allocatable",
                'node="n1", resource="nvidia_com_gpu", unit="integer"',
                "1x30",
            ),
            # n2 advertises both.
            dcgm("DCGM_FI_DEV_GPU_TEMP", "n2", GPU0, "40x30"),
            dcgm("DCGM_FI_DEV_GPU_TEMP", "n2", GPU1, "40x30"),
            series(
                "kube_node_status_allocatable",
                'node="n2", resource="nvidia_com_gpu", unit="integer"',
                "2x30",
            ),
            # n3 advertises none at all (no device plugin registered).
            dcgm("DCGM_FI_DEV_GPU_TEMP", "n3", GPU0, "40x30"),
        ],
        [
            {"eval_time": "5m", "alertname": "GPUsNotAdvertised", "exp_alerts": []},
            {
                "eval_time": "15m",
                "alertname": "GPUsNotAdvertised",
                "exp_alerts": [
                    expected(
                        {"severity": "warning", "node": "n1"},
                        "A node advertises fewer GPUs than it has.",
                        "Node n1 should advertise 2 nvidia.com/gpu (the GPUs its DCGM exporter "
                        "sees), but its allocatable count is lower or missing.",
                    ),
                    expected(
                        {"severity": "warning", "node": "n3"},
                        "A node advertises fewer GPUs than it has.",
                        "Node n3 should advertise 1 nvidia.com/gpu (the GPUs its DCGM exporter "
                        "sees), but its allocatable count is lower or missing.",
                    ),
                ],
            },
        ],
    ),
    "GPUThermalThrottling": (
        [
            # Held down 30 s of every minute, then the healthy GPU 1 second a minute.
            dcgm("DCGM_FI_DEV_THERMAL_VIOLATION", "n1", GPU0, "0+30000000000x40"),
            dcgm("DCGM_FI_DEV_THERMAL_VIOLATION", "n1", GPU1, "0+1000000000x40"),
        ],
        [
            {"eval_time": "15m", "alertname": "GPUThermalThrottling", "exp_alerts": []},
            {
                "eval_time": "25m",
                "alertname": "GPUThermalThrottling",
                "exp_alerts": [
                    expected(
                        {"severity": "warning", "node": "n1", **A100},
                        "A GPU's clocks are held down by temperature.",
                        f"{ON_GPU0} n1 has had its clocks held down by temperature 50% of the "
                        "time for 15m.",
                    )
                ],
            },
        ],
    ),
    "GPUPowerThrottling": (
        [
            dcgm("DCGM_FI_DEV_POWER_VIOLATION", "n1", GPU0, "0+12000000000x40"),
            dcgm("DCGM_FI_DEV_POWER_VIOLATION", "n1", GPU1, "0x40"),
        ],
        [
            {
                "eval_time": "25m",
                "alertname": "GPUPowerThrottling",
                "exp_alerts": [
                    expected(
                        {"severity": "warning", "node": "n1", **A100},
                        "A GPU's clocks are held down by the power limit.",
                        f"{ON_GPU0} n1 has had its clocks held down by the power limit 20% of "
                        "the time for 15m.",
                    )
                ],
            },
        ],
    ),
    "GPUNodeDaemonSetNotRunning": (
        [
            series(
                "kube_daemonset_status_desired_number_scheduled",
                f'namespace="{NS}", daemonset="nvidia-device-plugin"',
                "3x30",
            ),
            series(
                "kube_daemonset_status_number_available",
                f'namespace="{NS}", daemonset="nvidia-device-plugin"',
                "3x5 2x25",
            ),
            # Healthy exporter; NFD's worker is not a GPU DaemonSet this alert watches.
            series(
                "kube_daemonset_status_desired_number_scheduled",
                f'namespace="{NS}", daemonset="nvidia-dcgm-exporter"',
                "3x30",
            ),
            series(
                "kube_daemonset_status_number_available",
                f'namespace="{NS}", daemonset="nvidia-dcgm-exporter"',
                "3x30",
            ),
            series(
                "kube_daemonset_status_desired_number_scheduled",
                f'namespace="{NS}", daemonset="nfd-worker"',
                "5x30",
            ),
            series(
                "kube_daemonset_status_number_available",
                f'namespace="{NS}", daemonset="nfd-worker"',
                "1x30",
            ),
        ],
        [
            {"eval_time": "15m", "alertname": "GPUNodeDaemonSetNotRunning", "exp_alerts": []},
            {
                "eval_time": "25m",
                "alertname": "GPUNodeDaemonSetNotRunning",
                "exp_alerts": [
                    expected(
                        {
                            "severity": "warning",
                            "namespace": NS,
                            "daemonset": "nvidia-device-plugin",
                        },
                        "A GPU DaemonSet is not running on every GPU node it should.",
                        f"DaemonSet {NS}/nvidia-device-plugin has no available pod on 1 of its "
                        "GPU nodes for 15m.",
                    )
                ],
            },
        ],
    ),
    "GPUsIdleWhilePodsWait": (
        [
            dcgm("DCGM_FI_DEV_GPU_UTIL", "n1", GPU0, "0x70"),
            dcgm("DCGM_FI_DEV_GPU_UTIL", "n1", GPU1, "95x70", pod="busy"),
            # A GPU pod cannot schedule from minute 10; a CPU pod waits all along.
            series(
                "kube_pod_container_resource_requests",
                'namespace="ml", pod="train", container="main", resource="nvidia_com_gpu", '
                'unit="integer", node=""',
                "1x70",
            ),
            series("kube_pod_status_unschedulable", 'namespace="ml", pod="train"', "_x10 1x60"),
            series(
                "kube_pod_container_resource_requests",
                'namespace="web", pod="api", container="main", resource="cpu", unit="core"',
                "1x70",
            ),
            series("kube_pod_status_unschedulable", 'namespace="web", pod="api"', "1x70"),
        ],
        [
            {"eval_time": "30m", "alertname": "GPUsIdleWhilePodsWait", "exp_alerts": []},
            {
                "eval_time": "45m",
                "alertname": "GPUsIdleWhilePodsWait",
                "exp_alerts": [
                    expected(
                        {"severity": "warning"},
                        "GPUs are idle while GPU pods cannot be scheduled.",
                        "1 GPUs have been idle (utilisation at most 0%) for 30m while pods "
                        "requesting GPUs cannot be scheduled.",
                    )
                ],
            },
        ],
    ),
}


@pytest.mark.promtool
def test_promtool_unit_tests_fire_each_alert(tmp_path: Path) -> None:
    obj = rule_object(tmp_path)
    assert set(alert_names(obj)) == set(UNIT_TESTS)
    rules = rule_file(tmp_path, obj)
    tests = [
        {"interval": "1m", "input_series": inputs, "alert_rule_test": cases}
        for inputs, cases in UNIT_TESTS.values()
    ]
    test_file = tmp_path / "tests.yaml"
    test_file.write_text(
        yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests})
    )
    result = promtool("test", "rules", test_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.promtool
def test_shared_gpus_are_expected_once_per_replica(tmp_path: Path) -> None:
    sharing = {"strategy": "time-slicing", "replicas": 4, "renameByDefault": True}
    obj = rule_object(tmp_path, devicePlugin={"enabled": True, "sharing": sharing})
    rules = rule_file(tmp_path, obj)
    inputs = [
        dcgm("DCGM_FI_DEV_GPU_TEMP", "n1", GPU0, "40x30"),
        dcgm("DCGM_FI_DEV_GPU_TEMP", "n1", GPU1, "40x30"),
        # 2 GPUs x 4 replicas, one GPU unhealthy: 4 left; n2 advertises all 8.
        series(
            "kube_node_status_allocatable", 'node="n1", resource="nvidia_com_gpu_shared"', "4x30"
        ),
        dcgm("DCGM_FI_DEV_GPU_TEMP", "n2", GPU0, "40x30"),
        dcgm("DCGM_FI_DEV_GPU_TEMP", "n2", GPU1, "40x30"),
        series(
            "kube_node_status_allocatable", 'node="n2", resource="nvidia_com_gpu_shared"', "8x30"
        ),
    ]
    case = {
        "eval_time": "15m",
        "alertname": "GPUsNotAdvertised",
        "exp_alerts": [
            expected(
                {"severity": "warning", "node": "n1"},
                "A node advertises fewer GPUs than it has.",
                "Node n1 should advertise 8 nvidia.com/gpu.shared (the GPUs its DCGM exporter "
                "sees, times 4 replicas), but its allocatable count is lower or missing.",
            )
        ],
    }
    test_file = tmp_path / "tests.yaml"
    test_file.write_text(
        yaml.safe_dump(
            {
                "rule_files": [rules.name],
                "tests": [{"interval": "1m", "input_series": inputs, "alert_rule_test": [case]}],
            }
        )
    )
    result = promtool("test", "rules", test_file)
    assert result.returncode == 0, result.stdout + result.stderr


# --- settings -----------------------------------------------------------------------------------


def test_thresholds_severity_labels_and_runbooks_are_settings(tmp_path: Path) -> None:
    obj = rule_object(
        tmp_path,
        alerts={
            "thresholds": {"throttledRatio": 0.25, "throttledFor": "5m", "idleFor": "2h"},
            "severity": {"GPUXidError": "critical"},
            "disabled": ["GPUPowerThrottling"],
            "labels": {"team": "ml-platform"},
            "ruleLabels": {"release": "kube-prometheus-stack"},
            "runbookURL": "https://wiki.example.com/gpu/runbooks",
        },
    )
    assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    rules = {r["alert"]: r for g in obj["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert "GPUPowerThrottling" not in rules
    assert rules["GPUXidError"]["labels"] == {"severity": "critical", "team": "ml-platform"}
    assert rules["GPUThermalThrottling"]["labels"]["severity"] == "warning"
    assert rules["GPUThermalThrottling"]["expr"].endswith("> 0.25")
    assert rules["GPUThermalThrottling"]["for"] == "5m"
    assert rules["GPUsIdleWhilePodsWait"]["for"] == "2h"
    assert (
        rules["GPURowRemapFailure"]["annotations"]["runbook_url"]
        == "https://wiki.example.com/gpu/runbooks#gpurowremapfailure"
    )


def test_each_alert_has_a_runbook_in_the_docs(tmp_path: Path) -> None:
    components = (ROOT / "docs" / "components.md").read_text()
    runbooks = components.split("\n## Alert runbooks\n", 1)[1].split("\n## ", 1)[0]
    headings = re.findall(r"(?m)^### (\w+)$", runbooks)
    # Every alert gpustack can render: kubeadm's and the node status exporter's.
    assert sorted(headings) == sorted(get_args(AlertName))
    assert set(UNIT_TESTS) < set(headings)
    obj = rule_object(tmp_path)
    for rule in (r for g in obj["spec"]["groups"] for r in g["rules"] if "alert" in r):
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def run_unit_test(
    tmp_path: Path, obj: dict[str, Any], inputs: list[dict[str, str]], cases: list[dict[str, Any]]
) -> None:
    rules = rule_file(tmp_path, obj)
    test_file = tmp_path / "tests.yaml"
    test_file.write_text(
        yaml.safe_dump(
            {
                "rule_files": [rules.name],
                "tests": [{"interval": "1m", "input_series": inputs, "alert_rule_test": cases}],
            }
        )
    )
    result = promtool("test", "rules", test_file)
    assert result.returncode == 0, result.stdout + result.stderr


def node_resource(metric: str, node: str, resource: str, values: str) -> dict[str, str]:
    return series(metric, f'node="{node}", resource="{resource}", unit="integer"', values)


MIXED_POOLS = {
    "pools": [
        {
            "name": "training",
            "selector": {"example.com/gpu-pool": "training"},
            "devicePlugin": {"migStrategy": "mixed"},
        },
        {
            "name": "inference",
            "selector": {"example.com/gpu-pool": "inference"},
            "devicePlugin": {
                "sharing": {"strategy": "time-slicing", "replicas": 4, "renameByDefault": True}
            },
        },
    ]
}
NOT_ADVERTISED = (
    "A node advertises fewer GPUs than it has.",
    "Node {node} has {count} GPUs (the GPUs its DCGM exporter sees), but advertises fewer "
    "nvidia.com/gpu, nvidia.com/gpu.shared or MIG devices, none, or some of them unhealthy.",
)


@pytest.mark.promtool
def test_gpus_not_advertised_is_true_to_every_pool(tmp_path: Path) -> None:
    """A pool with migStrategy mixed advertises nvidia.com/mig-<profile> and no nvidia.com/gpu,
    one with renameByDefault nvidia.com/gpu.shared (k8s-device-plugin v0.20.0 README, "MIG
    strategies" and "Shared Access to GPUs"): built from the cluster's settings alone the alert
    would fire on every node of such a pool, for ever. It fires on a node of any pool only when
    that node advertises fewer devices than it has GPUs, none, or some unhealthy."""
    obj = rule_object(tmp_path, nodes=MIXED_POOLS)
    capacity, allocatable = "kube_node_status_capacity", "kube_node_status_allocatable"
    inputs = [
        # training: one A100 cut in seven 1g.10gb devices, all healthy: quiet.
        dcgm("DCGM_FI_DEV_GPU_TEMP", "mig-1", GPU0, "40x30"),
        node_resource(capacity, "mig-1", "nvidia_com_mig_1g_10gb", "7x30"),
        node_resource(allocatable, "mig-1", "nvidia_com_mig_1g_10gb", "7x30"),
        # inference: two GPUs times 4 replicas, all healthy: quiet.
        dcgm("DCGM_FI_DEV_GPU_TEMP", "shared-1", GPU0, "40x30"),
        dcgm("DCGM_FI_DEV_GPU_TEMP", "shared-1", GPU1, "40x30"),
        node_resource(capacity, "shared-1", "nvidia_com_gpu_shared", "8x30"),
        node_resource(allocatable, "shared-1", "nvidia_com_gpu_shared", "8x30"),
        # inference: one GPU reported unhealthy, its 4 replicas gone from allocatable.
        dcgm("DCGM_FI_DEV_GPU_TEMP", "shared-2", GPU0, "40x30"),
        dcgm("DCGM_FI_DEV_GPU_TEMP", "shared-2", GPU1, "40x30"),
        node_resource(capacity, "shared-2", "nvidia_com_gpu_shared", "8x30"),
        node_resource(allocatable, "shared-2", "nvidia_com_gpu_shared", "4x30"),
        # a node in no pool: two GPUs, one advertised.
        dcgm("DCGM_FI_DEV_GPU_TEMP", "whole-1", GPU0, "40x30"),
        dcgm("DCGM_FI_DEV_GPU_TEMP", "whole-1", GPU1, "40x30"),
        node_resource(capacity, "whole-1", "nvidia_com_gpu", "1x30"),
        node_resource(allocatable, "whole-1", "nvidia_com_gpu", "1x30"),
        # a node whose plugin never registered: nothing advertised.
        dcgm("DCGM_FI_DEV_GPU_TEMP", "whole-2", GPU0, "40x30"),
    ]
    summary, description = NOT_ADVERTISED
    firing = [("shared-2", 2), ("whole-1", 2), ("whole-2", 1)]
    cases = [
        {"eval_time": "5m", "alertname": "GPUsNotAdvertised", "exp_alerts": []},
        {
            "eval_time": "15m",
            "alertname": "GPUsNotAdvertised",
            "exp_alerts": [
                expected(
                    {"severity": "warning", "node": node},
                    summary,
                    description.format(node=node, count=count),
                )
                for node, count in firing
            ],
        },
    ]
    run_unit_test(tmp_path, obj, inputs, cases)


@pytest.mark.promtool
def test_dra_nodes_are_left_out_of_gpus_not_advertised_and_their_plugin_is_watched(
    tmp_path: Path,
) -> None:
    """In a cluster with device-plugin and DRA pools, the DRA nodes advertise nothing in node
    capacity (the DRA driver publishes ResourceSlices): they are told by the kubelet plugin's pod
    and left out, while a device-plugin node that advertises nothing still fires. The kubelet
    plugin's DaemonSet is one GPUNodeDaemonSetNotRunning watches."""
    pools = {
        "pools": [
            {
                "name": "dra",
                "selector": {"example.com/gpu-pool": "dra"},
                "gpuAllocation": "dra",
            }
        ]
    }
    obj = rule_object(
        tmp_path, platform={"profile": "kubeadm", "kubernetesVersion": "1.34"}, nodes=pools
    )
    plugin = "dra-driver-nvidia-gpu-kubelet-plugin"
    inputs = [
        dcgm("DCGM_FI_DEV_GPU_TEMP", "dra-1", GPU0, "40x30"),
        series(
            "kube_pod_info",
            f'namespace="{NS}", pod="{plugin}-abcde", node="dra-1", '
            f'created_by_kind="DaemonSet", created_by_name="{plugin}"',
            "1x30",
        ),
        dcgm("DCGM_FI_DEV_GPU_TEMP", "plugin-1", GPU0, "40x30"),
        series(
            "kube_daemonset_status_desired_number_scheduled",
            f'namespace="{NS}", daemonset="{plugin}"',
            "2x30",
        ),
        series(
            "kube_daemonset_status_number_available",
            f'namespace="{NS}", daemonset="{plugin}"',
            "1x30",
        ),
    ]
    cases = [
        {
            "eval_time": "25m",
            "alertname": "GPUsNotAdvertised",
            "exp_alerts": [
                expected(
                    {"severity": "warning", "node": "plugin-1"},
                    "A node advertises fewer GPUs than it has.",
                    "Node plugin-1 should advertise 1 nvidia.com/gpu (the GPUs its DCGM "
                    "exporter sees), but its allocatable count is lower or missing.",
                )
            ],
        },
        {
            "eval_time": "25m",
            "alertname": "GPUNodeDaemonSetNotRunning",
            "exp_alerts": [
                expected(
                    {"severity": "warning", "namespace": NS, "daemonset": plugin},
                    "A GPU DaemonSet is not running on every GPU node it should.",
                    f"DaemonSet {NS}/{plugin} has no available pod on 1 of its GPU nodes for 15m.",
                )
            ],
        },
    ]
    run_unit_test(tmp_path, obj, inputs, cases)


def test_managed_prometheus_gets_cluster_wide_rules(tmp_path: Path) -> None:
    obj = rule_object(tmp_path, "gke-cos", devicePlugin={"enabled": False})
    assert (obj["apiVersion"], obj["kind"]) == ("monitoring.googleapis.com/v1", "ClusterRules")
    assert "namespace" not in obj["metadata"]
    # GKE's own device plugin is not gpustack's to watch; the exporter and validator are.
    daemonset_rule = next(
        r
        for g in obj["spec"]["groups"]
        for r in g["rules"]
        if r.get("alert") == "GPUNodeDaemonSetNotRunning"
    )
    assert 'daemonset=~"nvidia-dcgm-exporter' in daemonset_rule["expr"]
    assert "nvidia-device-plugin" not in daemonset_rule["expr"]
    # ClusterRules (prometheus-engine CRD): every rule exactly one of record and alert.
    for rule in (r for g in obj["spec"]["groups"] for r in g["rules"]):
        assert ("record" in rule) != ("alert" in rule)
        assert "annotations" not in rule or "alert" in rule


def test_no_rules_without_a_monitor_or_an_exporter(tmp_path: Path, cli) -> None:
    stack = stack_for(tmp_path, "kubeadm", **CLUSTER, dcgmExporter={"monitor": "none"})
    kinds = {o["kind"] for o in build_all(stack)}
    assert "PrometheusRule" not in kinds
    config = tmp_path / "off.yaml"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "gpustack.dev/v1alpha1",
                "kind": "GPUStack",
                "metadata": {"name": "lab"},
                "platform": {"profile": "kubeadm"},
                "namespace": NS,
                **CLUSTER,
                "dcgmExporter": {"enabled": False},
                "alerts": {"enabled": True},
            },
            indent=1,
        )
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert re.search(r"off\.yaml:\d+:\d+", result.output), result.output
    assert "alerts.enabled needs the DCGM exporter" in result.output
    assert not (tmp_path / "out").exists()


# --- what the rules use -------------------------------------------------------------------------


def test_rules_use_only_metrics_the_exporter_collects() -> None:
    counters = read_manifest(
        (ROOT / "out/kubeadm-lab/configmap-nvidia-dcgm-exporter-metrics.yaml").read_text()
    )["data"]["counters.csv"]
    collected = {line.split(",")[0] for line in counters.splitlines() if line[:5] == "DCGM_"}
    rules = (ROOT / "out/kubeadm-lab/prometheusrule-gpustack-gpu-alerts.yaml").read_text()
    used = set(re.findall(r"DCGM_[A-Z0-9_]+", rules))
    assert used and used <= collected
    # The throttling and double-bit ECC alerts need counters the exporter's default list leaves
    # out; gpustack's list turns them on.
    assert {"DCGM_FI_DEV_THERMAL_VIOLATION", "DCGM_FI_DEV_POWER_VIOLATION"} <= used
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in used


@pytest.mark.shared
def test_every_collected_field_is_one_upstream_lists() -> None:
    # dcgm-exporter's own lists name every field it knows how to collect (some commented out).
    upstream = {
        match
        for name in ("etc__default-counters.csv", "etc__dcp-metrics-included.csv")
        for match in re.findall(
            r"(?m)^#?\s*(DCGM_FI_[A-Z0-9_]+)\s*,",
            (SHARED / "refs/dcgm-exporter" / name).read_text(),
        )
    }
    counters = read_manifest(
        (ROOT / "out/kubeadm-lab/configmap-nvidia-dcgm-exporter-metrics.yaml").read_text()
    )["data"]["counters.csv"]
    shipped = {line.split(",")[0] for line in counters.splitlines() if line[:5] == "DCGM_"}
    assert shipped - upstream == set()


@pytest.mark.shared
@pytest.mark.parametrize(
    "cluster", ["kubeadm-lab", "openshift-entitled", "rke2-mig", "gke-cos-managed"]
)
def test_rule_objects_pass_the_upstream_crd_schemas(cluster: str) -> None:
    paths = list((ROOT / "out" / cluster).glob("*rule*-gpustack-gpu-alerts.yaml"))
    assert paths
    for path in paths:
        validate_upstream(read_manifest(path.read_text()))


@pytest.mark.shared
def test_monitors_label_samples_with_their_node() -> None:
    monitor = read_manifest(
        (ROOT / "out/kubeadm-lab/servicemonitor-nvidia-dcgm-exporter.yaml").read_text()
    )
    validate_upstream(monitor)
    assert {
        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
        "targetLabel": "node",
    } in monitor["spec"]["endpoints"][0]["relabelings"]
    pod_monitoring = read_manifest(
        (ROOT / "out/gke-cos-managed/podmonitoring-nvidia-dcgm-exporter.yaml").read_text()
    )
    validate_upstream(pod_monitoring)
    assert pod_monitoring["spec"]["targetLabels"]["metadata"] == ["node"]
