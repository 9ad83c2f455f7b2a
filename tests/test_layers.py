"""Layered values, as Helm users know them from -f and --set: `extends:` with a list of bases
applied in order, and `--set FIELD=VALUE` on render, check and diff."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import read_manifests
from ruamel.yaml import YAML

CLUSTER = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
metadata: {name: lab}
platform: {profile: kubeadm}
"""


def rendered(cli, *arguments: object) -> dict[str, dict]:
    result = cli("render", *arguments, "--stdout")
    assert result.exit_code == 0, result.output
    objects = [obj for obj in read_manifests(result.stdout) if obj]
    return {f"{obj['kind']}/{obj['metadata']['name']}": obj for obj in objects}


def plugin_config(objects: dict[str, dict]) -> dict:
    text = objects["ConfigMap/nvidia-device-plugin-config"]["data"]["config.yaml"]
    return YAML(typ="safe").load(text)


def scrape_interval(objects: dict[str, dict]) -> str:
    return objects["ServiceMonitor/nvidia-dcgm-exporter"]["spec"]["endpoints"][0]["interval"]


# --- extends: a list -----------------------------------------------------------------------------


def bases(folder: Path) -> None:
    (folder / "monitoring.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
        "dcgmExporter: {interval: 30s, monitorLabels: {release: prom}}\n"
    )
    (folder / "sharing.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
        "devicePlugin: {sharing: {strategy: time-slicing, replicas: 8}}\n"
        "dcgmExporter: {interval: 1m}\n"
    )


def test_a_list_of_bases_applies_in_order_and_the_file_wins(cli, tmp_path):
    bases(tmp_path)
    config = tmp_path / "lab.yaml"
    config.write_text(CLUSTER + "extends: [monitoring.yaml, sharing.yaml]\n")
    objects = rendered(cli, config)
    assert scrape_interval(objects) == "1m"  # the later base wins
    assert objects["ServiceMonitor/nvidia-dcgm-exporter"]["metadata"]["labels"]["release"] == "prom"
    assert plugin_config(objects)["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 8
    config.write_text(
        CLUSTER + "extends: [sharing.yaml, monitoring.yaml]\n"
        "devicePlugin: {sharing: {replicas: 3}}\n"
    )
    objects = rendered(cli, config)
    assert scrape_interval(objects) == "30s"
    assert plugin_config(objects)["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 3


def test_the_single_string_form_still_works_and_bases_of_a_list_are_not_clusters(cli, tmp_path):
    bases(tmp_path)
    (tmp_path / "a.yaml").write_text(CLUSTER.replace("lab", "a") + "extends: sharing.yaml\n")
    (tmp_path / "b.yaml").write_text(
        CLUSTER.replace("lab", "b") + "extends: [monitoring.yaml, sharing.yaml]\n"
    )
    result = cli("render", tmp_path, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["a", "b"]


def test_an_empty_or_wrong_extends_list_is_exit_2_with_its_position(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(CLUSTER + "extends: []\n")
    result = cli("render", config, "--stdout")
    assert result.exit_code == 2
    assert f"{config}:5:10: extends: must name at least one base config" in result.stderr
    config.write_text(CLUSTER + "extends: [monitoring.yaml, 3]\n")
    result = cli("render", config, "--stdout")
    assert result.exit_code == 2
    assert f"{config}:5:28: extends.1: must be a path" in result.stderr


def test_a_cycle_through_a_list_is_reported(cli, tmp_path):
    (tmp_path / "base.yaml").write_text("kind: GPUStack\nextends: [lab.yaml]\n")
    config = tmp_path / "lab.yaml"
    config.write_text(CLUSTER + "extends: [base.yaml]\n")
    result = cli("render", config, "--stdout")
    assert result.exit_code == 2
    assert "extends forms a cycle" in result.stderr


# --- --set ---------------------------------------------------------------------------------------


def test_set_overrides_a_field_typed_like_the_file(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(CLUSTER + "devicePlugin: {sharing: {strategy: time-slicing}}\n")
    objects = rendered(
        cli,
        config,
        "--set",
        "devicePlugin.sharing.replicas=8",
        "--set",
        "dcgmExporter.interval=1m",
        "--set",
        "gfd.enabled=false",
    )
    assert plugin_config(objects)["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 8
    assert scrape_interval(objects) == "1m"
    assert "DaemonSet/gpu-feature-discovery" not in objects
    # A later --set wins; a label key holding dots is escaped as in Helm.
    objects = rendered(
        cli,
        config,
        "--set",
        "devicePlugin.sharing.replicas=8",
        "--set",
        "devicePlugin.sharing.replicas=6",
        "--set",
        "nodes.selector.pool\\.example\\.com/gpu=a100",
    )
    assert plugin_config(objects)["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 6
    selector = objects["DaemonSet/nvidia-device-plugin"]["spec"]["template"]["spec"]
    assert "pool.example.com/gpu" in json.dumps(selector)


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        (
            "devicePlugin.sharing.replicas=100",
            "error: --set: devicePlugin.sharing.replicas: 100 is too large: the most allowed is 48",
        ),
        (
            "devicePlugin.sharing.replicas=four",
            "error: --set: devicePlugin.sharing.replicas: expected a whole number, got 'four'",
        ),
        (
            "platform.kubernetesVersion=1.30",
            "error: --set: platform.kubernetesVersion: expected a string, but YAML reads 1.30 as "
            'the number 1.3 (quote it: "1.30")',
        ),
        (
            "devicePlugin.migStrateg=single",
            "error: --set: devicePlugin.migStrateg: unknown field 'migStrateg' "
            "(did you mean 'migStrategy'?)",
        ),
        ("replicas", "error: --set: expected FIELD=VALUE, got 'replicas'"),
    ],
)
@pytest.mark.parametrize("command", ["render", "check", "diff"])
def test_a_bad_set_is_exit_2_naming_the_option(cli, tmp_path, command, assignment, message):
    config = tmp_path / "lab.yaml"
    config.write_text(CLUSTER)
    out = tmp_path / "out"
    out.mkdir()
    extra = ["--against", out] if command == "diff" else ["-o", out]
    result = cli(command, config, *extra, "--set", assignment)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].startswith(message), result.stderr
    assert list(out.iterdir()) == []


def test_check_and_diff_see_the_same_override_render_wrote(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(CLUSTER)
    out = tmp_path / "out"
    setting = ["--set", "devicePlugin.migStrategy=single"]
    assert cli("render", config, "-o", out, *setting).exit_code == 0
    assert cli("check", config, "-o", out, *setting).exit_code == 0
    assert cli("check", config, "-o", out).exit_code == 1
    assert cli("diff", config, "--against", out, *setting).exit_code == 0
    drift = cli("diff", config, "--against", out)
    assert drift.exit_code == 1
    assert 'data["config.yaml"].flags.migStrategy' in drift.stdout


@pytest.mark.parametrize(
    ("field", "unquoted"),
    [
        ("dcgmExporter.interval", "30"),
        ("platform.kubernetesVersion", "1.30"),
        ("gitops.argocd.retry.backoff.duration", "30"),
    ],
)
def test_a_number_where_a_string_goes_gets_a_hint_that_works(
    cli, tmp_path: Path, field: str, unquoted: str
) -> None:
    """The hint's value, written as it says, is taken: `interval: 30` quoted would still not be
    a Prometheus duration, so the hint gives the unit; Argo CD's durations take bare seconds."""
    config = tmp_path / "lab.yaml"
    config.write_text(
        CLUSTER + "gitops: {tool: argocd, argocd: {repoURL: 'https://example.com/fleet.git'}}\n"
    )
    first = cli("render", config, "--set", f"{field}={unquoted}", "--stdout")
    assert first.exit_code == 2
    suggested = re.search(r'(?:quote it|give its unit): "([^"]+)"', first.stderr)
    assert suggested, first.stderr
    second = cli("render", config, "--set", f'{field}="{suggested[1]}"', "--stdout")
    assert second.exit_code == 0, second.stderr


def test_a_render_with_set_says_so_and_check_names_what_a_plain_render_would_drop(
    cli, tmp_path: Path
) -> None:
    config = tmp_path / "lab.yaml"
    config.write_text(CLUSTER)
    out = tmp_path / "out"
    rendered_with = cli(
        "render", config, "-o", out, "--set", "devicePlugin.sharing.strategy=time-slicing"
    )
    assert rendered_with.exit_code == 0, rendered_with.output
    assert "--set is recorded" in rendered_with.stderr
    kustomization = YAML(typ="safe").load((out / "lab" / "kustomization.yaml").read_text())
    assert (
        kustomization["metadata"]["annotations"]["gpustack.dev/set"]
        == "--set devicePlugin.sharing.strategy=time-slicing"
    )
    # kustomize reads past a Kustomization's own metadata: the folder still builds.
    from gitops_helpers import kustomize

    assert kustomize(out / "lab")
    # The same --set: current. Without it: stale, and the render command check suggests is
    # said to drop the setting, named by its field (never its value, read from committed output).
    assert (
        cli(
            "check", config, "-o", out, "--set", "devicePlugin.sharing.strategy=time-slicing"
        ).exit_code
        == 0
    )
    plain = cli("check", config, "-o", out, "-q")
    assert plain.exit_code == 1
    assert (
        f"warning: {out / 'lab'} was rendered with --set devicePlugin.sharing.strategy "
        "(its kustomization.yaml records them); the command above would drop those settings"
    ) in plain.stderr
    # A render without --set records nothing.
    assert cli("render", config, "-o", out).exit_code == 0
    assert "gpustack.dev/set" not in (out / "lab" / "kustomization.yaml").read_text()


def test_check_names_recorded_set_fields_but_never_a_committed_value(cli, tmp_path: Path) -> None:
    """The record is committed output, which a pull request may write anything into: check
    takes field paths out of it, never a value, and nothing that is not a field path."""
    config = tmp_path / "lab.yaml"
    config.write_text(CLUSTER)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    kustomization = out / "lab" / "kustomization.yaml"
    text = kustomization.read_text()
    assert "  annotations:\n" in text
    kustomization.write_text(
        text.replace(
            "  annotations:\n",
            "  annotations:\n    gpustack.dev/set: "
            "\"--set images.registry=TOPSECRET --set '$(curl evil)=x'\"\n",
        )
    )
    result = cli("check", config, "-o", out, "-q")
    assert result.exit_code == 1
    assert "was rendered with --set images.registry (its kustomization.yaml" in result.stderr
    assert "TOPSECRET" not in result.output and "curl" not in result.output
