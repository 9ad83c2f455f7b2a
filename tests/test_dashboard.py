"""The DCGM dashboard: a ConfigMap Grafana's sidecar picks up, with a panel for every metric the
exporter collects and none for one it does not, filtered by cluster, pool, node and GPU, and
charting what NVIDIA's own dashboard charts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SHARED, read_manifest, stack_for

from gpustack.build.components import build_all
from gpustack.validation import lint

CLUSTER = {"devicePlugin": {"enabled": True}, "nfd": {"mode": "deploy"}}
COMMITTED = ROOT / "out/kubeadm-lab/configmap-gpustack-gpu-dashboard.yaml"
COUNTERS = ROOT / "out/kubeadm-lab/configmap-nvidia-dcgm-exporter-metrics.yaml"


def dashboard_map(tmp_path: Path, profile: str = "kubeadm", **sections: Any) -> dict[str, Any]:
    stack = stack_for(tmp_path, profile, **{**CLUSTER, **sections})
    found = [
        o
        for o in build_all(stack)
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "gpustack-gpu-dashboard"
    ]
    assert len(found) == 1
    return found[0]


def model(config_map: dict[str, Any]) -> dict[str, Any]:
    (text,) = config_map["data"].values()
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def metrics_charted(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each metric a panel charts, and that panel."""
    charted = {}
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            for metric in re.findall(r"DCGM_[A-Z0-9_]+", target["expr"]):
                charted[metric] = panel
    return charted


def collected() -> set[str]:
    counters = read_manifest(COUNTERS.read_text())["data"]["counters.csv"]
    return {
        line.split(",")[0]
        for line in counters.splitlines()
        if line.startswith("DCGM_") and line.split(",")[1].strip() != "label"
    }


def test_the_sidecar_finds_the_dashboard_by_its_label(tmp_path: Path) -> None:
    default = dashboard_map(tmp_path)
    assert default["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert default["metadata"]["namespace"] == "gpu-system"
    custom = dashboard_map(
        tmp_path,
        dashboard={
            "labels": {"grafana.example.com/dashboard": "gpu"},
            "namespace": "monitoring",
            "folder": "GPU fleet",
        },
    )
    assert "grafana_dashboard" not in custom["metadata"]["labels"]
    assert custom["metadata"]["labels"]["grafana.example.com/dashboard"] == "gpu"
    assert custom["metadata"]["namespace"] == "monitoring"
    assert custom["metadata"]["annotations"] == {"grafana_folder": "GPU fleet"}


def test_a_panel_for_each_collected_metric_and_no_other() -> None:
    dashboard = model(read_manifest(COMMITTED.read_text()))
    assert set(metrics_charted(dashboard)) == collected()
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    # Panels sit in a grid: none overlaps another.
    cells = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, panel["title"]
                cells.add((x, y))


def test_the_json_is_stable_and_sorted() -> None:
    text = read_manifest(COMMITTED.read_text())["data"]["gpustack-gpu-dashboard.json"]
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_variables_filter_by_cluster_pool_node_and_gpu(tmp_path: Path) -> None:
    dashboard = model(
        dashboard_map(
            tmp_path,
            "gke-cos",
            devicePlugin={"enabled": False},
            dashboard={"poolLabel": "cloud.google.com/gke-nodepool"},
        )
    )
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert list(variables) == ["datasource", "cluster", "pool", "node", "gpu"]
    # kube-state-metrics exports node label cloud.google.com/gke-nodepool as
    # label_cloud_google_com_gke_nodepool on kube_node_labels.
    assert "label_cloud_google_com_gke_nodepool" in variables["pool"]["definition"]
    assert 'label_cloud_google_com_gke_nodepool=~"$pool"' in variables["node"]["definition"]
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            assert 'node=~"$node"' in target["expr"] and 'gpu=~"$gpu"' in target["expr"]


@pytest.mark.shared
def test_charts_what_nvidias_dashboard_charts() -> None:
    nvidia = json.loads(
        (SHARED / "refs/dcgm-exporter/grafana__dcgm-exporter-dashboard.json").read_text()
    )
    theirs = {
        metric: target["expr"]
        for panel in nvidia["panels"]
        for target in panel.get("targets", [])
        for metric in re.findall(r"DCGM_[A-Z0-9_]+", target["expr"])
    }
    ours = metrics_charted(model(read_manifest(COMMITTED.read_text())))
    assert set(theirs) <= set(ours)
    # NVIDIA charts the SM clock (MHz) times 10^6, as hertz.
    assert "* 1000000" in theirs["DCGM_FI_DEV_SM_CLOCK"]
    sm_clock = ours["DCGM_FI_DEV_SM_CLOCK"]
    assert "* 1000000" in sm_clock["targets"][0]["expr"]
    assert sm_clock["fieldConfig"]["defaults"]["unit"] == "hertz"
    assert ours["DCGM_FI_DEV_GPU_TEMP"]["fieldConfig"]["defaults"]["unit"] == "celsius"
    assert ours["DCGM_FI_DEV_POWER_USAGE"]["fieldConfig"]["defaults"]["unit"] == "watt"


def test_lint_catches_a_panel_on_a_metric_the_exporter_does_not_collect() -> None:
    objects = [
        read_manifest(p.read_text()) for p in sorted((ROOT / "out/kubeadm-lab").glob("*.yaml"))
    ]
    objects = [o for o in objects if isinstance(o, dict) and o.get("kind") != "Kustomization"]
    assert not [f for f in lint.run(objects) if f.rule == "dcgm-metric-not-collected"]
    for obj in objects:
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == "gpustack-gpu-dashboard":
            key = "gpustack-gpu-dashboard.json"
            obj["data"][key] = obj["data"][key].replace(
                "DCGM_FI_DEV_GPU_TEMP{", "DCGM_FI_DEV_SLOWDOWN_TEMP{"
            )
    findings = [f for f in lint.run(objects) if f.rule == "dcgm-metric-not-collected"]
    assert findings
    assert all("DCGM_FI_DEV_SLOWDOWN_TEMP" in f.message for f in findings)
    assert {f.object[-1] for f in findings if f.object} == {"gpustack-gpu-dashboard"}


def test_no_dashboard_without_a_monitor(tmp_path: Path) -> None:
    stack = stack_for(tmp_path, "kubeadm", **CLUSTER, dcgmExporter={"monitor": "none"})
    names = {o["metadata"]["name"] for o in build_all(stack)}
    assert "gpustack-gpu-dashboard" not in names
    stack = stack_for(
        tmp_path,
        "kubeadm",
        **CLUSTER,
        dcgmExporter={"monitor": "none"},
        dashboard={"enabled": True},
    )
    assert "gpustack-gpu-dashboard" in {o["metadata"]["name"] for o in build_all(stack)}
