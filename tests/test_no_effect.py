"""What a config says is what runs: a setting that changes nothing in a cluster's output is
refused with why, never accepted in silence. Found systematically: every field of every
example is rendered with another value, and either the output changes or loading refuses it."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from conftest import ROOT, run_gpustack, write_config
from pydantic import BaseModel

from gpustack.build import pipeline
from gpustack.config.model import GPUStack
from gpustack.errors import UserError
from gpustack.read.yamlio import load_file
from gpustack.resolve import platform_profiles as profiles
from gpustack.resolve.load import load_stack, overrides
from gpustack.resolve.stack import Stack

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
# Fields left out of the sweep, and why.
NOT_SWEPT = {
    "metadata": "names the output folder",
    "extends": "names files",
    "patches": "tests/test_patches.py",
    "nodes.pools": "a list of pools, each checked in tests/test_node_pools.py",
    "platform.kubernetesVersion": "the version validation and deprecation checks target, "
    "not only what renders",
}
# Fields whose `auto` resolves per cluster: another value that resolves the same is the same
# setting, not one without effect.
RESOLVED: dict[str, Callable[[Stack], object]] = {
    "dcgmExporter.monitor": lambda stack: stack.monitor,
    "driver.mode": lambda stack: stack.driver_mode,
    "devicePlugin.deviceListStrategy": lambda stack: stack.device_list_strategy,
    "validator.enabled": lambda stack: stack.validator_enabled,
    "toolkit.enabled": lambda stack: stack.toolkit_enabled,
    "runtimeClass.enabled": lambda stack: stack.runtime_class_enabled,
    "smokeTest.enabled": lambda stack: stack.smoke_test_enabled,
    "alerts.enabled": lambda stack: stack.alerts_enabled,
    "dashboard.enabled": lambda stack: stack.dashboard_enabled,
}


def leaves(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every field of the config that holds a value (not a section), by its path."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        section = next(
            (
                each
                for each in (info.annotation, *get_args(info.annotation))
                if isinstance(each, type) and issubclass(each, BaseModel)
            ),
            None,
        )
        if section is not None and get_origin(info.annotation) not in (list, dict):
            yield from leaves(section, (*prefix, key))
        else:
            yield (*prefix, key)


def at(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def literal_choices(model: type[BaseModel], path: tuple[str, ...]) -> list[object]:
    current: Any = model
    for key in path[:-1]:
        info = current.model_fields[key]
        current = next(
            each
            for each in (info.annotation, *get_args(info.annotation))
            if isinstance(each, type) and issubclass(each, BaseModel)
        )
    annotation = next(
        info.annotation
        for name, info in current.model_fields.items()
        if (info.alias or name) == path[-1]
    )
    found: list[object] = []
    stack = [annotation]
    while stack:
        each = stack.pop()
        if get_origin(each) is Literal:
            found += get_args(each)
        else:
            stack += get_args(each)
    return found


def seen_values() -> dict[tuple[str, ...], list[object]]:
    """The values each field takes in the examples and the profiles' defaults: real settings."""
    seen: dict[tuple[str, ...], list[object]] = {}
    documents = [load_file(path).data for path in EXAMPLES]
    documents += [profiles.load(name)[1].data for name in profiles.BUILTIN]
    for data in documents:
        for path in leaves(GPUStack):
            value = at(data, path)
            if value is not None and value not in seen.setdefault(path, []):
                seen[path].append(value)
    return seen


SEEN = seen_values()
# Values for fields that no example or profile sets: each component's resources and image tag,
# and a few settings of its own.
COMPONENTS = (
    "devicePlugin",
    "gfd",
    "nfd",
    "dcgmExporter",
    "driver",
    "toolkit",
    "validator",
    "nodeStatusExporter",
    "migManager",
)
EXTRA: dict[tuple[str, ...], list[object]] = {
    **{(section, "resources"): [{"limits": {"memory": "1Gi"}}] for section in COMPONENTS},
    **{(section, "version"): ["v9.9.9"] for section in (*COMPONENTS, "dra")},
    ("images", "registry"): ["registry.example.com"],
    ("images", "pullSecrets"): [["regcred"]],
    ("alerts", "ruleLabels"): [{"release": "prometheus"}],
    ("dashboard", "labels"): [{"grafana_dashboard": "1"}],
    ("driver", "kernelVersion"): ["5.15.0-1"],
    ("smokeTest", "image"): ["nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0"],
}


def other_values(path: tuple[str, ...], current: object) -> list[object]:
    values = [value for value in literal_choices(GPUStack, path) if value != current]
    if isinstance(current, bool):
        values.append(not current)
    elif isinstance(current, int):
        values.append(current + 1)
    values += [value for value in SEEN.get(path, []) if value != current and value not in values]
    return values[:4] + [value for value in EXTRA.get(path, []) if value != current]


def swept(path: tuple[str, ...]) -> bool:
    dotted = ".".join(path)
    return not any(dotted == field or dotted.startswith(f"{field}.") for field in NOT_SWEPT)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.stem)
def test_every_setting_changes_the_output_or_is_refused(example: Path) -> None:
    baseline = load_stack(example)
    files = pipeline.files(pipeline.render(baseline))
    current = baseline.config.model_dump(by_alias=True)
    silent = []
    for path in filter(swept, leaves(GPUStack)):
        dotted = ".".join(path)
        for value in other_values(path, at(current, path)):
            layer = overrides([f"{dotted}={_yaml(value)}"])
            try:
                stack = load_stack(example, override=layer)
            except UserError:
                continue  # refused, with why
            resolved = RESOLVED.get(dotted)
            if resolved is not None and resolved(stack) == resolved(baseline):
                continue
            if pipeline.files(pipeline.render(stack)) == files:
                silent.append(f"{dotted}={value!r}")
    assert not silent, f"{example.stem}: accepted and changes nothing: {', '.join(silent)}"


def _yaml(value: object) -> str:
    import json

    return json.dumps(value)


@pytest.mark.parametrize("profile", ["eks-al2023", "gke-cos", "aks", "kubeadm"])
def test_a_driver_version_where_the_platform_or_the_nodes_install_the_driver(
    tmp_path: Path, profile: str
) -> None:
    with pytest.raises(UserError) as caught:
        load_stack(write_config(tmp_path, profile, 'driver: {version: "580.178.04"}\n'))
    assert caught.value.field == "driver.version"
    assert caught.value.message.startswith("has no effect: the driver is not a container here")
    assert caught.value.location is not None and caught.value.location.line == 5


def test_sharing_for_gpus_the_dra_driver_hands_out(tmp_path: Path) -> None:
    """Accepted, it would rename the smoke test (its name hashes the config) and nothing else."""
    body = """\
    gpuAllocation: dra
    platform: {profile: kubeadm, kubernetesVersion: "1.34"}
    devicePlugin: {sharing: {strategy: time-slicing, replicas: 4}}
    """
    path = tmp_path / "lab.yaml"
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        + textwrap.dedent(body)
    )
    with pytest.raises(UserError) as caught:
        load_stack(path)
    assert caught.value.field == "devicePlugin.sharing.strategy"
    assert "no GPU node takes its GPUs from the device plugin" in caught.value.message


def test_a_profiles_own_default_gives_way_silently(tmp_path: Path) -> None:
    """Only what the user wrote is refused: the profile's defaults for sections that do not
    apply to a cluster (a driver version on GKE) are no mistake of the user's."""
    stack = load_stack(write_config(tmp_path, "gke-cos", ""))
    assert not stack.driver_container


def test_set_over_a_fleet_names_each_cluster_it_cannot_reach(tmp_path: Path) -> None:
    """`render --set driver.version=...` over a fleet reaches only the clusters that run the
    driver as a container: the others are named, and nothing is written."""
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    write_config(clusters, "kubeadm", "driver: {mode: container}\n", name="metal")
    write_config(clusters, "eks-al2023", "nodes: {eks: {instanceType: g6.xlarge}}\n", name="cloud")
    result = run_gpustack(
        "render", "clusters", "-o", "out", "--set", "driver.version=580.178.04", cwd=tmp_path
    )
    assert result.returncode == 2
    assert result.stderr == (
        "error: --set: driver.version: has no effect: the driver is not a container here "
        "(driver mode preinstalled): the nodes or the platform install it, and gpustack renders "
        "no driver (remove it, and install that driver on the nodes; or set driver.mode to "
        "container or driver-toolkit where the profile offers them) [loading clusters/cloud.yaml]\n"
    )
    assert not (tmp_path / "out").exists()


def test_an_error_in_a_base_names_the_cluster_that_brought_it_in(tmp_path: Path) -> None:
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    (clusters / "base.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nplatform: {profile: kubeadm}\n"
        "driver:\n  mode: container\n"
    )
    for name, own in (("a", ""), ("b", "platform: {profile: gke-cos}\n")):
        (clusters / f"{name}.yaml").write_text(
            f"extends: base.yaml\napiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
            f"metadata: {{name: {name}}}\n{own}"
        )
    result = run_gpustack("render", "clusters", "-o", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("error: clusters/base.yaml:5:9: driver.mode:")
    assert result.stderr.endswith(" [loading clusters/b.yaml]\n")


def _fleet_with_a_driver_base(tmp_path: Path, gke_own: str) -> Path:
    """A fleet whose base pins the driver for the clusters that run it as a container (kubeadm
    with driver.mode container) and one GKE cluster, whose platform installs its own."""
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    (clusters / "base.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
        'dcgmExporter: {interval: 30s}\ndriver:\n  version: "580.178.04"\n'
    )
    (clusters / "metal.yaml").write_text(
        "extends: base.yaml\nmetadata: {name: metal}\n"
        "platform: {profile: kubeadm}\ndriver: {mode: container}\n"
    )
    (clusters / "cloud.yaml").write_text(
        "extends: base.yaml\nmetadata: {name: cloud}\nplatform: {profile: gke-cos}\n" + gke_own
    )
    return clusters


def test_a_base_holds_settings_for_the_clusters_where_they_take_effect(
    tmp_path: Path,
) -> None:
    """A fleet's base pins the driver for the clusters that run it as a container; on the GKE
    cluster, whose platform installs its own, the base's version is a default that does not
    apply, not a mistake of that cluster's: the fleet renders, and `config show` says that it
    does nothing there, and why. Written in the GKE cluster's own config, it is refused."""
    clusters = _fleet_with_a_driver_base(tmp_path, "")
    result = run_gpustack("render", "clusters", "-o", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    metal = (tmp_path / "out" / "metal" / "daemonset-nvidia-driver-daemonset.yaml").read_text()
    assert "580.178.04" in metal
    assert not list((tmp_path / "out" / "cloud").glob("daemonset-nvidia-driver*"))
    shown = run_gpustack("config", "show", "clusters/cloud.yaml", cwd=tmp_path)
    assert shown.returncode == 0
    assert shown.stderr == (
        "note: driver.version (set at clusters/base.yaml:5:12) has no effect here: the driver "
        "is not a container here (driver mode gke-managed): the nodes or the platform install "
        "it, and gpustack renders no driver\n"
    )
    own = run_gpustack("config", "show", "clusters/metal.yaml", cwd=tmp_path)
    assert own.stderr == ""
    with (clusters / "cloud.yaml").open("a") as file:
        file.write('driver: {version: "580.178.04"}\n')
    refused = run_gpustack("render", "clusters", "-o", "out", cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        "error: clusters/cloud.yaml:4:10: driver.version: has no effect: the driver is not a "
        "container here (driver mode gke-managed)"
    )


def test_a_base_holds_resources_and_versions_for_components_some_clusters_run(
    tmp_path: Path,
) -> None:
    """Resources and versions for every GPU component, a fleet's policy, apply where each
    component runs: the toolkit, the validator, the MIG manager and a pod device plugin are
    not deployed on every platform, and no cluster is refused for it."""
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    (clusters / "base.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
        + "".join(
            f"{section}: {{resources: {{requests: {{cpu: 50m, memory: 64Mi}}}}}}\n"
            for section in ("devicePlugin", "gfd", "toolkit", "validator", "dcgmExporter")
        )
        + "migManager: {version: v0.13.0}\n"
    )
    profiles = ["kubeadm", "gke-cos", "eks-al2023", "eks-bottlerocket", "aks", "openshift"]
    for profile in profiles:
        (clusters / f"{profile}.yaml").write_text(
            f"extends: base.yaml\nmetadata: {{name: {profile}}}\nplatform: {{profile: {profile}}}\n"
        )
    result = run_gpustack("render", "clusters", "-o", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    refused = run_gpustack(
        "render",
        "clusters/gke-cos.yaml",
        "--stdout",
        "--set",
        "toolkit.resources=null",
        "--set",
        "validator.resources={requests: {cpu: 10m}}",
        cwd=tmp_path,
    )
    assert refused.returncode == 2
    assert "error: --set: validator.resources: has no effect" in refused.stderr


def test_a_null_takes_a_bases_setting_away(tmp_path: Path) -> None:
    """As the hint says, and as docs/config.md promises: `driver: null` in the
    cluster takes the base's version away (back to the default), so the fleet renders, the
    driver container of the other cluster pinned by the base."""
    _fleet_with_a_driver_base(tmp_path, "driver: null\ndcgmExporter: {interval: null}\n")
    result = run_gpustack("render", "clusters", "-o", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    metal = (tmp_path / "out" / "metal" / "daemonset-nvidia-driver-daemonset.yaml").read_text()
    assert "580.178.04" in metal
    cloud = load_stack(tmp_path / "clusters" / "cloud.yaml")
    assert cloud.config.dcgmExporter.interval == "15s"  # the base's 30s taken away
    shown = run_gpustack("config", "show", "--show-origin", "clusters/cloud.yaml", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "dcgmExporter.interval" not in shown.stdout
    assert "driver.version" not in shown.stdout
