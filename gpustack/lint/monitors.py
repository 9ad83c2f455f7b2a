"""monitor-target-missing: a ServiceMonitor (or GMP PodMonitoring) whose selector matches nothing,
or whose endpoint port name the target does not have, scrapes nothing and says nothing about it
(dcgm-exporter #188, #342: no GPU metrics in Prometheus)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.lint._objects import Objects, Rule, finding, labels_match, mapping, sequence
from gpustack.objects import describe, namespace_of


def _in_namespaces(monitor: dict[str, Any], namespace: str) -> bool:
    # prometheus-operator ServiceMonitor.spec.namespaceSelector: `any`, `matchNames`, else its own.
    selector = mapping(mapping(monitor.get("spec")).get("namespaceSelector"))
    if selector.get("any") is True:
        return True
    names = sequence(selector.get("matchNames"))
    return namespace in names if names else namespace == namespace_of(monitor)


def _service_monitor(objects: Objects, monitor: dict[str, Any]) -> Iterator[Finding]:
    spec = mapping(monitor.get("spec"))
    selector = mapping(spec.get("selector"))
    services = [
        service
        for service in objects.of_kind("Service")
        if _in_namespaces(monitor, namespace_of(service))
        and labels_match(selector, mapping(mapping(service.get("metadata")).get("labels")))
    ]
    if not services:
        yield finding(
            RULE,
            monitor,
            f"{describe(monitor)} selects no Service here (selector {_spell(selector)}); make "
            "spec.selector match the exporter Service's labels and namespace",
            "spec.selector",
        )
        return
    names = {
        str(p.get("name"))
        for s in services
        for p in map(mapping, sequence(mapping(s.get("spec")).get("ports")))
    }
    for index, endpoint in enumerate(map(mapping, sequence(spec.get("endpoints")))):
        port = endpoint.get("port")
        if isinstance(port, str) and port not in names:
            yield finding(
                RULE,
                monitor,
                f"{describe(monitor)} scrapes port {port!r} but the Service(s) it selects name "
                f"their ports {', '.join(sorted(names)) or '(none)'}; use one of those names",
                f"spec.endpoints.{index}.port",
            )


def _pod_monitoring(objects: Objects, monitor: dict[str, Any]) -> Iterator[Finding]:
    spec = mapping(monitor.get("spec"))
    selector = mapping(spec.get("selector"))
    cluster_wide = monitor.get("kind") == "ClusterPodMonitoring"
    pods = [
        pod
        for pod in objects.pods()
        if (cluster_wide or pod.namespace == namespace_of(monitor))
        and labels_match(selector, pod.labels)
    ]
    if not pods:
        yield finding(
            RULE,
            monitor,
            f"{describe(monitor)} selects no pods here (selector {_spell(selector)}); make "
            "spec.selector match the exporter's pod template labels",
            "spec.selector",
        )
        return
    ports = {
        str(port.get(key))
        for pod in pods
        for container in pod.containers
        for port in map(mapping, sequence(container.get("ports")))
        for key in ("name", "containerPort")
        if key in port
    }
    for index, endpoint in enumerate(map(mapping, sequence(spec.get("endpoints")))):
        port = endpoint.get("port")
        if port is not None and str(port) not in ports:
            yield finding(
                RULE,
                monitor,
                f"{describe(monitor)} scrapes port {port!r} but the pods it selects expose "
                f"{', '.join(sorted(ports)) or 'no ports'}; name the container port it scrapes",
                f"spec.endpoints.{index}.port",
            )


def _spell(selector: dict[str, Any]) -> str:
    labels = mapping(selector.get("matchLabels"))
    return ", ".join(f"{k}={v}" for k, v in labels.items()) or "(expressions)"


def check(objects: Objects) -> Iterator[Finding]:
    for monitor in objects.of_kind("ServiceMonitor"):
        yield from _service_monitor(objects, monitor)
    for monitor in objects.of_kind("PodMonitoring", "ClusterPodMonitoring"):
        yield from _pod_monitoring(objects, monitor)


RULE = Rule(
    "monitor-target-missing",
    "error",
    "A ServiceMonitor selects no Service (in its namespaces) or scrapes a port name the Service "
    "does not have; a PodMonitoring/ClusterPodMonitoring selects no pods or a port they do not "
    "expose.",
    "Make `spec.selector` match the exporter's Service (or pod) labels and `endpoints[].port` "
    "name one of its ports.",
    check,
)
