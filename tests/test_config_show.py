"""`gpustack config show`: a config as it is in force, and with `--show-origin` the file, line
and column each value comes from, as `git config --show-origin` does."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gpustack.resolve.load import load_stack

BASE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
platform:
  profile: openshift
devicePlugin:
  sharing: {strategy: time-slicing, replicas: 8}
"""
MEMBER = """\
extends: base.yaml
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
metadata: {name: east}
platform:
  openshiftVersion: "4.18"
devicePlugin:
  sharing: {replicas: 2}
"""


@pytest.fixture
def member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "east.yaml").write_text(MEMBER)
    return tmp_path / "east.yaml"


def origins(output: str) -> dict[str, str]:
    """field -> where, from `--show-origin` lines (`WHERE  field=value`)."""
    found = {}
    for line in output.splitlines():
        where, _, assignment = line.rpartition("  ")
        found[assignment.partition("=")[0]] = where.strip()
    return found


def test_each_value_names_the_file_line_and_column_it_comes_from(cli, member: Path) -> None:
    result = cli(
        "config", "show", "--show-origin", "east.yaml", "--set", "dcgmExporter.interval=30s"
    )
    assert result.exit_code == 0, result.output
    where = origins(result.stdout)
    assert where["devicePlugin.sharing.strategy"] == "base.yaml:6:23"  # the base's
    assert where["devicePlugin.sharing.replicas"] == "east.yaml:8:23"  # the member overrides it
    assert where["platform.profile"] == "base.yaml:4:12"
    assert where["dcgmExporter.interval"] == "--set"
    # A value that follows another names it, and where that one is written.
    assert (
        where["platform.kubernetesVersion"] == "east.yaml:6:21 (follows platform.openshiftVersion)"
    )
    assert where["namespace"].endswith("(profile default)")
    assert "profiles/openshift.yaml:" in where["namespace"]
    assert any(
        line.endswith("  devicePlugin.sharing.replicas=2") for line in result.stdout.splitlines()
    )


def test_show_prints_the_values_render_takes(cli, member: Path) -> None:
    result = cli("config", "show", "east.yaml")
    assert result.exit_code == 0, result.output
    shown = YAML(typ="safe").load(result.stdout)
    config = load_stack(member).config
    assert shown["devicePlugin"]["sharing"] == {"strategy": "time-slicing", "replicas": 2}
    assert shown["platform"] == {
        "profile": "openshift",
        "kubernetesVersion": config.platform.kubernetesVersion,
        "openshiftVersion": "4.18",
    }
    assert shown["platform"]["kubernetesVersion"] == "1.31"
    assert shown["namespace"] == config.namespace


def test_a_bad_config_is_the_error_render_gives(cli, member: Path) -> None:
    (member.parent / "base.yaml").write_text(BASE + "nfd: {mode: deplyo}\n")
    result = cli("config", "show", "--show-origin", "east.yaml")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: base.yaml:7:13: nfd.mode: 'deplyo' is not one of")
    assert result.stderr.endswith("[loading east.yaml]\n")


def test_a_null_shows_the_default_it_brings_back(cli, member: Path) -> None:
    """A member's null takes the base's value away: the profile's default is in force again,
    and --show-origin names both the profile's line and the null that brought it back."""
    base = member.parent / "base.yaml"
    base.write_text(BASE + "nfd: {mode: deploy}\ndcgmExporter: {interval: 30s}\n")
    member.write_text(MEMBER + "nfd: {mode: null}\ndcgmExporter: {interval: null}\n")
    result = cli("config", "show", "--show-origin", "east.yaml")
    assert result.exit_code == 0, result.output
    where = origins(result.stdout)
    assert where["nfd.mode"].endswith(
        "(profile default); east.yaml:9:13 takes the bases' value away"
    )
    assert "profiles/openshift.yaml:" in where["nfd.mode"]
    assert "  nfd.mode=external" in result.stdout
    # No profile default: the field's own applies, and nothing writes it any more.
    assert "dcgmExporter.interval" not in where
    assert load_stack(member).config.dcgmExporter.interval == "15s"
