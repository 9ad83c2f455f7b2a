"""The command starts fast because each command imports its heavy parts only when it runs:
`gpustack --version` and `--help` must not load pydantic, the schemas or the YAML parser
(bench/cli.py measures the time; this guards the import structure that keeps it low)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
from typing import Any

import pytest
from conftest import ROOT

HEAVY = [
    "pydantic",
    "ruamel.yaml",
    "jsonschema",
    "jsonschema_rs",
    "kubernetes_validate",
    "yaml",
    "gpustack.config",
    "gpustack.render",
]
RENDERER = ["gpustack.model", "gpustack.config", "gpustack.render", "gpustack.output"]
VALID = ROOT / "tests" / "data" / "validate" / "corpus" / "valid.yaml"
KUBECONFORM_FLAGS = ["-strict", "-schema-location", "default", "-schema-location", "gpustack"]

# What each new interpreter does, step by step; each step's result is what it finds in
# sys.modules (or the validators built) right after it. Steps share an interpreter only where
# the earlier ones cannot hide what a later one loads: a step that must load no command module
# comes before any that loads one, each command's module is loaded first by the run that is
# about it, checks that a module is absent may follow one another, and the config is loaded
# where no validator was built before (its result says which were).
INTERPRETERS: list[list[tuple[str, list[str]]]] = [
    [
        ("import", []),
        ("run", ["--version"]),
        ("run", ["--profiles-dir", "x", "--version", "render", "--bogus"]),  # eager: first
        ("run", ["--debug", "--version"]),
        ("run", ["render", "missing.yaml"]),
    ],
    [("run", ["check", "missing.yaml", "-o", "out"])],
    [
        ("run", ["validate", "-summary", "missing.yaml"]),
        ("validate", [*KUBECONFORM_FLAGS, str(VALID)]),  # kubeconform's
        ("validate", ["--no-lint", str(VALID)]),  # gpustack's own spelling
    ],
    [("run", ["profiles", "show", "nonesuch"])],
    [("run", ["render", "--bogus"]), ("load", [str(ROOT / "examples" / "kubeadm.yaml")])],
]

PROGRAM = """\
import json
import sys

steps, results = json.loads(sys.argv[1]), []


def commands():
    return sorted(
        n.rpartition(".")[2]
        for n in sys.modules
        if n.startswith("gpustack.commands.")
        and n.rpartition(".")[2] not in ("common", "declared", "root")
    )


def built():
    from pydantic import BaseModel
    from pydantic._internal._mock_val_ser import MockValSer

    from gpustack import model

    return sorted(
        name
        for name, cls in vars(model).items()
        if isinstance(cls, type)
        and issubclass(cls, BaseModel)
        and cls.__module__ == model.__name__
        and not isinstance(cls.__pydantic_validator__, MockValSer)
    )


for kind, argument in steps:
    if kind == "import":
        import gpustack.cli

        results.append([name for name in HEAVY if name in sys.modules])
    elif kind == "run":
        from gpustack.cli import run

        code = run(argument)
        results.append([code, commands()])
    elif kind == "validate":
        from gpustack.cli import app

        try:
            app(["validate", *argument])
        except SystemExit:
            pass
        results.append([name for name in RENDERER if name in sys.modules])
    elif kind == "load":
        from pathlib import Path

        from gpustack.config import load_stack

        before = built()
        load_stack(Path(argument[0]))
        results.append([before, built()])
sys.stdout.flush()
print("results:", json.dumps(results))
"""


@functools.cache
def step_results() -> dict[tuple[str, tuple[str, ...]], Any]:
    """Each step's result, by (kind, argument), from one new interpreter per entry of
    INTERPRETERS, each run in an empty folder."""
    found: dict[tuple[str, tuple[str, ...]], Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        for steps in INTERPRETERS:
            program = f"HEAVY = {HEAVY!r}\nRENDERER = {RENDERER!r}\n{PROGRAM}"
            done = subprocess.run(
                [sys.executable, "-c", program, json.dumps(steps)],
                cwd=folder,
                capture_output=True,
                text=True,
                check=False,
            )
            last = done.stdout.splitlines()[-1:]
            assert done.returncode == 0 and last and last[0].startswith("results: "), (
                done.stdout + done.stderr
            )
            results = json.loads(last[0].removeprefix("results: "))
            for (kind, argument), result in zip(steps, results, strict=True):
                found[kind, tuple(argument)] = result
    return found


def test_importing_the_cli_loads_no_heavy_module():
    assert step_results()["import", ()] == []


@pytest.mark.parametrize(
    "flags",
    [KUBECONFORM_FLAGS, ["--no-lint"]],  # kubeconform's; gpustack's own spelling
)
def test_validating_loads_neither_the_config_model_nor_the_renderer(flags):
    """`gpustack validate` with kubeconform's flags needs only the YAML reader and the schemas;
    the names it spells itself are the renderer's."""
    from gpustack.profiles import data_dir
    from gpustack.validation import schemas

    assert schemas.schemas_dir() == data_dir("schemas")
    assert step_results()["validate", (*flags, str(VALID))] == []


def test_loading_a_config_builds_the_validators_of_the_config_and_profile_only():
    """A section the config leaves out takes its default without building the section's own
    validator (the config's validator holds the sections' schemas): building them all was
    about 35 ms of every command that loads a config."""
    before, after = step_results()["load", (str(ROOT / "examples" / "kubeadm.yaml"),)]
    assert before == []  # nothing built by the steps before it in its interpreter
    assert after == ["GPUStack", "Profile"]


def test_a_section_left_out_is_the_section_s_own_default():
    """What a config gets for a section it leaves out equals the section's model with nothing
    given (its defaults, and no field counted as set), for every section of every model."""
    from pydantic import BaseModel

    from gpustack import model

    checked = 0
    for cls in vars(model).values():
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            continue
        for name, field in cls.model_fields.items():
            if field.default_factory is None:
                continue
            default = field.get_default(call_default_factory=True)
            if not isinstance(default, BaseModel):
                continue
            given = type(default)(**default.model_dump(exclude_defaults=True))
            assert default == given, f"{cls.__name__}.{name}"
            assert default.model_fields_set == given.model_fields_set, f"{cls.__name__}.{name}"
            checked += 1
    assert checked >= 25


def test_the_built_in_api_groups_are_known_without_reading_every_version():
    """api-version-not-served takes the built-in API groups from a list kept beside the sizes of
    the schema files it was read from, rather than parsing every Kubernetes version's schemas on
    each run: the installed files are those, and reading them gives that list."""
    from gpustack.lint import api_versions

    assert api_versions.definition_sizes() == api_versions.SHIPPED_SIZES
    assert api_versions.read_built_in_groups() == api_versions.SHIPPED_GROUPS


def test_other_schema_files_are_read_for_the_built_in_api_groups(monkeypatch):
    from gpustack.lint import api_versions

    monkeypatch.setattr(api_versions, "SHIPPED_GROUPS", frozenset({"example.com"}))
    monkeypatch.setattr(api_versions, "SHIPPED_SIZES", {})
    api_versions.built_in_groups.cache_clear()
    try:
        assert api_versions.built_in_groups() == api_versions.read_built_in_groups()
    finally:
        api_versions.built_in_groups.cache_clear()


@pytest.mark.parametrize(
    ("line", "code", "loaded"),
    [
        (["--version"], 0, []),
        (["--profiles-dir", "x", "--version", "render", "--bogus"], 0, []),  # eager: first
        (["render", "missing.yaml"], 2, ["render"]),
        (["check", "missing.yaml", "-o", "out"], 2, ["check"]),
        (["--debug", "--version"], 0, []),
        (["validate", "-summary", "missing.yaml"], 1, ["validate"]),
        (["profiles", "show", "nonesuch"], 2, ["profiles"]),
        (["render", "--bogus"], 2, ["render"]),
    ],
)
def test_a_run_loads_only_the_command_it_names(line, code, loaded):
    """The program names its commands' modules without importing them: a run parses with
    argparse (standard library) and loads only the module of the command it runs."""
    assert step_results()["run", tuple(line)] == [code, loaded]
