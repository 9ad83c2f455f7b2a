"""The GPU smoke test: a Job that takes a GPU once the stack is up, and gates the GitOps sync on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import stack_for, validate_upstream
from gitops_helpers import kustomize, listed_objects, load, schema_errors
from manifests import shared_affinity

from gpustack.build.pipeline import files, render
from gpustack.resolve import platform_profiles as profiles

ARGOCD = {"tool": "argocd", "argocd": {"repoURL": "https://git.example.com/fleet.git"}}
FLUX = {"tool": "flux", "flux": {"sourceRef": {"name": "flux-system"}}}
# Every profile with NVIDIA's device plugin, and GKE with its own (where the DCGM exporter is the
# GPU DaemonSet to compare with).
PROFILES = sorted(profiles.BUILTIN)


def jobs(objects: list[dict]) -> list[dict]:
    return [obj for obj in objects if obj["kind"] == "Job"]


def smoke_test(tmp_path: Path, profile: str, **sections: object) -> dict:
    (job,) = jobs(render(stack_for(tmp_path, profile, **sections)).objects)
    return job


def write(tmp_path: Path, rendering) -> Path:
    folder = tmp_path / "out" / rendering.name
    for relative, content in files(rendering).items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(content)
    return folder


def tolerated(taint: dict, tolerations: list[dict]) -> bool:
    """Whether a pod with `tolerations` may run on a node with `taint` (the scheduler's rule)."""
    for toleration in tolerations:
        if toleration.get("effect") not in (None, taint["effect"]):
            continue
        if toleration["key"] != taint["key"]:
            continue
        if toleration["operator"] == "Exists" or toleration.get("value") == taint.get("value"):
            return True
    return False


@pytest.mark.parametrize("profile", PROFILES)
def test_argo_cd_runs_the_smoke_test_after_every_sync(tmp_path, profile):
    job = smoke_test(tmp_path, profile, gitops=ARGOCD)
    annotations = job["metadata"]["annotations"]
    assert annotations["argocd.argoproj.io/hook"] == "PostSync"
    # Re-created on every sync, removed once passed, kept for reading when it failed.
    policies = set(annotations["argocd.argoproj.io/hook-delete-policy"].split(","))
    assert policies == {"BeforeHookCreation", "HookSucceeded"}
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] >= 0
    validate_upstream(job)


def test_the_smoke_test_waits_out_a_first_install_with_a_driver_container(tmp_path):
    # The Job's deadline runs while its pod is Pending: it must outlast the driver container's
    # build, which its startup probe allows (initial delay + period x failures).
    rendering = render(
        stack_for(tmp_path, "kubeadm", driver={"mode": "container"}, smokeTest={"enabled": True})
    )
    (job,) = jobs(rendering.objects)
    (driver,) = [o for o in rendering.objects if o["metadata"]["name"] == "nvidia-driver-daemonset"]
    probe = driver["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    build = probe["initialDelaySeconds"] + probe["periodSeconds"] * probe["failureThreshold"]
    assert job["spec"]["activeDeadlineSeconds"] > build


def seconds(duration: str) -> int:
    """Seconds in a Flux timeout as gpustack writes them (`5m`, `1560s`)."""
    return int(duration[:-1]) * {"s": 1, "m": 60, "h": 3600}[duration[-1]]


@pytest.mark.parametrize(
    ("profile", "driver"),
    [("kubeadm", {"mode": "container"}), ("rke2", {"mode": "container"}), ("openshift", {})],
)
def test_flux_waits_out_the_driver_containers_build_in_its_stage(tmp_path, profile, driver):
    # OpenShift's default driver is a driver container built with the Driver Toolkit.
    rendering = render(stack_for(tmp_path, profile, driver=driver, gitops=FLUX))
    (daemonset,) = [
        o for o in rendering.objects if o["metadata"]["name"] == "nvidia-driver-daemonset"
    ]
    (probe,) = [
        c["startupProbe"]
        for c in daemonset["spec"]["template"]["spec"]["containers"]
        if "startupProbe" in c
    ]
    build = probe["initialDelaySeconds"] + probe["periodSeconds"] * probe["failureThreshold"]
    by_path = {k["spec"]["path"].rsplit("/", 1)[1]: k["spec"] for k in rendering.gitops_objects}
    # The driver DaemonSet is Ready only after its build: its stage must not time out first,
    # and keeps the configured timeout (5m) for the pods that start after the driver.
    assert seconds(by_path["workloads"]["timeout"]) >= build + 5 * 60
    assert by_path["workloads"]["wait"] is True
    for folder in ("foundation", "monitors"):
        assert by_path[folder]["timeout"] == "5m"
    (job,) = jobs(rendering.objects)
    assert seconds(by_path["smoke-test"]["timeout"]) > job["spec"]["activeDeadlineSeconds"]


def test_flux_keeps_the_configured_timeout_without_a_driver_container(tmp_path):
    rendering = render(stack_for(tmp_path, "kubeadm", gitops=FLUX))
    by_path = {k["spec"]["path"].rsplit("/", 1)[1]: k["spec"] for k in rendering.gitops_objects}
    assert by_path["workloads"]["timeout"] == "5m"


@pytest.mark.shared
def test_flux_runs_the_smoke_test_after_the_workloads_and_waits_for_it(tmp_path):
    rendering = render(stack_for(tmp_path, "rke2", gitops=FLUX))
    folder = write(tmp_path, rendering)
    (job,) = jobs(rendering.objects)
    assert [obj["metadata"]["name"] for obj in kustomize(folder / "smoke-test")] == [
        job["metadata"]["name"]
    ]
    assert "argocd.argoproj.io/hook" not in job["metadata"].get("annotations", {})
    # A deleted Job would be re-created by the next reconciliation: a finished one stays.
    assert "ttlSecondsAfterFinished" not in job["spec"]
    kustomizations = listed_objects(folder / "gitops")
    depended_on = {
        dependency["name"]
        for kustomization in kustomizations
        for dependency in kustomization["spec"].get("dependsOn", [])
    }
    # Nothing depends on the smoke test, and it depends on the workloads only: it starts once
    # the GPU stack is ready, whether or not the monitoring stack's CRDs are installed.
    last = [k for k in kustomizations if k["metadata"]["name"] not in depended_on]
    assert sorted(k["metadata"]["name"] for k in last) == [
        "gpustack-lab-monitors",
        "gpustack-lab-smoke-test",
    ]
    (smoke,) = [k for k in last if k["spec"]["path"].endswith("/smoke-test")]
    assert smoke["spec"]["dependsOn"] == [{"name": "gpustack-lab-workloads"}]
    # Ready only once the Job completed (kstatus health of every object it applies).
    assert smoke["spec"]["wait"] is True
    for kustomization in kustomizations:
        assert schema_errors(kustomization) == []


@pytest.mark.shared
def test_flux_without_wait_still_health_checks_the_smoke_test(tmp_path):
    flux = {**FLUX, "flux": {**FLUX["flux"], "wait": False, "timeout": "2m"}}
    rendering = render(stack_for(tmp_path, "kubeadm", gitops=flux))
    (job,) = jobs(rendering.objects)
    by_name = {obj["metadata"]["name"]: obj for obj in rendering.gitops_objects}
    last = by_name["gpustack-lab-smoke-test"]
    assert last["spec"]["healthChecks"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job["metadata"]["name"],
            "namespace": "gpu-system",
        }
    ]
    # The Job's own deadline is reported, not a timeout of the Kustomization.
    timeout = last["spec"]["timeout"]
    assert timeout.endswith("s") and int(timeout[:-1]) > job["spec"]["activeDeadlineSeconds"]
    assert by_name["gpustack-lab-workloads"]["spec"]["timeout"] == "2m"
    assert "healthChecks" not in by_name["gpustack-lab-workloads"]["spec"]
    assert schema_errors(last) == []


def test_no_smoke_test_without_gitops_unless_asked(tmp_path):
    assert jobs(render(stack_for(tmp_path, "kubeadm")).objects) == []
    assert (
        jobs(
            render(
                stack_for(tmp_path, "kubeadm", gitops=ARGOCD, smokeTest={"enabled": False})
            ).objects
        )
        == []
    )
    job = smoke_test(tmp_path, "kubeadm", smokeTest={"enabled": True})
    # kubectl apply: the finished Job goes away by itself, so applying again tests again.
    assert job["spec"]["ttlSecondsAfterFinished"] > 0
    assert "annotations" not in job["metadata"]


@pytest.mark.parametrize("profile", PROFILES)
def test_the_smoke_test_lands_where_the_gpu_daemonsets_run(tmp_path, profile):
    rendering = render(stack_for(tmp_path, profile, gitops=ARGOCD))
    (job,) = jobs(rendering.objects)
    pod = job["spec"]["template"]["spec"]
    daemonsets = {
        obj["metadata"]["name"]: obj["spec"]["template"]["spec"]
        for obj in rendering.objects
        if obj["kind"] == "DaemonSet"
    }
    reference = daemonsets.get("nvidia-device-plugin") or daemonsets["nvidia-dcgm-exporter"]
    assert pod["affinity"] == shared_affinity(reference)
    assert pod.get("runtimeClassName") == reference.get("runtimeClassName")
    for taint in [
        *rendering.taints,
        {"key": "nvidia.com/gpu", "value": "x", "effect": "NoExecute"},
    ]:
        assert tolerated(taint, pod["tolerations"]), taint
    # Not node-critical: a test must not preempt the GPU stack (and GKE's quota would refuse it).
    assert "priorityClassName" not in pod


@pytest.mark.parametrize("profile", PROFILES)
def test_the_smoke_test_pod_meets_pod_security_restricted(tmp_path, profile):
    pod = smoke_test(tmp_path, profile, gitops=ARGOCD)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["runAsNonRoot"] is True
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "volumes" not in pod and pod["automountServiceAccountToken"] is False
    # OpenShift's SCC assigns a uid from the namespace's range and refuses any other.
    openshift = profiles.load(profile)[0].facts.securityContextConstraints
    assert ("runAsUser" in security) is not openshift
    if not openshift:
        assert security["runAsUser"] != 0


def test_the_smoke_test_takes_the_resource_the_plugin_advertises(tmp_path):
    shared = {"sharing": {"strategy": "time-slicing", "renameByDefault": True}}
    job = smoke_test(tmp_path, "kubeadm", gitops=ARGOCD, devicePlugin=shared)
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu.shared": 1}
    mig = smoke_test(
        tmp_path,
        "kubeadm",
        gitops=ARGOCD,
        devicePlugin={"migStrategy": "mixed"},
        smokeTest={
            "resource": "nvidia.com/mig-1g.10gb",
            "command": ["nvidia-smi", "-L"],
            "image": "nvcr.io/nvidia/cuda:12.8.0-base-ubi9",
        },
    )
    container = mig["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": 1}
    assert container["command"] == ["nvidia-smi", "-L"]
    assert container["image"] == "nvcr.io/nvidia/cuda:12.8.0-base-ubi9"


def test_a_changed_stack_is_a_new_smoke_test_job(tmp_path):
    """A Job's pod template is immutable: a changed Job must have a new name, and any rollout of
    the stack gets a new test run; the same config gives the same name."""
    first = smoke_test(tmp_path, "kubeadm", gitops=FLUX)["metadata"]["name"]
    again = smoke_test(tmp_path, "kubeadm", gitops=FLUX)["metadata"]["name"]
    rolled = smoke_test(tmp_path, "kubeadm", gitops=FLUX, devicePlugin={"version": "v0.19.0"})[
        "metadata"
    ]["name"]
    deadline = smoke_test(
        tmp_path, "kubeadm", gitops=FLUX, smokeTest={"activeDeadlineSeconds": 900}
    )["metadata"]["name"]
    assert first == again
    assert len({first, rolled, deadline}) == 3
    assert all(name.startswith("gpu-smoke-test-") for name in (first, rolled, deadline))


def test_the_rendered_folder_with_the_smoke_test_validates(cli, tmp_path):
    config = tmp_path / "gpu.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: gpu}\n"
        "platform: {profile: rke2}\ngitops: {tool: flux, flux: {sourceRef: {name: flux-system}}}\n"
    )
    assert cli("render", config, "-o", tmp_path / "out").exit_code == 0
    result = cli("validate", "--summary", tmp_path / "out")
    assert result.exit_code == 0, result.output
    job_file = next((tmp_path / "out" / "gpu" / "smoke-test").glob("job-*.yaml"))
    assert load(job_file)["kind"] == "Job"


def test_clusters_that_differ_only_in_name_share_the_smoke_test_job(tmp_path):
    """A fleet's clusters with the same settings emit (and validate) one Job object."""
    from gpustack.resolve.load import load_stack

    names = []
    for cluster in ("gpu-east", "gpu-west"):
        path = tmp_path / f"{cluster}.yaml"
        path.write_text(
            "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
            f"metadata: {{name: {cluster}}}\nplatform: {{profile: kubeadm}}\n"
            "smokeTest: {enabled: true}\n"
        )
        (job,) = jobs(render(load_stack(path)).objects)
        names.append(job["metadata"]["name"])
    assert names[0] == names[1]
