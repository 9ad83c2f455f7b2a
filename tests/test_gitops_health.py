"""Every Flux stage and Argo CD Application reaches Ready/Healthy, on a first install and after a
driver change, judged by Flux's and Argo CD's own rules (tests/health_rules.py).

The cluster is simulated as its controllers leave it once they converged: a DaemonSet's pods run
the new template after a RollingUpdate but keep the old one under OnDelete until someone deletes
them, a Deployment's replicas are all available, a Job whose pod finds a GPU completes (one that
finds none fails at its deadline), a CRD is established. Flux is simulated as kustomize-controller
reconciles (a Kustomization applies only once every Kustomization it depends on is Ready, and is
Ready once every health-checked object is Current), Argo CD as gitops-engine syncs (wave by wave,
each applied once the waves before it are healthy, then the PostSync hooks).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import example_base
from gitops_helpers import kustomize, kustomize_apart, listed_objects
from health_rules import (
    CURRENT,
    DEGRADED,
    HEALTHY,
    IN_PROGRESS,
    PROGRESSING,
    argocd_health,
    kstatus,
    worse,
)

from gpustack.build.pipeline import files, render
from gpustack.resolve.load import load_stack

# The driver container's DaemonSets (one per RHCOS build on OpenShift), by component label.
DRIVER_COMPONENT = "nvidia-driver"
COMPONENT_LABEL = "app.kubernetes.io/component"
HOOK = "argocd.argoproj.io/hook"
HOOK_DELETE_POLICY = "argocd.argoproj.io/hook-delete-policy"
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
VERSION_A, VERSION_B = "570.195.03", "580.105.08"
GPU_NODES = 3
TOOLS = {
    "flux": {"tool": "flux", "flux": {"sourceRef": {"name": "flux-system"}}},
    "argocd": {"tool": "argocd", "argocd": {"repoURL": "https://git.example.com/fleet.git"}},
}
# Examples with a driver container: a driver change rolls a DaemonSet on every GPU node.
EXAMPLES_WITH_DRIVER = ["kubeadm-driver-container", "openshift"]

Key = tuple[str, str, str, str]


def _stages(folder: Path) -> list[str]:
    return [k["spec"]["path"].rsplit("/", 1)[1] for k in kustomizations(folder)]


@functools.cache
def _stages_built(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """Each Flux stage folder of the cluster's `folder`, as real kustomize builds it: all of them
    in one run (the stages share no object; kustomize would refuse one made twice), each
    stage's objects, in kustomize's order, those its own kustomization lists."""
    names = _stages(folder)
    built = kustomize_apart(
        [folder / name for name in names], folder.parent / f"{folder.name}-stages"
    )
    return dict(zip(names, built))


def stage_objects(folder: Path, stage: str) -> list[dict[str, Any]]:
    """What real kustomize builds from the stage folder `folder/stage` (a fresh copy each call)."""
    return copy.deepcopy(_stages_built(folder)[stage])


def key_of(obj: dict[str, Any]) -> Key:
    metadata = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], metadata.get("namespace", ""), metadata["name"])


def is_driver(obj: dict[str, Any]) -> bool:
    labels = obj["metadata"].get("labels", {})
    return obj["kind"] == "DaemonSet" and labels.get(COMPONENT_LABEL) == DRIVER_COMPONENT


def update_strategy(obj: dict[str, Any]) -> str:
    return obj["spec"].get("updateStrategy", {}).get("type", "RollingUpdate")


@dataclass
class Cluster:
    """The objects applied to a cluster and what its controllers made of them.

    `gpu_nodes`: where the GPU DaemonSets run and where a smoke-test pod finds a GPU.
    `rolling`: the driver DaemonSets are mid-rollout (the first node updated, the next one
    rebuilding its driver) instead of converged."""

    gpu_nodes: int = GPU_NODES
    rolling: bool = False
    live: dict[Key, dict[str, Any]] = field(default_factory=dict)
    # The pod template each DaemonSet's pods run.
    pods: dict[Key, Any] = field(default_factory=dict)

    def apply(self, obj: dict[str, Any]) -> None:
        """Apply `obj` (server-side apply) and let its controller act on it."""
        key = key_of(obj)
        before = self.live.get(key)
        applied = copy.deepcopy(obj)
        generation = 1
        if before is not None:
            generation = before["metadata"]["generation"]
            generation += before.get("spec") != applied.get("spec")
            applied["status"] = before.get("status", {})
        applied["metadata"]["generation"] = generation
        self.live[key] = applied
        self._converge(applied)

    def _converge(self, obj: dict[str, Any]) -> None:
        kind, key = obj["kind"], key_of(obj)
        status = obj.setdefault("status", {})
        if kind == "DaemonSet":
            desired = self.gpu_nodes
            template = obj["spec"]["template"]
            running = self.pods.get(key)
            updated = desired
            if running is not None and running != template and update_strategy(obj) == "OnDelete":
                # OnDelete: the controller creates pods from the new template only where an old
                # pod was deleted; nothing deletes them here.
                updated = 0
            elif self.rolling and is_driver(obj) and running is not None and running != template:
                updated = 1  # the first node runs the new driver; the next one is rebuilding
            else:
                self.pods[key] = template
            available = desired - 1 if updated not in (0, desired) else desired
            status.update(
                observedGeneration=obj["metadata"]["generation"],
                desiredNumberScheduled=desired,
                currentNumberScheduled=desired,
                updatedNumberScheduled=updated,
                numberAvailable=available,
                numberReady=available,
            )
        elif kind == "Deployment":
            replicas = obj["spec"].get("replicas", 1)
            status.update(
                observedGeneration=obj["metadata"]["generation"],
                replicas=replicas,
                updatedReplicas=replicas,
                readyReplicas=replicas,
                availableReplicas=replicas,
                conditions=[
                    {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                    {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
                ],
            )
        elif kind == "Job" and "conditions" not in status:
            status["startTime"] = "2026-01-01T00:00:00Z"
            if self.gpu_nodes:
                status.update(succeeded=1, conditions=[{"type": "Complete", "status": "True"}])
            else:  # the pod stayed Pending: no node offers a GPU
                status.update(
                    failed=0,
                    conditions=[
                        {
                            "type": "Failed",
                            "status": "True",
                            "reason": "DeadlineExceeded",
                            "message": "Job was active longer than specified deadline",
                        }
                    ],
                )
        elif kind == "CustomResourceDefinition":
            status["conditions"] = [
                {"type": "NamesAccepted", "status": "True"},
                {"type": "Established", "status": "True"},
            ]

    def delete_hook(self, obj: dict[str, Any]) -> None:
        self.live.pop(key_of(obj), None)


# --- Flux ---------------------------------------------------------------------------------------


@dataclass
class StageResult:
    ready: bool
    message: str
    applied: bool


def reconcile_flux(
    folder: Path, kustomizations: list[dict[str, Any]], cluster: Cluster
) -> dict[str, StageResult]:
    """Each Kustomization reconciled once its dependencies are (kustomize-controller: dependsOn,
    then apply, then wait for every object's kstatus, or only `healthChecks` without `wait`)."""
    results: dict[str, StageResult] = {}
    pending = {k["metadata"]["name"]: k for k in kustomizations}
    while pending:
        progressed = False
        for name, kustomization in list(pending.items()):
            spec = kustomization["spec"]
            dependencies = [d["name"] for d in spec.get("dependsOn", [])]
            if any(d not in results for d in dependencies):
                continue
            pending.pop(name)
            progressed = True
            not_ready = [d for d in dependencies if not results[d].ready]
            if not_ready:
                message = f"DependencyNotReady: dependency '{not_ready[0]}' is not ready"
                results[name] = StageResult(False, message, applied=False)
                continue
            objects = stage_objects(folder, spec["path"].rsplit("/", 1)[1])
            for obj in objects:
                cluster.apply(obj)
            if spec.get("wait"):
                checked = [cluster.live[key_of(obj)] for obj in objects]
            else:
                checked = [
                    cluster.live[(ref["apiVersion"], ref["kind"], ref["namespace"], ref["name"])]
                    for ref in spec.get("healthChecks", [])
                ]
            waiting = [
                f"{obj['kind']}/{obj['metadata']['name']}: {status} ({message})"
                for obj in checked
                for status, message in [kstatus(obj)]
                if status != CURRENT
            ]
            results[name] = StageResult(
                not waiting, "; ".join(waiting) or "ReconciliationSucceeded", applied=True
            )
        assert progressed, f"dependency cycle among {sorted(pending)}"
    return results


def flux_objects_waiting(
    folder: Path, kustomizations: list[dict[str, Any]], results: dict[str, StageResult]
) -> list[dict[str, Any]]:
    """The objects of the Kustomizations that did not apply the revision (a dependency was not
    Ready): what waits behind the stages that are not Ready."""
    return [
        obj
        for kustomization in kustomizations
        if not results[kustomization["metadata"]["name"]].applied
        for obj in stage_objects(folder, kustomization["spec"]["path"].rsplit("/", 1)[1])
    ]


# --- Argo CD ------------------------------------------------------------------------------------


@dataclass
class SyncResult:
    phase: str  # Succeeded, Failed or Running (waiting for health)
    message: str
    waiting: list[dict[str, Any]]  # objects and hooks the sync has not applied yet
    health: str = HEALTHY  # the Application's health: the worst of its resources'
    hooks: dict[str, tuple[str, str]] = field(default_factory=dict)  # each hook's health


def sync_argocd(objects: list[dict[str, Any]], cluster: Cluster) -> SyncResult:
    """One sync operation of the Application (gitops-engine sync_context.go Sync): the Sync
    phase's waves in order, each applied once the ones before are healthy (a Degraded object
    fails the sync), then the PostSync hooks; the Application's health as argo-cd
    controller/health.go aggregates it (hooks left out)."""
    resources = [o for o in objects if HOOK not in o["metadata"].get("annotations", {})]
    hooks = [o for o in objects if HOOK in o["metadata"].get("annotations", {})]
    assert {o["metadata"]["annotations"][HOOK] for o in hooks} <= {"PostSync"}
    waves = sorted({int(o["metadata"]["annotations"][SYNC_WAVE]) for o in resources})
    for wave in waves:
        in_wave = [o for o in resources if int(o["metadata"]["annotations"][SYNC_WAVE]) == wave]
        for obj in in_wave:
            cluster.apply(obj)
        later = [o for o in resources if int(o["metadata"]["annotations"][SYNC_WAVE]) > wave]
        for obj in in_wave:
            health = argocd_health(cluster.live[key_of(obj)])
            if health and health[0] == DEGRADED:
                return SyncResult(
                    "Failed", health[1], later + hooks, _app_health(cluster, resources)
                )
            if health and health[0] != HEALTHY:
                message = f"waiting for healthy state of {obj['kind']}/{obj['metadata']['name']}"
                return SyncResult(
                    "Running", message, later + hooks, _app_health(cluster, resources)
                )
    for hook in hooks:
        # BeforeHookCreation: the previous run is deleted and the hook created again.
        cluster.delete_hook(hook)
        cluster.apply(hook)
    results = {}
    for hook in hooks:
        health = argocd_health(cluster.live[key_of(hook)])
        assert health is not None
        results[hook["metadata"]["name"]] = health
        if health[0] == DEGRADED:
            return SyncResult("Failed", health[1], [], _app_health(cluster, resources), results)
        if health[0] != HEALTHY:
            return SyncResult("Running", "waiting for completion of hook", [], HEALTHY, results)
        policies = hook["metadata"]["annotations"].get(HOOK_DELETE_POLICY, "").split(",")
        if "HookSucceeded" in policies:
            cluster.delete_hook(hook)
    health = _app_health(cluster, resources)
    return SyncResult("Succeeded", "successfully synced", [], health, results)


def _app_health(cluster: Cluster, resources: list[dict[str, Any]]) -> str:
    result = HEALTHY
    for obj in resources:
        health = argocd_health(cluster.live[key_of(obj)])
        if health and worse(result, health[0]):
            result = health[0]
    return result


# --- rendering ----------------------------------------------------------------------------------


def render_example(folder: Path, example: str, tool: str, version: str) -> Path:
    """The example with the tool's settings and `driver.version`, written into `folder` as
    `render` writes it; returns the cluster's folder."""
    config = folder / f"{example}-{tool}-{version}.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
        f"extends: {example_base(folder, example)}\n"
        f"driver: {{version: '{version}'}}\n"
        f"gitops: {TOOLS[tool]}\n"
    )
    rendering = render(load_stack(config))
    cluster = folder / f"{tool}-{version}" / rendering.name
    for relative, content in files(rendering).items():
        (cluster / relative).parent.mkdir(parents=True, exist_ok=True)
        (cluster / relative).write_bytes(content)
    return cluster


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str, str], Path]:
    """render_example, each (example, tool, version) rendered once for the module's tests (and
    built by kustomize once: `kustomize` keeps each folder's build, `_stages_built` each Flux
    folder's stages). The tests only read the folders: what they change (the cluster's
    objects, a Kustomization) is a copy."""
    folder = tmp_path_factory.mktemp("rendered")

    @functools.cache
    def render_once(example: str, tool: str, version: str) -> Path:
        return render_example(folder, example, tool, version)

    return render_once


def kustomizations(folder: Path) -> list[dict[str, Any]]:
    return [o for o in listed_objects(folder / "gitops") if o["kind"] == "Kustomization"]


def drivers(folder: Path) -> list[dict[str, Any]]:
    """The driver DaemonSets kustomize builds from the Argo CD folder or, for Flux, from its
    stage folders (which the reconciliation reads: the folder itself is not built)."""
    if (folder / "gitops").is_dir() and kustomizations(folder):
        objects = [o for stage in _stages(folder) for o in stage_objects(folder, stage)]
    else:
        objects = kustomize(folder)
    found = [o for o in objects if is_driver(o)]
    assert found, "the example renders no driver DaemonSet"
    return found


ON_DELETE_WEDGES = (
    "the driver DaemonSet is rendered with updateStrategy OnDelete, which kstatus keeps "
    "InProgress after every driver change (its pods are replaced only by hand): the workloads "
    "stage, and the smoke test after it, reach Ready only with a RollingUpdate driver "
    "(driver.upgrade.maxUnavailable)"
)


# --- tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES_WITH_DRIVER)
def test_every_flux_stage_is_ready_on_a_first_install_and_after_a_driver_change(rendered, example):
    cluster = Cluster()
    before = rendered(example, "flux", VERSION_A)
    first = reconcile_flux(before, kustomizations(before), cluster)
    assert all(result.ready for result in first.values()), first

    after = rendered(example, "flux", VERSION_B)
    assert drivers(after) != drivers(before), "a driver.version change must change the driver"
    results = reconcile_flux(after, kustomizations(after), cluster)
    stage = {
        k["spec"]["path"].rsplit("/", 1)[1]: k["metadata"]["name"] for k in kustomizations(after)
    }
    # Whatever the driver does, the stages that do not need it are Ready.
    for folder in ("foundation", "monitors"):
        assert results[stage[folder]].ready, results[stage[folder]].message
    if any(update_strategy(o) == "OnDelete" for o in drivers(after)):
        # The evaluator sees the wedge kstatus makes of it, and that it stops at the driver.
        assert "Updated: 0/3" in results[stage["workloads"]].message
        assert results[stage["smoke-test"]].message.startswith("DependencyNotReady")
        pytest.xfail(ON_DELETE_WEDGES)
    assert all(result.ready for result in results.values()), {
        name: result.message for name, result in results.items() if not result.ready
    }


@pytest.mark.parametrize("example", EXAMPLES_WITH_DRIVER)
def test_a_flux_driver_rollout_holds_back_only_the_smoke_test(rendered, example):
    cluster = Cluster()
    before = rendered(example, "flux", VERSION_A)
    reconcile_flux(before, kustomizations(before), cluster)
    cluster.rolling = True
    after = rendered(example, "flux", VERSION_B)
    results = reconcile_flux(after, kustomizations(after), cluster)
    by_folder = {
        k["spec"]["path"].rsplit("/", 1)[1]: results[k["metadata"]["name"]]
        for k in kustomizations(after)
    }
    # The stage holding the driver reports its rollout; what is held back behind it is only
    # what needs the new driver to prove anything: the smoke-test Job.
    assert not by_folder["workloads"].ready
    assert by_folder["foundation"].ready and by_folder["monitors"].ready
    waiting = flux_objects_waiting(after, kustomizations(after), results)
    assert waiting and {o["kind"] for o in waiting} == {"Job"}


@pytest.mark.parametrize("example", EXAMPLES_WITH_DRIVER)
def test_every_argo_cd_sync_is_healthy_on_a_first_install_and_after_a_driver_change(
    rendered, example
):
    cluster = Cluster()
    before = rendered(example, "argocd", VERSION_A)
    first = sync_argocd(kustomize(before), cluster)
    assert (first.phase, first.health) == ("Succeeded", HEALTHY), first.message
    after = rendered(example, "argocd", VERSION_B)
    second = sync_argocd(kustomize(after), cluster)
    assert (second.phase, second.health) == ("Succeeded", HEALTHY), second.message
    # The PostSync smoke test ran again against the new driver (a new Job: its name hashes the
    # config), passed, and was deleted (HookSucceeded).
    assert len(second.hooks) == 1 and second.hooks.keys() != first.hooks.keys()
    assert [status for status, _ in second.hooks.values()] == [HEALTHY]
    assert not [o for o in cluster.live.values() if o["kind"] == "Job"]


@pytest.mark.parametrize("example", EXAMPLES_WITH_DRIVER)
def test_an_argo_cd_driver_rollout_holds_back_only_the_smoke_test(rendered, example):
    cluster = Cluster()
    before = rendered(example, "argocd", VERSION_A)
    sync_argocd(kustomize(before), cluster)
    cluster.rolling = True
    after = rendered(example, "argocd", VERSION_B)
    result = sync_argocd(kustomize(after), cluster)
    if result.phase == "Succeeded":
        # Argo CD judges an OnDelete DaemonSet Healthy as soon as its controller saw it.
        assert all(update_strategy(o) == "OnDelete" for o in drivers(after))
        return
    assert result.phase == "Running" and result.health == PROGRESSING
    assert "nvidia-driver" in result.message
    # Every object but the PostSync smoke test is applied while the driver rolls out.
    assert {o["kind"] for o in result.waiting} == {"Job"}


@pytest.mark.parametrize("example", EXAMPLES_WITH_DRIVER)
def test_an_argo_cd_first_sync_before_any_gpu_node_recovers_by_retrying(rendered, example):
    folder = rendered(example, "argocd", VERSION_A)
    (application,) = listed_objects(folder / "gitops")
    retry = application["spec"]["syncPolicy"]["retry"]
    cluster = Cluster(gpu_nodes=0)
    first = sync_argocd(kustomize(folder), cluster)
    # No GPU node: every DaemonSet is healthy with nothing scheduled, the smoke test fails.
    assert first.phase == "Failed" and "deadline" in first.message
    assert retry["limit"] > 0
    cluster.gpu_nodes = GPU_NODES  # a GPU node pool joined; the retry runs the hook again
    assert sync_argocd(kustomize(folder), cluster).phase == "Succeeded"


def test_kstatus_keeps_an_on_delete_daemonset_in_progress_after_a_template_change(rendered):
    # The counter-proof that the evaluator tells a wedge from a rollout: the same driver change
    # under both update strategies.
    before = rendered("kubeadm-driver-container", "flux", VERSION_A)
    after = rendered("kubeadm-driver-container", "flux", VERSION_B)
    statuses = {}
    for strategy in ("OnDelete", "RollingUpdate"):
        cluster = Cluster()
        (old,), (new,) = drivers(before), drivers(after)
        for obj in (old, new):
            obj["spec"]["updateStrategy"] = {"type": strategy}
            cluster.apply(obj)
        live = cluster.live[key_of(new)]
        statuses[strategy] = (kstatus(live), argocd_health(live))
    assert statuses["OnDelete"] == (
        (IN_PROGRESS, "Updated: 0/3"),
        (HEALTHY, "daemon set 0 out of 3 new pods have been updated"),
    )
    assert statuses["RollingUpdate"] == (
        (CURRENT, "All replicas scheduled as expected. Replicas: 3"),
        (HEALTHY, ""),
    )


def test_a_chain_of_stages_would_wedge_behind_the_driver_rollout(rendered):
    # The stages chained one after the other, monitors after the workloads and the smoke test
    # after the monitors: the evaluator finds the ServiceMonitor held back by the rollout.
    cluster = Cluster()
    before = rendered("kubeadm-driver-container", "flux", VERSION_A)
    reconcile_flux(before, kustomizations(before), cluster)
    cluster.rolling = True
    after = rendered("kubeadm-driver-container", "flux", VERSION_B)
    chained = kustomizations(after)
    by_folder = {k["spec"]["path"].rsplit("/", 1)[1]: k for k in chained}
    by_folder["monitors"]["spec"]["dependsOn"] = [
        {"name": by_folder["workloads"]["metadata"]["name"]}
    ]
    by_folder["smoke-test"]["spec"]["dependsOn"] = [
        {"name": by_folder["monitors"]["metadata"]["name"]}
    ]
    results = reconcile_flux(after, chained, cluster)
    waiting = flux_objects_waiting(after, chained, results)
    assert "ServiceMonitor" in {o["kind"] for o in waiting}
    assert results[by_folder["monitors"]["metadata"]["name"]].message.startswith(
        "DependencyNotReady"
    )


def _go_seconds(duration: str) -> int:
    """Seconds in a retry duration as Argo CD reads it (a number of seconds or a Go duration)."""
    if duration.isdigit():
        return int(duration)
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(int(amount) * units[unit] for amount, unit in re.findall(r"(\d+)([hms])", duration))


def test_argo_cd_keeps_retrying_a_first_sync_for_hours(rendered):
    # argo-cd v3.5.1 RetryStrategy.NextRetryAt: the n-th retry waits duration x factor^n, at
    # most maxDuration; each attempt before a GPU node exists lasts the smoke test's deadline.
    folder = rendered("kubeadm-driver-container", "argocd", VERSION_A)
    (application,) = listed_objects(folder / "gitops")
    retry = application["spec"]["syncPolicy"]["retry"]
    backoff = retry["backoff"]
    waits = [
        min(
            _go_seconds(backoff["duration"]) * backoff["factor"] ** n,
            _go_seconds(backoff["maxDuration"]),
        )
        for n in range(retry["limit"])
    ]
    (job,) = [o for o in kustomize(folder) if o["kind"] == "Job"]
    attempts = (retry["limit"] + 1) * job["spec"]["activeDeadlineSeconds"]
    # README: GPU nodes that join within about five and a half hours of the first sync are
    # found by one of its retries.
    assert 5 * 3600 < sum(waits) + attempts < 6 * 3600


def test_argo_cd_retry_follows_the_settings(tmp_path):
    config = tmp_path / "gpustack.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: kubeadm}\n"
        "gitops: {tool: argocd, argocd: {repoURL: 'https://git.example.com/fleet.git', "
        "automated: false, retry: {limit: 0, backoff: {duration: '30', maxDuration: 1h}}}}\n"
    )
    (application,) = render(load_stack(config)).gitops_objects
    # A manual sync takes the Application's retry too (argo-cd server/application Sync).
    assert application["spec"]["syncPolicy"] == {
        "retry": {"limit": 0, "backoff": {"duration": "30", "factor": 2, "maxDuration": "1h"}}
    }


@pytest.mark.parametrize("example", EXAMPLES_WITH_DRIVER)
def test_a_flux_first_install_before_any_gpu_node_fails_only_the_smoke_test(rendered, example):
    # docs/gitops.md: every other stage turns Ready; the smoke test reports its failed Job, which stays
    # failed until it is deleted (Flux then creates it again) or the config changes.
    folder = rendered(example, "flux", VERSION_A)
    cluster = Cluster(gpu_nodes=0)
    results = reconcile_flux(folder, kustomizations(folder), cluster)
    by_folder = {
        k["spec"]["path"].rsplit("/", 1)[1]: results[k["metadata"]["name"]]
        for k in kustomizations(folder)
    }
    assert [name for name, result in by_folder.items() if not result.ready] == ["smoke-test"]
    assert "Job Failed" in by_folder["smoke-test"].message
    cluster.gpu_nodes = GPU_NODES
    assert not reconcile_flux(folder, kustomizations(folder), cluster)[
        f"gpustack-{folder.name}-smoke-test"
    ].ready
    (job,) = [o for o in cluster.live.values() if o["kind"] == "Job"]
    cluster.delete_hook(job)
    assert all(r.ready for r in reconcile_flux(folder, kustomizations(folder), cluster).values())
