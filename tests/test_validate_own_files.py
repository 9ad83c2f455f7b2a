"""One validate hook over a whole repository: gpustack's own configs and profiles are checked
against their schemas, and JSON Schemas are not mistaken for manifests."""

from __future__ import annotations

import json

from conftest import ROOT


def test_the_repository_validates_as_a_whole(cli):
    """Configs (examples/), profiles, rendered output and the schemas folder, in one run."""
    result = cli(
        "validate",
        "--summary",
        ROOT / "examples",
        ROOT / "profiles",
        ROOT / "out",
        ROOT / "schemas",
    )
    assert result.exit_code == 0, result.stdout
    configs = len(list((ROOT / "examples").glob("*.yaml")))
    profiles = len(list((ROOT / "profiles").glob("*.yaml")))
    found = int(result.stdout.split("Summary: ")[1].split(" resources")[0])
    manifests = sum(1 for _ in (ROOT / "out").rglob("*.yaml"))
    assert found >= configs + profiles + manifests - 10 * len(list((ROOT / "out").iterdir()))


def test_a_bad_config_is_named_with_the_field_line_and_column(cli, tmp_path):
    config = tmp_path / "gpustack.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata:\n  name: lab\n"
        'platform:\n  profile: rke2\n  kubernetesVersion: "1.31"\n'
        "devicePlugin:\n  sharing: {strategy: time-slicing, replicaz: 4}\n"
    )
    result = cli("validate", "--no-lint", config)
    assert result.exit_code == 1
    assert result.stdout == (
        f"{config} - GPUStack lab is invalid: devicePlugin.sharing: Additional properties are not "
        "allowed ('replicaz' was unexpected); did you mean 'replicas'? (line 9, column 37)\n"
    )


def test_a_fleet_base_validates_and_a_cluster_still_needs_its_profile(cli, tmp_path):
    """A base that clusters extend names no cluster and may leave the profile to them; a
    cluster that extends nothing must name both."""
    header = "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
    (tmp_path / "base.yaml").write_text(header + "nodes:\n  taints: []\n")
    (tmp_path / "a.yaml").write_text(
        header + "extends: base.yaml\nmetadata: {name: a}\nplatform: {profile: rke2}\n"
    )
    assert cli("validate", "--no-lint", tmp_path).exit_code == 0
    assert cli("render", tmp_path, "-o", tmp_path.parent / "out").exit_code == 0
    (tmp_path / "b.yaml").write_text(header + "metadata: {name: b}\n")
    result = cli("validate", "--no-lint", tmp_path)
    assert result.exit_code == 1
    assert '"platform" is a required property' in result.stdout


def test_configs_are_read_as_gpustack_reads_them_yaml_1_2(cli, tmp_path):
    """`no` is a string in a gpustack config (YAML 1.2), where a manifest's would be false."""
    config = tmp_path / "gpustack.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: lab}\n"
        "platform: {profile: rke2}\ndcgmExporter:\n  monitorLabels: {release: no}\n"
    )
    assert cli("validate", "--no-lint", config).exit_code == 0
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: {release: no}\n"
    )
    assert cli("validate", "--no-lint", manifest).exit_code == 1


def test_json_schemas_are_not_manifests(cli, tmp_path):
    (tmp_path / "gpustack.schema.json").write_text(
        (ROOT / "schemas" / "gpustack.schema.json").read_text()
    )
    (tmp_path / "widget_v1.json").write_text(
        json.dumps({"type": "object", "properties": {"spec": {"type": "object"}}})
    )
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    result = cli("validate", "--summary", tmp_path, tmp_path / "gpustack.schema.json")
    assert result.exit_code == 0
    assert result.stdout.startswith("Summary: 1 resource found in 2 files")
