"""What a user meets at the command line: which configs a bare command reads, clear messages
instead of tracebacks, and recovering output whose marker line was lost."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFIG = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
metadata: {name: NAME}
platform: {profile: kubeadm}
"""


def cluster(path: Path, name: str = "lab") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(CONFIG.replace("NAME", name))
    return path


def files_below(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


# --- a bare command --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["render", "check", "diff"])
def test_a_bare_command_in_a_fleet_repository_names_the_configs_instead_of_the_demo(
    cli, tmp_path, monkeypatch, command
):
    monkeypatch.chdir(tmp_path)
    cluster(tmp_path / "clusters" / "gpu-west.yaml", "gpu-west")
    arguments = [command, "--against", "out"] if command == "diff" else [command]
    (tmp_path / "out").mkdir()
    result = cli(*arguments)
    assert result.exit_code == 2, result.output
    assert "clusters/" in result.stderr
    assert "kubeadm-lab" not in result.output
    assert files_below(tmp_path / "out") == {}


def test_a_bare_render_with_configs_in_the_folder_itself_refuses_too(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cluster(tmp_path / "gpu-east.yaml", "gpu-east")
    result = cli("render")
    assert result.exit_code == 2
    assert "gpu-east.yaml" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_bare_render_in_an_empty_folder_says_it_renders_the_example(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("render")
    assert result.exit_code == 0, result.output
    assert "embedded example" in result.stderr
    assert (tmp_path / "out" / "kubeadm-lab" / "kustomization.yaml").is_file()


def test_a_bare_render_reads_gpustack_yaml_without_a_note(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cluster(tmp_path / "gpustack.yaml", "mine")
    cluster(tmp_path / "clusters" / "other.yaml", "other")
    result = cli("render")
    assert result.exit_code == 0, result.output
    assert "embedded example" not in result.stderr
    assert (tmp_path / "out" / "mine").is_dir() and not (tmp_path / "out" / "other").exists()


# --- messages instead of tracebacks -----------------------------------------------------------


def test_init_into_an_existing_folder_writes_gpustack_yaml_there(cli, tmp_path):
    folder = tmp_path / "gpu-west"
    folder.mkdir()
    result = cli("init", folder, "--profile", "rke2")
    assert result.exit_code == 0, result.output
    written = (folder / "gpustack.yaml").read_text()
    assert "name: gpu-west" in written and "profile: rke2" in written
    again = cli("init", folder)
    assert again.exit_code == 2
    assert "gpustack.yaml: already exists" in again.stderr
    forced = cli("init", folder, "--force")
    assert forced.exit_code == 0, forced.output
    assert "profile: kubeadm" in (folder / "gpustack.yaml").read_text()


def test_init_says_what_the_next_step_needs(cli, tmp_path):
    result = cli("init", tmp_path / "lab.yaml", "--profile", "openshift")
    assert result.exit_code == 0
    assert f"gpustack render {tmp_path / 'lab.yaml'}" in result.stderr
    (tmp_path / "profiles").mkdir()
    result = cli("init", tmp_path / "site.yaml", "--profiles-dir", tmp_path / "profiles",
                 "--profile", "kubeadm")
    assert result.exit_code == 0, result.output
    assert f"--profiles-dir {tmp_path / 'profiles'}" in result.stderr


def test_render_dash_o_dash_prints_the_stream_and_writes_nothing(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = cluster(tmp_path / "lab.yaml")
    result = cli("render", config, "-o", "-")
    assert result.exit_code == 0, result.output
    assert "kind: DaemonSet" in result.stdout
    assert not (tmp_path / "-").exists()


def test_check_against_a_missing_output_folder_says_so_once(cli, tmp_path):
    config = cluster(tmp_path / "lab.yaml")
    result = cli("check", config, "-o", tmp_path / "missing")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "output folder does not exist" in result.stderr
    assert not (tmp_path / "missing").exists()


# --- a generated file that lost its marker ----------------------------------------------------


def test_a_file_that_lost_its_marker_is_recovered_by_render_force(cli, tmp_path):
    config = cluster(tmp_path / "lab.yaml")
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    damaged = out / "lab" / "daemonset-nvidia-device-plugin.yaml"
    pristine = damaged.read_bytes()
    damaged.write_bytes(pristine.split(b"\n", 1)[1])  # the marker line removed
    (out / "lab" / "NOTES.md").write_text("mine\n")

    check = cli("check", config, "-o", out)
    assert check.exit_code == 1
    assert "--force" in check.stderr

    refused = cli("render", config, "-o", out)
    assert refused.exit_code == 2
    assert "--force" in refused.stderr
    assert damaged.read_bytes() != pristine

    forced = cli("render", config, "-o", out, "--force")
    assert forced.exit_code == 0, forced.output
    assert damaged.read_bytes() == pristine
    assert (out / "lab" / "NOTES.md").read_text() == "mine\n"
    assert cli("check", config, "-o", out).exit_code == 0
