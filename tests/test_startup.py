"""The command starts fast because each command imports its heavy parts only when it runs:
`gpustack --version` and `--help` must not load pydantic, the schemas or the YAML parser
(bench/cli.py measures the time; this guards the import structure that keeps it low)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT


def test_importing_the_cli_loads_no_heavy_module():
    code = (
        "import sys, gpustack.cli\n"
        "heavy = ['pydantic', 'ruamel.yaml', 'jsonschema', 'jsonschema_rs', 'kubernetes_validate',"
        " 'yaml', 'gpustack.config', 'gpustack.render']\n"
        "print(' '.join(name for name in heavy if name in sys.modules))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == []


@pytest.mark.parametrize(
    "flags",
    [
        "'-strict', '-schema-location', 'default', '-schema-location', 'gpustack'",  # kubeconform's
        "'--no-lint'",  # gpustack's own spelling
    ],
)
def test_validating_loads_neither_the_config_model_nor_the_renderer(flags):
    """`gpustack validate` with kubeconform's flags needs only the YAML reader and the schemas;
    the names it spells itself are the renderer's."""
    from gpustack.profiles import data_dir
    from gpustack.validation import schemas

    assert schemas.schemas_dir() == data_dir("schemas")
    code = (
        "import sys\nfrom gpustack.cli import app\n"
        f"try:\n    app(['validate', {flags}, 'tests/data/validate/corpus/valid.yaml'])\n"
        "except SystemExit:\n    pass\n"
        "print(' '.join(name for name in ['gpustack.model', 'gpustack.config', 'gpustack.render',"
        " 'gpustack.output']"
        " if name in sys.modules))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert completed.stdout.splitlines()[-1:] in ([], [""]), completed.stdout


def test_loading_a_config_builds_the_validators_of_the_config_and_profile_only():
    """A section the config leaves out takes its default without building the section's own
    validator (the config's validator holds the sections' schemas): building them all was
    about 35 ms of every command that loads a config."""
    code = (
        "from pathlib import Path\nfrom pydantic import BaseModel\n"
        "from pydantic._internal._mock_val_ser import MockValSer\n"
        "from gpustack import model\nfrom gpustack.config import load_stack\n"
        "load_stack(Path('examples/kubeadm.yaml'))\n"
        "print(' '.join(sorted(name for name, cls in vars(model).items() if isinstance(cls, type)"
        " and issubclass(cls, BaseModel) and cls.__module__ == model.__name__"
        " and not isinstance(cls.__pydantic_validator__, MockValSer))))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert completed.stdout.split() == ["GPUStack", "Profile"]


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
def test_a_run_loads_only_the_command_it_names(tmp_path, line, code, loaded):
    """The program names its commands' modules without importing them: a run parses with
    argparse (standard library) and loads only the module of the command it runs."""
    program = (
        "import sys\nfrom gpustack.cli import run\n"
        f"code = run({line!r})\n"
        "names = sorted(n.rpartition('.')[2] for n in sys.modules if n.startswith('gpustack.commands.')"
        " and n.rpartition('.')[2] not in ('common', 'declared', 'root'))\n"
        "print(code, names)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == f"{code} {loaded}", done.stdout + done.stderr


def _loaded_after(lines: list[list[str]], names: list[str]) -> list[str]:
    """Which of `names` a process has loaded after running each command line in turn."""
    program = (
        "import sys\nfrom gpustack.cli import run\n"
        f"codes = [run(line) for line in {lines!r}]\n"
        f"print(codes, ' '.join(name for name in {names!r} if name in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True
    )
    codes, _, loaded = done.stdout.splitlines()[-1].partition("] ")
    assert codes.strip("[").split(", ") == ["0"] * len(lines), done.stdout + done.stderr
    return loaded.split()


# Loaded only by the runs that use them: ruamel (the full YAML parser) for a file libyaml cannot
# read as the full parser would, jsonpatch for a config's JSON 6902 patches, difflib and the diff
# printer for a suggestion or stale output, ctypes to swap a folder that exists.
NOT_NEEDED = ["ruamel.yaml", "jsonpatch", "difflib", "gpustack.diff", "ctypes"]


def test_rendering_and_checking_a_config_load_only_what_they_use(tmp_path):
    out = str(tmp_path / "out")
    lines = [
        ["render", "examples/kubeadm.yaml", "-o", out, "-q"],
        ["check", "examples/kubeadm.yaml", "-o", out, "-q"],
        ["validate", str(tmp_path / "out" / "kubeadm-lab")],
    ]
    assert _loaded_after(lines, NOT_NEEDED) == []
    # The first render wrote a new folder: replacing it (a config changed) swaps in the new one.
    changed = [["render", "examples/kubeadm.yaml", "-o", out, "-q", "--set", "gfd.enabled=false"]]
    assert _loaded_after(lines[:1] + changed, NOT_NEEDED) == ["ctypes"]


def test_the_config_model_s_annotations_are_not_strings():
    """pydantic evaluates an annotation written as a string (`from __future__ import
    annotations`) on creating each model class, a third of the model's import time."""
    from pydantic import BaseModel

    from gpustack import model

    models = [
        cls
        for cls in vars(model).values()
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls.__module__ == model.__name__
    ]
    assert len(models) > 50
    for cls in models:
        written = vars(cls).get("__annotations__", {})
        assert not [name for name, value in written.items() if isinstance(value, str)], cls


@pytest.mark.parametrize(("given", "searched"), [(None, False), ("other-plugin", True)])
def test_the_program_leaves_pydantic_plugins_out_unless_told(given, searched):
    """The command does not search the environment's distributions for pydantic plugins (their
    entry points, read through importlib.metadata) when it validates a config; a
    PYDANTIC_DISABLE_PLUGINS the user set is kept as it is."""
    program = (
        "import os, runpy, sys\nsys.argv = ['gpustack', 'render', 'examples/kubeadm.yaml',"
        " '--stdout']\n"
        "try:\n    runpy.run_module('gpustack', run_name='__main__')\nexcept SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        "from pydantic.plugin import _loader\n"
        "print(os.environ['PYDANTIC_DISABLE_PLUGINS'], _loader._plugins is not None)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYDANTIC_DISABLE_PLUGINS"}
    if given is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = given
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"{given or '__all__'} {searched}"
