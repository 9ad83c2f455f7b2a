"""End to end: the examples' renders are valid, place GPU workloads right on each platform, build
with real kustomize, are byte-stable across processes, and are written safely.

The checks read whatever objects a render produces (every workload, every ServiceAccount), not a
list of components, so a component added to the stack is checked as the others are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from conftest import ROOT, SHARED, as_upstream, crd_validator, example_base, run_gpustack
from example_renders import committed_files, example_configs, render_example
from kubernetes_validate.utils import SchemaNotFoundError, ValidationError
from manifests import (
    configured_taints,
    containers,
    covering_tolerations,
    gpu_workloads,
    pod_spec,
    required_node_labels,
    runtime_users,
    workloads,
)
from ruamel.yaml import YAML

from gpustack.build import pipeline
from gpustack.objects import identity
from gpustack.resolve.load import load_stack
from gpustack.resolve.stack import Stack

CRD_SCHEMAS = SHARED / "crd-schemas"
KUBELET_DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"
GKE_OS_LABEL = "cloud.google.com/gke-os-distribution"
# container-engine-accelerators nvidia-driver-installer/{cos,ubuntu}: the installer image per OS.
GKE_INSTALLER_IMAGES = {"cos": "cos-nvidia-installer", "ubuntu": "gke-nvidia-installer"}
# OpenShift's built-in SCCs that admit hostPath volumes; only `privileged` admits privileged pods.
HOSTPATH_SCCS = {"privileged", "hostaccess", "hostmount-anyuid"}

EXAMPLES = {path.stem: path for path in example_configs()}


@cache
def rendered(example: str) -> tuple[Stack, list[dict[str, Any]]]:
    stack, rendering = render_example(EXAMPLES[example])
    return stack, rendering.objects


def objects_of(kind: str, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj.get("kind") == kind]


def examples_with(profiles: set[str]) -> list[str]:
    return [name for name in EXAMPLES if rendered(name)[0].profile.metadata.name in profiles]


def label(obj: dict[str, Any]) -> str:
    _group, kind, namespace, name = identity(obj)
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


# (a) strict schemas ---------------------------------------------------------------------------


def is_core_group(group: str) -> bool:
    """Groups Kubernetes itself serves: the legacy core group, dotless ones and *.k8s.io."""
    return "." not in group or group.endswith(".k8s.io")


@pytest.mark.shared
@pytest.mark.parametrize("example", EXAMPLES)
def test_every_object_passes_strict_schema_validation(example: str) -> None:
    stack, objects = rendered(example)
    version = stack.config.platform.kubernetesVersion
    problems = []
    for obj in objects:
        group, kind, _, _ = identity(obj)
        if is_core_group(group):
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except ValidationError as error:
                problems.append(f"{label(obj)}: {error.message} at {list(error.absolute_path)}")
            except SchemaNotFoundError:
                problems.append(
                    f"{label(obj)}: Kubernetes {version} has no {obj['apiVersion']} {kind}"
                )
            continue
        # Red Hat's NodeFeatureRule is upstream's under another group (conftest.UPSTREAM_GROUP).
        obj = as_upstream(obj)
        kind = obj["kind"]
        group, api_version = obj["apiVersion"].rpartition("/")[::2]
        schema_file = CRD_SCHEMAS / group / f"{kind.lower()}_{api_version}.json"
        if not schema_file.is_file():
            problems.append(
                f"{label(obj)}: no upstream CRD schema {schema_file.relative_to(SHARED)}"
            )
            continue
        problems += [
            f"{label(obj)}: {error.message} at {list(error.absolute_path)}"
            for error in crd_validator(schema_file).iter_errors(obj)
        ]
    assert not problems, "\n".join(problems)


# (b) platform facts, over all objects ---------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_object_is_labelled_managed_by_gpustack(example: str) -> None:
    _, objects = rendered(example)
    unlabelled = [
        label(obj)
        for obj in objects
        if (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/managed-by") != "gpustack"
    ]
    assert not unlabelled


@pytest.mark.parametrize("example", EXAMPLES)
def test_no_daemonset_selects_another_daemonsets_pods(example: str) -> None:
    _, objects = rendered(example)
    daemonsets = objects_of("DaemonSet", objects)
    overlaps = [
        f"{label(one)} selects the pods of {label(other)}"
        for one in daemonsets
        for other in daemonsets
        if one is not other
        and one["metadata"].get("namespace") == other["metadata"].get("namespace")
        and one["spec"]["selector"]["matchLabels"].items()
        <= other["spec"]["template"]["metadata"]["labels"].items()
    ]
    assert not overlaps


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_gpu_workload_tolerates_every_configured_taint(example: str) -> None:
    stack, objects = rendered(example)
    untolerated = [
        f"{label(workload)} does not tolerate {taint}"
        for workload in gpu_workloads(objects, stack)
        for taint in configured_taints(stack)
        if not any(
            toleration in covering_tolerations(taint)
            for toleration in pod_spec(workload).get("tolerations", [])
        )
    ]
    assert not untolerated


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_gpu_workload_lands_only_on_gpu_nodes(example: str) -> None:
    """Placement is the profile's GPU label AND nodes.selector, for every GPU workload."""
    stack, objects = rendered(example)
    wanted = {requirement.key for requirement in stack.facts.gpuNodeSelector}
    wanted |= set(stack.config.nodes.selector)
    misplaced = [
        f"{label(workload)} may land on nodes without {sorted(wanted - set(required_node_labels(pod_spec(workload))))}"
        for workload in gpu_workloads(objects, stack)
        if not wanted <= set(required_node_labels(pod_spec(workload)))
    ]
    assert not misplaced


@pytest.mark.parametrize("example", examples_with({"rke2"}))
def test_rke2_gpu_pods_use_the_nvidia_runtime_class(example: str) -> None:
    stack, objects = rendered(example)
    runtime_classes = {obj["metadata"]["name"]: obj for obj in objects_of("RuntimeClass", objects)}
    # RKE2 ships RuntimeClass nvidia (rke2-runtimeclasses); any other name gpustack must render.
    if "nvidia" in stack.facts.runtime.providedRuntimeClasses:
        assert "nvidia" not in runtime_classes
    else:
        assert runtime_classes.get("nvidia", {}).get("handler") == "nvidia"
    gpu = runtime_users(objects, stack)
    assert gpu
    missing = [label(w) for w in gpu if pod_spec(w).get("runtimeClassName") != "nvidia"]
    assert not missing, "without runtimeClassName: nvidia these crash-loop with runc"


@pytest.mark.parametrize("example", examples_with({"gke-cos", "gke-ubuntu"}))
def test_gke_runs_no_nvidia_device_plugin_by_default(example: str) -> None:
    stack, objects = rendered(example)
    assert "gke-no-default-nvidia-gpu-device-plugin" not in stack.config.nodes.selector
    plugins = [
        label(workload)
        for workload in workloads(objects)
        if any(
            volume.get("hostPath", {}).get("path") == KUBELET_DEVICE_PLUGINS
            for volume in pod_spec(workload).get("volumes", [])
        )
    ]
    assert not plugins, "GKE's own device plugin already serves nvidia.com/gpu on these nodes"


def driver_installers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        workload
        for workload in workloads(objects)
        if any(
            _image_name(container["image"]).endswith("nvidia-installer")
            for container in containers(pod_spec(workload))
        )
    ]


def _image_name(image: str) -> str:
    return image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]


@pytest.mark.parametrize("profile", ["gke-cos", "gke-ubuntu"])
@pytest.mark.parametrize("driver_mode", ["gke-managed", "gke-installer"])
def test_gke_driver_installer_matches_the_node_image(
    profile: str, driver_mode: str, tmp_path: Path
) -> None:
    example = next(name for name in examples_with({profile}))
    config = tmp_path / "cluster.yaml"
    config.write_text(
        f"extends: {example_base(tmp_path, example)}\ndriver: {{mode: {driver_mode}}}\n"
    )
    stack = load_stack(config)
    objects = pipeline.render(stack).objects
    installers = driver_installers(objects)
    if driver_mode == "gke-managed":
        assert not installers, "GKE installs the driver itself on managed pools"
        return
    assert installers, "driver.mode gke-installer renders Google's installer DaemonSet"
    os_name = stack.facts.driver.installerOS
    assert os_name is not None
    for installer in installers:
        images = {_image_name(c["image"]) for c in containers(pod_spec(installer))}
        assert GKE_INSTALLER_IMAGES[os_name] in images
        assert not images & (set(GKE_INSTALLER_IMAGES.values()) - {GKE_INSTALLER_IMAGES[os_name]})
        requirements = required_node_labels(pod_spec(installer)).get(GKE_OS_LABEL, [])
        assert {"operator": "In", "values": [os_name]} in [
            {"operator": r["operator"], "values": r.get("values")} for r in requirements
        ], f"{label(installer)} must select {GKE_OS_LABEL}={os_name}"


@pytest.mark.parametrize("example", examples_with({"openshift"}))
def test_openshift_namespace_is_scraped_by_cluster_monitoring(example: str) -> None:
    stack, objects = rendered(example)
    namespace = next(
        obj
        for obj in objects_of("Namespace", objects)
        if obj["metadata"]["name"] == stack.namespace
    )
    assert namespace["metadata"]["labels"].get("openshift.io/cluster-monitoring") == "true"


def scc_uses(objects: list[dict[str, Any]], namespace: str, account: str) -> set[str]:
    """The SCCs a ServiceAccount may `use` through the rendered (Cluster)RoleBindings."""
    granted: set[str] = set()
    for binding in objects_of("RoleBinding", objects) + objects_of("ClusterRoleBinding", objects):
        subjects = binding.get("subjects", [])
        if not any(
            s.get("kind") == "ServiceAccount"
            and s.get("name") == account
            and s.get("namespace", binding["metadata"].get("namespace")) == namespace
            for s in subjects
        ):
            continue
        ref = binding["roleRef"]
        role_namespace = binding["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        for role in objects_of(ref["kind"], objects):
            if role["metadata"]["name"] != ref["name"]:
                continue
            if role["metadata"].get("namespace", "") != role_namespace:
                continue
            for rule in role.get("rules", []):
                if (
                    "security.openshift.io" in rule.get("apiGroups", [])
                    and "securitycontextconstraints" in rule.get("resources", [])
                    and "use" in rule.get("verbs", [])
                ):
                    granted |= set(rule.get("resourceNames", []))
    return granted


@pytest.mark.parametrize("example", examples_with({"openshift"}))
def test_openshift_privileged_pods_may_use_an_scc_that_admits_them(example: str) -> None:
    _stack, objects = rendered(example)
    rendered_sccs = {
        obj["metadata"]["name"]: obj for obj in objects_of("SecurityContextConstraints", objects)
    }
    problems = []
    for workload in workloads(objects):
        spec = pod_spec(workload)
        privileged = any(
            (c.get("securityContext") or {}).get("privileged") for c in containers(spec)
        )
        host_path = any("hostPath" in volume for volume in spec.get("volumes", []))
        if not (privileged or host_path):
            continue
        account = spec.get("serviceAccountName", "default")
        namespace = workload["metadata"]["namespace"]
        admitting = {"privileged"} if privileged else HOSTPATH_SCCS
        admitting |= {
            name
            for name, scc in rendered_sccs.items()
            if scc.get("allowPrivilegedContainer" if privileged else "allowHostDirVolumePlugin")
        }
        if not scc_uses(objects, namespace, account) & admitting:
            problems.append(
                f"{label(workload)}: ServiceAccount {account} may not use {sorted(admitting)}"
            )
        if account not in {
            obj["metadata"]["name"] for obj in objects_of("ServiceAccount", objects)
        }:
            problems.append(f"{label(workload)}: ServiceAccount {account} is not rendered")
    assert not problems, "\n".join(problems)


# (c) real kustomize: tests/test_gitops.py builds every example's folder, with each GitOps tool.


# (d) determinism ------------------------------------------------------------------------------


def run_process(
    *args: str, cwd: Path = ROOT, **environment: str
) -> subprocess.CompletedProcess[str]:
    """`python -m gpustack ARGS...` in a new interpreter (its own hash seed)."""
    return subprocess.run(
        [sys.executable, "-m", "gpustack", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), **environment},
        capture_output=True,
        text=True,
        check=False,
    )


def test_separate_processes_with_different_hash_seeds_render_the_same_bytes() -> None:
    """The stream under one hash seed is what this process (another) streams. Files written
    under a third are the committed out/: test_golden's regeneration command runs under seed 0."""
    configs = [str(path) for path in example_configs()]
    stream = run_process("render", *configs, "--stdout", PYTHONHASHSEED="4242")
    assert stream.returncode == 0, stream.stderr
    here = run_gpustack("render", *configs, "--stdout")
    assert here.returncode == 0, here.stderr
    assert stream.stdout == here.stdout


# (e) atomic writes and pruning ----------------------------------------------------------------


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) below `folder`."""
    return {
        str(path.relative_to(folder)): None if path.is_dir() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
    }


@pytest.fixture
def previous_render(tmp_path: Path) -> Path:
    """out/ holding a render of the kubeadm example and the user's own files beside it."""
    out = tmp_path / "out"
    result = run_gpustack("render", str(EXAMPLES["kubeadm"]), "-o", str(out))
    assert result.returncode == 0, result.stderr
    folder = out / "kubeadm-lab"
    (folder / "NOTES.md").write_text("Runbook for the lab cluster.\n")
    (folder / "node" / "site-join-patch.yaml").write_text("# our own discovery settings\n")
    return out


def derived_config(tmp_path: Path, example: str, overrides: str) -> Path:
    config = tmp_path / f"{example}-changed.yaml"
    config.write_text(f"extends: {example_base(tmp_path, example)}\n{overrides}")
    return config


def test_a_config_error_leaves_the_old_output_byte_identical(
    previous_render: Path, tmp_path: Path
) -> None:
    before = snapshot(previous_render)
    config = derived_config(tmp_path, "kubeadm", "dcgmExporter: {interval: soon}\n")
    result = run_gpustack("render", str(config), "-o", str(previous_render))
    assert result.returncode == 2 and "dcgmExporter.interval" in result.stderr
    assert "Traceback" not in result.stderr
    assert snapshot(previous_render) == before


def test_a_render_with_invalid_objects_leaves_the_old_output_byte_identical(
    previous_render: Path, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every render is validated before it is written; a finding there writes nothing. The
    finding is injected: the examples themselves render valid objects."""
    import gpustack.validation
    from gpustack.findings import Finding

    def invalid(objects: list[dict[str, Any]], kubernetes_version: str) -> list[Finding]:
        return [
            Finding(
                "schema",
                "error",
                "injected: spec.replicas is not allowed here",
                object=identity(objects[-1]),
            )
        ]

    monkeypatch.setattr(gpustack.validation, "validate_objects", invalid)
    before = snapshot(previous_render)
    config = derived_config(tmp_path, "kubeadm", "devicePlugin: {migStrategy: single}\n")
    result = cli("render", config, "-o", previous_render)
    assert result.exit_code == 1, result.output
    assert "injected: spec.replicas is not allowed here" in result.output
    assert snapshot(previous_render) == before


def test_rerendering_without_a_component_prunes_exactly_its_files(
    previous_render: Path, tmp_path: Path
) -> None:
    folder = previous_render / "kubeadm-lab"
    before = snapshot(previous_render)
    config = derived_config(
        tmp_path, "kubeadm", "devicePlugin: {enabled: false}\ngfd: {enabled: false}\n"
    )
    _, full = render_example(EXAMPLES["kubeadm"])
    smaller = pipeline.files(pipeline.render(load_stack(config)))
    stale = set(pipeline.files(full)) - set(smaller)
    assert stale, "disabling the device plugin must remove its files"

    result = run_gpustack("render", str(config), "-o", str(previous_render))
    assert result.returncode == 0, result.stderr

    user_files = {"NOTES.md", "node/site-join-patch.yaml"}
    assert set(committed_files(folder)) == set(smaller) | user_files
    assert {name: (folder / name).read_bytes() for name in smaller} == smaller
    for name in user_files:
        assert (folder / name).read_bytes() == before[f"kubeadm-lab/{name}"]


def test_a_users_file_with_a_name_gpustack_wants_is_refused_not_overwritten(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "out" / "kubeadm-lab"
    folder.mkdir(parents=True)
    own = folder / "namespace-gpu-system.yaml"
    own.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: gpu-system}\n")
    before = snapshot(tmp_path / "out")

    result = run_gpustack("render", str(EXAMPLES["kubeadm"]), "-o", "out", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr == (
        "error: out/kubeadm-lab/namespace-gpu-system.yaml: exists and was not written by "
        "gpustack (no marker on its first line); move it away, render elsewhere, or pass "
        "--force to overwrite it\n"
    )
    assert snapshot(tmp_path / "out") == before


# (f) installed, outside the repository ------------------------------------------------------


def pip_install_target(source: Path, target: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def run_installed(target: Path, cwd: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """Run with only the installed package on the path; its dependencies come from this env."""
    return subprocess.run(
        list(command),
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(target)},
    )


# One interpreter with only the installed package on its path: the gpustack it imports, then
# commands run by gpustack.cli.run (what both launchers call), each one's exit code and output.
INSTALLED_PROGRAM = """\
import contextlib, io, json, sys
import gpustack
from gpustack.cli import run
runs = []
for arguments in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(arguments)
    runs.append([code, out.getvalue(), err.getvalue()])
print(json.dumps({"file": gpustack.__file__, "runs": runs}))
"""


def run_in_installed_package(
    target: Path, cwd: Path, *commands: list[str]
) -> list[subprocess.CompletedProcess[str]]:
    """COMMANDS run one after the other in one interpreter that imports the installed package
    (checked here): each one's exit code, stdout and stderr."""
    done = run_installed(
        target, cwd, sys.executable, "-c", INSTALLED_PROGRAM, json.dumps(list(commands))
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert Path(report["file"]).parent == target / "gpustack", report["file"]
    return [
        subprocess.CompletedProcess(command, *run)
        for command, run in zip(commands, report["runs"], strict=True)
    ]


def check_data(target: Path) -> None:
    """The installed package holds the data files."""
    data = target / "gpustack" / "_data"
    for folder, expected in (
        ("profiles", ROOT / "profiles"),
        ("schemas", ROOT / "schemas"),
        ("examples", ROOT / "examples"),
    ):
        assert committed_files(data / folder) == committed_files(expected), folder


def check_render(target: Path, cwd: Path, gpustack: list[str]) -> None:
    """`gpustack render` with no config renders the embedded example into ./out."""
    rendered_files = run_installed(target, cwd, *gpustack, "render")
    assert rendered_files.returncode == 0, rendered_files.stderr
    _, embedded = render_example(EXAMPLES["kubeadm"])
    assert committed_files(cwd / "out" / "kubeadm-lab") == pipeline.files(embedded)


def check_profiles_list(listed: subprocess.CompletedProcess[str]) -> None:
    """What `gpustack profiles list` showed: every shipped profile."""
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == sorted(
        path.stem for path in (ROOT / "profiles").glob("*.yaml")
    )


def check_profiles_show(shown: subprocess.CompletedProcess[str]) -> None:
    """What `gpustack profiles show rke2` showed: the profile, as YAML."""
    assert shown.returncode == 0, shown.stderr
    profile = YAML(typ="safe").load(shown.stdout)
    assert profile["metadata"]["name"] == "rke2"
    assert profile["facts"]["runtime"]["runtimeClass"] == "required"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """gpustack installed from the source tree, not editable (pip builds the wheel and installs
    it, as README's quick start does), once for the tests that run it; they only read it."""
    target = tmp_path_factory.mktemp("installed") / "site"
    pip_install_target(ROOT, target)
    return target


def test_the_installed_wheel_works_outside_the_repository(installed: Path, tmp_path: Path) -> None:
    """The installed package, outside the repository: its data files, `python -m gpustack`
    rendering the embedded example, and the profile commands (in one interpreter, with the
    package imported from where pip put it)."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    check_data(installed)
    check_render(installed, cwd, [sys.executable, "-m", "gpustack"])
    listed, shown = run_in_installed_package(
        installed, cwd, ["profiles", "list"], ["profiles", "show", "rke2"]
    )
    check_profiles_list(listed)
    check_profiles_show(shown)


def test_the_console_script_of_the_installed_wheel_works(installed: Path, tmp_path: Path) -> None:
    """The script pip wrote starts the same gpustack.cli:main as `python -m gpustack` above
    (the package and its data are that test's): a command that writes files into the working
    folder, and one that takes arguments and prints."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    script = installed / "bin" / "gpustack"
    assert script.is_file()
    for launcher in (script, installed / "gpustack" / "__main__.py"):
        assert "from gpustack.cli import main" in launcher.read_text(), launcher
    check_render(installed, cwd, [str(script)])
    check_profiles_show(run_installed(installed, cwd, str(script), "profiles", "show", "rke2"))
