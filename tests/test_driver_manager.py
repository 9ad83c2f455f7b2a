"""NVIDIA's k8s-driver-manager in the driver DaemonSet, the deploy labels it flips, and driver
upgrades that roll node by node, per driver-container profile (kubeadm and RKE2 `container`,
OpenShift `driver-toolkit`).

Expectations come from upstream, not from gpustack's code:
- the init container as the GPU Operator renders it (gpu-operator v26.7.0
  internal/state/testdata golden driver render: image, command, env, mounts) with the image of its
  helm values (`driver.manager`);
- the RBAC as the GPU Operator grants it (assets/state-driver/0210_clusterrole.yaml): gpustack's
  may only be narrower;
- the labels it flips and the pods it waits for (NVIDIA/k8s-driver-manager v0.12.0
  cmd/driver-manager/main.go evictAllGPUOperatorComponents, waitForPodsToTerminate), and the
  deploy label each GPU Operator DaemonSet selects (assets/state-*/...daemonset.yaml nodeSelector);
- the ready file the driver's startup probe writes (assets/state-driver/0400_configmap.yaml).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from conftest import SHARED, stack_for, validate_upstream, yaml_document, yaml_documents
from manifests import schedulable

from gpustack.build.components import driver as driver_component
from gpustack.build.pipeline import Rendering, render
from gpustack.errors import UserError
from gpustack.objects import identity
from gpustack.validation import lint

OPERATOR = SHARED / "refs/gpu-operator"
DRIVER = "nvidia-driver-daemonset"
MANAGER = "k8s-driver-manager"
LABELLER = "deploy-labels"
EVICTION = "gpu-pod-eviction"
KUBECTL = Path(sys.executable).parent / "kubectl"

# (profile, config sections): every profile whose driver runs in a container gpustack deploys.
DRIVER_CONTAINER_PROFILES = [
    ("kubeadm", {"driver": {"mode": "container"}}),
    ("rke2", {"driver": {"mode": "container"}}),
    ("openshift", {}),
]
IDS = ["kubeadm-container", "rke2-container", "openshift-driver-toolkit"]
CONTAINER_SECTIONS = {"driver": {"mode": "container"}}

# The label values and pod labels k8s-driver-manager v0.12.0 uses (cmd/driver-manager/main.go:
# pausedStr, waitForPodsToTerminate's selectors and the optional MIG manager's).
PAUSED = "paused-for-driver-upgrade"
WAITED_FOR = {
    "nvidia-operator-validator",
    "nvidia-container-toolkit-daemonset",
    "nvidia-device-plugin-daemonset",
    "gpu-feature-discovery",
    "nvidia-dcgm-exporter",
    "nvidia-dcgm",
    "nvidia-mig-manager",
}


def load(text: str) -> Any:
    return yaml_document(text)


def template(name: str) -> Any:
    """An upstream asset read as YAML: lines that hold only a Go template action (if, end)
    dropped, the other actions blanked."""
    text = (OPERATOR / name).read_text()
    text = re.sub(r"(?m)^\s*\{\{[^\n]*\}\}\s*\n", "", text)
    return load(re.sub(r"\{\{.*?\}\}", "x", text))


def golden_daemonset(name: str) -> dict[str, Any]:
    text = (OPERATOR / name).read_text()
    return next(d for d in yaml_documents(text) if d and d["kind"] == "DaemonSet")


def rendered(tmp_path: Path, profile: str, sections: dict[str, Any]) -> Rendering:
    return render(stack_for(tmp_path, profile, **sections))


def daemonsets(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in rendering.objects if o["kind"] == "DaemonSet"}


def pod(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def manager(workload: dict[str, Any]) -> dict[str, Any]:
    (init,) = [c for c in pod(workload)["initContainers"] if c["name"] == MANAGER]
    return init


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def host_paths(workload: dict[str, Any], container: dict[str, Any]) -> dict[str, str | None]:
    volumes = {v["name"]: v.get("hostPath", {}).get("path") for v in pod(workload)["volumes"]}
    return {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}


def node_label_strings(rendering: Rendering, profile: str) -> set[str]:
    """The labels the profile's node/ files register GPU nodes with, as key=value."""
    files = rendering.node_files
    if profile == "kubeadm":
        join = load(files["join-configuration.yaml"])
        [arg] = [
            a for a in join["nodeRegistration"]["kubeletExtraArgs"] if a["name"] == "node-labels"
        ]
        return set(str(arg["value"]).split(","))
    if profile == "rke2":
        return set(load(files["rke2-agent-config.yaml"])["node-label"])
    template = load(files["machineset-patch.yaml"])["spec"]["template"]["spec"]
    labels = template.get("metadata", {}).get("labels", {})
    return {f"{key}={value}" for key, value in labels.items()}


# --- the init container ----------------------------------------------------------------------


@pytest.mark.shared
@pytest.mark.parametrize(("profile", "sections"), DRIVER_CONTAINER_PROFILES, ids=IDS)
def test_driver_manager_runs_first_as_the_gpu_operator_runs_it(tmp_path, profile, sections):
    golden = golden_daemonset("golden__driver-minimal.yaml")
    theirs = manager(golden)
    values = load((OPERATOR / "helm__values.yaml").read_text())["driver"]
    workload = daemonsets(rendered(tmp_path, profile, sections))[DRIVER]
    ours = manager(workload)
    assert ours["image"] == (
        f"{values['manager']['repository']}/{values['manager']['image']}:"
        f"{values['manager']['version']}"
    )
    assert ours["command"] == theirs["command"] == ["driver-manager"]
    assert ours["args"] == theirs["args"] == ["uninstall_driver"]
    assert ours["securityContext"] == theirs["securityContext"]
    # The same variables; the same values but the digest (each render's own) and the eviction
    # timeout: the operator's manifest leaves it unlimited, its upgrade policy allows 300 s (helm
    # values driver.upgradePolicy.drain.timeoutSeconds), which gpustack takes.
    assert list(env(ours)) == list(env(theirs))
    expected = {**env(theirs), "DRIVER_CONFIG_DIGEST": None, "DRAIN_TIMEOUT_SECONDS": None}
    assert {**env(ours), "DRIVER_CONFIG_DIGEST": None, "DRAIN_TIMEOUT_SECONDS": None} == expected
    assert (
        env(ours)["DRAIN_TIMEOUT_SECONDS"]
        == f"{values['upgradePolicy']['drain']['timeoutSeconds']}s"
    )
    # Where it sees the host: /run/nvidia (the old driver's root, state and PID files), /sys
    # (loaded modules), / at /host (a host driver); Mellanox's only with GPUDirect RDMA.
    theirs_at = {
        path: host
        for path, host in host_paths(golden, theirs).items()
        if path != "/run/mellanox/drivers"
    }
    # Besides: its API token (upstream's comes with the pod's automounted token).
    ours_at = {
        path: host
        for path, host in host_paths(workload, ours).items()
        if path != "/var/run/secrets/kubernetes.io/serviceaccount"
    }
    assert ours_at == theirs_at
    propagation = {
        m["mountPath"]: m.get("mountPropagation")
        for m in ours["volumeMounts"]
        if m["mountPath"] in ours_at
    }
    assert propagation == {
        m["mountPath"]: m.get("mountPropagation")
        for m in theirs["volumeMounts"]
        if m["mountPath"] in theirs_at
    }
    validate_upstream(workload)


@pytest.mark.parametrize(("profile", "sections"), DRIVER_CONTAINER_PROFILES, ids=IDS)
def test_driver_manager_and_driver_agree_on_the_digest(tmp_path, profile, sections):
    """The manager skips the unload, and the driver the module reload, only when the digest it
    is given equals the one the running driver stored: all containers carry the same."""
    workload = daemonsets(rendered(tmp_path, profile, sections))[DRIVER]
    digests = {
        env(c)["DRIVER_CONFIG_DIGEST"]
        for c in [*pod(workload)["initContainers"], *pod(workload)["containers"]]
        if c["name"] not in (LABELLER, EVICTION)  # they install nothing
    }
    assert len(digests) == 1
    # The eviction as the pod stops runs the manager past its digest check, which would skip it
    # (the running driver is its own pod's): cmd/driver-manager/main.go shouldSkipUninstall.
    (eviction,) = [c for c in pod(workload)["containers"] if c["name"] == EVICTION]
    assert "DRIVER_CONFIG_DIGEST" not in env(eviction)
    assert env(eviction)["FORCE_REINSTALL"] == "true"


@pytest.mark.parametrize(("profile", "sections"), DRIVER_CONTAINER_PROFILES, ids=IDS)
def test_what_installs_nothing_reloads_no_driver(tmp_path, profile, sections):
    """Upgrade settings, the manager's version and placement change the pod template (the pods
    roll) but not what is installed: the digest stays, so each new pod keeps the loaded driver."""

    def digest(**extra: Any) -> str:
        driver = {**sections.get("driver", {}), **extra.pop("driver", {})}
        workload = daemonsets(rendered(tmp_path, profile, {**sections, "driver": driver, **extra}))[
            DRIVER
        ]
        return str(env(manager(workload))["DRIVER_CONFIG_DIGEST"])

    before = digest()
    assert (
        digest(
            driver={
                "manager": {"version": "v0.11.0"},
                "upgrade": {
                    "maxUnavailable": "25%",
                    "gpuPodEviction": False,
                    "drain": {
                        "enabled": True,
                        "timeoutSeconds": 0,
                        "force": True,
                        "podSelector": "team=ml",
                    },
                },
            },
            nodes={"taints": []},
        )
        == before
    )
    assert digest(driver={"version": "580.95.05"}) != before


def test_a_new_probe_reloads_no_driver(tmp_path, monkeypatch):
    """The startup probe and the preStop hook judge and clean up after the driver; they install
    nothing, so a gpustack release that changes them must not reload every node's driver."""
    config = {"driver": {"mode": "container"}}

    def digest_and_probe() -> tuple[str, str]:
        workload = daemonsets(rendered(tmp_path, "kubeadm", config))[DRIVER]
        (container,) = [c for c in pod(workload)["containers"] if c["name"] == "nvidia-driver-ctr"]
        return (
            str(env(manager(workload))["DRIVER_CONFIG_DIGEST"]),
            container["startupProbe"]["exec"]["command"][2],
        )

    before, probe = digest_and_probe()
    monkeypatch.setattr(driver_component, "_startup_probe", lambda: "nvidia-smi")
    after, changed = digest_and_probe()
    assert changed != probe
    assert after == before


@pytest.mark.parametrize(
    ("upgrade", "expected"),
    [
        (
            {"gpuPodEviction": False},
            {"ENABLE_GPU_POD_EVICTION": "false", "ENABLE_AUTO_DRAIN": "false"},
        ),
        (
            {
                "drain": {
                    "enabled": True,
                    "timeoutSeconds": 900,
                    "podSelector": "team=ml,tier!=critical",
                    "deleteEmptyDir": True,
                    "force": True,
                }
            },
            {
                "ENABLE_GPU_POD_EVICTION": "true",
                "ENABLE_AUTO_DRAIN": "true",
                "DRAIN_TIMEOUT_SECONDS": "900s",
                "DRAIN_POD_SELECTOR_LABEL": "team=ml,tier!=critical",
                "DRAIN_DELETE_EMPTYDIR_DATA": "true",
                "DRAIN_USE_FORCE": "true",
            },
        ),
    ],
)
def test_upgrade_settings_reach_the_driver_manager(tmp_path, upgrade, expected):
    workload = daemonsets(
        rendered(tmp_path, "kubeadm", {"driver": {"mode": "container", "upgrade": upgrade}})
    )[DRIVER]
    values = env(manager(workload))
    assert {name: values[name] for name in expected} == expected


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (0, "driver.upgrade.maxUnavailable"),
        ("0%", "driver.upgrade.maxUnavailable"),
        ("150%", "driver.upgrade.maxUnavailable"),
    ],
)
def test_a_rollout_that_could_never_move_is_refused(tmp_path, value, field):
    # apps/v1: maxUnavailable may not be 0 while maxSurge is 0 (the driver cannot surge).
    with pytest.raises(UserError) as raised:
        stack_for(
            tmp_path, "kubeadm", driver={"mode": "container", "upgrade": {"maxUnavailable": value}}
        )
    assert raised.value.field == field


@pytest.mark.parametrize(("profile", "sections"), DRIVER_CONTAINER_PROFILES, ids=IDS)
@pytest.mark.parametrize("selector", [None, "", "   "])
def test_a_drain_of_every_pod_is_refused(tmp_path, profile, sections, selector):
    """k8s-driver-manager v0.12.0 drains with kubectl's drain package without setting DaemonSet
    pods aside (internal/kubernetes/client.go DrainNode); with no selector it lists every pod of
    the node, the driver pod among them, and kubectl's daemonSetFilter fails the drain there."""
    drain: dict[str, Any] = {"enabled": True}
    if selector is not None:
        drain["podSelector"] = selector
    driver = {**sections.get("driver", {}), "upgrade": {"drain": drain}}
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, profile, **{**sections, "driver": driver})
    assert raised.value.field == "driver.upgrade.drain.enabled"
    assert "DaemonSet pods" in raised.value.message
    assert "podSelector" in (raised.value.hint or "")


@pytest.mark.parametrize(("profile", "sections"), DRIVER_CONTAINER_PROFILES, ids=IDS)
def test_a_drain_off_or_of_selected_pods_is_taken(tmp_path, profile, sections):
    for drain in ({"enabled": False}, {"enabled": True, "podSelector": "team=ml"}):
        driver = {**sections.get("driver", {}), "upgrade": {"drain": drain}}
        workload = daemonsets(rendered(tmp_path, profile, {**sections, "driver": driver}))[DRIVER]
        assert env(manager(workload))["ENABLE_AUTO_DRAIN"] == str(drain["enabled"]).lower()


# --- RBAC ------------------------------------------------------------------------------------


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.mark.shared
@pytest.mark.parametrize(("profile", "sections"), DRIVER_CONTAINER_PROFILES, ids=IDS)
def test_driver_manager_may_do_what_it_does_and_no_more_than_upstream(tmp_path, profile, sections):
    rendering = rendered(tmp_path, profile, sections)
    workload = daemonsets(rendering)[DRIVER]
    account = pod(workload)["serviceAccountName"]
    objects = {(o["kind"], o["metadata"]["name"]): o for o in rendering.objects}
    # The manager gets the account's token where client-go looks for it; the long-running,
    # privileged driver containers get none.
    token = "/var/run/secrets/kubernetes.io/serviceaccount"
    volumes = {v["name"]: v for v in pod(workload)["volumes"]}
    for container in [*pod(workload)["initContainers"], *pod(workload)["containers"]]:
        mounted = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        if container["name"] not in (MANAGER, LABELLER, EVICTION):
            assert token not in mounted, container["name"]
            continue
        if container["name"] == EVICTION:
            # The one long-running container with the token: unprivileged and not root (the
            # pod shares the host's PID namespace), its root file system read-only.
            security = container["securityContext"]
            assert security["privileged"] is False
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}
            assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
            assert security["readOnlyRootFilesystem"] is True
        sources = volumes[mounted[token]]["projected"]["sources"]
        assert {"serviceAccountToken", "configMap", "downwardAPI"} == {
            key for source in sources for key in source
        }
    assert objects[("ServiceAccount", account)]["automountServiceAccountToken"] is False
    assert pod(workload).get("automountServiceAccountToken") is not True
    (binding,) = [
        o
        for o in rendering.objects
        if o["kind"] == "ClusterRoleBinding"
        and {
            "kind": "ServiceAccount",
            "name": account,
            "namespace": workload["metadata"]["namespace"],
        }
        in o["subjects"]
    ]
    ours = _grants(objects[("ClusterRole", binding["roleRef"]["name"])]["rules"])
    theirs = _grants(template("manifests-state-driver__0210_clusterrole.yaml")["rules"])
    assert ours <= theirs
    # What v0.12.0 calls (internal/kubernetes/client.go): its node's labels and cordon (a patch),
    # the pods on the node, their eviction (never a delete), the DaemonSet behind a DaemonSet pod
    # (kubectl drain's filter), a pod's ResourceClaims; and the deploy-labels init container's
    # list of its node (kubectl label with selectors).
    assert {
        ("", "nodes", "get"),
        ("", "nodes", "list"),
        ("", "nodes", "patch"),
        ("", "pods", "list"),
        ("", "pods", "get"),
        ("", "pods/eviction", "create"),
        ("apps", "daemonsets", "get"),
        ("resource.k8s.io", "resourceclaims", "get"),
    } == ours
    assert ("", "pods", "delete") not in ours


# --- deploy labels ---------------------------------------------------------------------------

# Upstream DaemonSets, each with the deploy label it selects and the app label it carries.
UPSTREAM_OPERANDS = [
    "state-device-plugin__0500_daemonset.yaml",
    "gpu-feature-discovery__0500_daemonset.yaml",
    "state-dcgm-exporter__0800_daemonset.yaml",
    "state-container-toolkit__0500_daemonset.yaml",
    "state-mig-manager__0600_daemonset.yaml",
]

GPU_CONFIGS = [
    *DRIVER_CONTAINER_PROFILES,
    # The MIG manager flips them too, whoever installs the driver.
    ("kubeadm", {"devicePlugin": {"migStrategy": "single"}}),
    ("rke2", {"devicePlugin": {"migStrategy": "mixed"}, "driver": {"mode": "container"}}),
    # The MPS control daemon holds the GPUs like the plugin: it leaves and is waited for with it.
    (
        "kubeadm",
        {
            "driver": {"mode": "container"},
            "devicePlugin": {"sharing": {"strategy": "mps", "replicas": 4}},
        },
    ),
]
GPU_IDS = [*IDS, "kubeadm-host-mig", "rke2-container-mig", "kubeadm-container-mps"]


DEPLOY = "nvidia.com/gpu.deploy."
# Every deploy label k8s-driver-manager reads and the GPU DaemonSets here select, "true": a GPU
# node as the node/ files register it, or labelled by hand where the platform re-applies labels.
ALL_TRUE = {
    DEPLOY + name: "true"
    for name in (
        "driver",
        "container-toolkit",
        "device-plugin",
        "gpu-feature-discovery",
        "dcgm-exporter",
        "mig-manager",
        "operator-validator",
    )
}


def gpu_node(workload: dict[str, Any]) -> dict[str, str]:
    """The labels of a GPU node the workload is meant for, deploy labels left out."""
    spec = pod(workload)
    labels = {k: v for k, v in spec.get("nodeSelector", {}).items() if not k.startswith(DEPLOY)}
    required = (
        spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
    )
    for term in required.get("nodeSelectorTerms", []):
        for expression in term["matchExpressions"]:
            if expression["operator"] == "In":
                labels[expression["key"]] = expression["values"][0]
            elif expression["operator"] == "Exists":
                labels[expression["key"]] = "true"
    return labels


@pytest.mark.shared
@pytest.mark.parametrize(("profile", "sections"), GPU_CONFIGS, ids=GPU_IDS)
def test_every_gpu_daemonset_answers_to_its_deploy_label(tmp_path, profile, sections):
    """Each GPU DaemonSet runs where its upstream twin's deploy label is "true" and leaves a node
    where a manager paused it (or it is "false"). A node without the labels keeps the stack (no
    controller labels nodes here, so rendering never takes the stack off a running node); the
    node files register them "true" so the managers can pause them, except on OpenShift, whose
    Machine API re-applies a MachineSet's labels (and so would undo every pause)."""
    rendering = rendered(tmp_path, profile, sections)
    ours = daemonsets(rendering)
    by_app = {d["spec"]["template"]["metadata"]["labels"].get("app"): d for d in ours.values()}
    registered = node_label_strings(rendering, profile)
    reapplied = profile == "openshift"
    golden = golden_daemonset("golden__driver-minimal.yaml")
    twins = [(DRIVER, pod(golden)["nodeSelector"])] if DRIVER in ours else []
    for name in UPSTREAM_OPERANDS:
        upstream = load((OPERATOR / name).read_text())
        app = upstream["spec"]["template"]["metadata"]["labels"]["app"]
        if app in by_app:  # no toolkit with a host driver on RKE2, no MIG manager without MIG
            twins.append(
                (
                    by_app[app]["metadata"]["name"],
                    upstream["spec"]["template"]["spec"]["nodeSelector"],
                )
            )
    assert len(twins) >= 4
    for name, selector in twins:
        ((key, value),) = selector.items()
        assert value == "true"
        workload = ours[name]
        node = gpu_node(workload)
        assert schedulable(workload, {**node, key: "true"}), name
        for paused in ("paused-for-driver-upgrade", "paused-for-mig-change", "false"):
            assert not schedulable(workload, {**node, key: paused}), (name, paused)
        assert schedulable(workload, node), name
        assert (f"{key}=true" in registered) != reapplied, name
    # Every GPU DaemonSet answers to a deploy label; all but the driver's carry an `app` label
    # the managers wait for.
    for name, workload in ours.items():
        node = {**gpu_node(workload), **ALL_TRUE}
        stopped = {k: ("false" if k.startswith(DEPLOY) else v) for k, v in node.items()}
        if name == "nfd-worker":  # labels nodes, touches no GPU
            assert schedulable(workload, stopped)
            continue
        assert schedulable(workload, node) and not schedulable(workload, stopped), name
        if name != DRIVER:
            assert workload["spec"]["template"]["metadata"]["labels"]["app"] in WAITED_FOR, name


@pytest.mark.parametrize(("profile", "sections"), GPU_CONFIGS, ids=GPU_IDS)
def test_a_paused_node_keeps_none_of_the_gpu_clients(tmp_path, profile, sections):
    """What the driver manager does to a node's labels: each "true" but the driver's becomes
    paused-for-driver-upgrade; no GPU client may stay (it would hold /dev/nvidia* and the old
    driver could not unload), and the driver pod stays."""
    rendering = rendered(tmp_path, profile, sections)
    for name, workload in daemonsets(rendering).items():
        if name == "nfd-worker":
            continue
        node = {**gpu_node(workload), **ALL_TRUE}
        paused = {
            k: (PAUSED if k.startswith(DEPLOY) and k != DEPLOY + "driver" else v)
            for k, v in node.items()
        }
        assert schedulable(workload, node), name
        assert schedulable(workload, paused) == (name == DRIVER), name


def test_without_a_manager_nothing_selects_deploy_labels(tmp_path):
    """A host driver and no MIG manager: nothing flips the labels, so nothing waits for them and
    the nodes register none."""
    rendering = rendered(tmp_path, "kubeadm", {})
    for workload in daemonsets(rendering).values():
        assert not any(
            key.startswith("nvidia.com/gpu.deploy.")
            for key in pod(workload).get("nodeSelector", {})
        )
    assert "nvidia.com/gpu.deploy" not in "".join(rendering.node_files.values())


@pytest.mark.parametrize(("profile", "sections"), GPU_CONFIGS, ids=GPU_IDS)
def test_deploy_labels_are_known_to_be_set(tmp_path, profile, sections):
    """No `node-label-unsourced` finding: the node/ files set the labels the DaemonSets select."""
    rendering = rendered(tmp_path, profile, sections)
    findings = lint.run(
        rendering.objects,
        rendering.kubernetes_version,
        taints=rendering.taints,
        node_labels=rendering.node_labels,
    )
    assert [f.message for f in findings if f.rule == "node-label-unsourced"] == []


# --- rolling upgrades ------------------------------------------------------------------------


@pytest.mark.shared
@pytest.mark.parametrize(("profile", "sections"), DRIVER_CONTAINER_PROFILES, ids=IDS)
def test_the_next_node_waits_for_this_nodes_new_driver(tmp_path, profile, sections):
    workload = daemonsets(rendered(tmp_path, profile, sections))[DRIVER]
    assert workload["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1},
    }
    assert workload["spec"]["minReadySeconds"] > 0
    (driver,) = [c for c in pod(workload)["containers"] if c["name"] == "nvidia-driver-ctr"]
    # Ready only while the driver answers and its ready file (the one upstream's startup probe
    # writes and the toolkit waits for) is there.
    script = (OPERATOR / "manifests-state-driver__0400_configmap.yaml").read_text()
    ready = re.search(r'READY_FILE="\$\{VALIDATIONS_DIR\}/([^"]+)"', script)
    validations = re.search(r'VALIDATIONS_DIR="([^"]+)"', script)
    assert ready and validations
    command = " ".join(driver["readinessProbe"]["exec"]["command"])
    assert f"{validations.group(1)}/{ready.group(1)}" in command
    assert "nvidia-smi" in command
    # And, as upstream's probe, the module loaded and the driver's daemons (the fabric manager on
    # NVSwitch systems) Ready before the next node is taken down.
    daemons = re.search(r'DAEMONS_STATUS_FILE="\$\{VALIDATIONS_DIR\}/([^"]+)"', script)
    assert daemons and f"{validations.group(1)}/{daemons.group(1)}" in command
    assert '!= "Ready"' in script and "= Ready" in command
    assert "/sys/module/nvidia/refcnt" in script and "/sys/module/nvidia/refcnt" in command


def test_max_unavailable_takes_a_count_or_a_percentage(tmp_path):
    for value in (3, "25%"):
        workload = daemonsets(
            rendered(
                tmp_path,
                "kubeadm",
                {"driver": {"mode": "container", "upgrade": {"maxUnavailable": value}}},
            )
        )[DRIVER]
        assert workload["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": value}


@pytest.mark.parametrize(("profile", "sections"), DRIVER_CONTAINER_PROFILES, ids=IDS)
def test_a_driver_version_change_changes_only_the_driver_daemonset(tmp_path, profile, sections):
    def objects(version: str) -> tuple[dict[Any, dict[str, Any]], dict[str, str]]:
        driver = {**sections.get("driver", {}), "version": version}
        rendering = rendered(tmp_path, profile, {**sections, "driver": driver})
        return {identity(o): o for o in rendering.objects}, rendering.node_files

    before, before_files = objects("580.95.05")
    after, after_files = objects("595.91.07")
    assert set(before) == set(after)
    changed = sorted(f"{key[1]}/{key[3]}" for key in before if before[key] != after[key])
    assert changed == [f"DaemonSet/{DRIVER}"]
    assert before_files == after_files
    # Within it: the driver image, and the digest on every container; nothing else.
    (key,) = [k for k in before if k[1] == "DaemonSet" and k[3] == DRIVER]
    old, new = before[key], after[key]
    assert old["metadata"] == new["metadata"]
    assert {k: v for k, v in old["spec"].items() if k != "template"} == {
        k: v for k, v in new["spec"].items() if k != "template"
    }
    for before_c, after_c in zip(
        [*pod(old)["initContainers"], *pod(old)["containers"]],
        [*pod(new)["initContainers"], *pod(new)["containers"]],
        strict=True,
    ):
        strip = {"DRIVER_CONFIG_DIGEST"}
        for side in (before_c, after_c):
            side["env"] = [e for e in side["env"] if e["name"] not in strip]
            if side["image"].startswith("nvcr.io/nvidia/driver:"):
                side["image"] = "nvcr.io/nvidia/driver"
    assert old == new


GITOPS = {
    "no-gitops": {},
    "argocd": {
        "gitops": {"tool": "argocd", "argocd": {"repoURL": "https://git.example.com/f.git"}}
    },
    "flux": {
        "gitops": {"tool": "flux", "flux": {"sourceRef": {"kind": "GitRepository", "name": "f"}}}
    },
}


@pytest.mark.parametrize("layout", sorted(GITOPS))
@pytest.mark.parametrize(("profile", "sections"), DRIVER_CONTAINER_PROFILES, ids=IDS)
def test_gpustack_diff_of_a_driver_version_change_names_only_the_driver(
    cli, tmp_path, profile, sections, layout
):
    """What a reviewer sees before committing a driver upgrade: one changed object, the driver
    DaemonSet (its image and digest), whatever the GitOps layout (Flux stages, Argo CD waves).
    With a GitOps tool the smoke test Job is also replaced by a new one, by design: its name
    hashes the config so that every change of the stack is tested again (and the kustomizations
    list the new name); diff pairs the two Jobs, a change of its name alone."""

    def config(version: str) -> Path:
        driver = {**sections.get("driver", {}), "version": version}
        body = {
            "apiVersion": "gpustack.dev/v1alpha1",
            "kind": "GPUStack",
            "metadata": {"name": "lab"},
            "platform": {"profile": profile},
            **sections,
            "driver": driver,
            **GITOPS[layout],
        }
        path = tmp_path / version / "lab.yaml"
        path.parent.mkdir()
        path.write_text(json.dumps(body))
        return path

    result = cli("diff", config("580.95.05"), config("595.91.07"), "--output", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    objects = [c for c in document["changes"] if c["kind"]]
    assert {c["change"] for c in objects} == {"changed"}
    (change,) = [c for c in objects if c["kind"] != "Job"]
    assert (change["kind"], change["name"]) == ("DaemonSet", DRIVER)
    smoke_tests = [c for c in objects if c["kind"] == "Job"]
    assert len(smoke_tests) == (1 if GITOPS[layout] else 0)
    for smoke_test in smoke_tests:
        assert smoke_test["paths"] == ["metadata.name"]
        old, new = smoke_test["renamedFrom"], smoke_test["name"]
        assert (
            old != new and old.startswith("gpu-smoke-test-") and new.startswith("gpu-smoke-test-")
        )
    texts = [c["file"] for c in document["changes"] if not c["kind"]]
    assert all(file.endswith("kustomization.yaml") for file in texts), texts
    # The driver image, and the digest on the manager and on each driver container (not on the
    # deploy-labels init container, which installs nothing).
    paths = change["paths"]
    workload = daemonsets(rendered(tmp_path, profile, sections))[DRIVER]
    containers = sum(
        1
        for c in [*pod(workload)["initContainers"], *pod(workload)["containers"]]
        if c["name"] not in (LABELLER, EVICTION)  # they install nothing
    )
    assert paths.count("spec.template.spec.containers[0].image") == 1, paths
    digests = [
        p for p in paths if re.fullmatch(r"spec\.template\.spec\.\w+\[\d+\]\.env\[\d+\]\.value", p)
    ]
    assert len(digests) == containers == len(paths) - 1, paths
    lines = [
        line
        for line in change["diff"].splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert lines and all(
        re.fullmatch(r"[+-] +(image: nvcr\.io/nvidia/driver:\S+|value: [0-9a-f]{16})", line)
        for line in lines
    ), lines


# --- The deploy labels start as "true" on every GPU node --------------------------------------


def selects(selector: str, labels: dict[str, str]) -> bool:
    """A label selector of `key notin (v1,v2)` requirements, as the API server evaluates it:
    `notin` holds where the key is absent or its value is not listed (Kubernetes labels docs,
    set-based requirements)."""
    requirements = re.findall(r"([^\s,]+) notin \(([^)]*)\)", selector)
    assert requirements and selector == ",".join(f"{k} notin ({v})" for k, v in requirements)
    return all(labels.get(key) not in values.split(",") for key, values in requirements)


class APIServer:
    """Just enough of the API server for `kubectl label nodes`: discovery, a list of nodes by
    field and label selector, and the patch it sends, recorded."""

    def __init__(self, nodes: dict[str, dict[str, str]]) -> None:
        self.patches: list[tuple[str, str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def reply(self, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == "/api":
                    return self.reply({"kind": "APIVersions", "versions": ["v1"]})
                if url.path == "/apis":
                    return self.reply({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
                if url.path == "/api/v1":
                    resource = {"name": "nodes", "namespaced": False, "kind": "Node"}
                    resource["verbs"] = ["get", "list", "patch"]
                    return self.reply(
                        {"kind": "APIResourceList", "groupVersion": "v1", "resources": [resource]}
                    )
                assert url.path == "/api/v1/nodes", url.path
                field, _, name = query["fieldSelector"].partition("=")
                assert field == "metadata.name"
                items = [
                    {"kind": "Node", "apiVersion": "v1", "metadata": {"name": n, "labels": labels}}
                    for n, labels in nodes.items()
                    if n == name and selects(query["labelSelector"], labels)
                ]
                self.reply({"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items})

            def do_PATCH(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                name = urlparse(self.path).path.rpartition("/")[2]
                server.patches.append((name, self.headers["Content-Type"], body))
                self.reply({"kind": "Node", "apiVersion": "v1", "metadata": {"name": name}})

        self.http = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        # shutdown() waits for the serving loop to look at its flag, which it does every
        # poll_interval (half a second by default, as long as kubectl itself takes).
        threading.Thread(target=self.http.serve_forever, args=(0.01,), daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def labeller_run(container: dict[str, Any], labels: dict[str, str], tmp_path: Path) -> Any:
    """Run the init container's kubectl command line, as the kubelet expands it on node gpu-1,
    against an API server whose node gpu-1 has `labels`; the patches it sent."""
    assert container["command"] == ["/bin/kubectl"]
    args = tuple(a.replace("$(NODE_NAME)", "gpu-1") for a in container["args"])
    return kubectl_patches(args, tuple(sorted(labels.items())), tmp_path / "kubectl")


# (args, labels) -> the patches: the profiles whose renders share a command line share its runs
# (the same command against the same nodes sends the same patches).
_PATCHES: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], Any] = {}


def kubectl_patches(args: tuple[str, ...], labels: tuple[tuple[str, str], ...], home: Path) -> Any:
    if (args, labels) in _PATCHES:
        return _PATCHES[args, labels]
    home.mkdir(exist_ok=True)
    server = APIServer({"gpu-1": dict(labels), "gpu-2": {}})
    try:
        result = subprocess.run(
            [str(KUBECTL), *args, f"--server={server.url}", f"--cache-dir={home}/cache"],
            capture_output=True,
            text=True,
            timeout=60,
            env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        )
        assert result.returncode == 0, result.stderr
        _PATCHES[args, labels] = server.patches
        return server.patches
    finally:
        server.close()


@pytest.mark.parametrize(("profile", "sections"), DRIVER_CONTAINER_PROFILES, ids=IDS)
def test_a_node_without_deploy_labels_gets_them_before_the_manager_reads_them(
    tmp_path, profile, sections
):
    """The GPU Operator's controller labels every GPU node; here the driver pod's first init
    container does, with the real kubectl, so the manager can take the stack off any node: one
    that joined without the node/ files, a node of a cluster rendered before them, every
    OpenShift node. It only starts labels: a node whose labels are already set, paused above all,
    is left as it is, and only its own node is touched."""
    workload = daemonsets(rendered(tmp_path, profile, sections))[DRIVER]
    names = [c["name"] for c in pod(workload)["initContainers"]]
    assert names.index(LABELLER) < names.index(MANAGER)
    (labeller,) = [c for c in pod(workload)["initContainers"] if c["name"] == LABELLER]
    assert labeller["image"].startswith("registry.k8s.io/kubectl:v1.")
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in (
        labeller["env"]
    )
    empty = dict.fromkeys(ALL_TRUE, "")  # what the manager writes for an absent label
    for labels in ({}, {"kubernetes.io/hostname": "gpu-1"}, empty):
        assert labeller_run(labeller, labels, tmp_path) == [
            ("gpu-1", "application/merge-patch+json", {"metadata": {"labels": ALL_TRUE}})
        ], labels
    paused = {**ALL_TRUE, DEPLOY + "device-plugin": PAUSED}
    mig = {**ALL_TRUE, DEPLOY + "dcgm-exporter": "paused-for-mig-change"}
    disabled = {DEPLOY + "dcgm-exporter": "false"}
    for labels in (ALL_TRUE, paused, mig, disabled, {DEPLOY + "driver": "pre-installed"}):
        assert labeller_run(labeller, labels, tmp_path) == [], labels
    # Its token is the manager's (the projected one), and its account may list and patch nodes.
    rendering = rendered(tmp_path, profile, sections)
    (role,) = [
        o
        for o in rendering.objects
        if o["kind"] == "ClusterRole"
        and o["metadata"]["name"] == pod(workload)["serviceAccountName"]
    ]
    verbs = {v for r in role["rules"] if "nodes" in r["resources"] for v in r["verbs"]}
    assert {"list", "patch"} <= verbs
    mounts = {m["mountPath"] for m in labeller["volumeMounts"]}
    assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts


def test_the_mig_manager_starts_the_labels_where_no_driver_pod_does(tmp_path):
    sections = {"devicePlugin": {"migStrategy": "single"}}
    workloads = daemonsets(rendered(tmp_path, "kubeadm", sections))
    (labeller,) = [
        c for c in pod(workloads["nvidia-mig-manager"])["initContainers"] if c["name"] == LABELLER
    ]
    assert labeller_run(labeller, {}, tmp_path) == [
        ("gpu-1", "application/merge-patch+json", {"metadata": {"labels": ALL_TRUE}})
    ]
    with_driver = daemonsets(rendered(tmp_path, "kubeadm", {**sections, **CONTAINER_SECTIONS}))
    assert LABELLER not in [
        c["name"] for c in pod(with_driver["nvidia-mig-manager"])["initContainers"]
    ]
