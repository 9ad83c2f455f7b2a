"""GPU alerts as code: recording and alerting rules over the DCGM exporter and kube-state-metrics.

One rule object for the Prometheus that scrapes the exporter: a prometheus-operator PrometheusRule,
or with Google Managed Prometheus a ClusterRules (a namespaced `Rules` sees only the metrics of its
own namespace, prometheus-engine charts/operator/crds/monitoring.googleapis.com_rules.yaml, and
these rules join the exporter's metrics with kube-state-metrics' from another namespace).

Every exporter sample carries the `node` label its monitor sets (metrics.NODE_LABEL), the
label kube-state-metrics names nodes by; per-GPU rules keep the exporter's `gpu`, `UUID` and
`modelName` labels (dcgm-exporter internal/pkg/rendermetrics/render_metrics.go, d5e5f51) and drop
the pod labels, so a GPU is one series whichever pod holds it. The "Alert runbooks" section of docs/components.md
has one runbook per alert.
"""

from __future__ import annotations

from typing import Any

from gpustack.build import device_plugin_config, metrics, ready_files
from gpustack.build.workload import COMPONENT_LABEL
from gpustack.config.component_settings import Sharing
from gpustack.config.field_types import duration_ms
from gpustack.config.monitoring_settings import AlertThresholds
from gpustack.objects import kind_of, name_of, namespace_of
from gpustack.resolve.stack import Stack

NAME = "gpustack-gpu-alerts"
COMPONENT = "gpu-alerts"
RECORDING_GROUP = "gpustack-gpu.recording"
ALERTING_GROUP = "gpustack-gpu.alerts"

# The per-GPU labels rules aggregate by, dropping the pod, namespace and container labels.
NODE = metrics.NODE_LABEL
GPU = f"{NODE}, gpu, UUID, modelName"
# The XID the driver reports when a GPU no longer answers on PCIe (NVIDIA XID catalogue).
XID_FALLEN_OFF_BUS = 79
# GPU resources as kube-state-metrics names them (`nvidia.com/gpu` -> `nvidia_com_gpu`): whole or
# time-sliced GPUs, renamed shared GPUs and MIG devices (strategy mixed).
GPU_RESOURCES = "nvidia_com_(gpu|gpu_shared|mig_.+)"
RESOURCE_NAMES = {
    "nvidia_com_gpu": "nvidia.com/gpu",
    "nvidia_com_gpu_shared": "nvidia.com/gpu.shared",
}
# The GPU DaemonSets gpustack renders whose absence from a GPU node the on-call team must know.
WATCHED_DAEMONSETS = (
    metrics.DCGM_EXPORTER,
    device_plugin_config.NAME,
    ready_files.VALIDATOR,
    ready_files.VALIDATOR_DRA,
    metrics.NODE_STATUS_EXPORTER,
    # On DRA nodes the kubelet plugin hands out the GPUs: without it no claim is prepared.
    metrics.DRA_KUBELET_PLUGIN,
)

# Recorded series (level:metric:operations, Prometheus recording rule naming).
XID = "node_gpu:dcgm_xid_errors:max"
GPUS = f"{NODE}:dcgm_gpus:count"
UTILIZATION = "node_gpu:dcgm_gpu_utilization:max"
THERMAL = "node_gpu:dcgm_thermal_violation:ratio"
POWER = "node_gpu:dcgm_power_violation:ratio"
UNSCHEDULABLE = "cluster:gpu_pods_unschedulable:count"

# Each alert's severity unless alerts.severity says otherwise.
SEVERITY = {
    "GPUXidError": "warning",
    "GPUFallenOffBus": "critical",
    "GPUsMissing": "critical",
    "GPUDoubleBitECCError": "critical",
    "GPURowRemapFailure": "critical",
    "GPUsNotAdvertised": "warning",
    "GPUThermalThrottling": "warning",
    "GPUPowerThrottling": "warning",
    "GPUNodeDaemonSetNotRunning": "warning",
    "GPUsIdleWhilePodsWait": "warning",
    # As upstream's node deployment alerts (gpu-operator assets/state-node-status-exporter/
    # 0800_prometheus_rule_openshift.yaml, v26.7.0).
    "GPUNodeDriverValidationFailed": "warning",
    "GPUNodeToolkitNotReady": "warning",
    "GPUNodeCUDANotReady": "warning",
    "GPUNodeNoDevicesAdvertised": "warning",
}


def enabled(stack: Stack) -> bool:
    return stack.alerts_enabled


def api_version_and_kind(stack: Stack) -> tuple[str, str]:
    if stack.monitor == "podmonitoring":
        return "monitoring.googleapis.com/v1", "ClusterRules"
    return "monitoring.coreos.com/v1", "PrometheusRule"


def build(stack: Stack, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rule object for the stack `objects` were built for (it watches their DaemonSets)."""
    if not enabled(stack):
        return []
    api_version, kind = api_version_and_kind(stack)
    metadata: dict[str, Any] = {
        "name": NAME,
        "labels": {COMPONENT_LABEL: COMPONENT, **stack.config.alerts.ruleLabels},
    }
    if kind == "PrometheusRule":
        metadata["namespace"] = stack.namespace
    daemonsets = sorted(
        name_of(obj)
        for obj in objects
        if kind_of(obj) == "DaemonSet"
        and namespace_of(obj) == stack.namespace
        and name_of(obj) in WATCHED_DAEMONSETS
    )
    return [
        {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": metadata,
            "spec": {"groups": groups(stack, daemonsets)},
        }
    ]


def groups(stack: Stack, daemonsets: list[str]) -> list[dict[str, Any]]:
    """The rule groups, as Prometheus reads them from a rule file."""
    settings = stack.config.alerts
    alerts = [rule for rule in _alerts(stack, daemonsets) if rule["alert"] not in settings.disabled]
    for rule in alerts:
        name = rule["alert"]
        rule["labels"] = {
            **settings.labels,
            "severity": settings.severity.get(name, SEVERITY[name]),
        }
        if settings.runbookURL:
            rule["annotations"]["runbook_url"] = f"{settings.runbookURL}#{name.lower()}"
        if duration_ms(rule["for"]) == 0:
            del rule["for"]
    return [
        {"name": RECORDING_GROUP, "rules": _recording_rules(stack)},
        {"name": ALERTING_GROUP, "rules": alerts},
    ]


def _rate_window(stack: Stack) -> str:
    """At least four scrapes, and no less than 5m: rate() needs two samples in its window."""
    window_ms = max(300_000, 4 * duration_ms(stack.config.dcgmExporter.interval))
    if window_ms % 60_000 == 0:
        return f"{window_ms // 60_000}m"
    if window_ms % 1000 == 0:
        return f"{window_ms // 1000}s"
    return f"{window_ms}ms"


def _recording_rules(stack: Stack) -> list[dict[str, Any]]:
    window = _rate_window(stack)

    def violation_ratio(field: str) -> str:
        # The counters count nanoseconds of throttling: per second of time, a share from 0 to 1.
        return f"max by ({GPU}) (rate({field}[{window}])) / 1e9"

    return [
        {"record": XID, "expr": f"max by ({GPU}) (DCGM_FI_DEV_XID_ERRORS)"},
        # A GPU the exporter reads at all reports its temperature (NVIDIA's dashboard lists GPUs
        # by it); grouping by gpu counts a GPU once however many pods share it.
        {
            "record": GPUS,
            "expr": f"count by ({NODE}) (group by ({NODE}, gpu) (DCGM_FI_DEV_GPU_TEMP))",
        },
        {"record": UTILIZATION, "expr": f"max by ({GPU}) (DCGM_FI_DEV_GPU_UTIL)"},
        {"record": THERMAL, "expr": violation_ratio("DCGM_FI_DEV_THERMAL_VIOLATION")},
        {"record": POWER, "expr": violation_ratio("DCGM_FI_DEV_POWER_VIOLATION")},
        {
            "record": UNSCHEDULABLE,
            "expr": (
                "count(\n"
                "  max by (namespace, pod) (\n"
                f'    kube_pod_container_resource_requests{{resource=~"{GPU_RESOURCES}"}} > 0\n'
                "  )\n"
                "  and on (namespace, pod)\n"
                "  max by (namespace, pod) (kube_pod_status_unschedulable) == 1\n"
                ")"
            ),
        },
    ]


def _advertised(stack: Stack) -> tuple[str, int] | None:
    """The resource every device-plugin node advertises its GPUs as (kube-state-metrics' name)
    and how many per GPU, where all of them do it alike; None where it depends on the node: a
    MIG layout, or node pools whose plugin configs advertise differently."""
    config = stack.config
    kinds = {
        _advertised_as(stack, settings.mig_strategy, settings.sharing)
        for settings in (config.pool_settings(pool) for pool in [None, *stack.pools])
        if settings.gpu_allocation == "device-plugin"
    }
    return kinds.pop() if len(kinds) == 1 else None


def _advertised_as(stack: Stack, mig_strategy: str, sharing: Sharing) -> tuple[str, int] | None:
    """What one plugin config advertises per GPU: None with MIG (as many as the layout cuts)."""
    if mig_strategy != "none":
        return None
    if not stack.nvidia_plugin_serves or sharing.strategy == "none":
        # GKE's own plugin advertises one nvidia.com/gpu per GPU.
        return "nvidia_com_gpu", 1
    # k8s-device-plugin: each GPU is advertised `replicas` times, as nvidia.com/gpu.shared with
    # renameByDefault (docs: "Shared Access to GPUs").
    return (
        "nvidia_com_gpu_shared" if sharing.renameByDefault else "nvidia_com_gpu"
    ), sharing.replicas


def _not_advertised(stack: Stack) -> dict[str, Any] | None:
    """GPUsNotAdvertised, true to every node that gets its GPUs from a device plugin: the exact
    count where every such node advertises alike (whole GPUs, or each GPU `replicas` times),
    else what holds for any plugin config (MIG layouts, pools with their own sharing or MIG
    strategy): the node advertises fewer devices than it has GPUs, or none, or reports some
    unhealthy (allocatable below capacity: the kubelet keeps counting in capacity the devices a
    plugin reports unhealthy, devicemanager GetCapacity). Nodes whose GPUs the DRA driver hands
    out advertise none: they are told by the DRA kubelet plugin's pod on them and left out; a
    cluster whose every GPU node is on DRA gets no rule."""
    if "device-plugin" not in stack.gpu_allocations:
        return None
    advertised = _advertised(stack)
    if advertised is not None:
        resource, per_gpu = advertised
        allocatable = f'kube_node_status_allocatable{{resource="{resource}"}}'
        expected = GPUS if per_gpu == 1 else f"{GPUS} * {per_gpu}"
        # Allocatable, not capacity: the kubelet keeps counting in capacity the devices a
        # plugin reports unhealthy (devicemanager GetCapacity).
        expr = (
            f"{expected} > on ({NODE}) max by ({NODE}) ({allocatable})\n"
            f"or ({expected} unless on ({NODE}) {allocatable})"
        )
        description = (
            "Node {{ $labels.node }} should advertise {{ $value }} "
            f"{RESOURCE_NAMES[resource]} (the GPUs its DCGM exporter sees"
            + (f", times {per_gpu} replicas" if per_gpu > 1 else "")
            + "), but its allocatable count is lower or missing."
        )
    else:
        capacity = f'sum by ({NODE}) (kube_node_status_capacity{{resource=~"{GPU_RESOURCES}"}})'
        allocatable = (
            f'sum by ({NODE}) (kube_node_status_allocatable{{resource=~"{GPU_RESOURCES}"}})'
        )
        expr = (
            f"{GPUS} and on ({NODE}) ({allocatable} < {capacity})\n"
            f"or {GPUS} > on ({NODE}) {capacity}\n"
            f"or ({GPUS} unless on ({NODE}) {capacity})"
        )
        description = (
            "Node {{ $labels.node }} has {{ $value }} GPUs (the GPUs its DCGM exporter sees), "
            "but advertises fewer nvidia.com/gpu, nvidia.com/gpu.shared or MIG devices, none, "
            "or some of them unhealthy."
        )
    if stack.dra_gpus:
        plugin = (
            f'kube_pod_info{{namespace="{stack.namespace}", created_by_kind="DaemonSet", '
            f'created_by_name="{metrics.DRA_KUBELET_PLUGIN}"}}'
        )
        expr = f"(\n{expr}\n)\nunless on ({NODE}) max by ({NODE}) ({plugin})"
    return _alert(
        "GPUsNotAdvertised",
        expr,
        stack.config.alerts.thresholds.notAdvertisedFor,
        "A node advertises fewer GPUs than it has.",
        description,
    )


def _alert(name: str, expr: str, waited: str, summary: str, description: str) -> dict[str, Any]:
    """One alerting rule: it fires once `expr` has held for `waited` (`groups` drops a zero
    `for`, which Prometheus reads as firing at once). `groups` adds its labels and runbook."""
    return {
        "alert": name,
        "expr": expr,
        "for": waited,
        "annotations": {"summary": summary, "description": description},
    }


# How an alert about one GPU names it, from the labels the DCGM exporter puts on its samples.
_ON_GPU = (
    "GPU {{ $labels.gpu }} ({{ $labels.modelName }}, {{ $labels.UUID }}) on node {{ $labels.node }}"
)


def _gpu_error_alerts(stack: Stack) -> list[dict[str, Any]]:
    """A GPU that reports an error, falls off the bus or disappears from its exporter."""
    thresholds: AlertThresholds = stack.config.alerts.thresholds
    errors = thresholds.errorWindow
    return [
        _alert(
            "GPUXidError",
            # A new code, or a series that came with one (an exporter that just started).
            f"{XID} != 0\n"
            f"and (\n"
            f"  changes({XID}[{errors}]) > 0\n"
            f"  or ({XID} unless {XID} offset {errors})\n"
            f")",
            "0s",
            "A GPU reported an XID error.",
            f"{_ON_GPU} reported XID {{{{ $value }}}} within the last {errors}.",
        ),
        _alert(
            "GPUFallenOffBus",
            f"{XID} == {XID_FALLEN_OFF_BUS}",
            "0s",
            "A GPU has fallen off the bus (XID 79).",
            f"{_ON_GPU} reported XID 79: it no longer answers on PCIe. The node needs a "
            "reset or a repair.",
        ),
        # A GPU that fell off the bus may leave no XID series behind: DCGM stops reading it.
        _alert(
            "GPUsMissing",
            f"{GPUS} < max_over_time({GPUS}[{thresholds.gpuCountLookback}])",
            "0s",
            "A node's exporter sees fewer GPUs than it did.",
            "The DCGM exporter on node {{ $labels.node }} sees {{ $value }} GPUs, "
            f"fewer than it did within the last {thresholds.gpuCountLookback}.",
        ),
        _alert(
            "GPUDoubleBitECCError",
            f"max by ({GPU}) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[{errors}])) > 0",
            "0s",
            "A GPU had an uncorrectable (double-bit) memory error.",
            f"{_ON_GPU} had {{{{ $value }}}} double-bit ECC errors in the last {errors}.",
        ),
        _alert(
            "GPURowRemapFailure",
            f"max by ({GPU}) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
            "0s",
            "A GPU could not remap a failing memory row.",
            f"{_ON_GPU} failed to remap a memory row: its memory can no longer be "
            "repaired in the field.",
        ),
    ]


def _throttling_alerts(stack: Stack) -> list[dict[str, Any]]:
    thresholds = stack.config.alerts.thresholds
    return [
        _alert(
            alert,
            f"{series} > {thresholds.throttledRatio:g}",
            thresholds.throttledFor,
            f"A GPU's clocks are held down by {cause}.",
            f"{_ON_GPU} has had its clocks held down by {cause} "
            "{{ $value | humanizePercentage }} of the time for "
            f"{thresholds.throttledFor}.",
        )
        for alert, series, cause in (
            ("GPUThermalThrottling", THERMAL, "temperature"),
            ("GPUPowerThrottling", POWER, "the power limit"),
        )
    ]


def _daemonset_alert(stack: Stack, daemonsets: list[str]) -> dict[str, Any]:
    waited = stack.config.alerts.thresholds.daemonSetFor
    selector = f'namespace="{stack.namespace}", daemonset=~"{"|".join(daemonsets)}"'
    return _alert(
        "GPUNodeDaemonSetNotRunning",
        "max by (namespace, daemonset) "
        f"(kube_daemonset_status_desired_number_scheduled{{{selector}}})\n"
        "- max by (namespace, daemonset) "
        f"(kube_daemonset_status_number_available{{{selector}}})\n"
        "> 0",
        waited,
        "A GPU DaemonSet is not running on every GPU node it should.",
        "DaemonSet {{ $labels.namespace }}/{{ $labels.daemonset }} has no "
        f"available pod on {{{{ $value }}}} of its GPU nodes for {waited}.",
    )


def _idle_alert(stack: Stack) -> dict[str, Any]:
    thresholds = stack.config.alerts.thresholds
    return _alert(
        "GPUsIdleWhilePodsWait",
        f"count({UTILIZATION} <= {thresholds.idleUtilization}) > 0\nand on () {UNSCHEDULABLE} > 0",
        thresholds.idleFor,
        "GPUs are idle while GPU pods cannot be scheduled.",
        "{{ $value }} GPUs have been idle (utilisation at most "
        f"{thresholds.idleUtilization}%) for {thresholds.idleFor} while pods "
        "requesting GPUs cannot be scheduled.",
    )


def _alerts(stack: Stack, daemonsets: list[str]) -> list[dict[str, Any]]:
    rules = _gpu_error_alerts(stack)
    not_advertised = _not_advertised(stack)
    if not_advertised is not None:
        rules.append(not_advertised)
    rules += _throttling_alerts(stack)
    if daemonsets:
        rules.append(_daemonset_alert(stack, daemonsets))
    # Pods waiting for a DRA GPU wait on a ResourceClaim, which kube-state-metrics (v2.x)
    # reports nothing of: no series tells them from pods waiting for anything else.
    if not stack.dra_gpus or "device-plugin" in stack.gpu_allocations:
        rules.append(_idle_alert(stack))
    return rules + _node_status_alerts(stack)


def _node_status_alerts(stack: Stack) -> list[dict[str, Any]]:
    """A node whose bring-up stopped at a step, from the node status exporter's metrics: the
    intent of upstream's node deployment alerts (gpu-operator assets/state-node-status-exporter/
    0800_prometheus_rule_openshift.yaml, v26.7.0). A later step is blamed only while the driver
    validation passes, so a broken driver raises one alert, not three."""
    if not metrics.node_status_exporter_enabled(stack):
        return []
    waited = stack.config.alerts.thresholds.nodeValidationFor
    driver_ok = f"and on ({NODE}) {metrics.DRIVER_VALIDATION} == 1"
    rules = [
        _alert(
            "GPUNodeDriverValidationFailed",
            f"{metrics.DRIVER_VALIDATION} == 0",
            waited,
            "A GPU node's driver fails its validation.",
            "nvidia-smi has not run on node {{ $labels.node }} (host driver or driver "
            f"container) for {waited}.",
        ),
        _alert(
            "GPUNodeToolkitNotReady",
            f"{metrics.TOOLKIT_READY} == 0\n{driver_ok}",
            waited,
            "A GPU node's container runtime cannot run GPU containers.",
            "The driver works on node {{ $labels.node }}, but the validator's toolkit "
            f"validation has not passed for {waited}: GPU DaemonSets wait there.",
        ),
        _alert(
            "GPUNodeCUDANotReady",
            f"{metrics.CUDA_READY} == 0\n{driver_ok}",
            waited,
            "CUDA applications cannot run on a GPU node.",
            "The driver works on node {{ $labels.node }}, but the validator's CUDA "
            f"validation has not passed for {waited}.",
        ),
    ]
    if stack.config.devicePlugin.enabled and not stack.dra_gpus:
        # -1: the exporter could not read its node; 0: the node advertises no GPU (as every node
        # of a pool on the DRA driver does).
        rules.append(
            _alert(
                "GPUNodeNoDevicesAdvertised",
                f"{metrics.PLUGIN_DEVICES} == 0\n{driver_ok}",
                waited,
                "A GPU node advertises no GPUs.",
                "The driver works on node {{ $labels.node }}, but the node has "
                f"advertised no nvidia.com/gpu or MIG device for {waited}.",
            )
        )
    return rules
