"""What a change does to running nodes, as a review says it (gpustack.rollouts): the examples
rendered before and after a setting changes, their workloads compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from markdown_page import Page, to_html

from gpustack import config, render
from gpustack.diff import Change, Diff, as_markdown
from gpustack.rollouts import (
    NO_RESTART,
    RELOADS_DRIVER,
    RESTARTS_NODE_PODS,
    RESTARTS_PODS,
    rollout,
)

DRIVER = "nvidia-driver-daemonset"


def objects(example: str | Path, *settings: str) -> dict[str, dict[str, Any]]:
    """The example's (or config's) workloads by name, rendered with the `--set` settings."""
    path = example if isinstance(example, Path) else ROOT / "examples" / f"{example}.yaml"
    stack = config.load_stack(path, override=config.overrides(list(settings)))
    return {
        obj["metadata"]["name"]: obj
        for obj in render.render(stack).objects
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
    source = (Path(__file__).parent.parent / "gpustack" / "rollouts.py").read_text()
    assert "gpustack.components" not in source


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
