"""A plain command line of render, check, diff, validate or schema runs by the commands' own small parser
(gpustack/commands/declared.py) rather than typer's; anything else goes to typer. Both must give
the user the same: stdout, stderr and exit code, for plain runs and for mistakes alike."""

from __future__ import annotations

import shutil

import pytest
from conftest import run_gpustack

from gpustack.commands import declared

CONFIG = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
metadata: {name: NAME}
platform: {profile: PROFILE}
"""
USER_PROFILE = """\
apiVersion: gpustack.dev/v1alpha1
kind: Profile
extends: kubeadm
metadata: {name: k3s, description: k3s}
"""

# Command lines the small parser runs itself (environment variables first).
PLAIN = [
    "render lab.yaml --stdout",
    "render lab.yaml -o fresh --output json",
    "render lab.yaml -ofresh --output=json -q",
    "render --out=fresh lab.yaml --force",
    "render -j2 --jobs 01 lab.yaml -o -",
    "render lab.yaml --set devicePlugin.sharing.replicas=8 --set=devicePlugin.sharing.replicas=4 -o -",
    "render lab.yaml --set bad",
    "render --profile=nope lab.yaml --stdout",
    "render missing.yaml",
    "render lab.yaml -- --stdout",
    "render lab.yaml --stdout --debug",
    "--profiles-dir prof render k3s.yaml --stdout",
    "--profiles-dir=prof render --profiles-dir nowhere k3s.yaml --stdout",
    "GPUSTACK_PROFILES_DIR=prof --profiles-dir nowhere render k3s.yaml --stdout",
    "GPUSTACK_PROFILES_DIR= --profiles-dir prof render k3s.yaml --stdout",
    "GPUSTACK_PROFILES_DIR=nowhere render --profiles-dir prof k3s.yaml --stdout",
    "--version",
    "--version render --bogus",
    "check lab.yaml -o out",
    "check lab.yaml -o missing",
    "check rke2.yaml -o out --color always",
    "check rke2.yaml -o out --output json",
    "diff lab.yaml rke2.yaml --color=always",
    "diff --profile kubeadm --profile rke2 --output json lab.yaml",
    "diff --against out --output markdown rke2.yaml",
    "diff lab.yaml",
    "diff lab.yaml rke2.yaml k3s.yaml",
    "validate out",
    "validate -strict -output json out",
    "schema",
    "--debug schema",
]
# Command lines left to typer: help, mistakes, and what typer reads its own way.
TYPER = [
    "",
    "-h",
    "--help",
    "bogus",
    "--bogus render",
    "--profiles-dir",
    "--profiles-dir prof",
    "--profiles-dir --debug render",
    "--version --bogus",
    "-- render",
    "render --help",
    "render -h",
    "render --bogus",
    "render -x",
    "render --stdout=1",
    "render -qo fresh lab.yaml",
    "render --jobs 0 lab.yaml",
    "render --jobs -1 lab.yaml",
    "render --jobs +1 lab.yaml --stdout",
    "render --jobs x lab.yaml",
    "render --output yaml lab.yaml",
    "render --output JSON lab.yaml",
    "render lab.yaml --output",
    "render -o",
    "render -o '' lab.yaml -q",
    "render ''",
    "render --version",
    "check --stdout",
    "check --color sometimes -o out",
    "diff --output xml lab.yaml rke2.yaml",
    "validate --jobs 0 out",
    "validate --bogus",
    "schema extra",
    "schema --bogus",
    "profiles list",
]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """Configs, a user profile and a rendered `out/`, made once: each way of each command line
    runs in a copy of its own."""
    folder = tmp_path_factory.mktemp("template")
    (folder / "lab.yaml").write_text(CONFIG.replace("NAME", "lab").replace("PROFILE", "kubeadm"))
    (folder / "rke2.yaml").write_text(CONFIG.replace("NAME", "lab").replace("PROFILE", "rke2"))
    (folder / "k3s.yaml").write_text(CONFIG.replace("NAME", "k3s").replace("PROFILE", "k3s"))
    (folder / "prof").mkdir()
    (folder / "prof" / "k3s.yaml").write_text(USER_PROFILE)
    assert run_gpustack("render", "lab.yaml", "-o", "out", "-q", cwd=folder).returncode == 0
    return folder


@pytest.fixture
def folder(template, tmp_path, monkeypatch):
    monkeypatch.delenv("GPUSTACK_PROFILES_DIR", raising=False)
    shutil.copytree(template, tmp_path / "template", symlinks=True)
    return tmp_path / "template"


def both_ways(line: str, folder, monkeypatch) -> tuple[list[object], bool]:
    """What `gpustack LINE` prints and exits with, by the small parser where it takes the line
    and by typer alone; and whether the small parser took it."""
    import shlex

    words = shlex.split(line)
    env = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    taken = []
    light = declared.main

    def spy(arguments: list[str]) -> int | None:
        code = light(arguments)
        taken.append(code is not None)
        return code

    results = []
    for way, main in (("light", spy), ("typer", lambda arguments: None)):
        monkeypatch.setattr(declared, "main", main)
        shutil.copytree(folder, folder.parent / way, symlinks=True)
        done = run_gpustack(*words, cwd=folder.parent / way, env=env)
        # a --debug traceback names other frames; its last line is the same
        stderr = done.stderr.splitlines()[-1:] if "Traceback" in done.stderr else done.stderr
        results.append([done.returncode, done.stdout, stderr])
    monkeypatch.setattr(declared, "main", light)
    assert results[0] == results[1], line
    return results[0], taken == [True]


@pytest.mark.parametrize("line", PLAIN)
def test_a_plain_command_line_runs_by_the_small_parser_as_typer_would(line, folder, monkeypatch):
    _, taken = both_ways(line, folder, monkeypatch)
    assert taken


@pytest.mark.parametrize("line", TYPER)
def test_help_and_mistakes_are_typer_s(line, folder, monkeypatch):
    (code, _, _), taken = both_ways(line, folder, monkeypatch)
    assert not taken
    assert code in (0, 1, 2)


def test_the_declared_commands_take_what_they_declare():
    """Each declared command's function takes exactly its arguments and options."""
    import importlib
    import inspect

    for name, module in declared.COMMANDS.items():
        command = importlib.import_module(module).COMMAND
        declared_names = [option.parameter for option in command.options]
        if command.arguments is not None:
            declared_names.append(command.arguments.parameter)
        assert sorted(inspect.signature(command.run).parameters) == sorted(declared_names), name
