"""monitor-target-missing: a ServiceMonitor (or GMP PodMonitoring) whose selector matches nothing,
or whose endpoint port name the target does not have, scrapes nothing and says nothing about it
(dcgm-exporter #188, #342: no GPU metrics in Prometheus)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.objects import describe, kind_of, labels_of, namespace_of
from gpustack.validation.lint._objects import (
    Budget,
    Labelled,
    Objects,
    Pod,
    Rule,
    finding,
    mapping,
    sequence,
)


def _namespaces(monitor: dict[str, Any]) -> list[str] | None:
    """The namespaces a ServiceMonitor looks in; None: every one.

    prometheus-operator ServiceMonitor.spec.namespaceSelector: `any`, `matchNames`, else its own.
    """
    selector = mapping(mapping(monitor.get("spec")).get("namespaceSelector"))
    if selector.get("any") is True:
        return None
    names = sequence(selector.get("matchNames"))
    return (
        sorted({name for name in names if isinstance(name, str)})
        if names
        else [namespace_of(monitor)]
    )


class _Targets:
    """Services or pods, each namespace's indexed by label (Labelled), and all of them together
    for a monitor that looks everywhere: a monitor's targets are looked up, not searched for,
    so the work grows with the monitors and targets, not with their pairs."""

    def __init__(self, targets: list[tuple[str, dict[str, Any]]], budget: Budget) -> None:
        self._budget = budget
        self._all = targets
        self._by_namespace: dict[str, list[int]] = {}
        for number, (namespace, _) in enumerate(targets):
            self._by_namespace.setdefault(namespace, []).append(number)
        self._indexes: dict[str | None, tuple[list[int], Labelled]] = {}

    def matching(self, selector: dict[str, Any], namespaces: list[str] | None) -> list[int]:
        found: list[int] = []
        for namespace in [None] if namespaces is None else namespaces:
            if namespace not in self._indexes:
                numbers = (
                    list(range(len(self._all)))
                    if namespace is None
                    else self._by_namespace.get(namespace, [])
                )
                labels = [self._all[number][1] for number in numbers]
                self._indexes[namespace] = (numbers, Labelled(labels, self._budget))
            numbers, index = self._indexes[namespace]
            found += [numbers[each] for each in index.matching(selector)]
        return sorted(found)


def _service_monitor(
    monitor: dict[str, Any], services: list[dict[str, Any]], targets: _Targets
) -> Iterator[Finding]:
    spec = mapping(monitor.get("spec"))
    selector = mapping(spec.get("selector"))
    chosen = [services[number] for number in targets.matching(selector, _namespaces(monitor))]
    if not chosen:
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
        for s in chosen
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


def _pod_monitoring(
    monitor: dict[str, Any], all_pods: list[Pod], targets: _Targets
) -> Iterator[Finding]:
    spec = mapping(monitor.get("spec"))
    selector = mapping(spec.get("selector"))
    cluster_wide = kind_of(monitor) == "ClusterPodMonitoring"
    namespaces = None if cluster_wide else [namespace_of(monitor)]
    pods = [all_pods[number] for number in targets.matching(selector, namespaces)]
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
    budget = Budget("monitors' selectors and labels")
    services = list(objects.of_kind("Service"))
    by_service = _Targets(
        [(namespace_of(s), labels_of(s)) for s in services],
        budget,
    )
    for monitor in objects.of_kind("ServiceMonitor"):
        yield from _service_monitor(monitor, services, by_service)
    pods = objects.pods()
    by_pod = _Targets([(pod.namespace, pod.labels) for pod in pods], budget)
    for monitor in objects.of_kind("PodMonitoring", "ClusterPodMonitoring"):
        yield from _pod_monitoring(monitor, pods, by_pod)


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
