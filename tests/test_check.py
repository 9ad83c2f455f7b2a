"""`gpustack check`: clean output passes; stale, incomplete or invalid output fails and says what
to run; config errors exit 2. Every case runs in a repository made in tmp_path."""

from __future__ import annotations

from pathlib import Path

from conftest import EXAMPLES, ROOT

from gpustack.build import pipeline
from gpustack.layout import HEADER
from gpustack.resolve.load import load_stack
from gpustack.write import folders


def gke_config(folder: Path, name: str = "edge", extra: str = "") -> Path:
    """A gke-cos cluster config: GKE runs the device plugin, so the rendering is complete today."""
    from gpustack.resolve.starter import starter

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(starter("gke-cos", name) + extra)
    return path


def test_clean_output_passes(cli, tmp_path):
    config = gke_config(tmp_path)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    result = cli("check", config, "-o", out)
    assert result.exit_code == 0, result.output
    assert "1 cluster(s) checked" in result.stderr


def test_stale_output_fails_with_a_diff_and_the_command_to_run(cli, tmp_path):
    config = gke_config(tmp_path)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    # The starter shows the defaults as comments: the line uncommented, with a value of its own.
    config.write_text(
        config.read_text().replace("# nodes:\n#   selector: {}", "nodes:\n  selector: {pool: a100}")
    )
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    result = cli("check", config, "-o", out)
    assert result.exit_code == 1
    assert f"{out}/edge/node/" in result.stdout and ": changed" in result.stdout
    assert "(committed)" in result.stdout and "(rendered)" in result.stdout
    assert "+" in result.stdout and "pool" in result.stdout
    assert f"run `gpustack render {config} -o {out}`" in result.stderr
    assert {
        p: p.read_bytes() for p in out.rglob("*") if p.is_file()
    } == before  # check never writes


def test_missing_and_extra_files_are_listed_but_a_users_own_files_are_not(cli, tmp_path):
    config = gke_config(tmp_path)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    folder = out / "edge"
    (folder / "namespace-gpu-system.yaml").unlink()
    (folder / "daemonset-old.yaml").write_text(f"{HEADER}kind: DaemonSet\n")
    (folder / "my-notes.yaml").write_text("kind: ConfigMap\n")
    result = cli("check", config, "-o", out)
    assert result.exit_code == 1
    assert f"{folder}/namespace-gpu-system.yaml: missing" in result.stdout
    assert f"{folder}/daemonset-old.yaml: extra" in result.stdout
    assert "my-notes.yaml" not in result.output


def test_invalid_rendering_fails_with_the_lint_finding(cli, tmp_path):
    # A user profile that places GPU workloads on nvidia.com/gpu.present, a label GFD never sets
    # and nothing else here does: every DaemonSet would show 0 desired pods.
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    text = (ROOT / "profiles" / "kubeadm.yaml").read_text()
    text = text.replace("name: kubeadm", "name: lab").replace(
        "key: feature.node.kubernetes.io/pci-10de.present", "key: nvidia.com/gpu.present"
    )
    (profiles / "lab.yaml").write_text(text)
    config = tmp_path / "lab.yaml"
    config.write_text(
        (EXAMPLES / "kubeadm.yaml").read_text().replace("profile: kubeadm", "profile: lab")
    )
    out = tmp_path / "out"
    # `gpustack render` refuses to write this; output committed before the rule existed (written
    # here without validation) is what `check` must still catch.
    refused = cli("render", config, "-o", out, "--profiles-dir", profiles)
    assert refused.exit_code == 1 and not out.exists()
    stack = load_stack(config, None, profiles)
    folders.write_tree(out / stack.name, pipeline.files(pipeline.render(stack)))
    result = cli("check", config, "-o", out, "--profiles-dir", profiles)
    assert result.exit_code == 1
    assert "[node-label-unsourced]" in result.stdout and "nvidia.com/gpu.present" in result.stdout
    assert f"{out}/kubeadm-lab/daemonset-nvidia-device-plugin.yaml: error:" in result.stdout
    assert "stale" not in result.stderr  # the output is current, only invalid


def test_a_folder_is_a_fleet_and_shared_bases_are_not_clusters(cli, tmp_path):
    fleet = tmp_path / "clusters"
    gke_config(fleet, "base")
    (fleet / "east.yaml").write_text("extends: base.yaml\nmetadata: {name: east}\n")
    (fleet / "west.yaml").write_text("extends: base.yaml\nmetadata: {name: west}\n")
    (fleet / "kustomization.yaml").write_text("resources: []\n")  # not a config: ignored
    out = tmp_path / "out"
    for name in ("east", "west"):
        assert cli("render", fleet / f"{name}.yaml", "-o", out).exit_code == 0
    result = cli("check", fleet, "-o", out)
    assert result.exit_code == 0, result.output
    assert "2 cluster(s) checked" in result.stderr
    assert not (out / "base").exists()


def test_default_config_is_gpustack_yaml_and_default_folder_is_out(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gke_config(tmp_path, "gpustack")
    # starter() names the cluster after the file; give it a real name.
    config = tmp_path / "gpustack.yaml"
    config.write_text(config.read_text().replace("name: gpustack ", "name: edge "))
    assert cli("render").exit_code == 0
    assert cli("check").exit_code == 0
    (tmp_path / "out" / "edge" / "kustomization.yaml").unlink()
    result = cli("check")
    assert result.exit_code == 1
    assert "run `gpustack render -o out`" in result.stderr


def test_config_errors_exit_2_with_file_and_line(cli, tmp_path):
    config = gke_config(tmp_path)
    config.write_text(config.read_text().replace("# nodes:", "nodez:"))
    result = cli("check", config, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert f"{config}:" in result.stderr and "nodez" in result.stderr
    assert cli("check", tmp_path / "missing.yaml").exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no GPUStack configs in this folder" in cli("check", empty).stderr


def test_two_configs_with_one_name_are_refused(cli, tmp_path):
    first = gke_config(tmp_path / "a")
    second = gke_config(tmp_path / "b")
    result = cli("check", first, second, "-o", tmp_path / "out")
    assert result.exit_code == 2
    assert "cluster name 'edge' is used by both" in result.stderr


def test_a_stale_entitlement_is_reported_without_showing_the_certificate(cli, tmp_path):
    import base64

    def pem(body: bytes) -> bytes:
        encoded = base64.encodebytes(body).decode()
        return f"-----BEGIN CERTIFICATE-----\n{encoded}-----END CERTIFICATE-----\n".encode()

    config = tmp_path / "ocp.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {name: ocp}\n"
        "platform: {profile: openshift}\nentitlement: {enabled: true, pemFile: cert.pem}\n"
    )
    old, new = pem(b"first dummy certificate " * 20), pem(b"second dummy certificate " * 20)
    (tmp_path / "cert.pem").write_bytes(old)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    (tmp_path / "cert.pem").write_bytes(new)
    result = cli("check", config, "-o", out)
    assert result.exit_code == 1
    assert "machineconfig-50-entitlement-pem.yaml: changed" in result.stdout
    assert "<redacted sha256:" in result.stdout
    for secret in (old, new):
        encoded = base64.b64encode(secret).decode()
        fragments = [encoded[i : i + 24] for i in range(0, len(encoded) - 24, 24)]
        assert not [f for f in fragments if f in result.output]


def test_a_crlf_checkout_is_stale_but_still_gpustacks_own(cli, tmp_path):
    # git's core.autocrlf (Windows) writes CRLF: the files are still gpustack's, so check asks
    # for a plain render (not --force) and render replaces them.
    config = gke_config(tmp_path)
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    for path in (out / "edge").glob("*.yaml"):
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    result = cli("check", config, "-o", out)
    assert result.exit_code == 1
    assert "Line endings differ" in result.stdout and "--force" not in result.output
    assert cli("render", config, "-o", out).exit_code == 0
    assert cli("check", config, "-o", out).exit_code == 0
