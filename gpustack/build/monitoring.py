"""How a Prometheus finds an exporter DaemonSet's pods: the Service in front of them and the
monitor object of the Prometheus that `monitoring.prometheus` names (`Stack.monitor`):
prometheus-operator's ServiceMonitor, Azure Monitor managed Prometheus's ServiceMonitor under
its own group, or Google Managed Prometheus's PodMonitoring. Every exporter (the DCGM exporter,
the node status exporter) is scraped through `scrape_objects`, so their monitors agree.
"""

from __future__ import annotations

from typing import Any

from gpustack.build.metrics import NODE_LABEL
from gpustack.build.workload import selector_labels
from gpustack.resolve.stack import Stack


def scrape_objects(
    stack: Stack,
    name: str,
    labels: dict[str, str],
    port: tuple[str, int],
    *,
    by_node: bool = False,
) -> list[dict[str, Any]]:
    """The objects through which the Prometheus of `stack.monitor` scrapes the exporter
    DaemonSet `name` on its `port` (name, number). With `by_node`, each sample is labelled
    `metrics.NODE_LABEL` with the node of the exporter pod it was scraped from (what an
    exporter whose samples do not say their node needs).

    Google Managed Prometheus scrapes pods directly and nothing else would use a Service there:
    a ClusterIP in front of a DaemonSet answers from a random node, so it is only useful as the
    endpoint list a Prometheus discovers (a ServiceMonitor's, or a plain Prometheus's own
    service discovery where the monitor is `none`)."""
    monitor = stack.monitor
    port_name = port[0]
    objects = []
    if monitor != "podmonitoring":
        objects.append(metrics_service(stack, name, labels, port, annotate=monitor == "none"))
    if monitor in ("servicemonitor", "azure-servicemonitor"):
        objects.append(service_monitor(stack, name, labels, port_name, by_node=by_node))
    elif monitor == "podmonitoring":
        objects.append(pod_monitoring(stack, name, labels, port_name, by_node=by_node))
    return objects


def metrics_service(
    stack: Stack,
    name: str,
    labels: dict[str, str],
    port: tuple[str, int],
    *,
    annotate: bool,
) -> dict[str, Any]:
    """The ClusterIP Service in front of an exporter DaemonSet named `name`, its `port` (name,
    number). With `annotate`, the `prometheus.io/scrape` convention a Prometheus without
    prometheus-operator discovers targets by (the GPU Operator's exporter Services carry it),
    left off otherwise so that no Prometheus scrapes twice."""
    metadata: dict[str, Any] = {"name": name, "namespace": stack.namespace, "labels": dict(labels)}
    if annotate:
        metadata["annotations"] = {"prometheus.io/scrape": "true"}
    port_name, number = port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(name),
            "ports": [
                {"name": port_name, "port": number, "targetPort": port_name, "protocol": "TCP"}
            ],
        },
    }


# Azure Monitor managed Prometheus reads prometheus-operator's ServiceMonitor under its own group
# and drops a monitor's samples unless it sets these limits, at the values of its templates
# (learn.microsoft.com azure-monitor containers/prometheus-metrics-scrape-crd).
AZURE_MONITOR_LIMITS = {
    "labelLimit": 63,
    "labelNameLengthLimit": 511,
    "labelValueLengthLimit": 1023,
}


def monitor_metadata(stack: Stack, name: str, labels: dict[str, str]) -> dict[str, Any]:
    """An exporter's ServiceMonitor or PodMonitoring metadata. One Prometheus scrapes every
    exporter, so each monitor carries `dcgmExporter.monitorLabels`: e.g. an existing
    kube-prometheus-stack selects only monitors that carry its `release` label."""
    labels = {**labels, **stack.config.dcgmExporter.monitorLabels}
    return {"name": name, "namespace": stack.namespace, "labels": labels}


def service_monitor(
    stack: Stack, name: str, labels: dict[str, str], port: str, *, by_node: bool
) -> dict[str, Any]:
    """A ServiceMonitor for the Prometheus that `stack.monitor` names: prometheus-operator's
    (`servicemonitor`) or Azure Monitor managed Prometheus's (`azure-servicemonitor`), on the
    Service `metrics_service` puts in front of the DaemonSet `name`."""
    # No scrapeTimeout: Prometheus then uses the smaller of its global timeout and the interval,
    # which stays valid for any interval.
    endpoint: dict[str, Any] = {
        "port": port,
        "path": "/metrics",
        "interval": stack.config.dcgmExporter.interval,
    }
    if by_node:
        # The node the scraped exporter pod runs on (Prometheus endpoints discovery,
        # __meta_kubernetes_pod_node_name).
        endpoint["relabelings"] = [
            {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": NODE_LABEL}
        ]
    spec = {
        "selector": {"matchLabels": selector_labels(name)},
        "namespaceSelector": {"matchNames": [stack.namespace]},
        "endpoints": [endpoint],
    }
    if stack.monitor == "azure-servicemonitor":
        return {
            "apiVersion": "azmonitoring.coreos.com/v1",
            "kind": "ServiceMonitor",
            "metadata": monitor_metadata(stack, name, labels),
            "spec": {**AZURE_MONITOR_LIMITS, **spec},
        }
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": monitor_metadata(stack, name, labels),
        "spec": spec,
    }


def pod_monitoring(
    stack: Stack, name: str, labels: dict[str, str], port: str, *, by_node: bool
) -> dict[str, Any]:
    """Google Managed Prometheus's PodMonitoring of the DaemonSet `name`'s pods. With
    `by_node`, the scraped pod's node is kept as its `node` target label (PodMonitoring permits
    pod, container and node); the scraped pod's pod, namespace and container labels never are:
    an exporter's samples name the pods they are about, which those would shadow
    (prometheus-engine example). Without it no target label is set: one would push the samples'
    own `node` to `exported_node`."""
    spec: dict[str, Any] = {
        "selector": {"matchLabels": selector_labels(name)},
        "endpoints": [{"port": port, "interval": stack.config.dcgmExporter.interval}],
    }
    if by_node:
        spec["targetLabels"] = {"metadata": [NODE_LABEL]}
    return {
        "apiVersion": "monitoring.googleapis.com/v1",
        "kind": "PodMonitoring",
        "metadata": monitor_metadata(stack, name, labels),
        "spec": spec,
    }
