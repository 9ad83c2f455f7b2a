"""`gpustack diff --against` reads back exactly the layout `gpustack render` writes, for every
GitOps setting and for fleets: right after a render there is nothing to report.

Also: one config on two profiles where some settings apply to one platform only.
"""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES

BASE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
metadata: {name: lab}
platform: {profile: kubeadm}
"""
ARGOCD = "gitops:\n  tool: argocd\n  argocd:\n    repoURL: https://git.example.com/fleet.git\n"
FLUX = "gitops:\n  tool: flux\n  flux:\n    sourceRef: {kind: GitRepository, name: fleet}\n"

LAYOUTS = {
    "no-gitops": "",
    "argocd-application": ARGOCD,
    "argocd-application-set": ARGOCD + "    applicationSet: true\n",
    "argocd-plugin": ARGOCD + "    path: clusters/{name}\n    plugin: {name: gpustack}\n",
    "flux-layers": FLUX,
    "flux-with-git-repository": FLUX
    + "    gitRepository: {url: https://git.example.com/fleet.git, ref: {branch: main}}\n",
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_render_then_diff_against_the_output_is_no_difference(cli, tmp_path, layout):
    config = tmp_path / "lab.yaml"
    config.write_text(BASE + LAYOUTS[layout])
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    assert cli("check", config, "-o", out).exit_code == 0
    result = cli("diff", config, "--against", out)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("no differences"), result.stdout


def test_a_hand_edit_in_a_flux_layer_is_reported_once(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(BASE + FLUX)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    plugin = out / "lab" / "workloads" / "daemonset-nvidia-device-plugin.yaml"
    plugin.write_text(
        plugin.read_text().replace(
            "priorityClassName: system-node-critical", "priorityClassName: system-cluster-critical"
        )
    )
    result = cli("diff", config, "--against", out, "--output", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["counts"] == {"changed": 1, "added": 0, "removed": 0}
    (change,) = document["changes"]
    assert (change["kind"], change["name"]) == ("DaemonSet", "nvidia-device-plugin")
    assert change["paths"] == ["spec.template.spec.priorityClassName"]


def test_a_flux_config_change_counts_each_object_once(cli, tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text(BASE + FLUX)
    new = tmp_path / "new.yaml"
    new.write_text(BASE + FLUX + "devicePlugin: {migStrategy: single}\n")
    result = cli("diff", old, new, "--output", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    files = [change["file"] for change in document["changes"]]
    assert len(files) == len(set(files)), files
    # Object files are compared as objects, never a second time as text.
    assert all(change["kind"] for change in document["changes"]), files


def test_a_removed_gitops_file_is_reported(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(BASE + ARGOCD)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    (out / "lab" / "gitops" / "application-gpustack-lab.yaml").unlink()
    result = cli("diff", config, "--against", out, "--output", "json")
    assert result.exit_code == 1
    changes = json.loads(result.stdout)["changes"]
    assert [(c["change"], c["kind"]) for c in changes] == [("added", "Application")]


# --- one config on two profiles ----------------------------------------------------------------


def test_the_openshift_example_on_another_profile_leaves_out_what_does_not_apply(cli):
    result = cli("diff", "--profile", "openshift", "--profile", "rke2", EXAMPLES / "openshift.yaml")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("openshift -> rke2: ")
    left_out = [line for line in lines if line.startswith("note: left out for rke2:")]
    assert any("platform.openshiftVersion" in line for line in left_out), lines[:8]
    assert any("entitlement" in line for line in left_out), lines[:8]
    assert "- removed  MachineConfig.machineconfiguration.openshift.io 50-entitlement-pem" in lines
    document = json.loads(
        cli(
            "diff",
            "--profile",
            "openshift",
            "--profile",
            "rke2",
            EXAMPLES / "openshift.yaml",
            "--output",
            "json",
        ).stdout
    )
    fields = {(item["profile"], item["field"]) for item in document["leftOut"]}
    assert ("rke2", "platform.openshiftVersion") in fields
    assert ("rke2", "entitlement.enabled") in fields
    assert not any(profile == "openshift" for profile, _ in fields)


def test_a_setting_one_profile_refuses_is_left_out_on_that_side_only(cli, tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(BASE + "driver: {mode: driver-toolkit}\n")
    result = cli("diff", "--profile", "openshift", "--profile", "kubeadm", config)
    assert result.exit_code == 1, result.output
    assert "note: left out for kubeadm: driver.mode" in result.stdout
    # Rendering the config on kubeadm itself is still an error.
    assert cli("render", config, "--stdout").exit_code == 2
