"""What a user meets at the command line: which configs a bare command reads, clear messages
instead of tracebacks, and recovering output whose marker line was lost."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_gpustack, run_on_terminal, runs_on_one_terminal

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
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


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
    # -q prints nothing but warnings and errors.
    assert cli("render", "-q").stderr == cli("check", "-q").stderr == ""


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
    result = cli(
        "init",
        tmp_path / "site.yaml",
        "--profiles-dir",
        tmp_path / "profiles",
        "--profile",
        "kubeadm",
    )
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


# --- fleet output ------------------------------------------------------------------------------


def small_fleet(folder: Path) -> Path:
    clusters = folder / "clusters"
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        cluster(clusters / f"{name}.yaml", name)
    return clusters


def test_render_prints_one_summary_line_for_a_fleet(cli, tmp_path):
    clusters = small_fleet(tmp_path)
    out = tmp_path / "out"
    first = cli("render", clusters, "-o", out)
    assert first.exit_code == 0, first.output
    files = len([p for p in out.rglob("*") if p.is_file()])
    assert first.stderr.splitlines() == [
        f"rendered 3 cluster(s) into {out}: {files} files written, 0 unchanged, 0 removed"
    ]
    (clusters / "gpu-c.yaml").write_text(
        (clusters / "gpu-c.yaml").read_text() + "gfd: {enabled: false}\n"
    )
    second = cli("render", clusters, "-o", out)
    gone = files - len([p for p in out.rglob("*") if p.is_file()])
    assert gone > 0
    # The device plugin's kustomization changes too; everything else is as it was.
    (line,) = second.stderr.splitlines()
    assert line.startswith("rendered 3 cluster(s) into ") and f", {gone} removed" in line
    assert cli("render", clusters, "-o", out, "--quiet").stderr == ""


def test_render_and_check_as_json(cli, tmp_path):
    clusters = small_fleet(tmp_path)
    out = tmp_path / "out"
    result = cli("render", clusters, "-o", out, "--output", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [c["name"] for c in document["clusters"]] == ["gpu-a", "gpu-b", "gpu-c"]
    assert document["written"] == sum(c["written"] for c in document["clusters"]) > 0
    assert document["clusters"][0]["folder"] == str(out / "gpu-a")
    check = cli("check", clusters, "-o", out, "--output", "json")
    assert check.exit_code == 0, check.output
    report = json.loads(check.stdout)
    assert report["current"] is True and report["valid"] is True
    (out / "gpu-b" / "kustomization.yaml").unlink()
    check = cli("check", clusters, "-o", out, "--output", "json")
    assert check.exit_code == 1
    report = json.loads(check.stdout)
    stale = {c["name"]: c for c in report["clusters"] if c["missing"]}
    assert list(stale) == ["gpu-b"] and stale["gpu-b"]["missing"] == ["kustomization.yaml"]


# --- conventions -------------------------------------------------------------------------------

PYTHON_TYPES = re.compile(r"<(list\[|path|str|int|float|bool|text|choice)", re.I)


def test_help_names_option_values_by_what_they_are(cli):
    from test_readme import LEAVES

    for words in LEAVES:
        result = cli(*words, "--help")
        assert result.exit_code == 0, words
        options = result.stdout.split("\nOptions:\n", 1)[1]
        assert not PYTHON_TYPES.search(options), (words, result.stdout)
        # A value is named by what it is (DIR, NAME, FORMAT), not by a parameter's name.
        named_by_parameter = re.findall(r"--[a-z-]+ ([A-Z]+_[A-Z_]+)", result.stdout)
        assert not named_by_parameter, (words, named_by_parameter)


def test_a_mistake_on_the_command_line_is_exit_2_with_the_command_s_usage(cli):
    from test_readme import LEAVES

    for words in LEAVES:
        result = cli(*words, "--bogus")
        assert result.exit_code == 2 and result.stdout == "", words
        assert result.stderr.startswith(f"Usage: gpustack {' '.join(words)} "), result.stderr
        # The option, or an argument the command needs and was not given.
        last = result.stderr.splitlines()[-1]
        assert last.startswith("Error: "), result.stderr
        assert "--bogus" in last or "Missing argument" in last, result.stderr
        assert result.exception is None
    for words, message in (
        (["rendr"], "No such command 'rendr'. Did you mean 'render'?"),
        (["render", "-j", "0"], "'-j' / '--jobs'"),
        (["render", "--output", "yaml"], "'yaml'"),
        (["profiles", "show"], "Missing argument 'NAME'"),
        (["--profiles-dir"], "Option '--profiles-dir' requires an argument"),
    ):
        result = cli(*words)
        assert (result.exit_code, result.stdout) == (2, ""), words
        assert message in result.stderr.splitlines()[-1], result.stderr


def test_words_after_a_double_dash_are_arguments(cli, tmp_path, monkeypatch):
    """`--` ends the options: a file named like an option is a path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "--strict").write_text(
        (Path(__file__).parent / "data/validate/corpus/valid.yaml").read_text()
    )
    result = cli("validate", "-summary", "--", "--strict")
    assert result.exit_code == 0, result.output
    assert "1 file" in result.stdout
    # A file that is not there, rather than kubeconform's -summary.
    missing = cli("validate", "--", "-summary")
    assert (
        missing.exit_code == 1 and "-summary - failed validation: file not found" in missing.stdout
    )


def user_profile(tmp_path: Path, name: str, description: str) -> tuple[Path, Path]:
    """A profiles folder holding `name`, a profile extending kubeadm, and a config using it."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / f"{name}.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: Profile\nextends: kubeadm\n"
        f"metadata: {{name: {name}, description: {description}}}\n"
    )
    config = tmp_path / "lab.yaml"
    config.write_text(CONFIG.replace("NAME", "lab").replace("kubeadm", name))
    return profiles, config


def test_global_options_work_after_the_command(cli, tmp_path):
    profiles, config = user_profile(tmp_path, "k3s", "k3s")
    for arguments in (
        ["--profiles-dir", profiles, "render", config, "--stdout"],
        ["render", config, "--stdout", "--profiles-dir", profiles],
    ):
        assert cli(*arguments).exit_code == 0
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: GPUStack\nplatform: [\n")
    after = cli("render", broken, "--stdout", "--debug")
    assert after.exit_code != 2 and after.exception is not None  # the traceback, as asked


def test_command_lines_run_one_after_another_in_one_process_share_nothing(cli, tmp_path):
    """A process that runs several command lines (dev/generate.py; the in-process runner here)
    builds each command's parser once and parses every later line with it: what one line gave
    (a root option, --debug, a mistake) reaches no other."""
    profiles, config = user_profile(tmp_path, "lab-nodes", "lab")
    given = cli("--profiles-dir", profiles, "render", config, "--stdout", "--debug")
    assert given.exit_code == 0, given.stderr
    # The same line without the root option: the profile is unknown, an error without --debug's
    # traceback.
    bare = cli("render", config, "--stdout")
    assert bare.exit_code == 2 and bare.exception is None, bare.stderr
    assert "lab-nodes" in bare.stderr
    assert cli("render", "-j", "0").exit_code == 2
    after = cli("render", config, "--stdout", "--profiles-dir", profiles)
    assert after.exit_code == 0, after.stderr
    assert after.stdout == given.stdout


def test_user_profiles_from_the_environment(cli, tmp_path, monkeypatch):
    profiles, config = user_profile(tmp_path, "k3s", "k3s from the environment")
    monkeypatch.setenv("GPUSTACK_PROFILES_DIR", str(profiles))
    assert "k3s from the environment" in cli("profiles", "list").stdout
    assert cli("render", config, "--stdout").exit_code == 0


def test_a_config_from_stdin(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("render", "-", "--stdout", input=CONFIG.replace("NAME", "piped"))
    assert result.exit_code == 0, result.output
    assert "kind: DaemonSet" in result.stdout
    bad = cli("render", "-", "--stdout", input=CONFIG.replace("NAME", "Bad_Name"))
    assert bad.exit_code == 2
    assert bad.stderr.startswith("error: <stdin>:3:18: metadata.name: 'Bad_Name'"), bad.stderr


def run_real(*args: str, env: dict[str, str], cwd: Path) -> str:
    """The real `python -m gpustack`: what it printed on stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "gpustack", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout


def test_check_colours_on_a_terminal_unless_no_color(cli, tmp_path):
    config = cluster(tmp_path / "lab.yaml")
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    plugin = out / "lab" / "daemonset-nvidia-device-plugin.yaml"
    plugin.write_text(plugin.read_text() + "# edited\n")
    env = {key: value for key, value in os.environ.items() if key != "NO_COLOR"}
    args = ("check", str(config), "-o", str(out))
    # One process, its stdout a terminal: a run as it starts, then one with NO_COLOR set.
    coloured, plain = runs_on_one_terminal(
        [(list(args), {}), (list(args), {"NO_COLOR": "1"})], cwd=tmp_path, env=env
    )
    assert coloured[0] == plain[0] == 1  # the edited file is stale
    assert "\x1b[" in coloured[1]
    assert "\x1b[" not in plain[1] and "daemonset-nvidia-device-plugin.yaml" in plain[1]
    # Not a terminal (in-process, its output captured): no colour either.
    piped = run_gpustack(*args, cwd=tmp_path, env={"NO_COLOR": None})
    assert piped.returncode == 1 and "\x1b[" not in piped.stdout + piped.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_scripts_and_completions(shell, tmp_path):
    # typer's own script for a named shell, as the protocol's `source_SHELL` gives it.
    script = run_gpustack(env={"_GPUSTACK_COMPLETE": f"source_{shell}"}, cwd=tmp_path)
    assert script.returncode == 0, script.stderr
    assert "_GPUSTACK_COMPLETE" in script.stdout
    env = {
        **os.environ,
        "_GPUSTACK_COMPLETE": f"complete_{shell}",
        "COMP_WORDS": "gpustack ren",
        "COMP_CWORD": "1",
        "_TYPER_COMPLETE_ARGS": "gpustack ren",
        "_TYPER_COMPLETE_FISH_ACTION": "get-args",
    }
    completed = run_real(env=env, cwd=tmp_path)
    assert "render" in completed, completed


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("gpustack render --profile o", ["openshift"]),
        ("gpustack diff --profile gke", ["gke-cos", "gke-ubuntu"]),
        ("gpustack init --profile k", ["k3s", "kubeadm"]),
        ("gpustack profiles show r", ["rke2"]),
        ("gpustack validate --output j", ["json", "junit"]),
        (
            "gpustack render --set devicePlugin.sharing.",
            [
                "devicePlugin.sharing.failRequestsGreaterThanOne=",
                "devicePlugin.sharing.renameByDefault=",
                "devicePlugin.sharing.replicas=",
                "devicePlugin.sharing.strategy=",
            ],
        ),
        ("gpustack check --set devicePlugin.sharing.rep", ["devicePlugin.sharing.replicas="]),
        ("gpustack diff --set nodes.cgroup", ["nodes.cgroupDriver="]),
        ("gpustack render -o out --set platform.kubernetesV", ["platform.kubernetesVersion="]),
        ("gpustack render --set ext", []),  # extends: names files, not a --set field
        ("gpustack render --set devicePlugin.sharing.replica", ["devicePlugin.sharing.replicas="]),
    ],
)
def test_profile_names_and_formats_complete(tmp_path, words, expected):
    # In-process (the answer is the same code's): the real process answers in
    # test_shell_completion_scripts_and_completions.
    env = {
        "_GPUSTACK_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - 1),
    }
    assert run_gpustack(env=env, cwd=tmp_path).stdout.split() == expected


@pytest.mark.parametrize(
    ("shell", "word", "expected"),
    [
        ("zsh", "devicePlugin.sharing.strategy=", ["none", "time-slicing", "mps"]),
        ("fish", "devicePlugin.sharing.strategy=t", ["time-slicing"]),
        ("fish", "nodes.controlPlane=", ["true", "false"]),
        ("zsh", "platform.profile=gke", ["gke-cos", "gke-ubuntu"]),
    ],
)
def test_a_set_value_completes_to_the_fields_choices(tmp_path, shell, word, expected):
    """zsh and fish hand over the whole word: after `=` come the field's choices (its enum from
    the config schema, a boolean, the profile names)."""
    words = f"gpustack render --set {word}"
    env = {
        "_GPUSTACK_COMPLETE": f"complete_{shell}",
        "_TYPER_COMPLETE_ARGS": words,
        "_TYPER_COMPLETE_FISH_ACTION": "get-args",
    }
    completed = run_gpustack(env=env, cwd=tmp_path).stdout
    field = word.partition("=")[0]
    assert re.findall(re.escape(field) + r"=([-a-z]+)", completed) == expected, completed


def test_every_completed_set_field_is_one_render_takes(cli, tmp_path):
    """Each completed path names a field of the config: render accepts it with a value of its
    own choices, and refuses a path the completion does not offer."""
    from gpustack.commands.common import set_fields

    fields = set_fields("")
    assert len(fields) > 100 and all(field.endswith("=") for field in fields)
    assert "devicePlugin.sharing.replicas=" in fields
    assert not any(field.startswith(("extends", "apiVersion", "kind")) for field in fields)
    for path in [f for f in fields if f.startswith(("devicePlugin.", "nodes.", "toolkit."))]:
        for choice in set_fields(path)[:1]:
            # The embedded example is kubeadm's; a field of one platform only (OpenShift's
            # machineConfigPool) renders on that platform.
            results = [
                cli("render", "--stdout", "--profile", profile, "--set", choice)
                for profile in ("kubeadm", "openshift")
            ]
            for result in results:
                assert "is not a field" not in result.output and "Extra inputs" not in result.output
            # Taken, or refused only because it changes nothing on that cluster (the example
            # shares its GPUs: `sharing.strategy=none` leaves its replicas without effect).
            assert any(r.exit_code == 0 or "has no effect" in r.stderr for r in results), (
                choice,
                results[0].output,
            )
    refused = cli("render", "--stdout", "--set", "devicePlugin.sharing.replica=4")
    assert refused.exit_code == 2


def test_bash_completes_a_set_field_and_a_command_through_typer_s_script(tmp_path):
    """The bash script typer gives (`_GPUSTACK_COMPLETE=source_bash`), run by bash: it asks the
    real command what fits at the cursor."""
    script = tmp_path / "gpustack.bash"
    written = run_gpustack(env={"_GPUSTACK_COMPLETE": "source_bash"}, cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    script.write_text(written.stdout)
    launcher = tmp_path / "bin" / "gpustack"
    launcher.parent.mkdir()
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m gpustack "$@"\n')
    launcher.chmod(0o755)
    probe = (
        f"source {script}\n"
        "COMP_WORDS=(gpustack render --set devicePlugin.sharing.rep); COMP_CWORD=3\n"
        "_gpustack_completion gpustack; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
        "COMP_WORDS=(gpustack ren); COMP_CWORD=1\n"
        "_gpustack_completion gpustack; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    env = {**os.environ, "PATH": f"{launcher.parent}{os.pathsep}{os.environ['PATH']}"}
    shown = subprocess.run(
        ["bash", "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert shown == ["devicePlugin.sharing.replicas=", "render"]


def test_validate_completes_the_formats_it_reports():
    from gpustack.commands import validate
    from gpustack.validation import report

    assert validate.OUTPUTS == report.FORMATS


def test_completion_for_an_unknown_shell_is_refused(tmp_path):
    result = run_gpustack(env={"_GPUSTACK_COMPLETE": "source_tcsh"}, cwd=tmp_path)
    assert result.returncode != 0 and result.stdout == ""


def test_a_long_render_shows_progress_on_a_terminal_only(tmp_path):
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    # Progress counts clusters, whatever each holds: small ones (GKE without the exporter, a
    # few files each) keep the render cheap.
    for index in range(20):
        (clusters / f"gpu-{index}.yaml").write_text(
            CONFIG.replace("NAME", f"gpu-{index}").replace("kubeadm", "gke-cos")
            + "dcgmExporter: {enabled: false}\n"
        )
    code, shown = run_on_terminal("render", "clusters", "-o", "out", cwd=tmp_path, stream="stderr")
    assert code == 0
    # Both count clusters: the fleet's _gitops/ folder is written (here emptied) too, but is none.
    assert "rendering 20/20" in shown and "writing 20/20" in shown
    assert "/21" not in shown
    # The progress line is cleared before the summary, which stays.
    assert shown.rstrip().endswith("0 unchanged, 0 removed")
    # Not a terminal (in-process, its stderr captured): the summary alone.
    piped = run_gpustack("render", "clusters", "-o", "out", cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr.startswith("rendered 20 cluster(s) into out: 0 files written, ")
    assert piped.stderr.count("\n") == 1 and "\r" not in piped.stderr
