"""The pre-commit hooks, end to end with the real pre-commit framework in a temporary git
repository.

Offline by design. A user's `.pre-commit-config.yaml` names this repository and a `rev`;
pre-commit then clones it and pip-installs it into a fresh virtualenv, which downloads gpustack's
dependencies (and its build backend) from PyPI. Tests may not use the network, so the test
repository declares the same hooks as `repo: local` with `language: system`, running this
checkout's gpustack with the test's own interpreter (`sys.executable -m gpustack`). What would
differ from the published hooks is ruled out separately: `.pre-commit-hooks.yaml` is loaded with
pre-commit's own manifest schema (`pre_commit.clientlib.load_manifest`), and the local hooks are
built from its entries (same id, name, entry, pass_filenames, require_serial and files; only
`gpustack` becomes `python -m gpustack` and the language becomes `system`). Hooks run on a real
`git commit`, installed by `pre-commit install`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from pre_commit.clientlib import load_manifest

from gpustack.emit import dump
from tests.conftest import ROOT, run_gpustack

MANIFEST = ROOT / ".pre-commit-hooks.yaml"


def published_hooks() -> dict[str, dict[str, Any]]:
    return {hook["id"]: hook for hook in load_manifest(str(MANIFEST))}


def local_hook(hook_id: str, **overrides: Any) -> dict[str, Any]:
    """The published hook as a `repo: local` hook that runs this checkout with this interpreter."""
    hook = published_hooks()[hook_id]
    command = hook["entry"].split()
    assert command[0] == "gpustack"
    return {
        "id": hook["id"],
        "name": hook["name"],
        "entry": shlex.join([sys.executable, "-m", "gpustack", *command[1:]]),
        "language": "system",
        "pass_filenames": hook["pass_filenames"],
        "require_serial": hook["require_serial"],
        "files": hook["files"],
        **overrides,
    }


class Repository:
    def __init__(self, path: Path, cache: Path, hooks: list[dict[str, Any]]) -> None:
        self.path = path
        path.mkdir()
        self.env = {
            **os.environ,
            "PRE_COMMIT_HOME": str(cache),
            "PYTHONPATH": str(ROOT),
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": str(cache),
        }
        self.git("init", "-q")
        config = {"repos": [{"repo": "local", "hooks": hooks}]}
        (path / ".pre-commit-config.yaml").write_text(dump(config))
        subprocess.run(
            [sys.executable, "-m", "pre_commit", "install"],
            cwd=path,
            env=self.env,
            check=True,
            capture_output=True,
        )

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=self.path,
            env=self.env,
            capture_output=True,
            text=True,
        )

    def gpustack(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The user's own steps around the hooks (init, render), in-process; the hooks
        themselves run as pre-commit starts them, on a real `git commit`."""
        return run_gpustack(*args, cwd=self.path, env=self.env)

    def commit(self, message: str) -> subprocess.CompletedProcess[str]:
        self.git("add", "-A")
        return self.git("commit", "-q", "-m", message)


def test_hook_manifest_is_valid_for_pre_commit_and_matches_the_commands():
    hooks = published_hooks()
    assert set(hooks) == {"gpustack-check", "gpustack-validate"}
    assert hooks["gpustack-check"]["entry"] == "gpustack check"
    # check is given the changed files, and re-renders only the clusters they affect.
    assert hooks["gpustack-check"]["pass_filenames"] is True
    assert hooks["gpustack-validate"]["entry"] == "gpustack validate"
    assert hooks["gpustack-validate"]["pass_filenames"] is True
    # One gpustack process per commit, however many CPUs pre-commit would share the files among.
    assert all(hook["require_serial"] is True for hook in hooks.values())
    assert all(hook["language"] == "python" for hook in hooks.values())
    # The command the entry names exists in this build and is the console script's.
    from gpustack.commands.root import ROOT

    assert {"check", "validate"} <= set(ROOT.commands)


def hook_result(output: str, name: str) -> str:
    """What pre-commit printed for the hook called `name`: Passed, Failed or Skipped."""
    (line,) = [line for line in output.splitlines() if line.startswith(name + ".")]
    return line.rsplit(".", 1)[1].split()[-1]


def test_check_and_validate_hooks_pass_a_clean_commit_and_refuse_stale_or_invalid_output(tmp_path):
    # The validate hook as the README suggests: the rendered manifests only, not every YAML file.
    hooks = [local_hook("gpustack-check"), local_hook("gpustack-validate", files="^out/")]
    check, validate = (hook["name"] for hook in hooks)
    repo = Repository(tmp_path / "repo", tmp_path / "cache", hooks)
    # A GKE cluster: the platform runs the device plugin, so gpustack's output is complete here.
    assert repo.gpustack("init", "--profile", "gke-cos", "--name", "edge").returncode == 0
    assert repo.gpustack("render", "gpustack.yaml", "-o", "out").returncode == 0
    clean = repo.commit("GPU stack for edge")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    output = clean.stdout + clean.stderr
    assert "gpustack check" in output
    assert (hook_result(output, check), hook_result(output, validate)) == ("Passed", "Passed")

    # One refused commit, each hook failing for its own reason: the config changed without a
    # render (check), and a manifest edited by hand into an invalid one (validate).
    config = repo.path / "gpustack.yaml"
    config.write_text(config.read_text().replace("namespace: gpu-system", "namespace: gpu-edge"))
    namespace = repo.path / "out" / "edge" / "namespace-gpu-system.yaml"
    namespace.write_text(namespace.read_text().replace("metadata:", "metadata:\n  nmae: typo"))
    refused = repo.commit("move to another namespace, forgetting to render; hand-edit a manifest")
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert (hook_result(output, check), hook_result(output, validate)) == ("Failed", "Failed")
    assert "out/edge/namespace-gpu-edge.yaml: missing" in output
    assert "out/edge/namespace-gpu-system.yaml: extra" in output
    assert "run `gpustack render -o out` and commit the result" in output
    assert "nmae" in output
    assert repo.git("log", "--oneline").stdout.count("\n") == 1  # the commit was refused

    # The render prunes the hand-edited file (its first line still holds gpustack's marker): the
    # namespace is gpu-edge now.
    assert repo.gpustack("render", "gpustack.yaml", "-o", "out").returncode == 0
    fixed = repo.commit("move to another namespace")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    output = fixed.stdout + fixed.stderr
    assert (hook_result(output, check), hook_result(output, validate)) == ("Passed", "Passed")
    assert not namespace.exists()
    assert repo.git("log", "--oneline").stdout.count("\n") == 2


def test_check_hook_without_args_in_a_fleet_repository_names_the_configs(tmp_path):
    """No `./gpustack.yaml`, configs in `clusters/`: the bare hook checks a config the commit
    stages (a named config is checked, as `gpustack check a.yaml` is), and fails naming the
    configs for a commit that stages none, instead of checking the embedded example (which would
    pass or fail for reasons unrelated to the fleet)."""
    repo = Repository(tmp_path / "repo", tmp_path / "cache", [local_hook("gpustack-check")])
    (repo.path / "clusters").mkdir()
    created = repo.gpustack("init", "--profile", "gke-cos", "clusters/edge.yaml")
    assert created.returncode == 0, created.stderr
    assert repo.gpustack("render", "clusters", "-o", "out").returncode == 0
    first = repo.commit("GPU stack for edge")
    assert first.returncode == 0, first.stdout + first.stderr

    kustomization = repo.path / "out" / "edge" / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text() + "# edited by hand\n")
    refused = repo.commit("hand-edit the output")
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "no ./gpustack.yaml here, but there are cluster configs: clusters/" in output
    assert "kubeadm-lab" not in output


def test_check_hook_in_a_fleet_checks_the_clusters_the_commit_changes(tmp_path):
    """pre-commit passes the staged files: a cluster's config checks that cluster, a shared
    base every cluster extending it; the fleet folder comes from `args`, as README shows."""
    hook = local_hook("gpustack-check", args=["clusters", "-o", "out"], verbose=True)
    repo = Repository(tmp_path / "repo", tmp_path / "cache", [hook])
    clusters = repo.path / "clusters"
    clusters.mkdir()
    head = "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
    (clusters / "base.yaml").write_text(head + "platform: {profile: gke-cos}\n")
    for name in ("east", "west", "north"):
        (clusters / f"{name}.yaml").write_text(
            head + f"extends: base.yaml\nmetadata: {{name: {name}}}\n"
        )
    assert repo.gpustack("render", "clusters", "-o", "out").returncode == 0
    first = repo.commit("three GKE clusters")
    assert first.returncode == 0, first.stdout + first.stderr
    # Every file of the fleet, checked by one process: one verdict, each cluster rendered once.
    assert first.stderr.count("cluster(s) checked") == 1, first.stderr

    west = clusters / "west.yaml"
    west.write_text(west.read_text() + "# the west region's cluster\n")
    one = repo.commit("comment on west")
    assert one.returncode == 0, one.stdout + one.stderr
    assert "1 cluster(s) checked, those the 1 file(s) named affect" in one.stderr

    west.write_text(west.read_text() + "dcgmExporter: {monitorLabels: {release: prom}}\n")
    stale = repo.commit("monitor west, forgetting to render")
    output = stale.stdout + stale.stderr
    assert stale.returncode != 0
    assert "out/west/podmonitoring-nvidia-dcgm-exporter.yaml: changed" in output
    assert "out/east" not in output and "out/north" not in output
    assert "run `gpustack render clusters -o out` and commit the result" in output

    # Rendered now, in a commit that also changes the base every cluster extends: all three
    # checked, west's new output current.
    assert repo.gpustack("render", "clusters", "-o", "out").returncode == 0
    base = clusters / "base.yaml"
    base.write_text(base.read_text() + "# shared by every cluster\n")
    shared = repo.commit("monitor west; comment on the base")
    assert shared.returncode == 0, shared.stdout + shared.stderr
    assert "3 cluster(s) checked: output in out is current and valid" in shared.stderr

    (repo.path / "notes.yaml").write_text("owner: platform team\n")
    unrelated = repo.commit("notes")
    assert unrelated.returncode == 0, unrelated.stdout + unrelated.stderr
    assert "0 cluster(s) checked" in unrelated.stderr
