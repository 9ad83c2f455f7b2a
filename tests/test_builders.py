"""The shapes every component repeats, built once: what a node would notice if one of them
went wrong in any component (a mount of no volume, a host root mounted writable, a driver root
that never shows the driver mounted after the pod started, a monitor that scrapes nothing).

Checked over every example's rendering, so a new component is held to them as it lands."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from conftest import stack_for
from example_renders import example_configs, render_example

from gpustack.build import monitoring
from gpustack.build.components import build_all
from gpustack.build.pod import HostPath, exec_probe, host_paths, mount
from gpustack.objects import annotations_of, kind_of, labels_of, name_of
from gpustack.resolve.stack import DRIVER_CONTAINER_ROOT


@functools.cache
def _renderings() -> dict[str, list[dict[str, Any]]]:
    return {path.stem: render_example(path)[1].objects for path in example_configs()}


def pod_specs() -> list[tuple[str, dict[str, Any]]]:
    """(`example: Kind name`, pod spec) of every workload of every example."""
    found = []
    for example, objects in _renderings().items():
        for obj in objects:
            template = obj.get("spec", {}).get("template")
            if kind_of(obj) == "Job":
                template = obj["spec"]["template"]
            if isinstance(template, dict):
                found.append((f"{example}: {kind_of(obj)} {name_of(obj)}", template["spec"]))
    return found


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


# --- pods -------------------------------------------------------------------------------------


def test_every_mount_names_a_volume_of_its_pod_and_every_volume_is_mounted() -> None:
    # The kubelet refuses a pod whose container mounts a volume the pod does not define; a
    # volume no container mounts is a host path opened for nothing.
    specs = pod_specs()
    assert len(specs) > 50
    for where, pod in specs:
        volumes = [volume["name"] for volume in pod.get("volumes", [])]
        assert len(volumes) == len(set(volumes)), where
        mounted = {m["name"] for c in containers(pod) for m in c.get("volumeMounts", [])}
        assert mounted <= set(volumes), where
        assert set(volumes) <= mounted, where


def test_the_host_root_is_mounted_at_host_and_sees_later_mounts() -> None:
    # NVIDIA's containers run the host's tools with `chroot /host`, and find a driver container's
    # root under it once that pod has mounted it: HostToContainer.
    seen = 0
    for where, pod in pod_specs():
        roots = {
            v["name"] for v in pod.get("volumes", []) if v.get("hostPath", {}).get("path") == "/"
        }
        for container in containers(pod):
            for found in container.get("volumeMounts", []):
                if found["name"] in roots and found["mountPath"] == "/host":
                    seen += 1
                    assert found.get("mountPropagation") == "HostToContainer", where
    assert seen > 10


def test_the_driver_containers_root_is_seen_where_it_is_mounted_later() -> None:
    # /run/nvidia/driver is mounted on the host by the driver pod after the other GPU pods may
    # have started: a mount of it without HostToContainer shows an empty folder for ever.
    seen = 0
    for where, pod in pod_specs():
        roots = {
            v["name"]
            for v in pod.get("volumes", [])
            if v.get("hostPath", {}).get("path") == DRIVER_CONTAINER_ROOT
        }
        for container in containers(pod):
            for found in container.get("volumeMounts", []):
                if found["name"] in roots:
                    seen += 1
                    assert found.get("mountPropagation") == "HostToContainer", where
    assert seen > 10


def test_every_env_entry_has_one_value() -> None:
    for where, pod in pod_specs():
        for container in containers(pod):
            names = [entry["name"] for entry in container.get("env", [])]
            assert len(names) == len(set(names)), (where, container["name"])
            for entry in container.get("env", []):
                sources = {"value", "valueFrom"} & entry.keys()
                assert len(sources) == 1, (where, entry)
                if "value" in sources:
                    assert isinstance(entry["value"], str), (where, entry)


def test_a_host_path_gives_its_volume_and_mount_one_name() -> None:
    paths = [
        HostPath("a", "/run/a", "/a", "Directory", read_only=True),
        HostPath("b", "/run/b", "/b", propagation="Bidirectional"),
    ]
    volumes, mounts = host_paths(paths)
    assert [v["name"] for v in volumes] == [m["name"] for m in mounts] == ["a", "b"]
    assert volumes[0]["hostPath"] == {"path": "/run/a", "type": "Directory"}
    # No type: the kubelet checks nothing before it mounts the path.
    assert volumes[1]["hostPath"] == {"path": "/run/b"}
    assert mounts[0]["readOnly"] is True and "mountPropagation" not in mounts[0]
    assert mounts[1]["mountPropagation"] == "Bidirectional" and "readOnly" not in mounts[1]


def test_a_mount_and_a_probe_leave_kubernetes_defaults_unwritten() -> None:
    # Writable, no propagation; no initial delay, 1 s timeout, 3 failures: Kubernetes' own
    # defaults, which a written value would pin against a later default.
    assert mount("v", "/v") == {"name": "v", "mountPath": "/v"}
    probe = exec_probe("true", period=10)
    assert probe == {"exec": {"command": ["sh", "-c", "true"]}, "periodSeconds": 10}


# --- monitors ---------------------------------------------------------------------------------

EXPORTERS = ("nvidia-dcgm-exporter", "nvidia-node-status-exporter")


@pytest.mark.parametrize(
    ("profile", "monitor", "kinds"),
    [
        ("openshift", "servicemonitor", {"Service", "ServiceMonitor"}),
        ("aks", "azure-servicemonitor", {"Service", "ServiceMonitor"}),
        ("kubeadm", "podmonitoring", {"PodMonitoring"}),
        ("kubeadm", "none", {"Service"}),
    ],
)
def test_both_exporters_are_scraped_alike(
    tmp_path: Path, profile: str, monitor: str, kinds: set[str]
) -> None:
    stack = stack_for(
        tmp_path,
        profile,
        devicePlugin={"enabled": True},
        nodeStatusExporter={"enabled": True},
        dcgmExporter={"monitor": monitor, "monitorLabels": {"release": "prometheus"}},
    )
    objects = build_all(stack)
    scraped = {
        name: {kind_of(o): o for o in objects if name_of(o) == name and kind_of(o) in kinds}
        for name in EXPORTERS
    }
    for name, found in scraped.items():
        assert found.keys() == kinds, name
        daemonset = next(o for o in objects if kind_of(o) == "DaemonSet" and name_of(o) == name)
        pods = labels_of(daemonset["spec"]["template"])
        ports = {
            port["name"]
            for container in daemonset["spec"]["template"]["spec"]["containers"]
            for port in container.get("ports", [])
        }
        service = found.get("Service")
        if service:
            assert service["spec"]["selector"].items() <= pods.items()
            assert service["spec"]["ports"][0]["targetPort"] in ports
            # A plain Prometheus finds the Service by its annotation; with a monitor object,
            # the annotation would have it scraped twice.
            scrape = annotations_of(service).get("prometheus.io/scrape")
            assert scrape == ("true" if monitor == "none" else None)
        for kind in kinds - {"Service"}:
            watcher = found[kind]
            assert labels_of(watcher)["release"] == "prometheus"
            endpoint = watcher["spec"]["endpoints"][0]
            if kind == "ServiceMonitor":
                assert service is not None
                assert (
                    watcher["spec"]["selector"]["matchLabels"].items() <= labels_of(service).items()
                )
                assert endpoint["port"] == service["spec"]["ports"][0]["name"]
                azure = watcher["apiVersion"].startswith("azmonitoring.")
                assert azure == (monitor == "azure-servicemonitor")
                assert ("labelLimit" in watcher["spec"]) == azure
            else:
                assert watcher["spec"]["selector"]["matchLabels"].items() <= pods.items()
                assert endpoint["port"] in ports
    # Only the DCGM exporter's samples need their node added: the node status exporter's carry
    # it already, and a second `node` label would push theirs to `exported_node`.
    for kind in kinds - {"Service"}:
        dcgm = scraped["nvidia-dcgm-exporter"][kind]["spec"]
        status = scraped["nvidia-node-status-exporter"][kind]["spec"]
        assert "relabelings" in dcgm["endpoints"][0] or "targetLabels" in dcgm
        assert "relabelings" not in status["endpoints"][0] and "targetLabels" not in status


def test_scrape_objects_follow_the_stack_monitor(tmp_path: Path) -> None:
    stack = stack_for(tmp_path, "gke-cos", dcgmExporter={"monitor": "podmonitoring"})
    [only] = monitoring.scrape_objects(stack, "x", {"a": "b"}, ("metrics", 9400), by_node=True)
    assert kind_of(only) == "PodMonitoring"
    assert only["spec"]["targetLabels"] == {"metadata": ["node"]}


# --- objects.py -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [None, "text", [], {}, {"metadata": "x"}, {"metadata": {"labels": ["a"], "annotations": 3}}],
)
def test_labels_and_annotations_of_a_malformed_object_are_empty(obj: Any) -> None:
    # Committed output and a user's manifests may hold anything: reading them never raises.
    assert labels_of(obj) == {} and annotations_of(obj) == {}


def test_labels_and_annotations_are_the_objects_own() -> None:
    obj = {"metadata": {"labels": {"a": "1"}, "annotations": {"b": "2"}}}
    assert labels_of(obj) is obj["metadata"]["labels"]
    assert annotations_of(obj) is obj["metadata"]["annotations"]
