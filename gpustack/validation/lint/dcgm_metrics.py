"""dcgm-metric-not-collected: an alert, recording rule or dashboard uses a DCGM metric that the
DCGM exporter does not collect, so the alert never fires and the panel stays empty.

The exporter collects exactly the fields of its collectors file (`DCGM_EXPORTER_COLLECTORS`, a
CSV of `field, type, help` lines, dcgm-exporter etc/default-counters.csv's format); the rule
reads that file from the ConfigMap the exporter mounts it from. An exporter whose list is not
among the objects (the image's own file, a ConfigMap applied elsewhere) proves nothing either
way, and then the rule says nothing.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from typing import Any

from gpustack.findings import Finding
from gpustack.objects import kind_of
from gpustack.validation.lint._objects import Objects, Pod, Rule, finding, mapping, sequence

COLLECTORS_ENV = "DCGM_EXPORTER_COLLECTORS"
# DCGM fields (DCGM_FI_*) and the exporter's own (DCGM_EXP_*), as metric names.
_METRIC = re.compile(r"\bDCGM_(?:FI|EXP)_[A-Z0-9_]+\b")
# Rule objects of prometheus-operator and of Google Managed Prometheus.
RULE_KINDS = ("PrometheusRule", "Rules", "ClusterRules", "GlobalRules")


def _mounted_file(pod: Pod, container: dict[str, Any], path: str) -> tuple[str, str] | None:
    """(ConfigMap name, key) of the file at `path` in the container, when a ConfigMap volume
    holds it."""
    volumes = {
        str(volume.get("name")): volume
        for volume in map(mapping, sequence(pod.spec.get("volumes")))
    }
    for mount in map(mapping, sequence(container.get("volumeMounts"))):
        directory = str(mount.get("mountPath", "")).rstrip("/")
        if mount.get("subPath") or not path.startswith(directory + "/"):
            continue
        source = mapping(volumes.get(str(mount.get("name")), {}).get("configMap"))
        if not source.get("name"):
            continue
        relative = posixpath.relpath(path, directory)
        items = {
            str(item.get("path")): str(item.get("key"))
            for item in map(mapping, sequence(source.get("items")))
        }
        return str(source["name"]), items.get(relative, relative) if items else relative
    return None


def collected(objects: Objects) -> set[str] | None:
    """The metrics the exporters among `objects` collect, or None when no exporter's collectors
    file is among them."""
    fields: set[str] | None = None
    for pod in objects.pods():
        for container in pod.containers:
            path = pod.env(container).get(COLLECTORS_ENV)
            found = _mounted_file(pod, container, path) if path else None
            config_map = objects.config_map(pod.namespace, found[0]) if found else None
            text = mapping(mapping(config_map).get("data")).get(found[1]) if found else None
            if not isinstance(text, str):
                continue
            fields = fields or set()
            for line in text.splitlines():
                field = line.split(",")[0].strip()
                if field and not field.startswith("#"):
                    fields.add(field)
    return fields


def _rule_expressions(obj: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(rule name, field path, expression) of each rule."""
    for g, group in enumerate(map(mapping, sequence(mapping(obj.get("spec")).get("groups")))):
        for r, rule in enumerate(map(mapping, sequence(group.get("rules")))):
            name = str(rule.get("alert") or rule.get("record") or f"rule {r}")
            yield name, f"spec.groups[{g}].rules[{r}].expr", str(rule.get("expr", ""))


def _dashboard_texts(obj: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    for key, value in mapping(obj.get("data")).items():
        if str(key).endswith(".json") and isinstance(value, str):
            yield f"dashboard {key}", f"data.{key}", value


def check(objects: Objects) -> Iterator[Finding]:
    fields = collected(objects)
    if fields is None:
        return
    for obj in objects.objects:
        kind = kind_of(obj)
        if kind in RULE_KINDS:
            uses = _rule_expressions(obj)
        elif kind == "ConfigMap":
            uses = _dashboard_texts(obj)
        else:
            continue
        for name, field, text in uses:
            for metric in sorted(set(_METRIC.findall(text)) - fields):
                yield finding(
                    RULE,
                    obj,
                    f"{name} uses {metric}, which the DCGM exporter does not collect "
                    "(not in its collectors file)",
                    field,
                )


RULE = Rule(
    "dcgm-metric-not-collected",
    "error",
    "An alert, recording rule or dashboard uses a DCGM metric the DCGM exporter's collectors file "
    "does not list: the alert can never fire, the panel stays empty.",
    "Add the field to the exporter's counters, or change the rule or panel to one it collects.",
    check,
)
