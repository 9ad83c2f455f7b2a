"""`gpustack import`: a ClusterPolicy, the GPU Operator's or the device-plugin chart's values and
device plugin configs become a commented gpustack config, each input field reported; the
config renders, validates and lints clean, and importing twice gives the same bytes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SHARED, read_manifests, run_gpustack
from ruamel.yaml import YAML

CASES = ROOT / "tests" / "cases" / "import"
REFS = SHARED / "refs"


def run_import(tmp_path: Path, *args: object) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Import into tmp_path/imported.yaml; the config, the JSON report, and the config's text."""
    target = tmp_path / "imported.yaml"
    done = run_gpustack("import", *args, "-o", target, "--output", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = target.read_text()
    report = json.loads(done.stderr[: done.stderr.rindex("}") + 1])
    return YAML(typ="safe").load(text), report, text


def outcome(report: dict[str, Any], field: str) -> dict[str, Any]:
    found = [entry for entry in report["entries"] if entry["field"] == field]
    assert found, f"{field} is not in the report"
    return found[-1]


def renders_clean(tmp_path: Path) -> None:
    """The imported config renders, validates and lints clean through the real CLI."""
    done = run_gpustack("render", "imported.yaml", "-o", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    checked = run_gpustack("check", "imported.yaml", "-o", "out", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "error" not in checked.stderr


def test_mig_on_rke2_from_kubectl_output(tmp_path: Path) -> None:
    config, report, text = run_import(tmp_path, CASES / "mig-rke2.yaml")
    # RKE2's containerd paths in the toolkit's environment name the platform.
    assert config["platform"]["profile"] == "rke2"
    assert config["devicePlugin"]["migStrategy"] == "mixed"
    assert config["migManager"] == {"defaultConfig": "all-1g.10gb", "withReboot": True}
    assert config["dcgmExporter"]["interval"] == "30s"
    assert config["dcgmExporter"]["monitorLabels"] == {"release": "kube-prometheus-stack"}
    # The host's driver is what `auto` means on RKE2: nothing to write.
    assert "driver" not in config
    assert outcome(report, "spec.driver.enabled")["outcome"] == "default"
    assert "# from ClusterPolicy spec.mig.strategy" in text
    # kubectl's additions are reported, not read as settings.
    assert outcome(report, "metadata.managedFields")["outcome"] == "dropped"
    assert outcome(report, "status.state")["outcome"] == "dropped"
    # The operator's toolkit config path is RKE2's template: the profile keeps its own.
    toolkit = outcome(report, "spec.toolkit.env[0]")
    assert toolkit["outcome"] == "dropped" and "facts.runtime.toolkit" in toolkit["why"]
    assert outcome(report, "spec.migManager.config.name")["outcome"] == "dropped"
    assert report["entries"][0]["location"].endswith("mig-rke2.yaml:5:15")
    renders_clean(tmp_path)


@pytest.mark.parametrize(
    ("config_path", "profile"),
    [
        ("/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl", "k3s"),
        ("/etc/containerd/config.toml", None),  # the shared /run/k3s socket alone tells neither
    ],
)
def test_k3s_is_told_from_rke2_by_its_containerd_config(
    tmp_path: Path, config_path: str, profile: str | None
) -> None:
    source = (CASES / "mig-rke2.yaml").read_text()
    rke2_path = "/var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl"
    assert rke2_path in source and "/run/k3s/containerd/containerd.sock" in source
    (tmp_path / "policy.yaml").write_text(source.replace(rke2_path, config_path))
    done = run_gpustack("import", "policy.yaml", cwd=tmp_path)
    if profile is None:
        assert done.returncode == 2
        assert "nothing in the inputs names the platform" in done.stderr
        assert "--profile" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert f"profile: {profile}" in done.stdout


def test_time_slicing_from_the_named_config_map(tmp_path: Path) -> None:
    config, report, _ = run_import(tmp_path, CASES / "time-slicing.yaml", "--profile", "kubeadm")
    sharing = config["devicePlugin"]["sharing"]
    assert sharing == {"strategy": "time-slicing", "replicas": 8, "renameByDefault": True}
    assert config["driver"]["mode"] == "container"
    assert config["driver"]["version"] == "580.95.05"
    # maxParallelUpgrades is how many nodes upgrade at once; the operator's maxUnavailable is not.
    assert config["driver"]["upgrade"]["maxUnavailable"] == 2
    # The operator's upgrade controller drains every pod but DaemonSets'; gpustack's drain is
    # k8s-driver-manager's, which without a pod selector stops at the driver pod: not carried
    # over, with why. The timeout and emptyDir eviction still apply to the GPU pods' eviction.
    assert config["driver"]["upgrade"]["drain"] == {"timeoutSeconds": 600, "deleteEmptyDir": True}
    enable = outcome(report, "spec.driver.upgradePolicy.drain.enable")
    assert enable["outcome"] == "dropped"
    assert "does not set DaemonSet pods aside" in enable["why"]
    assert outcome(report, "spec.driver.upgradePolicy.maxUnavailable")["outcome"] == "dropped"
    assert config["nodes"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
    ]
    # The other config, which nodes would pick by label, is reported as not carried over.
    other = outcome(report, "data.a100")
    assert other["outcome"] == "dropped" and "nvidia.com/device-plugin.config" in other["why"]
    assert outcome(report, "data.any")["outcome"] == "mapped"
    renders_clean(tmp_path)


def test_mps_from_the_device_plugin_chart(tmp_path: Path) -> None:
    config, report, _ = run_import(tmp_path, CASES / "mps-values.yaml", "--profile", "kubeadm")
    assert config["devicePlugin"]["sharing"] == {"strategy": "mps", "replicas": 10}
    assert config["devicePlugin"]["resources"] == {"requests": {"cpu": "20m", "memory": "96Mi"}}
    assert outcome(report, "migStrategy")["outcome"] == "default"
    assert outcome(report, "image.tag")["target"] == "devicePlugin.version"
    renders_clean(tmp_path)


def test_cdi_off_means_envvar(tmp_path: Path) -> None:
    config, report, _ = run_import(tmp_path, CASES / "cdi-off.yaml", "--profile", "kubeadm")
    assert config["devicePlugin"]["deviceListStrategy"] == "envvar"
    assert config["toolkit"] == {"enabled": True, "version": "v1.19.0"}
    assert config["nfd"]["mode"] == "external"
    assert outcome(report, "cdi.enabled")["target"] == "devicePlugin.deviceListStrategy"
    renders_clean(tmp_path)


def test_precompiled_is_reported_not_guessed(tmp_path: Path) -> None:
    config, report, _ = run_import(tmp_path, CASES / "precompiled.yaml", "--profile", "kubeadm")
    # No kernel in the ClusterPolicy: gpustack cannot name the one precompiled image.
    assert "precompiled" not in config["driver"]
    precompiled = outcome(report, "spec.driver.usePrecompiled")
    assert precompiled["outcome"] == "dropped" and "driver.kernelVersion" in precompiled["why"]
    assert outcome(report, "spec.driver.kernelModuleType")["outcome"] == "dropped"
    # A driver branch is not a driver version gpustack can tag an image with.
    assert outcome(report, "spec.driver.version")["outcome"] == "dropped"
    assert config["driver"]["upgrade"]["drain"] == {
        "enabled": True,
        "timeoutSeconds": 900,
        "podSelector": "nvidia.com/gpu.workload=true",
    }
    renders_clean(tmp_path)


SELECTOR = "nvidia.com/gpu.workload=true"  # precompiled.yaml's DRAIN_POD_SELECTOR_LABEL


@pytest.mark.parametrize(
    ("written", "seconds"), [("0s", 0), ("300s", 300), ("15m", 900), ("1m30s", 90), ("120", 120)]
)
def test_a_drain_timeout_written_as_the_operator_writes_it(
    tmp_path: Path, written: str, seconds: int
) -> None:
    """The operator's driver-manager env spells the timeout as a Go duration (`0s` in its
    rendered driver DaemonSet, gpu-operator v26.7.0), as the driver manager reads it."""
    source = (CASES / "precompiled.yaml").read_text()
    assert 'value: "900"' in source
    (tmp_path / "policy.yaml").write_text(source.replace('value: "900"', f'value: "{written}"'))
    config, report, _ = run_import(tmp_path, tmp_path / "policy.yaml", "--profile", "kubeadm")
    timeout = outcome(report, "spec.driver.manager.env[2]")
    if seconds == 300:  # gpustack's default: read, and left out of the config
        assert timeout["outcome"] == "default"
        assert config["driver"]["upgrade"]["drain"] == {"enabled": True, "podSelector": SELECTOR}
    else:
        assert timeout["outcome"] == "mapped"
        assert config["driver"]["upgrade"]["drain"] == {
            "enabled": True,
            "timeoutSeconds": seconds,
            "podSelector": SELECTOR,
        }


@pytest.mark.parametrize("written", ["1500ms", "90x", "-5s"])
def test_a_drain_timeout_that_is_no_whole_number_of_seconds_is_reported_not_guessed(
    tmp_path: Path, written: str
) -> None:
    source = (CASES / "precompiled.yaml").read_text()
    (tmp_path / "policy.yaml").write_text(source.replace('value: "900"', f'value: "{written}"'))
    config, report, _ = run_import(tmp_path, tmp_path / "policy.yaml", "--profile", "kubeadm")
    timeout = outcome(report, "spec.driver.manager.env[2]")
    assert timeout["outcome"] == "dropped" and "whole number of seconds" in timeout["why"]
    assert config["driver"]["upgrade"]["drain"] == {"enabled": True, "podSelector": SELECTOR}


def test_private_registry_and_unknown_fields(tmp_path: Path) -> None:
    config, report, _ = run_import(
        tmp_path, CASES / "private-registry.yaml", "--profile", "kubeadm"
    )
    assert config["images"] == {
        "registry": "registry.example.com:5000/mirror",
        "pullSecrets": ["mirror-pull"],
    }
    assert config["devicePlugin"]["version"] == "v0.19.0"
    assert config["devicePlugin"]["resources"] == {"requests": {"cpu": "50m"}}
    unknown = [entry for entry in report["entries"] if entry["outcome"] == "unknown"]
    assert [entry["field"] for entry in unknown] == ["spec.driverz.enabled"]
    assert unknown[0]["location"].endswith("private-registry.yaml:27:14")
    renders_clean(tmp_path)


def test_check_names_each_difference(tmp_path: Path) -> None:
    done = run_gpustack(
        "import",
        CASES / "private-registry.yaml",
        "--profile",
        "kubeadm",
        "--check",
        "--output",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    differences = {each["aspect"]: each for each in json.loads(done.stderr)["differences"]}
    # The operator pulls the images the ClusterPolicy leaves at nvcr.io from there; gpustack
    # pulls every image from the mirror.
    assert differences["validator image"] == {
        "aspect": "validator image",
        "operator": "nvcr.io/nvidia/gpu-operator:v26.7.0",
        "gpustack": "registry.example.com:5000/mirror/nvidia/gpu-operator:v26.7.0",
        "stops": False,
        "replaced": False,
    }
    assert differences["exporter counters"]["operator"] == "ConfigMap custom-counters"
    # The operator's GFD keeps its own version; gpustack's runs the plugin's.
    assert differences["gfd image"]["gpustack"].endswith("k8s-device-plugin:v0.19.0")
    assert "devicePlugin image" not in differences


def test_profile_is_guessed_or_asked_for(tmp_path: Path) -> None:
    done = run_gpustack("import", CASES / "gke.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert "--profile gke-cos or --profile gke-ubuntu" in done.stderr
    done = run_gpustack("import", CASES / "cdi-off.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "give --profile" in done.stderr
    assert done.stdout == ""


def test_bad_inputs_are_located_and_never_quoted(tmp_path: Path) -> None:
    secret = "hunter2-not-for-logs"
    (tmp_path / "deployment.yaml").write_text(
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {secret}\n"
    )
    done = run_gpustack("import", "deployment.yaml", "--profile", "kubeadm", cwd=tmp_path)
    assert done.returncode == 2
    assert "deployment.yaml:2:7: kind:" in done.stderr
    assert secret not in done.stderr and "Traceback" not in done.stderr
    (tmp_path / "list.yaml").write_text(f"- {secret}\n")
    done = run_gpustack("import", "list.yaml", "--profile", "kubeadm", cwd=tmp_path)
    assert done.returncode == 2 and "list.yaml:1:1" in done.stderr
    assert secret not in done.stderr
    (tmp_path / "broken.yaml").write_text("driver: {enabled: [\n")
    done = run_gpustack("import", "broken.yaml", "--profile", "kubeadm", cwd=tmp_path)
    assert done.returncode == 2 and "broken.yaml:2:1" in done.stderr


def test_output_file_is_not_overwritten_without_force(tmp_path: Path) -> None:
    target = tmp_path / "lab.yaml"
    target.write_text("kept\n")
    args = ("import", CASES / "cdi-off.yaml", "--profile", "kubeadm", "-o", target)
    done = run_gpustack(*args, cwd=tmp_path)
    assert done.returncode == 2 and "--force" in done.stderr
    assert target.read_text() == "kept\n"
    done = run_gpustack(*args, "--force", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "name: lab" in target.read_text()


def test_importing_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    """Two runs in two processes (each with a hash seed of its own): `python -m gpustack` as a
    user runs it (the config on stdout, the report on stderr), and the same command in this
    process."""
    inputs = [CASES / "time-slicing.yaml", CASES / "private-registry.yaml"]
    command = ["import", *map(str, inputs), "--profile", "kubeadm"]
    runs = [
        subprocess.run(
            [sys.executable, "-m", "gpustack", *command],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
        ),
        run_gpustack(*command, cwd=tmp_path),
    ]
    assert runs[0].returncode == 0, runs[0].stderr
    assert runs[1].returncode == 0, runs[1].stderr
    assert runs[0].stdout == runs[1].stdout and runs[0].stderr == runs[1].stderr
    assert runs[0].stdout.startswith("# Written by `gpustack import`")
    assert "mapped (" in runs[0].stderr


UPSTREAM = [
    # (file under refs/, extra arguments, mapped fields the sample must give)
    (
        "gpu-operator/config__samples__v1_clusterpolicy.yaml",
        (),
        {"platform.profile": "openshift", "devicePlugin.migStrategy": "single"},
    ),
    (
        "gpu-operator/bundle__csv-alm-example__clusterpolicy-openshift.yaml",
        (),
        {"platform.profile": "openshift", "devicePlugin.migStrategy": "single"},
    ),
    (
        "openshift/gitops-catalog__gpu-operator-certified__instance__base__cluster-policy.yaml",
        (),
        {
            "platform.profile": "openshift",
            "nodes.taints": [{"key": "nvidia-gpu-only", "effect": "NoSchedule"}],
            "validator.pluginWorkload": True,
        },
    ),
    (
        "gpu-operator/helm__values.yaml",
        ("--profile", "kubeadm"),
        {"driver.mode": "container", "devicePlugin.migStrategy": "single"},
    ),
    ("k8s-device-plugin/helm-values.yaml", ("--profile", "kubeadm"), {"gfd.enabled": False}),
]


def _field(config: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        config = config[part]
    return config


@pytest.mark.shared
@pytest.mark.parametrize(("sample", "args", "fields"), UPSTREAM, ids=[u[0] for u in UPSTREAM])
def test_upstream_samples_import_and_render(
    tmp_path: Path, sample: str, args: tuple[str, ...], fields: dict[str, Any]
) -> None:
    config, report, _ = run_import(tmp_path, REFS / sample, *args)
    for dotted, value in fields.items():
        assert _field(config, dotted) == value, dotted
    assert not [entry for entry in report["entries"] if entry["outcome"] == "unknown"]
    renders_clean(tmp_path)


def test_a_plugin_config_file_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "sliced.yaml").write_text(
        "version: v1\nflags:\n  migStrategy: single\n  failOnInitError: false\n"
        "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 3\n"
    )
    config, report, _ = run_import(tmp_path, tmp_path / "sliced.yaml", "--profile", "kubeadm")
    assert config["devicePlugin"] == {
        "migStrategy": "single",
        "sharing": {"strategy": "time-slicing", "replicas": 3},
    }
    # A flag gpustack writes itself is named, with its line.
    flag = outcome(report, "flags.failOnInitError")
    assert flag["outcome"] == "dropped" and flag["location"].endswith("sliced.yaml:4:20")
    renders_clean(tmp_path)


def test_the_text_report_groups_each_field(tmp_path: Path) -> None:
    done = run_gpustack("import", CASES / "precompiled.yaml", "--profile", "kubeadm", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].endswith("precompiled.yaml for profile kubeadm (given with --profile)")
    assert "mapped (6):" in lines and "not carried over (6):" in lines
    # What the ClusterPolicy leaves out is the operator's default, said as such, without a
    # place in a file.
    assert lines[1].startswith("what the inputs leave out: GPU Operator v26.7.0's defaults (")
    assert "  GPU Operator v26.7.0's default migManager.enabled -> migManager.enabled" in lines
    assert any(
        line.endswith(
            "precompiled.yaml:11:14: ClusterPolicy spec.driver.version: not a driver "
            "version such as 595.91.07 (a digest or a custom tag): gpustack names the "
            "driver image by version and node OS"
        )
        for line in lines
    )
    # The config on stdout says where each field came from.
    assert "mode: container  # from ClusterPolicy spec.driver.enabled" in done.stdout


def test_the_release_a_clusterpolicy_is_labelled_with_gives_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "old.yaml").write_text(
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: cluster-policy\n"
        "  labels:\n    app.kubernetes.io/version: v25.3.0\nspec:\n  driver:\n    enabled: true\n"
    )
    config, report, _ = run_import(tmp_path, tmp_path / "old.yaml", "--profile", "kubeadm")
    assert report["operatorVersion"] == "v25.3.0"
    assert report["operatorVersionReason"] == "the ClusterPolicy's label app.kubernetes.io/version"
    assert outcome(report, "metadata.labels")["outcome"] == "default"
    # v25.3.0's own images, which the ClusterPolicy leaves out (its values.yaml).
    assert config["toolkit"] == {"version": "v1.17.5"}
    assert config["driver"]["version"] == "570.124.06"
    # The `--operator-version` given wins over the label.
    config, report, _ = run_import(
        tmp_path,
        tmp_path / "old.yaml",
        "--profile",
        "kubeadm",
        "--operator-version",
        "v26.7.0",
        "--force",
    )
    assert report["operatorVersion"] == "v26.7.0" and "toolkit" not in config


def test_check_of_the_device_plugin_chart_names_what_gpustack_adds(tmp_path: Path) -> None:
    done = run_gpustack(
        "import",
        CASES / "mps-values.yaml",
        "--profile",
        "kubeadm",
        "--check",
        "--output",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    differences = {each["aspect"]: each for each in json.loads(done.stderr)["differences"]}
    # The chart ran the plugin and GFD only; gpustack's stack also runs the DCGM exporter.
    assert differences["dcgmExporter image"]["operator"] == "not run"
    assert differences["dcgmExporter image"]["gpustack"].startswith(
        "nvcr.io/nvidia/k8s/dcgm-exporter:"
    )
    assert "devicePlugin image" not in differences and "plugin sharing" not in differences


def test_a_gpustack_config_is_not_an_input(tmp_path: Path) -> None:
    done = run_gpustack("import", ROOT / "examples" / "kubeadm.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert "kubeadm.yaml:" in done.stderr and "is a gpustack config already" in done.stderr


def test_a_later_input_overrides_an_earlier_one(tmp_path: Path) -> None:
    # A base ClusterPolicy and a kustomize patch of it, as a GitOps repository keeps them.
    (tmp_path / "base.yaml").write_text(
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: gpu-cluster-policy\n"
        "spec:\n  mig:\n    strategy: single\n  devicePlugin:\n    config:\n      name: ''\n"
    )
    (tmp_path / "patch.yaml").write_text(
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: gpu-cluster-policy\n"
        "spec:\n  mig:\n    strategy: mixed\n"
    )
    config, report, text = run_import(
        tmp_path, tmp_path / "base.yaml", tmp_path / "patch.yaml", "--profile", "kubeadm"
    )
    assert config["devicePlugin"]["migStrategy"] == "mixed"
    first, second = [entry for entry in report["entries"] if entry["field"] == "spec.mig.strategy"]
    assert first["location"].endswith("base.yaml:7:15") and first["outcome"] == "dropped"
    assert first["why"] == "overridden by ClusterPolicy spec.mig.strategy"
    assert second["location"].endswith("patch.yaml:7:15") and second["outcome"] == "mapped"
    assert text.count("# from ClusterPolicy spec.mig.strategy") == 1
    renders_clean(tmp_path)


# ---------------------------------------------------------------------------------------------
# What an input leaves out is the operator's default, of the release it was written for.


def rendered(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The imported config's DaemonSets, rendered as `gpustack render` writes them."""
    done = run_gpustack("render", "imported.yaml", "--stdout", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    objects = [each for each in read_manifests(done.stdout) if each]
    return {
        each["metadata"]["name"]: each["spec"]["template"]["spec"]
        for each in objects
        if each["kind"] == "DaemonSet"
    }


def image_of(pods: dict[str, dict[str, Any]], name: str) -> str:
    image: str = pods[name]["containers"][0]["image"]
    return image


def test_a_clusterpolicy_with_few_fields_runs_what_the_operator_runs(tmp_path: Path) -> None:
    """A ClusterPolicy holds what its author changed; the operator runs its driver, toolkit and
    the rest by default, and so must the imported config."""
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: gpu-cluster-policy\n"
        "spec:\n  driver:\n    version: 580.95.05\n"
    )
    done = run_gpustack(
        "import",
        "policy.yaml",
        "--profile",
        "kubeadm",
        "--check",
        "-o",
        "imported.yaml",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "STOPS RUNNING" not in done.stderr and "check failed" not in done.stderr
    pods = rendered(tmp_path)
    assert image_of(pods, "nvidia-driver-daemonset").startswith("nvcr.io/nvidia/driver:580.95.05-")
    assert "nvidia-container-toolkit-daemonset" in pods
    assert "nvidia-mig-manager" in pods  # the operator runs it on MIG-capable nodes
    assert "nvidia-device-plugin" in pods and "nvidia-operator-validator" in pods
    # The operator's CDI default (on): the toolkit runs its runtime in CDI mode.
    toolkit_env = pods["nvidia-container-toolkit-daemonset"]["containers"][0]["env"]
    assert {"name": "NVIDIA_CONTAINER_RUNTIME_MODE", "value": "cdi"} in toolkit_env
    # The report says which release's defaults, and which came from them.
    assert (
        "what the inputs leave out: GPU Operator v26.7.0's defaults (the inputs do not name"
        in done.stderr
    )
    assert "  GPU Operator v26.7.0's default driver.enabled -> driver.mode" in done.stderr
    config = (tmp_path / "imported.yaml").read_text()
    assert re.search(
        r"\n  mode: container +# from GPU Operator v26.7.0's default driver.enabled\n", config
    )
    # The comments of a section line up.
    assert "\n  mode: container     # from" in config and "\n  version: 580.95.05  # from" in config


def test_check_fails_when_a_component_the_operator_runs_would_stop(tmp_path: Path) -> None:
    """On GKE the operator's node status exporter runs; gpustack's reports the validator's
    checks, and its validator cannot find GKE's driver: the exporter would stop."""
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: p\nspec:\n"
        "  nodeStatusExporter:\n    enabled: true\n"
    )
    args = ("import", "policy.yaml", "--profile", "gke-cos", "--check", "-o", "imported.yaml")
    done = run_gpustack(*args, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert (
        "  nodeStatusExporter image: operator nvcr.io/nvidia/gpu-operator:v26.7.0; gpustack not "
        "run (STOPS RUNNING)" in lines
    )
    assert any(line.startswith("check failed: nodeStatusExporter would stop") for line in lines)
    # What GKE runs itself (its device plugin, its driver) is said, and is no failure.
    assert (
        "  devicePlugin image: operator nvcr.io/nvidia/k8s-device-plugin:v0.20.0; gpustack not "
        "run (the platform runs its own, or needs none)" in lines
    )
    # The config is written all the same, for the user to change; the field is reported.
    assert "nodeStatusExporter" not in (tmp_path / "imported.yaml").read_text()
    assert "policy.yaml:7:14: ClusterPolicy spec.nodeStatusExporter.enabled: the node status" in (
        done.stderr
    )
    done = run_gpustack(*args, "--force", "--output", "json", cwd=tmp_path)
    differences = json.loads(done.stderr[: done.stderr.rindex("}") + 1])["differences"]
    assert [each["aspect"] for each in differences if each["stops"]] == ["nodeStatusExporter image"]


def test_an_older_charts_values_import_and_render(tmp_path: Path) -> None:
    """GPU Operator v25.3.x pins images by distribution-suffixed tags; its validator is an image
    of its own, which gpustack's validator DaemonSet does not run."""
    config, report, _ = run_import(
        tmp_path,
        CASES / "old-chart-values.yaml",
        "--profile",
        "kubeadm",
        "--operator-version",
        "v25.3.4",
    )
    assert config["toolkit"] == {"version": "v1.17.8"}
    assert config["migManager"]["version"] == "v0.12.3"
    assert config["driver"]["version"] == "570.172.08"
    # v25.3.4's own defaults for what the file leaves out (its values.yaml).
    assert config["driver"]["manager"] == {"version": "v0.8.1"}
    assert config["devicePlugin"]["version"] == "v0.17.4"
    assert config["devicePlugin"]["deviceListStrategy"] == "envvar"  # cdi.enabled false then
    exporter = outcome(report, "dcgmExporter.version")
    assert exporter["outcome"] == "dropped" and "4.4.1-4.6.0" in exporter["why"]
    validator = outcome(report, "validator.version")
    assert validator["outcome"] == "dropped" and "v25.10.0" in validator["why"]
    assert "validator" not in config
    assert report["operatorVersion"] == "v25.3.4"
    renders_clean(tmp_path)
    pods = rendered(tmp_path)
    assert image_of(pods, "nvidia-container-toolkit-daemonset").endswith(
        "container-toolkit:v1.17.8"
    )
    assert image_of(pods, "nvidia-operator-validator").endswith("gpu-operator:v26.7.0")


def test_a_keyless_toleration_is_said_and_the_others_carried_over(tmp_path: Path) -> None:
    config, report, _ = run_import(
        tmp_path, CASES / "old-chart-values.yaml", "--profile", "kubeadm"
    )
    assert config["nodes"]["taints"] == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    ]
    keyless = outcome(report, "daemonsets.tolerations[0]")
    assert keyless["outcome"] == "dropped" and "without a key" in keyless["why"]
    assert keyless["location"].endswith("old-chart-values.yaml:15:5")
    assert outcome(report, "daemonsets.tolerations[1]")["outcome"] == "mapped"


def test_an_unknown_operator_release_is_refused(tmp_path: Path) -> None:
    done = run_gpustack(
        "import",
        CASES / "cdi-off.yaml",
        "--profile",
        "kubeadm",
        "--operator-version",
        "v9.9.9",
        cwd=tmp_path,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "--operator-version: not a GPU Operator release the importer knows" in done.stderr
    assert "v24.3.0" in done.stderr and "v26.7.0" in done.stderr


def test_a_value_gpustack_refuses_is_reported_at_its_field_never_printed(tmp_path: Path) -> None:
    secret = "s3cr3t-token"
    (tmp_path / "values.yaml").write_text(
        "toolkit:\n"
        f"  repository: https://ci:{secret}@registry.example.com/nvidia/k8s\n"
        "  version: latest\n"
        "migManager:\n"
        f"  version: v0.12.3-{secret}\n"
    )
    done = run_gpustack(
        "import",
        "values.yaml",
        "--profile",
        "kubeadm",
        "-o",
        "imported.yaml",
        "--check",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert secret not in done.stderr and "Traceback" not in done.stderr
    # --check names the operator's image without the value it cannot vouch for.
    assert "  toolkit image: operator (not shown: not a value gpustack takes); gpustack " in (
        done.stderr
    )
    assert (
        "values.yaml:2:15: GPU Operator values toolkit.repository: not a value gpustack's "
        "images.registry takes" in done.stderr
    )
    assert "values.yaml:3:12: GPU Operator values toolkit.version: not a value" in done.stderr
    assert "values.yaml:5:12: GPU Operator values migManager.version: not a value" in done.stderr
    assert secret not in (tmp_path / "imported.yaml").read_text()
    renders_clean(tmp_path)


def test_a_plugin_config_file_name_cannot_write_keys_into_the_config(tmp_path: Path) -> None:
    name = "sliced\nnodes:\n  selector: {pwned: 'true'}\n#.yaml"
    (tmp_path / name).write_text(
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
        "      replicas: 3\n"
    )
    done = run_gpustack(
        "import",
        name,
        "--profile",
        "kubeadm",
        "-o",
        "imported.yaml",
        "--output",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "imported.yaml").read_text()
    config = YAML(typ="safe").load(text)
    assert "nodes" not in config and "pwned" not in text.replace("#", "\n#").split("\n#")[0]
    assert config["devicePlugin"]["sharing"] == {"strategy": "time-slicing", "replicas": 3}
    # Every line the name reached holds it in a comment; the report names it on one line too.
    assert all(
        line.index("pwned") > line.index("#") for line in text.splitlines() if "pwned" in line
    )
    report = json.loads(done.stderr[: done.stderr.rindex("}") + 1])
    assert all("\n" not in entry["input"] for entry in report["entries"])
    # The text report names the file on its one line.
    done = run_gpustack("import", name, "--profile", "kubeadm", cwd=tmp_path)
    assert done.stderr.splitlines()[0] == (
        "imported sliced?nodes:?  selector: {pwned: 'true'}?#.yaml for profile kubeadm "
        "(given with --profile)"
    )
    assert not [line for line in done.stderr.splitlines() if line.startswith("nodes:")]
    renders_clean(tmp_path)


# Every GPU Operator release from v24.3 to v26.7 (NVIDIA/gpu-operator tags), whose chart values
# and sample ClusterPolicy the shared references hold.
RELEASES = [
    "v24.3.0",
    "v24.6.0",
    "v24.6.1",
    "v24.6.2",
    "v24.9.0",
    "v24.9.1",
    "v24.9.2",
    "v25.3.0",
    "v25.3.1",
    "v25.3.2",
    "v25.3.3",
    "v25.3.4",
    "v25.10.0",
    "v25.10.1",
    "v26.3.0",
    "v26.3.1",
    "v26.3.2",
    "v26.3.3",
    "v26.7.0",
]
OPERATOR_RELEASES = REFS / "gpu-operator" / "releases"


@pytest.mark.shared
def test_the_importer_knows_every_release_of_the_references() -> None:
    from gpustack.adopt import releases

    found = {path.name.split("-")[0] for path in OPERATOR_RELEASES.glob("v*-values.yaml")}
    assert found == set(RELEASES)
    assert list(releases.releases()) == RELEASES


def _tag(image: str) -> str:
    return image.rpartition(":")[2]


@pytest.mark.shared
@pytest.mark.parametrize("kind", ["values", "clusterpolicy"])
@pytest.mark.parametrize("release", RELEASES)
def test_every_operator_release_imports_and_renders(
    tmp_path: Path, release: str, kind: str
) -> None:
    """Each release's own chart values (profile given) and sample ClusterPolicy (OpenShift's
    driver toolkit names the platform) import with nothing unknown, render, validate and lint
    clean, and run every component the operator runs: the checked import exits 0."""
    source = OPERATOR_RELEASES / f"{release}-{kind}.yaml"
    profile = ("--profile", "kubeadm") if kind == "values" else ()
    done = run_gpustack(
        "import",
        source,
        *profile,
        "--operator-version",
        release,
        "--check",
        "-o",
        "imported.yaml",
        "--output",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stderr[: done.stderr.rindex("}") + 1])
    assert report["operatorVersion"] == release
    assert not [entry for entry in report["entries"] if entry["outcome"] == "unknown"]
    assert not [each for each in report["differences"] if each["stops"]]
    renders_clean(tmp_path)
    if kind != "values":
        return
    # The chart's own images run, at the release their tags name; the validator is the
    # release's where its image carries nvidia-validator, else gpustack's own.
    upstream = YAML(typ="safe").load(source.read_text())
    pods = rendered(tmp_path)
    for daemonset, section in (
        ("nvidia-container-toolkit-daemonset", "toolkit"),
        ("nvidia-device-plugin", "devicePlugin"),
        ("nvidia-mig-manager", "migManager"),
    ):
        tag = _tag(image_of(pods, daemonset))
        assert re.fullmatch(r"v[0-9]+\.[0-9]+\.[0-9]+", tag), daemonset
        assert upstream[section]["version"].split("-")[0] == tag, daemonset
    driver = _tag(image_of(pods, "nvidia-driver-daemonset"))
    assert driver.startswith(f"{upstream['driver']['version']}-")
    validator = _tag(image_of(pods, "nvidia-operator-validator"))
    carries = tuple(int(part) for part in release[1:].split(".")) >= (25, 10, 0)
    assert validator == (release if carries else "v26.7.0")


def _merged(base: Any, override: Any) -> Any:
    """Helm's merge of a values file over the chart's: mappings key by key, anything else
    (lists included) replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {key: _merged(base.get(key), value) for key, value in {**base, **override}.items()}
    return base if override is None and base is not None else override


OVERRIDE = """\
driver:
  version: "580.82.07"
  upgradePolicy:
    maxParallelUpgrades: 2
toolkit:
  env:
  - name: CONTAINERD_SOCKET
    value: /run/containerd/containerd.sock
migManager:
  enabled: false
dcgmExporter:
  serviceMonitor:
    enabled: true
    interval: 30s
daemonsets:
  tolerations:
  - operator: Exists
  - key: dedicated
    value: gpu
    effect: NoSchedule
"""


@pytest.mark.shared
@pytest.mark.parametrize("release", RELEASES)
def test_an_override_file_imports_as_the_values_helm_merges(tmp_path: Path, release: str) -> None:
    """`helm install -f my-values.yaml` runs the chart's values with the file's over them: the
    import of the file alone, for its release, is the import of that merge."""
    (tmp_path / "my-values.yaml").write_text(OVERRIDE)
    chart = YAML(typ="safe").load((OPERATOR_RELEASES / f"{release}-values.yaml").read_text())
    merged = _merged(chart, YAML(typ="safe").load(OVERRIDE))
    with (tmp_path / "merged.yaml").open("w") as handle:
        YAML(typ="safe").dump(merged, handle)
    configs = []
    for name in ("my-values.yaml", "merged.yaml"):
        done = run_gpustack(
            "import", name, "--profile", "kubeadm", "--operator-version", release, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        configs.append(YAML(typ="safe").load(done.stdout))
    assert configs[0] == configs[1]
    assert configs[0]["driver"]["mode"] == "container"


def test_the_documented_import_is_what_gpustack_prints(tmp_path: Path) -> None:
    """docs/import.md's "An import, end to end", as written: each input file (a block whose
    first line is `# <file>`), each command with what it prints on stderr, and each config it
    writes (the block after the command's output)."""
    text = (ROOT / "docs" / "import.md").read_text()
    section = text.split("\n## An import, end to end\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```[a-z]*\n(.*?)```", section, re.DOTALL)
    written: list[str] = []
    commands = 0
    for block in blocks:
        first, _, rest = block.partition("\n")
        if first.startswith("$ gpustack "):
            words = first.split()[2:]
            done = run_gpustack(*words, cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            assert done.stderr == rest, first
            written.append(words[words.index("-o") + 1])
            commands += 1
        elif first.startswith("# Written by `gpustack import`"):
            assert (tmp_path / written.pop(0)).read_text() == block, first
        else:
            name = first.removeprefix("# ")
            assert re.fullmatch(r"[a-z-]+\.yaml", name), first
            (tmp_path / name).write_text(rest)
    assert commands == 2 and not written
    # The values are those of an older chart, and the ClusterPolicy holds a few fields.
    assert "--operator-version v25.3.4" in section and "v1.17.8-ubuntu20.04" in section


def test_a_refused_imported_config_is_said_at_the_input_without_its_values(
    tmp_path: Path,
) -> None:
    """What the import checks field by field cannot fail the config's load; anything that still
    does (a check across fields) is said at the input field, without the inputs' values."""

    from gpustack.adopt import adoption, report
    from gpustack.errors import Location, UserError

    secret = "v1.2.3-s3cr3t"
    imported = report.Imported(
        [],
        [],
        "kubeadm",
        "given",
        origins={"toolkit.version": [Location("values.yaml", 3, 12)]},
        values=[secret],
    )
    text = (
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata:\n  name: lab\n"
        f"platform:\n  profile: kubeadm\ntoolkit:\n  version: {secret}\n"
    )
    with pytest.raises(UserError) as raised:
        adoption.load(text, tmp_path / "lab.yaml", None, imported)
    assert secret not in str(raised.value.message)
    assert str(raised.value.location) == "values.yaml:3:12"
    assert raised.value.field == "toolkit.version"


@pytest.mark.parametrize(
    ("override", "field", "value"),
    [
        ("cdi:\n  enabled: false\n", "devicePlugin.deviceListStrategy", "envvar"),
        # The operator runs its MIG manager on MIG-capable nodes without a strategy too.
        ("mig:\n  strategy: none\n", "migManager.enabled", True),
        ("devicePlugin:\n  version: v0.19.0\n", "devicePlugin.version", "v0.19.0"),
    ],
)
def test_an_override_file_of_one_setting_keeps_the_charts_others(
    tmp_path: Path, override: str, field: str, value: Any
) -> None:
    (tmp_path / "my-values.yaml").write_text(override)
    done = run_gpustack(
        "import",
        "my-values.yaml",
        "--profile",
        "kubeadm",
        "--check",
        "-o",
        "imported.yaml",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    config = YAML(typ="safe").load((tmp_path / "imported.yaml").read_text())
    assert _field(config, field) == value
    assert config["driver"]["mode"] == "container"
    assert "STOPS RUNNING" not in done.stderr


def test_an_error_names_a_file_on_one_line(tmp_path: Path) -> None:
    name = "bad\nerror: fake.yaml"
    (tmp_path / name).write_text("driver: [\n")
    done = run_gpustack("import", name, "--profile", "kubeadm", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: bad?error: fake.yaml:2:1: invalid YAML")


def test_release_numbers_of_thousands_of_digits_name_no_release(tmp_path: Path) -> None:
    """A version of more digits than Python reads as a number (4,300) is no release: the import
    goes on with the newest release's defaults and reports each such field, without a traceback."""
    digits = "7" * 5000
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: gpu-cluster-policy\n"
        f'  labels:\n    app.kubernetes.io/version: "v{digits}.1.1"\n'
        f'spec:\n  dcgmExporter:\n    version: "{digits}.1.1-4.1.1-ubuntu22.04"\n'
        f'  validator:\n    version: "v{digits}.1.1"\n'
        f'  toolkit:\n    version: "v{digits}.1.1-ubuntu20.04"\n'
    )
    config, report, _ = run_import(tmp_path, "policy.yaml", "--profile", "kubeadm")
    assert report["operatorVersionReason"].startswith("the inputs do not name the operator")
    for field in ("dcgmExporter", "validator", "toolkit"):
        entry = outcome(report, f"spec.{field}.version")
        assert entry["outcome"] == "dropped"
        assert entry["why"] == f"not a value gpustack's {field}.version takes"
    assert "validator" not in config


def test_a_refusal_of_an_imported_value_keeps_its_reason_not_its_value(tmp_path: Path) -> None:
    """A MIG config name the config then refuses (none of that name): the message says why, with
    the value named as an imported one, never shown."""
    secret = "ghpSECRET0123456789"
    (tmp_path / "values.yaml").write_text(
        f"migManager:\n  config:\n    default: {secret}\nmig:\n  strategy: mixed\n"
    )
    done = run_gpustack(
        "import", "values.yaml", "--profile", "kubeadm", "-o", "imported.yaml", cwd=tmp_path
    )
    assert done.returncode == 2
    assert secret not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "error: values.yaml:3:14: migManager.defaultConfig: the imported config is not valid: no "
        "MIG config named (an imported value) (neither built in nor in migManager.config.file)"
    )
    assert not (tmp_path / "imported.yaml").exists()


def test_check_says_the_sharing_of_a_config_map_it_was_not_given_is_unknown(
    tmp_path: Path,
) -> None:
    """An operator whose device plugin reads a ConfigMap that is not among the inputs may share
    its GPUs (time-slicing, MPS): `--check` says so instead of comparing with no sharing."""
    (tmp_path / "values.yaml").write_text(
        "devicePlugin:\n  config:\n    name: time-slicing-config\n    default: any\n"
    )
    done = run_gpustack(
        "import",
        "values.yaml",
        "--operator-version",
        "v25.3.4",
        "--profile",
        "kubeadm",
        "--check",
        "-o",
        "imported.yaml",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (
        "  plugin sharing: operator its plugin config's (the ConfigMap devicePlugin.config.name "
        "names, not among the inputs); gpustack none\n" in done.stderr
    )
    assert "time-slicing-config" not in done.stderr.split("check:", 1)[1]


@pytest.mark.parametrize("selector", [None, "", "  "])
def test_a_drain_of_every_pod_is_reported_not_imported(
    tmp_path: Path, selector: str | None
) -> None:
    """The operator's drain without a pod selector drains every pod but DaemonSets'; gpustack's
    is k8s-driver-manager's, which stops at the driver pod (a DaemonSet's) and would be refused
    in the config: the import leaves it out and says why, at the field that turned it on."""
    env = (
        ""
        if selector is None
        else f'    - {{name: DRAIN_POD_SELECTOR_LABEL, value: "{selector}"}}\n'
    )
    (tmp_path / "values.yaml").write_text(
        "driver:\n  manager:\n    env:\n"
        '    - {name: ENABLE_AUTO_DRAIN, value: "true"}\n'
        '    - {name: DRAIN_TIMEOUT_SECONDS, value: "600"}\n' + env
    )
    config, report, _ = run_import(tmp_path, "values.yaml", "--profile", "kubeadm")
    drain_settings = config["driver"]["upgrade"]["drain"]
    assert "enabled" not in drain_settings and drain_settings["timeoutSeconds"] == 600
    drain = outcome(report, "driver.manager.env[0]")
    assert drain["outcome"] == "dropped"
    assert "without a pod selector it stops at the driver pod" in drain["why"]
    assert "the GPU pods' eviction (driver.upgrade.gpuPodEviction) is not affected" in drain["why"]
    renders_clean(tmp_path)


def test_a_drain_whose_selector_another_input_gives_is_imported(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: cluster-policy\n"
        "spec:\n  driver:\n    enabled: true\n"
        "    upgradePolicy:\n      drain: {enable: true}\n"
    )
    (tmp_path / "values.yaml").write_text(
        'driver:\n  manager:\n    env:\n    - {name: DRAIN_POD_SELECTOR_LABEL, value: "team=ml"}\n'
    )
    config, report, _ = run_import(tmp_path, "policy.yaml", "values.yaml", "--profile", "kubeadm")
    assert config["driver"]["upgrade"]["drain"] == {"enabled": True, "podSelector": "team=ml"}
    assert outcome(report, "spec.driver.upgradePolicy.drain.enable")["outcome"] == "mapped"
    renders_clean(tmp_path)


def test_the_driver_managers_booleans_import_as_it_reads_them(tmp_path: Path) -> None:
    """`ENABLE_AUTO_DRAIN: "1"` drains (Go's strconv.ParseBool, as k8s-driver-manager reads its
    flags); a word it does not read is reported, not taken as false."""
    (tmp_path / "values.yaml").write_text(
        "driver:\n  manager:\n    env:\n"
        '    - {name: ENABLE_AUTO_DRAIN, value: "1"}\n'
        '    - {name: DRAIN_POD_SELECTOR_LABEL, value: "team=ml"}\n'
        '    - {name: ENABLE_GPU_POD_EVICTION, value: "yes"}\n'
    )
    config, report, _ = run_import(tmp_path, "values.yaml", "--profile", "kubeadm")
    assert config["driver"]["upgrade"]["drain"]["enabled"] is True
    assert outcome(report, "driver.manager.env[2]") == {
        **outcome(report, "driver.manager.env[2]"),
        "outcome": "dropped",
        "why": "not a boolean the driver manager reads",
    }


def test_an_input_is_followed_out_of_no_repository_but_its_own(tmp_path: Path) -> None:
    """In a git repository an input that links out of it is refused, unread; outside any
    repository (a file `kubectl get` wrote, say) an input is read where it points."""
    outside = tmp_path / "saved"
    outside.mkdir()
    (outside / "policy.yaml").write_text("driver:\n  version: 580.95.05\n")
    repository = tmp_path / "repository"
    (repository / ".git").mkdir(parents=True)
    (repository / "policy.yaml").symlink_to(outside / "policy.yaml")
    refused = run_gpustack("import", "policy.yaml", "--profile", "kubeadm", cwd=repository)
    assert refused.returncode == 2
    assert refused.stderr == (
        "error: policy.yaml: is a symbolic link out of the git repository it is in; import does "
        "not follow it (copy the file into the repository, or name it where it is)\n"
    )
    (outside / "link.yaml").symlink_to(outside / "policy.yaml")
    config, _, _ = run_import(outside, "link.yaml", "--profile", "kubeadm")
    assert config["driver"]["version"] == "580.95.05"


def test_a_default_gpustack_refuses_on_the_profile_is_left_out_and_said(tmp_path: Path) -> None:
    """An override file for a GKE install (the driver GKE's) leaves `mig.strategy` to the chart,
    whose `single` gpustack refuses on GKE without the node pool's MIG partitions: the import goes
    on without it, says why at the default, and `--check` names the difference."""
    (tmp_path / "gke.yaml").write_text(
        "driver:\n  enabled: false\ntoolkit:\n  installDir: /home/kubernetes/bin/nvidia\n"
    )
    done = run_gpustack(
        "import", "gke.yaml", "--profile", "gke-cos", "--check", "-o", "imported.yaml", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (
        "  GPU Operator v26.7.0's default mig.strategy -> devicePlugin.migStrategy: the "
        "operator's default, which gpustack refuses here: MIG strategy 'single' on GKE needs "
        "MIG partitions" in done.stderr
    )
    assert "  plugin migStrategy: operator single; gpustack none\n" in done.stderr
    config = YAML(typ="safe").load((tmp_path / "imported.yaml").read_text())
    assert "migStrategy" not in config.get("devicePlugin", {})
    assert "error" not in done.stderr
