from __future__ import annotations

from ruamel.yaml import YAML


def test_bare_render_uses_the_embedded_kubeadm_example(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("render")
    assert result.exit_code == 0, result.output
    folder = tmp_path / "out" / "kubeadm-lab"
    kustomization = YAML(typ="safe").load((folder / "kustomization.yaml").read_text())
    # CRDs come first (nothing depends on the namespace to define them), from their own folder
    # (which `kubectl apply -k` applies first on an empty cluster), then the namespace.
    resources = kustomization["resources"]
    assert resources[0].startswith("crds/customresourcedefinition-")
    first = next(name for name in resources if not name.startswith("crds/"))
    assert first == "namespace-gpu-system.yaml"
    for name in kustomization["resources"]:
        assert (folder / name).is_file()
    assert (folder / "node" / "README.md").is_file()


def test_rendering_twice_gives_identical_bytes(cli, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    assert cli("render", "-o", first).exit_code == 0
    assert cli("render", "-o", second).exit_code == 0
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for name in files:
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_stdout_with_several_clusters_warns_that_the_stream_holds_them_all(cli, tmp_path):
    for name in ("east", "west"):
        (tmp_path / f"{name}.yaml").write_text(
            f"apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {{name: {name}}}\n"
            "platform: {profile: rke2}\n"
        )
    both = cli("render", tmp_path / "east.yaml", tmp_path / "west.yaml", "--stdout")
    assert both.exit_code == 0
    assert "one stream holds the objects of 2 clusters (east, west)" in both.stderr
    assert "warning" not in cli("render", tmp_path / "east.yaml", "--stdout").stderr


def test_a_warning_found_before_writing_is_shown_when_writing_is_refused(cli, tmp_path):
    """render says what it finds as it finds it: a stray folder's warning still reaches the
    user when the write that follows is refused, and the refusal comes after it."""
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    for name in ("east", "west"):
        (clusters / f"{name}.yaml").write_text(
            f"apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata: {{name: {name}}}\n"
            "platform: {profile: rke2}\n"
        )
    out = tmp_path / "out"
    assert cli("render", clusters, "-o", out).exit_code == 0
    (clusters / "west.yaml").rename(clusters / "north.yaml")
    (clusters / "north.yaml").write_text(
        (clusters / "north.yaml").read_text().replace("name: west", "name: north")
    )
    edited = out / "east" / "kustomization.yaml"
    edited.write_text(edited.read_text().split("\n", 1)[1] + "# edited by hand\n")
    before = edited.read_bytes()

    result = cli("render", clusters, "-o", out)
    assert result.exit_code == 2
    warned = result.stderr.index(f"warning: {out / 'west'}: gpustack's output for a cluster")
    refused = result.stderr.index(f"error: {edited}: exists and was not written by gpustack")
    assert warned < refused
    assert edited.read_bytes() == before
    assert not (out / "north").exists()
