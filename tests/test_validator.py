"""Per-node validation: NVIDIA's validator DaemonSet proves each GPU node and leaves ready files in
/run/nvidia/validations; the GPU DaemonSets wait for them, so after a reboot nothing starts before
the driver is back and the runtime is configured again; the driver validation creates the
/dev/char symlinks that keep GPUs in running pods across a `systemctl daemon-reload` under the
systemd cgroup driver (NVIDIA/nvidia-container-toolkit#48).

Expectations come from upstream, not from gpustack's code:
- the validator DaemonSet, its init containers, env, mounts and host paths: NVIDIA/gpu-operator
  assets/state-operator-validation/0500_daemonset.yaml (v26.7.0, in shared/refs);
- the wait init containers: the same release's device plugin, GFD, DCGM exporter and MIG manager
  DaemonSets (their `toolkit-validation` init container), the toolkit's `driver-validation`;
- the image: values.yaml `validator` (repository nvcr.io/nvidia, image gpu-operator, the chart's
  version v26.7.0; one image for operator and validator since v25.10);
- what each validation reads and calls: cmd/nvidia-validator/main.go (hostDevCharPath
  /host-dev-char, the ready file names, the env it reads, the API calls behind the RBAC).
"""

from __future__ import annotations

import posixpath
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED, stack_for, validate_upstream, yaml_document

from gpustack.build.pipeline import Rendering, render
from gpustack.errors import UserError

VALIDATOR = "nvidia-operator-validator"
IMAGE = "nvcr.io/nvidia/gpu-operator:v26.7.0"
VALIDATIONS = "/run/nvidia/validations"
CONTAINER = {"driver": {"mode": "container"}}
PREINSTALLED = {"driver": {"mode": "preinstalled"}}
MIG = {"devicePlugin": {"migStrategy": "mixed"}}

# Every profile with an NVIDIA driver, in a container or on the host (config sections, id).
NVIDIA_DRIVER = [
    ("kubeadm", {}),
    ("kubeadm", CONTAINER),
    ("rke2", {}),
    ("rke2", CONTAINER),
    ("openshift", {}),
    ("openshift", PREINSTALLED),
]
IDS = [
    f"{profile}-{sections.get('driver', {}).get('mode', 'default')}"
    for profile, sections in NVIDIA_DRIVER
]
# The GPU DaemonSets that wait for toolkit-ready upstream, by gpustack's name: upstream's file.
WAITING = {
    "nvidia-device-plugin": "state-device-plugin__0500_daemonset.yaml",
    "gpu-feature-discovery": "gpu-feature-discovery__0500_daemonset.yaml",
    "nvidia-dcgm-exporter": "state-dcgm-exporter__0800_daemonset.yaml",
    "nvidia-mig-manager": "state-mig-manager__0600_daemonset.yaml",
}


def rendered(tmp_path: Path, profile: str, sections: dict[str, Any]) -> Rendering:
    return render(stack_for(tmp_path, profile, **sections))


def daemonsets(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in rendering.objects if o["kind"] == "DaemonSet"}


def named(rendering: Rendering, kind: str, name: str) -> dict[str, Any] | None:
    return next(
        (o for o in rendering.objects if o["kind"] == kind and o["metadata"]["name"] == name), None
    )


def pod(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def host_paths(spec: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """Mount path -> host path of a container's hostPath mounts."""
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    return {
        m["mountPath"]: volumes[m["name"]]
        for m in container.get("volumeMounts", [])
        if m["name"] in volumes
    }


def on_host(spec: dict[str, Any], container: dict[str, Any], path: str) -> str | None:
    """Where a file the container names is on the host, through its hostPath mounts."""
    for mount, host in sorted(host_paths(spec, container).items(), key=lambda i: -len(i[0])):
        if path == mount or path.startswith(mount.rstrip("/") + "/"):
            return posixpath.normpath(host + "/" + path[len(mount) :])
    return None


def last_step(container: dict[str, Any]) -> str:
    """What an init container's shell runs last: upstream's own command, after any wait
    gpustack puts before it."""
    script = " ".join(container.get("args", []))
    return script.rpartition("exec ")[2]


def upstream(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml_document((SHARED / "refs/gpu-operator" / name).read_text())
    return loaded


def upstream_validator() -> dict[str, Any]:
    return upstream("state-operator-validation__0500_daemonset.yaml")


@pytest.mark.parametrize(("profile", "sections"), NVIDIA_DRIVER, ids=IDS)
def test_every_nvidia_driver_profile_gets_the_validator_from_nvidias_image(
    tmp_path, profile, sections
):
    validator = daemonsets(rendered(tmp_path, profile, sections))[VALIDATOR]
    spec = pod(validator)
    assert {c["image"] for c in [*spec["initContainers"], *spec["containers"]]} == {IMAGE}
    assert validator["metadata"]["labels"]["app.kubernetes.io/component"] == "operator-validator"
    assert spec["priorityClassName"] == "system-node-critical"
    # The tolerations the workload pods copy from the DaemonSet (main.go runWorkload).
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in spec["tolerations"]
    validate_upstream(validator)


@pytest.mark.shared
@pytest.mark.parametrize(("profile", "sections"), NVIDIA_DRIVER, ids=IDS)
def test_validator_runs_upstreams_steps_with_upstreams_env_and_host_paths(
    tmp_path, profile, sections
):
    ours = pod(daemonsets(rendered(tmp_path, profile, sections))[VALIDATOR])
    theirs = pod(upstream_validator())
    values = upstream("helm__values.yaml")["validator"]
    repository = f"{values['repository']}/{values['image']}"
    assert {c["image"].rpartition(":")[0] for c in ours["initContainers"]} == {repository}
    assert [c["name"] for c in ours["initContainers"]] == [
        c["name"] for c in theirs["initContainers"]
    ]
    for our, their in zip(ours["initContainers"], theirs["initContainers"]):
        assert our["command"] == their["command"], our["name"]
        assert [last_step(our)] == their["args"], our["name"]
        for name, value in env(their).items():
            if name == "MIG_STRATEGY":  # "FILLED BY OPERATOR": the device plugin's strategy
                continue
            assert env(our).get(name) == value, (our["name"], name)
        # Every host folder upstream mounts is mounted at the same path.
        assert host_paths(theirs, their).items() <= host_paths(ours, our).items(), our["name"]
    (their_main,) = theirs["containers"]
    (our_main,) = ours["containers"]
    assert our_main["name"] == their_main["name"] == VALIDATOR
    assert our_main["lifecycle"] == their_main["lifecycle"]
    assert host_paths(ours, our_main) == host_paths(theirs, their_main)


def test_plugin_validation_follows_the_device_plugin(tmp_path):
    mixed = pod(daemonsets(rendered(tmp_path, "rke2", MIG))[VALIDATOR])
    (plugin,) = [c for c in mixed["initContainers"] if c["name"] == "plugin-validation"]
    assert env(plugin)["MIG_STRATEGY"] == "mixed"
    assert env(plugin)["WITH_WORKLOAD"] == "false"  # upstream's: resources only, no GPU pod
    # TransformValidatorComponent drops the plugin validation without a device plugin.
    without = rendered(tmp_path, "kubeadm", {"devicePlugin": {"enabled": False}})
    names = [c["name"] for c in pod(daemonsets(without)[VALIDATOR])["initContainers"]]
    assert names == ["driver-validation", "toolkit-validation", "cuda-validation"]
    assert named(without, "ClusterRole", VALIDATOR) is None


def test_workload_pods_get_the_image_secrets_and_runtime_class_gpu_pods_get(tmp_path):
    rendering = rendered(
        tmp_path,
        "kubeadm",
        {"images": {"registry": "registry.example.com:5000/mirror", "pullSecrets": ["a", "b"]}},
    )
    spec = pod(daemonsets(rendering)[VALIDATOR])
    mirrored = "registry.example.com:5000/mirror/nvidia/gpu-operator:v26.7.0"
    for container in spec["initContainers"]:
        if container["name"] in ("cuda-validation", "plugin-validation"):
            variables = env(container)
            # The validator creates its workload pods from these (main.go runWorkload).
            assert variables["VALIDATOR_IMAGE"] == mirrored == container["image"]
            assert variables["VALIDATOR_IMAGE_PULL_SECRETS"] == "a,b"
            assert variables["VALIDATOR_RUNTIME_CLASS"] == spec["runtimeClassName"] == "nvidia"


def test_rbac_is_what_the_validator_calls(tmp_path):
    rendering = rendered(tmp_path, "openshift", {})
    role = named(rendering, "Role", VALIDATOR)
    assert role is not None
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): r for r in role["rules"]}
    # isDriverManagedByOperator lists DaemonSets, runWorkload gets the validator's own.
    assert set(rules[(("apps",), ("daemonsets",))]["verbs"]) == {"get", "list"}
    # runWorkload: list the previous pod, delete it, create the new one; waitForPod gets it.
    assert set(rules[(("",), ("pods",))]["verbs"]) == {"create", "get", "list", "delete"}
    # The CUDA workload pod is privileged: on OpenShift its account uses SCC privileged.
    scc = rules[(("security.openshift.io",), ("securitycontextconstraints",))]
    assert scc["resourceNames"] == ["privileged"] and scc["verbs"] == ["use"]
    cluster_role = named(rendering, "ClusterRole", VALIDATOR)
    assert cluster_role is not None
    assert cluster_role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    account = named(rendering, "ServiceAccount", VALIDATOR)
    assert account is not None and account["automountServiceAccountToken"] is True
    # Without workload pods, no rights on pods.
    quiet = rendered(tmp_path, "kubeadm", {"validator": {"cudaWorkload": False}})
    role = named(quiet, "Role", VALIDATOR)
    assert role is not None and all(r["resources"] != ["pods"] for r in role["rules"])
    (daemonset_rule,) = [r for r in role["rules"] if r["resources"] == ["daemonsets"]]
    assert daemonset_rule["verbs"] == ["list"]  # no workload pod: no Get of the DaemonSet
    (cuda,) = [
        c
        for c in pod(daemonsets(quiet)[VALIDATOR])["initContainers"]
        if c["name"] == "cuda-validation"
    ]
    assert env(cuda)["WITH_WORKLOAD"] == "false"


@pytest.mark.parametrize(
    ("profile", "sections"), [*NVIDIA_DRIVER, ("rke2", MIG)], ids=[*IDS, "rke2-mig"]
)
def test_gpu_daemonsets_wait_for_the_validators_toolkit_ready(tmp_path, profile, sections):
    rendering = rendered(tmp_path, profile, sections)
    workloads = daemonsets(rendering)
    validator = pod(workloads[VALIDATOR])
    (toolkit_validation,) = [
        c for c in validator["initContainers"] if c["name"] == "toolkit-validation"
    ]
    written = on_host(validator, toolkit_validation, f"{VALIDATIONS}/toolkit-ready")
    assert written == f"{VALIDATIONS}/toolkit-ready"
    waiting = [name for name in WAITING if name in workloads]
    assert "nvidia-device-plugin" in waiting and "nvidia-dcgm-exporter" in waiting
    for name in waiting:
        spec = pod(workloads[name])
        first = spec["initContainers"][0]
        assert first["name"] == "toolkit-validation", name
        # It waits for the very file the validator writes, on the host.
        assert on_host(spec, first, f"{VALIDATIONS}/toolkit-ready") == written, name
        assert f"{VALIDATIONS}/toolkit-ready" in first["args"][0], name
    if sections is MIG:
        assert "nvidia-mig-manager" in waiting


@pytest.mark.shared
def test_the_waits_are_upstreams(tmp_path):
    workloads = daemonsets(rendered(tmp_path, "rke2", MIG))
    for name, reference in WAITING.items():
        their_spec = pod(upstream(reference))
        (their_wait,) = [
            c for c in their_spec["initContainers"] if c["name"] == "toolkit-validation"
        ]
        our_spec = pod(workloads[name])
        our_wait = our_spec["initContainers"][0]
        assert our_wait["name"] == their_wait["name"]
        assert our_wait["command"] == their_wait["command"] == ["sh", "-c"]
        # Upstream's loop waits for the same host file.
        their_file = f"{VALIDATIONS}/toolkit-ready"
        assert their_file in their_wait["args"][0]
        assert on_host(our_spec, our_wait, their_file) == on_host(
            their_spec, their_wait, their_file
        )


@pytest.mark.parametrize(("profile", "sections"), NVIDIA_DRIVER, ids=IDS)
def test_dev_char_symlinks_on_every_node_with_an_nvidia_driver(tmp_path, profile, sections):
    """With the systemd cgroup driver (the default) a DaemonSet on every GPU node runs NVIDIA's
    driver validation with the host's /dev/char where createDevCharSymlinks writes
    (main.go hostDevCharPath), privileged, and the creation not disabled."""
    stack = stack_for(tmp_path, profile, **sections)
    assert stack.config.nodes.cgroupDriver == "systemd"
    rendering = render(stack)
    creators = []
    for name, workload in daemonsets(rendering).items():
        spec = pod(workload)
        for container in spec.get("initContainers", []):
            variables = env(container)
            if last_step(container) != "nvidia-validator" or variables.get("COMPONENT") != "driver":
                continue
            assert host_paths(spec, container)["/host-dev-char"] == "/dev/char", name
            assert host_paths(spec, container)["/host"] == "/", name  # a host driver at /
            assert container["securityContext"]["privileged"] is True, name
            assert variables.get("DISABLE_DEV_CHAR_SYMLINK_CREATION") != "true", name
            assert variables["WITH_WAIT"] == "true", name
            creators.append(name)
    assert VALIDATOR in creators
    if stack.driver_container or stack.toolkit_enabled:
        # Upstream's toolkit validates the driver (and creates the links) before it configures
        # the runtime, independently of the validator DaemonSet.
        assert "nvidia-container-toolkit-daemonset" in creators


@pytest.mark.shared
@pytest.mark.parametrize(("profile", "sections"), [("kubeadm", CONTAINER), ("openshift", {})])
def test_toolkit_waits_for_the_driver_as_upstreams_does(tmp_path, profile, sections):
    theirs = pod(upstream("state-container-toolkit__0500_daemonset.yaml"))
    (their_init,) = theirs["initContainers"]
    toolkit = daemonsets(rendered(tmp_path, profile, sections))[
        "nvidia-container-toolkit-daemonset"
    ]
    ours = pod(toolkit)
    (our_init,) = ours["initContainers"]
    assert our_init["name"] == their_init["name"] == "driver-validation"
    assert our_init["image"] == IMAGE
    assert env(our_init).items() >= env(their_init).items()
    assert host_paths(ours, our_init).items() >= host_paths(theirs, their_init).items()
    # Its account lists DaemonSets (state-container-toolkit/0200_role.yaml): it needs a token.
    account = next(
        o
        for o in rendered(tmp_path, profile, sections).objects
        if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == ours["serviceAccountName"]
    )
    assert account["automountServiceAccountToken"] is True


def driver_validations(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {
        name: container
        for name, workload in daemonsets(rendering).items()
        for container in pod(workload).get("initContainers", [])
        if container["name"] == "driver-validation"
    }


class Shell:
    """An init container's script run by a real shell on a node staged under a folder: its
    /run/nvidia/validations, a host whose `chroot /host nvidia-smi` answers or not, an
    nvidia-validator that records whether the driver pod's ready file was there when it ran,
    and a `sleep` that stands for the time the driver pod takes: after `ready_after` sleeps its
    startup probe writes the ready file."""

    def __init__(self, root: Path, host_driver: bool, ready_after: int) -> None:
        self.validations = root / "validations"
        self.bin = root / "bin"
        self.validations.mkdir(parents=True)
        self.bin.mkdir()
        self.ready = self.validations / ".driver-ctr-ready"
        self.sleeps = root / "sleeps"
        self.ran = root / "validator-ran"
        self.tool("chroot", "exit 0" if host_driver else "exit 127")
        self.tool(
            "sleep",
            f'echo >> "{self.sleeps}"; '
            f'[ "$(wc -l < "{self.sleeps}")" -ge {ready_after} ] && : > "{self.ready}"; exit 0',
        )
        self.tool("nvidia-validator", f'[ -f "{self.ready}" ] && echo ready > "{self.ran}"; '
                  f'[ -f "{self.ran}" ] || echo not-ready > "{self.ran}"')  # fmt: skip

    def tool(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)

    def run(self, container: dict[str, Any]) -> tuple[str, int]:
        (script,) = container["args"]
        script = str(script).replace(VALIDATIONS, str(self.validations))
        subprocess.run(
            [*container["command"], script],
            env={"PATH": f"{self.bin}:/usr/bin:/bin"},
            check=True,
            capture_output=True,
            timeout=60,
        )
        slept = len(self.sleeps.read_text().splitlines()) if self.sleeps.exists() else 0
        return self.ran.read_text().strip(), slept


@pytest.mark.parametrize(("profile", "sections"), [("kubeadm", CONTAINER), ("openshift", {})])
def test_nothing_validates_a_driver_container_before_its_ready_file(tmp_path, profile, sections):
    """NVIDIA's validator waits for the driver pod's ready file only where the GPU Operator owns
    the driver DaemonSet (cmd/nvidia-validator/main.go validateDriverContainer,
    assertDriverContainerReady, v26.7.0); gpustack's driver validations wait for it first. It is
    there only while a driver pod whose daemons (the fabric manager on NVSwitch systems) are Ready
    runs (written by its startup probe, removed by its preStop hook): so the toolkit, the validator
    and through it every GPU DaemonSet start neither before the fabric manager, nor on a driver
    that is stopping. A node whose host has a driver of its own (no driver pod there) goes on."""
    validations = driver_validations(rendered(tmp_path, profile, sections))
    assert set(validations) == {VALIDATOR, "nvidia-container-toolkit-daemonset"}
    for name, container in validations.items():
        root = tmp_path / name
        assert Shell(root / "waits", host_driver=False, ready_after=3).run(container) == (
            "ready",
            3,
        ), name
        assert Shell(root / "host", host_driver=True, ready_after=99).run(container) == (
            "not-ready",
            0,
        ), name
    # With a host driver gpustack deploys no driver pod: nothing to wait for.
    for container in driver_validations(rendered(tmp_path, "kubeadm", {})).values():
        assert container["args"] == ["nvidia-validator"]


@pytest.mark.parametrize("profile", ["gke-cos", "gke-ubuntu"])
def test_gke_has_no_validator_and_nothing_waits(tmp_path, profile):
    workloads = daemonsets(rendered(tmp_path, profile, {}))
    assert VALIDATOR not in workloads
    for name, workload in workloads.items():
        waits = [c for c in pod(workload).get("initContainers", []) if "validation" in c["name"]]
        assert waits == [], name


def test_validator_on_gke_is_refused_at_its_line(tmp_path, cli):
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: gke-cos}\nvalidator:\n  enabled: true\n"
    )
    result = cli("render", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "cluster.yaml:6:" in result.output and "validator.enabled" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(UserError):
        stack_for(tmp_path, "gke-ubuntu", validator={"enabled": True})


@pytest.mark.parametrize(
    ("sections", "symlinks"),
    [
        # A host driver and no toolkit DaemonSet: the validator alone makes the links.
        ({}, True),
        # cgroupfs: systemd never rewrites the device rules, the links are not needed.
        ({"nodes": {"cgroupDriver": "cgroupfs"}}, False),
        # The toolkit's own driver validation makes the links; the waits would still go.
        (CONTAINER, False),
    ],
)
def test_turning_the_validator_off_where_it_runs_is_refused(tmp_path, sections, symlinks):
    """The GPU Operator has no switch for its validator (api/nvidia/v1/clusterpolicy_types.go
    ValidatorSpec, v26.7.0): the GPU DaemonSets wait on its toolkit-ready, and its driver
    validation creates the /dev/char symlinks (cmd/nvidia-validator/main.go
    createDevCharSymlinks) that keep GPU pods their GPUs across a systemd daemon-reload. Turned
    off, both went with no word."""
    with pytest.raises(UserError) as raised:
        stack_for(tmp_path, "kubeadm", **{**sections, "validator": {"enabled": False}})
    assert raised.value.field == "validator.enabled"
    assert ("/dev/char symlinks" in raised.value.message) is symlinks
    assert "crash-loop" in raised.value.message
    # Where the validator cannot run (GKE), off is what auto gives: accepted.
    stack_for(tmp_path, "gke-cos", validator={"enabled": False})


def test_ready_files_go_with_the_validator_pod(tmp_path):
    main = pod(daemonsets(rendered(tmp_path, "kubeadm", {}))[VALIDATOR])["containers"][0]
    command = " ".join(main["lifecycle"]["preStop"]["exec"]["command"])
    assert f"rm -f {VALIDATIONS}/*-ready" in command
    # The main container only sleeps and removes files: no privilege.
    assert not main["securityContext"].get("privileged")
    assert main["securityContext"]["capabilities"] == {"drop": ["ALL"]}
