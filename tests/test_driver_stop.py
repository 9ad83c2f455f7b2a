"""A driver pod that stops (a rolling driver upgrade, a pool move, a deleted pod) takes the GPU
pods off its node before its daemons stop, as the GPU Operator's upgrade controller does before
it deletes a driver pod (NVIDIA/k8s-operator-libs pkg/upgrade: cordon, wait for jobs, pod
deletion, drain, pod restart, validation, uncordon).

Proven with NVIDIA's own k8s-driver-manager v0.12.0, built from its source archive
(tests/upstream.py), run by the rendered preStop hooks on a staged node (its /sys/module seen
through a mount namespace, as an unprivileged container sees the host's) against a small API
server that plays the node, the GPU DaemonSets' pods and a GPU workload, and records what the
manager does in order.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import upstream
from conftest import stack_for

from gpustack.build.pipeline import render

DRIVER = "nvidia-driver-daemonset"
NAMESPACE = "gpu-system"
NODE = "gpu-1"
DEPLOY = "nvidia.com/gpu.deploy."
# The GPU DaemonSets' deploy labels and the `app` label of their pods, as k8s-driver-manager
# v0.12.0 pauses them and waits for them (cmd/driver-manager/main.go
# evictAllGPUOperatorComponents, waitForPodsToTerminate).
OPERANDS = {
    "operator-validator": "nvidia-operator-validator",
    "container-toolkit": "nvidia-container-toolkit-daemonset",
    "device-plugin": "nvidia-device-plugin-daemonset",
    "gpu-feature-discovery": "gpu-feature-discovery",
    "dcgm-exporter": "nvidia-dcgm-exporter",
}


def _mount_namespaces() -> bool:
    try:
        result = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    except FileNotFoundError:
        return False
    return result.returncode == 0


# --- the API server the manager talks to ------------------------------------------------------


def _pod(
    namespace: str, name: str, owner: str, labels: dict[str, str], gpus: int = 0
) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": f"uid-{name}",
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": owner,
                    "name": name.rsplit("-", 1)[0],
                    "uid": f"uid-owner-{name}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": NODE,
            "containers": [{"name": "main", "image": "example", "resources": resources}],
        },
        "status": {"phase": "Running"},
    }


class Cluster:
    """One GPU node and the pods on it, behind enough of the API server for k8s-driver-manager:
    the node (get, strategic merge patch), pods (list by node and label, get), evictions, and
    discovery. The GPU DaemonSets' pods stand on the node while its deploy label is "true", as
    their DaemonSets select it. Every write is recorded with what the node looked like."""

    def __init__(self, observe: Any) -> None:
        self.labels = {DEPLOY + "driver": "true"} | {DEPLOY + key: "true" for key in OPERANDS}
        self.unschedulable = False
        self.workloads = {
            ("ml", "train-0"): _pod("ml", "train-0", "ReplicaSet", {"app": "train"}, gpus=8),
            ("web", "site-0"): _pod("web", "site-0", "ReplicaSet", {"app": "site"}),
        }
        self.events: list[tuple[str, Any, dict[str, Any]]] = []
        self.observe = observe
        self.lock = threading.Lock()
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, body: Any, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                with cluster.lock:
                    status, body = cluster.get(self.path)
                self.reply(body, status)

            def do_PATCH(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with cluster.lock:
                    status, answer = cluster.patch(self.path, body)
                self.reply(answer, status)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                with cluster.lock:
                    status, answer = cluster.post(self.path)
                self.reply(answer, status)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, args=(0.01,), daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def pods(self) -> list[dict[str, Any]]:
        operands = [
            _pod(NAMESPACE, f"{app}-x1", "DaemonSet", {"app": app})
            for key, app in OPERANDS.items()
            if self.labels.get(DEPLOY + key) == "true"
        ]
        return operands + list(self.workloads.values())

    def node(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": NODE, "labels": dict(self.labels), "annotations": {}},
            "spec": {"unschedulable": self.unschedulable},
        }

    def record(self, event: str, detail: Any) -> None:
        self.events.append((event, detail, self.observe()))

    def get(self, path: str) -> tuple[int, Any]:
        url = urlparse(path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = url.path.strip("/").split("/")
        if url.path == "/api":
            return 200, {"kind": "APIVersions", "versions": ["v1"]}
        if url.path == "/apis":
            groups = [
                {
                    "name": "policy",
                    "versions": [{"groupVersion": "policy/v1", "version": "v1"}],
                    "preferredVersion": {"groupVersion": "policy/v1", "version": "v1"},
                }
            ]
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        if url.path == "/api/v1":
            resources = [
                {"name": "nodes", "namespaced": False, "kind": "Node", "verbs": ["get", "patch"]},
                {"name": "pods", "namespaced": True, "kind": "Pod", "verbs": ["get", "list"]},
                {
                    "name": "pods/eviction",
                    "namespaced": True,
                    "kind": "Eviction",
                    "group": "policy",
                    "version": "v1",
                    "verbs": ["create"],
                },
            ]
            return 200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}
        if url.path == f"/api/v1/nodes/{NODE}":
            return 200, self.node()
        if parts[-1] == "pods":
            namespace = parts[3] if parts[2] == "namespaces" else None
            items = [
                pod
                for pod in self.pods()
                if (namespace is None or pod["metadata"]["namespace"] == namespace)
                and _selected(pod, query.get("labelSelector", ""), query.get("fieldSelector", ""))
            ]
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        if len(parts) == 6 and parts[4] == "pods":
            for pod in self.pods():
                if (pod["metadata"]["namespace"], pod["metadata"]["name"]) == (parts[3], parts[5]):
                    return 200, pod
            return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                         "reason": "NotFound"}  # fmt: skip
        raise AssertionError(f"unexpected GET {path}")

    def patch(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        assert urlparse(path).path == f"/api/v1/nodes/{NODE}", path
        labels = body.get("metadata", {}).get("labels")
        if labels:
            changed = {k: v for k, v in labels.items() if self.labels.get(k, "") != v}
            self.labels.update({k: v for k, v in labels.items() if v is not None})
            if changed:
                self.record("labels", changed)
        if "unschedulable" in body.get("spec", {}):
            self.unschedulable = bool(body["spec"]["unschedulable"])
            self.record("cordon" if self.unschedulable else "uncordon", NODE)
        return 200, self.node()

    def post(self, path: str) -> tuple[int, Any]:
        parts = urlparse(path).path.strip("/").split("/")
        assert parts[-1] == "eviction", path
        key = (parts[3], parts[5])
        self.record("evict", "/".join(key))
        self.workloads.pop(key)
        return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success"}


def _selected(pod: dict[str, Any], labels: str, fields: str) -> bool:
    for requirement in filter(None, labels.split(",")):
        key, _, value = requirement.partition("=")
        if pod["metadata"]["labels"].get(key) != value:
            return False
    for requirement in filter(None, fields.split(",")):
        key, _, value = requirement.partition("=")
        assert key == "spec.nodeName", fields
        if pod["spec"]["nodeName"] != value:
            return False
    return True


# --- the node ---------------------------------------------------------------------------------


class StoppingDriverPod:
    """The rendered driver pod's containers as the kubelet stops them, on a node staged under a
    folder: the host's /run/nvidia/validations, the pod's emptyDir, and /sys/module with the
    driver's modules loaded (for the eviction container: an unprivileged process in a mount
    namespace of its own, which sees that folder at /sys/module and is refused every unload)."""

    def __init__(self, workload: dict[str, Any], root: Path, server: str) -> None:
        spec = workload["spec"]["template"]["spec"]
        containers = {c["name"]: c for c in spec["containers"]}
        self.driver = containers["nvidia-driver-ctr"]
        self.eviction = containers["gpu-pod-eviction"]
        self.grace = spec["terminationGracePeriodSeconds"]
        self.root = root
        self.validations = root / "validations"
        self.handover = root / "handover"
        self.modules = root / "module"
        for folder in (self.validations, self.handover, self.bin):
            folder.mkdir(parents=True)
        for module in ("nvidia", "nvidia_uvm", "nvidia_modeset"):
            (self.modules / module).mkdir(parents=True)
            (self.modules / module / "refcnt").write_text("2\n")
        (self.validations / ".driver-ctr-ready").write_text("GDS_ENABLED: false\n")
        (self.validations / ".driver-daemons-status").write_text("Ready\n")
        (self.bin / "driver-manager").symlink_to(
            upstream.binaries("driver-manager") / "driver-manager"
        )
        (root / "kubeconfig").write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": server}}],
                    "users": [{"name": "u", "user": {}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "c",
                }
            )
        )

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def script(self, container: dict[str, Any]) -> str:
        command = container["lifecycle"]["preStop"]["exec"]["command"]
        assert command[:2] == ["sh", "-c"], command
        return (
            command[2]
            .replace("/run/nvidia/validations", str(self.validations))
            .replace("/run/driver-handover", str(self.handover))
        )

    def environment(self, container: dict[str, Any]) -> dict[str, str]:
        values = {"spec.nodeName": NODE, "metadata.namespace": NAMESPACE}
        env = {
            e["name"]: e["value"]
            if "value" in e
            else values[e["valueFrom"]["fieldRef"]["fieldPath"]]
            for e in container.get("env", [])
        }
        return env | {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "KUBECONFIG": str(self.root / "kubeconfig"),
        }

    def stop(self) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]:
        """The kubelet deleting the pod: every container's preStop hook at once."""
        driver = subprocess.Popen(
            ["sh", "-c", self.script(self.driver)], env=self.environment(self.driver)
        )
        # The eviction container's view: its own mount namespace, /sys/module the node's.
        inner = f'mount --bind "{self.modules}" /sys/module && exec sh -c "$0"'
        eviction = subprocess.Popen(
            ["unshare", "-rm", "sh", "-c", inner, self.script(self.eviction)],
            env=self.environment(self.eviction),
        )
        return driver, eviction

    def next_pod_manager(self, workload: dict[str, Any]) -> subprocess.CompletedProcess[bytes]:
        """The next driver pod's k8s-driver-manager init container on this node, once the old
        pod is gone: it sees the node's /sys/module, and /run without the old driver's root or
        PID file. `vfio-manage` (its image's, which unbinds GPUs from vfio-pci) stands for a
        node with none bound."""
        spec = workload["spec"]["template"]["spec"]
        (manager,) = [c for c in spec["initContainers"] if c["name"] == "k8s-driver-manager"]
        vfio = self.bin / "vfio-manage"
        vfio.write_text("#!/bin/sh\nexit 0\n")
        vfio.chmod(0o755)
        inner = (
            f'mount --bind "{self.modules}" /sys/module && mount -t tmpfs none /run && exec "$@"'
        )
        return subprocess.run(
            ["unshare", "-rm", "sh", "-c", inner, "sh", *manager["command"], *manager["args"]],
            env=self.environment(manager),
            capture_output=True,
            timeout=300,
            check=False,
        )


@pytest.fixture
def driver_pod_and_cluster(tmp_path):
    if not _mount_namespaces():
        pytest.skip("needs unshare -rm (user and mount namespaces) to stage a node's /sys/module")
    workload = next(
        o
        for o in render(stack_for(tmp_path, "kubeadm", driver={"mode": "container"})).objects
        if o["kind"] == "DaemonSet" and o["metadata"]["name"] == DRIVER
    )
    holder: dict[str, Any] = {}

    def observe() -> dict[str, Any]:
        pod: StoppingDriverPod = holder["pod"]
        driver: subprocess.Popen[bytes] = holder["driver"]
        return {
            # The kubelet signals the driver container, whose script then stops persistenced
            # and the fabric manager, only once its preStop hook has returned.
            "daemons running": driver.poll() is None,
            "ready file": (pod.validations / ".driver-ctr-ready").exists(),
        }

    cluster = Cluster(observe)
    holder["pod"] = StoppingDriverPod(workload, tmp_path / "node", cluster.url)
    holder["workload"] = workload
    try:
        yield holder, cluster
    finally:
        cluster.close()


@pytest.mark.upstream
def test_a_stopping_driver_pod_evicts_the_gpu_pods_before_its_daemons_stop(
    driver_pod_and_cluster,
):
    holder, cluster = driver_pod_and_cluster
    pod: StoppingDriverPod = holder["pod"]
    driver, eviction = pod.stop()
    holder["driver"] = driver
    eviction.wait(timeout=pod.grace)
    driver.wait(timeout=pod.grace)
    log = (pod.handover / "gpu-pod-eviction.log").read_text()
    assert driver.returncode == 0 and eviction.returncode == 0, log
    events = [(event, detail) for event, detail, _ in cluster.events]
    paused = {DEPLOY + key: "paused-for-driver-upgrade" for key in OPERANDS}
    restored = {DEPLOY + key: "true" for key in OPERANDS}
    # The GPU DaemonSets leave, the node is cordoned, the GPU pod (only it) is evicted; the
    # manager cannot unload the driver, so it uncordons the node and puts the labels back.
    assert events == [
        ("labels", paused),
        ("cordon", NODE),
        ("evict", "ml/train-0"),
        ("uncordon", NODE),
        ("labels", restored),
    ], log
    assert ("web", "site-0") in cluster.workloads
    # All of it while the driver's daemons still ran, and after the driver had withdrawn its
    # ready file: the GPU DaemonSets put back on the node wait for the next driver pod.
    for event, detail, seen in cluster.events:
        assert seen == {"daemons running": True, "ready file": False}, (event, detail)
    # The refused unload is the manager's, not the kernel's modules': still loaded here.
    assert "Failed to uninstall nvidia driver components" in log
    assert (pod.modules / "nvidia" / "refcnt").exists()


@pytest.mark.upstream
def test_no_driver_loaded_no_eviction(driver_pod_and_cluster):
    """A pod that stops before its driver ever loaded has nothing to protect: no call at all."""
    holder, cluster = driver_pod_and_cluster
    pod: StoppingDriverPod = holder["pod"]
    shutil.rmtree(pod.modules / "nvidia")
    driver, eviction = pod.stop()
    holder["driver"] = driver
    eviction.wait(timeout=pod.grace)
    driver.wait(timeout=pod.grace)
    assert cluster.events == []
    assert not (pod.validations / ".driver-ctr-ready").exists()


def _driver_pod(tmp_path: Path, **driver: Any) -> dict[str, Any]:
    workload = next(
        o
        for o in render(
            stack_for(tmp_path, "kubeadm", driver={"mode": "container", **driver})
        ).objects
        if o["kind"] == "DaemonSet" and o["metadata"]["name"] == DRIVER
    )
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def _wait_limit(script: str, marker: str) -> int:
    match = re.search(rf"while \[ ! -f \S*/{marker} \] && \[ \"\$waited\" -lt (\d+) \]", script)
    assert match, script
    return int(match.group(1))


@pytest.mark.parametrize("timeout", [300, 0, 1800])
def test_the_stop_fits_in_the_pods_grace_period(tmp_path, timeout):
    """The kubelet kills a stopping pod's containers when its grace period ends, hooks or not.
    The driver container's wait must outlast the eviction (the manager waits up to 5 minutes for
    the GPU DaemonSets' pods, cmd/driver-manager/main.go defaultGracePeriod, then evicts within
    DRAIN_TIMEOUT_SECONDS) and still leave the driver time to stop its daemons and unload."""
    spec = _driver_pod(tmp_path, upgrade={"drain": {"timeoutSeconds": timeout}})
    containers = {c["name"]: c for c in spec["containers"]}
    driver_stop = containers["nvidia-driver-ctr"]["lifecycle"]["preStop"]["exec"]["command"][2]
    eviction = containers["gpu-pod-eviction"]
    eviction_stop = eviction["lifecycle"]["preStop"]["exec"]["command"][2]
    drain = next(e["value"] for e in eviction["env"] if e["name"] == "DRAIN_TIMEOUT_SECONDS")
    assert drain.endswith("s") and int(drain[:-1]) > 0  # a stopping pod cannot wait for ever
    if timeout:
        assert int(drain[:-1]) == timeout
    handover = _wait_limit(eviction_stop, "driver-withdrawn")
    held = _wait_limit(driver_stop, "gpu-pods-gone")
    assert held >= handover + 300 + int(drain[:-1])
    assert spec["terminationGracePeriodSeconds"] >= held + 30


def test_without_eviction_the_driver_pod_only_withdraws_its_ready_file(tmp_path):
    """`driver.upgrade.gpuPodEviction: false`: nothing evicts, so nothing waits; the driver pod
    still withdraws its ready file first."""
    spec = _driver_pod(tmp_path, upgrade={"gpuPodEviction": False})
    assert [c["name"] for c in spec["containers"]] == ["nvidia-driver-ctr"]
    assert "terminationGracePeriodSeconds" not in spec
    (driver,) = spec["containers"]
    assert driver["lifecycle"]["preStop"]["exec"]["command"][2] == (
        "rm -f /run/nvidia/validations/.driver-ctr-ready "
        "/run/nvidia/validations/.driver-daemons-status"
    )


@pytest.mark.upstream
def test_an_eviction_cut_short_is_finished_by_the_next_pods_manager(driver_pod_and_cluster):
    """An eviction that did not finish (its container killed at the end of the grace period, a
    kubelet restart) leaves the node cordoned and the GPU DaemonSets paused. The next driver pod's
    manager, which runs whatever happened before, finds no driver loaded (the old pod unloaded it
    as it stopped) and puts the node back: uncordoned, every paused label `true` again
    (cmd/driver-manager/main.go uninstallDriver, maybeSetTrue)."""
    holder, cluster = driver_pod_and_cluster
    pod: StoppingDriverPod = holder["pod"]
    holder["driver"] = subprocess.Popen(["true"])
    cluster.labels.update({DEPLOY + key: "paused-for-driver-upgrade" for key in OPERANDS})
    cluster.unschedulable = True
    shutil.rmtree(pod.modules)
    pod.modules.mkdir()
    result = pod.next_pod_manager(holder["workload"])
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    assert [(event, detail) for event, detail, _ in cluster.events] == [
        ("uncordon", NODE),
        ("labels", {DEPLOY + key: "true" for key in OPERANDS}),
    ]
    assert not cluster.unschedulable
