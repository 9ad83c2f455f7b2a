"""What a change does to running nodes, as a review says it (gpustack.compare.rollouts): the examples
rendered before and after a setting changes, their workloads compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from markdown_page import Page, to_html

from gpustack.build import pipeline
from gpustack.compare.diff_markdown import as_markdown
from gpustack.compare.object_diff import Change, Diff
from gpustack.compare.rollouts import (
    NO_RESTART,
    RELOADS_DRIVER,
    RESTARTS_NODE_PODS,
    RESTARTS_PODS,
    rollout,
)
from gpustack.resolve import load

DRIVER = "nvidia-driver-daemonset"


def objects(example: str | Path, *settings: str) -> dict[str, dict[str, Any]]:
    """The example's (or config's) workloads by name, rendered with the `--set` settings."""
    path = example if isinstance(example, Path) else ROOT / "examples" / f"{example}.yaml"
    stack = load.load_stack(path, override=load.overrides(list(settings)))
    return {
        obj["metadata"]["name"]: obj
        for obj in pipeline.render(stack).objects
        if obj["kind"] in ("DaemonSet", "Deployment")
    }


def effects(example: str, before: tuple[str, ...], after: tuple[str, ...]) -> dict[str, Any]:
    """Each workload's Rollout from `before`'s settings to `after`'s (None: nothing restarts)."""
    old, new = objects(example, *before), objects(example, *after)
    return {name: rollout(old.get(name), new.get(name)) for name in sorted(old.keys() | new.keys())}


def restarting(found: dict[str, Any]) -> dict[str, int]:
    return {name: each.impact for name, each in found.items() if each is not None}


def test_a_new_driver_version_reloads_the_driver_one_node_at_a_time_evicting_gpu_pods():
    found = effects("kubeadm-driver-container", (), ("driver.version=580.95.05",))
    # Only the driver restarts: its pods take the GPU DaemonSets' pods off each node and back.
    assert restarting(found) == {DRIVER: RELOADS_DRIVER}
    driver = found[DRIVER]
    assert driver.pace == "1 node at a time, each new pod Ready 30 s before the next"
    assert driver.nodes == (
        "nodes matching feature.node.kubernetes.io/pci-10de.present=true, "
        "feature.node.kubernetes.io/system-os_release.ID=ubuntu, "
        "feature.node.kubernetes.io/system-os_release.VERSION_ID=22.04"
    )
    assert driver.driver == (
        "on each node the driver is reloaded: the GPU DaemonSets' pods leave it, it is "
        "cordoned, the pods using its GPUs are evicted (ENABLE_GPU_POD_EVICTION), then the new "
        "driver is loaded"
    )


def test_the_drain_and_the_pace_come_from_the_driver_managers_settings():
    settings = (
        "driver.upgrade.maxUnavailable=25%",
        "driver.upgrade.drain={enabled: true, timeoutSeconds: 600, podSelector: team=ml}",
    )
    found = effects("kubeadm-driver-container", settings, (*settings, "driver.version=580.95.05"))
    driver = found[DRIVER]
    assert driver.pace.startswith("25% of its nodes at a time")
    assert (
        "when that fails, it is drained within 600s: the pods matching team=ml "
        "(ENABLE_AUTO_DRAIN)" in driver.driver
    )


def test_a_driver_pod_change_that_installs_the_same_driver_keeps_it_loaded():
    # The eviction setting is the driver manager's, outside DRIVER_CONFIG_DIGEST: the new pods
    # find the driver they would install loaded and keep it (k8s-driver-manager v0.12.0).
    found = effects("kubeadm-driver-container", (), ("driver.upgrade.gpuPodEviction=false",))
    assert restarting(found) == {DRIVER: RESTARTS_NODE_PODS}
    assert found[DRIVER].driver.startswith("the loaded driver is kept (same DRIVER_CONFIG_DIGEST)")


def test_an_update_strategy_change_restarts_nothing():
    found = effects("kubeadm-driver-container", (), ("driver.upgrade.maxUnavailable=3",))
    assert restarting(found) == {}


def test_a_pools_driver_change_reloads_that_pool_only(tmp_path):
    example = ROOT / "examples" / "multi-pool.yaml"
    changed = tmp_path / "multi-pool.yaml"
    text = example.read_text()
    assert "      version: 595.91.07\n" in text  # the inference pool's own driver
    changed.write_text(text.replace("      version: 595.91.07\n", "      version: 580.95.05\n"))
    old, new = objects(example), objects(changed)
    found = {name: rollout(old.get(name), new.get(name)) for name in old.keys() | new.keys()}
    reloads = {name: each for name, each in found.items() if each and each.impact == RELOADS_DRIVER}
    assert list(reloads) == [f"{DRIVER}-inference"]
    assert reloads[f"{DRIVER}-inference"].nodes == "pool inference (the canary)"
    # The cluster's own driver DaemonSet (every other GPU node) is left alone; it is named by
    # the nodes it selects, the pool's excluded.
    assert found[DRIVER] is None
    cluster_driver = rollout(None, new[DRIVER])
    assert cluster_driver is not None
    assert cluster_driver.nodes.startswith(
        "nodes matching example.com/gpu-pool notin (inference), "
    )
    assert cluster_driver.driver.startswith(
        "on each node that runs a driver already, it is replaced"
    )


def test_a_sharing_change_restarts_the_plugins_pods_and_no_driver():
    found = effects("kubeadm", (), ("devicePlugin.sharing={strategy: time-slicing, replicas: 8}",))
    impacts = restarting(found)
    assert RELOADS_DRIVER not in impacts.values()
    assert impacts["nvidia-device-plugin"] == RESTARTS_NODE_PODS
    assert (
        found["nvidia-device-plugin"]
        .sentence()
        .startswith("DaemonSet gpu-system/nvidia-device-plugin restarts its pods on ")
    )


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (None, {"kind": "Deployment", "metadata": {"name": "x"}}, RESTARTS_PODS),
        ({"kind": "ConfigMap"}, {"kind": "ConfigMap", "data": {"a": "b"}}, None),
        # A hand-edited file may hold anything: no error, a plain restart.
        ({"kind": "DaemonSet", "spec": []}, {"kind": "DaemonSet", "spec": {"template": 1}}, 2),
    ],
)
def test_rollouts_of_other_objects(before, after, expected):
    found = rollout(before, after)
    assert (found.impact if found else None) == expected
    assert NO_RESTART < RESTARTS_PODS < RESTARTS_NODE_PODS < RELOADS_DRIVER


def test_the_module_reads_no_component():
    source = (Path(__file__).parent.parent / "gpustack" / "compare" / "rollouts.py").read_text()
    assert "gpustack.build.components" not in source


def test_a_review_says_a_driver_daemonset_is_removed_not_reloaded():
    driver = objects("kubeadm-driver-container")[DRIVER]
    gone = rollout(driver, None)
    assert gone is not None and (gone.action, gone.impact, gone.driver) == (
        "removes",
        RELOADS_DRIVER,
        "",
    )
    change = Change(
        "removed",
        f"DaemonSet.apps gpu-system/{DRIVER}",
        f"daemonset-{DRIVER}.yaml",
        ("apps", "DaemonSet", "gpu-system", DRIVER),
        (),
        "",
        rollout=gone,
    )
    page = Page(to_html(as_markdown([("lab", Diff("old", "new", (change,)))], "review")))
    cell = page.rows[1][4]
    assert cell.startswith(f"removes a GPU driver DaemonSet (gpu-system/{DRIVER}): - ")
    assert "reloads" not in cell


def _with_manager_env(driver: dict[str, Any], **settings: str | None) -> dict[str, Any]:
    """The driver DaemonSet with its driver manager's variables set (a str), set at run time
    (None: a valueFrom) or removed (absent from a patch: `...=REMOVE`)."""
    import copy

    changed = copy.deepcopy(driver)
    (manager,) = [
        container
        for container in changed["spec"]["template"]["spec"]["initContainers"]
        if any(item["name"] == "DRIVER_CONFIG_DIGEST" for item in container["env"])
    ]
    env = [item for item in manager["env"] if item["name"] not in settings]
    for name, value in settings.items():
        if value is None:
            env.append({"name": name, "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}})
        elif value != "REMOVE":
            env.append({"name": name, "value": value})
    manager["env"] = env
    return changed


def _new_driver_version() -> tuple[dict[str, Any], dict[str, Any]]:
    before = objects("kubeadm-driver-container")[DRIVER]
    after = objects("kubeadm-driver-container", "driver.version=580.95.05")[DRIVER]
    return before, after


def test_the_driver_managers_own_defaults_stand_where_its_settings_are_unset():
    # A patch that drops the variables leaves k8s-driver-manager v0.12.0's defaults: eviction
    # and auto drain on (cmd/driver-manager/main.go), not off.
    before, after = _new_driver_version()
    unset = {"ENABLE_GPU_POD_EVICTION": "REMOVE", "ENABLE_AUTO_DRAIN": "REMOVE"}
    found = rollout(_with_manager_env(before, **unset), _with_manager_env(after, **unset))
    assert found is not None
    assert "it is cordoned, the pods using its GPUs are evicted" in found.driver
    assert "when that fails, a drain is tried" in found.driver
    assert "GPU pods are not evicted" not in found.driver


@pytest.mark.parametrize(("written", "evicts"), [("True", True), ("1", True), ("", False)])
def test_the_driver_managers_booleans_are_read_as_go_reads_them(written, evicts):
    before, after = _new_driver_version()
    settings = {"ENABLE_GPU_POD_EVICTION": written, "ENABLE_AUTO_DRAIN": "false"}
    found = rollout(_with_manager_env(before, **settings), _with_manager_env(after, **settings))
    assert found is not None
    assert ("the pods using its GPUs are evicted" in found.driver) is evicts


def test_a_driver_manager_setting_that_is_no_boolean_stops_the_new_driver_pods():
    before, after = _new_driver_version()
    found = rollout(before, _with_manager_env(after, ENABLE_AUTO_DRAIN="yes"))
    assert found is not None
    assert found.driver == (
        "its driver manager stops at once (ENABLE_AUTO_DRAIN: not a boolean), so no new driver "
        "pod starts"
    )


def test_force_reinstall_reloads_the_driver_whatever_the_digest():
    before = objects("kubeadm-driver-container")[DRIVER]
    forced = _with_manager_env(before, FORCE_REINSTALL="true")
    found = rollout(before, forced)
    assert found is not None and found.impact == RELOADS_DRIVER
    assert found.driver.startswith("on each node the driver is reloaded")


def test_a_drain_without_a_pod_selector_is_said_to_fail():
    # k8s-driver-manager v0.12.0 drains with kubectl's drain package without setting DaemonSet
    # pods aside, and the new driver pod on the node is one: the drain always fails. gpustack
    # refuses such a config; a patch or a hand-edited manifest can still turn it on.
    before, after = _new_driver_version()
    drain = {"ENABLE_AUTO_DRAIN": "true", "DRAIN_POD_SELECTOR_LABEL": ""}
    found = rollout(_with_manager_env(before, **drain), _with_manager_env(after, **drain))
    assert found is not None
    assert "when that fails, a drain is tried and fails" in found.driver
    assert "it is drained" not in found.driver


def test_a_drain_alone_cordons_nothing_before_it():
    settings = (
        "driver.upgrade.gpuPodEviction=false",
        "driver.upgrade.drain={enabled: true, podSelector: team=ml}",
    )
    found = effects("kubeadm-driver-container", settings, (*settings, "driver.version=580.95.05"))
    assert found[DRIVER].driver == (
        "on each node the driver is reloaded: the GPU DaemonSets' pods leave it, when the old "
        "driver is in use, it is drained within 300s: the pods matching team=ml (ENABLE_AUTO_DRAIN), "
        "then the new driver is loaded"
    )


KERNEL_MODULES = """
patches:
  - target: {kind: DaemonSet, name: nvidia-driver-daemonset}
    patch: |
      spec:
        template:
          spec:
            containers:
              - name: nvidia-driver-ctr
                env:
                  - name: KERNEL_MODULE_TYPE
                    value: open
"""
TOLERATION = """
patches:
  - target: {kind: DaemonSet, name: nvidia-driver-daemonset}
    patch: |
      - op: add
        path: /spec/template/spec/tolerations/-
        value: {key: dedicated, operator: Exists, effect: NoSchedule}
"""


@pytest.mark.parametrize(("patch", "reloads"), [(KERNEL_MODULES, True), (TOLERATION, False)])
def test_a_patch_to_what_the_driver_installs_reloads_it(tmp_path, patch, reloads):
    """A patch that changes what the driver container installs (the kernel modules' type) takes
    effect on nodes whose driver is loaded: its DRIVER_CONFIG_DIGEST changes, so the driver
    manager and the driver container reload it; a toleration installs nothing and reloads
    nothing."""
    example = ROOT / "examples" / "kubeadm-driver-container.yaml"
    patched = tmp_path / "patched.yaml"
    patched.write_text(example.read_text() + patch)
    before, after = objects(example)[DRIVER], objects(patched)[DRIVER]
    found = rollout(before, after)
    assert found is not None
    assert (found.impact == RELOADS_DRIVER) is reloads
    if reloads:
        assert found.driver.startswith("on each node the driver is reloaded")
    digests = {
        item["value"]
        for group in ("initContainers", "containers")
        for container in after["spec"]["template"]["spec"][group]
        for item in container.get("env", [])
        if item["name"] == "DRIVER_CONFIG_DIGEST"
    }
    assert len(digests) == 1  # the driver manager and the driver container agree
