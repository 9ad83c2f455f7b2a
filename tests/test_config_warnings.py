"""Warnings a config shows rather than its objects (gpustack/build/config_warnings.py): each is a
rule with an id, reported by `render` and `check` among the lint findings, in text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

from gpustack.build import config_warnings

ROOT = Path(__file__).resolve().parent.parent


def gke_config(tmp_path: Path, version: str) -> Path:
    config = tmp_path / "gke.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: gke}\n"
        f'platform: {{profile: gke-ubuntu, kubernetesVersion: "{version}"}}\n'
    )
    return config


def test_render_and_check_report_a_config_warning_with_its_rule(cli, tmp_path):
    config, out = gke_config(tmp_path, "1.32"), tmp_path / "out"
    rendered = cli("render", config, "-o", out)
    assert rendered.exit_code == 0, rendered.output
    assert "warning: gke: [managed-dcgm-exporter] Kubernetes 1.32 on gke-ubuntu" in rendered.stderr
    # A warning leaves the exit code alone: the committed output is current.
    checked = cli("check", config, "-o", out)
    assert checked.exit_code == 0, checked.output
    assert "warning: [managed-dcgm-exporter] Kubernetes 1.32" in checked.stdout
    as_json = cli("check", config, "-o", out, "--output", "json")
    assert as_json.exit_code == 0, as_json.output
    findings = [
        line for report in json.loads(as_json.stdout)["clusters"] for line in report["findings"]
    ]
    assert [line for line in findings if "[managed-dcgm-exporter]" in line], findings


def test_a_cluster_that_meets_no_rule_gets_no_config_warning(cli, tmp_path):
    config, out = gke_config(tmp_path, "1.31"), tmp_path / "out"
    rendered = cli("render", config, "-o", out)
    assert rendered.exit_code == 0, rendered.output
    assert "[managed-dcgm-exporter]" not in rendered.stderr


def test_every_config_warning_is_documented_with_its_id():
    text = (ROOT / "docs" / "lint.md").read_text().split("## Warnings about a config", 1)[1]
    documented = {line.split("`")[1] for line in text.splitlines() if line.startswith("| `")}
    assert documented == {rule.id for rule in config_warnings.RULES}
