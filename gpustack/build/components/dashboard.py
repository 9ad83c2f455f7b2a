"""The DCGM dashboard as code: a Grafana dashboard in a ConfigMap for Grafana's dashboard sidecar.

Made from the exporter's own counter list (metrics.COUNTERS): a panel for each metric the
exporter collects, in its sections, and none for a metric it does not, so the dashboard follows
the counters. NVIDIA's dashboard (dcgm-exporter grafana/dcgm-exporter-dashboard.json, d5e5f51)
charts temperature, power, SM clocks (MHz times 10^6, in hertz), utilisation, framebuffer memory
and tensor core activity per GPU; this one charts every collected metric and filters by cluster,
node pool (a node label, through kube-state-metrics' kube_node_labels), node and GPU.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from gpustack.build import metrics
from gpustack.build.workload import COMPONENT_LABEL
from gpustack.resolve.stack import Stack

NAME = "gpustack-gpu-dashboard"
COMPONENT = "gpu-dashboard"
KEY = "gpustack-gpu-dashboard.json"
UID = "gpustack-gpu-dcgm"
# The sidecar's folder annotation (kiwigrid k8s-sidecar FOLDER_ANNOTATION, kube-prometheus-stack
# grafana chart `sidecar.dashboards.folderAnnotation`).
FOLDER_ANNOTATION = "grafana_folder"
NODE = metrics.NODE_LABEL
# Grafana's JSON model version the panels are written for (Grafana 10 and 11 read it).
SCHEMA_VERSION = 39

# How a field is charted: (title, Grafana unit, PromQL over the field's selector `{m}`). Counters
# are charted as rates; each field the exporter may collect has one.
PANELS: dict[str, tuple[str, str, str]] = {
    "DCGM_FI_DEV_SM_CLOCK": ("SM clock", "hertz", "{m} * 1000000"),
    "DCGM_FI_DEV_MEM_CLOCK": ("Memory clock", "hertz", "{m} * 1000000"),
    "DCGM_FI_DEV_GPU_TEMP": ("GPU temperature", "celsius", "{m}"),
    "DCGM_FI_DEV_MEMORY_TEMP": ("Memory temperature", "celsius", "{m}"),
    "DCGM_FI_DEV_POWER_USAGE": ("Power draw", "watt", "{m}"),
    # millijoules per second: watts averaged over the rate window.
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": (
        "Average power (from energy)",
        "watt",
        "rate({m}[$__rate_interval]) / 1000",
    ),
    "DCGM_FI_DEV_GPU_UTIL": ("GPU utilisation", "percent", "{m}"),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("Memory copy utilisation", "percent", "{m}"),
    "DCGM_FI_DEV_ENC_UTIL": ("Encoder utilisation", "percent", "{m}"),
    "DCGM_FI_DEV_DEC_UTIL": ("Decoder utilisation", "percent", "{m}"),
    "DCGM_FI_DEV_FB_FREE": ("Framebuffer free", "mbytes", "{m}"),
    "DCGM_FI_DEV_FB_USED": ("Framebuffer used", "mbytes", "{m}"),
    "DCGM_FI_DEV_FB_RESERVED": ("Framebuffer reserved", "mbytes", "{m}"),
    "DCGM_FI_DEV_XID_ERRORS": ("Last XID error", "none", "{m}"),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": (
        "Double-bit ECC errors",
        "none",
        "increase({m}[$__rate_interval])",
    ),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("PCIe replays", "ops", "rate({m}[$__rate_interval])"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("Rows remapped (uncorrectable)", "none", "{m}"),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("Rows remapped (correctable)", "none", "{m}"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("Row remap failure", "bool", "{m}"),
    # Nanoseconds of throttling per second: the share of time clocks were held down.
    "DCGM_FI_DEV_POWER_VIOLATION": (
        "Throttled by power",
        "percentunit",
        "rate({m}[$__rate_interval]) / 1e9",
    ),
    "DCGM_FI_DEV_THERMAL_VIOLATION": (
        "Throttled by temperature",
        "percentunit",
        "rate({m}[$__rate_interval]) / 1e9",
    ),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": (
        "NVLink bandwidth",
        "none",
        "rate({m}[$__rate_interval])",
    ),
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": ("vGPU licence status", "none", "{m}"),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("Graphics engine active", "percentunit", "{m}"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("Tensor core active", "percentunit", "{m}"),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("Memory interface active", "percentunit", "{m}"),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("PCIe sent", "Bps", "{m}"),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("PCIe received", "Bps", "{m}"),
}

_WIDTH = 12
_HEIGHT = 8


def enabled(stack: Stack) -> bool:
    return stack.dashboard_enabled


def pool_variable_label(node_label: str) -> str:
    """kube-state-metrics' label for a node label in kube_node_labels: `label_` and the key with
    every character outside [a-zA-Z0-9_] as `_` (kube-state-metrics SanitizeLabelName)."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", node_label)


def build(stack: Stack) -> list[dict[str, Any]]:
    if not enabled(stack):
        return []
    settings = stack.config.dashboard
    metadata: dict[str, Any] = {
        "name": NAME,
        "namespace": settings.namespace or stack.namespace,
        "labels": {COMPONENT_LABEL: COMPONENT, **settings.labels},
    }
    if settings.folder:
        metadata["annotations"] = {FOLDER_ANNOTATION: settings.folder}
    text = dashboard_json(settings.poolLabel)
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {KEY: text}}]


@functools.lru_cache(maxsize=64)
def dashboard_json(pool_label: str) -> str:
    """The dashboard's JSON text, written once per pool label, the one setting it depends on, so
    that a fleet's clusters share one text rather than each writing its own."""
    return json.dumps(dashboard(pool_label), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _panels() -> list[dict[str, Any]]:
    """A row per section of the exporter's counters, and a time series per counter, two a row."""
    selector = f'cluster=~"$cluster", {NODE}=~"$node", gpu=~"$gpu"'
    panels: list[dict[str, Any]] = []
    y = 0
    for heading, counters in metrics.COUNTERS:
        fields = [field for field, kind, _ in counters if kind != "label"]
        if not fields:
            continue
        panels.append(
            {
                "id": len(panels) + 1,
                "type": "row",
                "title": heading,
                "collapsed": False,
                "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
                "panels": [],
            }
        )
        y += 1
        for index, field in enumerate(fields):
            position = {
                "x": (index % 2) * _WIDTH,
                "y": y + (index // 2) * _HEIGHT,
                "w": _WIDTH,
                "h": _HEIGHT,
            }
            panels.append(_time_series(len(panels) + 1, field, position, selector))
        y += ((len(fields) + 1) // 2) * _HEIGHT
    return panels


def _time_series(
    number: int, field: str, position: dict[str, int], selector: str
) -> dict[str, Any]:
    title, unit, query = PANELS[field]
    return {
        "id": number,
        "type": "timeseries",
        "title": title,
        "description": field,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": position,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {
                "refId": "A",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "expr": query.format(m=f"{field}{{{selector}}}"),
                "legendFormat": f"{{{{{NODE}}}}} GPU {{{{gpu}}}}",
            }
        ],
    }


def _variables(pool_label: str) -> list[dict[str, Any]]:
    """The data source, then cluster, pool, node and GPU, each narrowing the next."""
    pool = pool_variable_label(pool_label)
    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
        },
        _query_variable("cluster", "Cluster", "label_values(DCGM_FI_DEV_GPU_TEMP, cluster)"),
        _query_variable(
            "pool",
            f"Pool ({pool_label})",
            f'label_values(kube_node_labels{{cluster=~"$cluster"}}, {pool})',
        ),
        _query_variable(
            "node",
            "Node",
            f'label_values(kube_node_labels{{cluster=~"$cluster", {pool}=~"$pool"}}, node)',
        ),
        _query_variable(
            "gpu",
            "GPU",
            f'label_values(DCGM_FI_DEV_GPU_TEMP{{cluster=~"$cluster", {NODE}=~"$node"}}, gpu)',
        ),
    ]


def dashboard(pool_label: str) -> dict[str, Any]:
    """The Grafana dashboard model, its pool variable reading the node label `pool_label`."""
    return {
        "uid": UID,
        "title": "GPUs (DCGM exporter)",
        "description": "Per-GPU telemetry from NVIDIA's DCGM exporter, rendered by gpustack.",
        "tags": ["gpu", "nvidia", "dcgm"],
        "editable": False,
        "schemaVersion": SCHEMA_VERSION,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "timezone": "",
        "panels": _panels(),
        "templating": {"list": _variables(pool_label)},
    }


def _query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    # allValue `.*`: "All" also matches series without the label (a Prometheus with no
    # `cluster` label, nodes kube-state-metrics exports without the pool label).
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "definition": query,
        "query": {"query": query, "refId": f"{name}-values"},
        "refresh": 2,
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "sort": 1,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
    }
