"""The command starts fast because each command imports its heavy parts only when it runs:
`gpustack --version` and `--help` must not load pydantic, the schemas or the YAML parser
(bench/cli.py measures the time; this guards the import structure that keeps it low).

What a process loads is seen in a fresh one; each such process runs several command lines, one
after another, and says what it loaded after each (a module, once loaded, stays loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def _results(program: str, cwd: Path, env: dict[str, str] | None = None) -> list:
    """What `program`, run in a fresh Python process, prints as JSON on its last line (after
    whatever the commands it runs print)."""
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


# Which of `names` are loaded (sys.modules), as Python source for the programs below.
LOADED = "[name for name in {names!r} if name in sys.modules]"
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
# (command line, its exit code, the command modules it loads)
LINES = [
    (["--version"], 0, []),
    (["--profiles-dir", "x", "--version", "render", "--bogus"], 0, []),  # eager: first
    (["render", "missing.yaml"], 2, ["render"]),
    (["check", "missing.yaml", "-o", "out"], 2, ["check"]),
    (["--debug", "--version"], 0, []),
    (["validate", "-summary", "missing.yaml"], 1, ["validate"]),
    (["profiles", "show", "nonesuch"], 2, ["profiles"]),
    (["render", "--bogus"], 2, ["render"]),
]


def test_a_run_loads_only_the_command_it_names(tmp_path):
    """The program names its commands' modules without importing them: a run parses with
    argparse (standard library) and loads only the module of the command it runs. Importing
    the command line loads no heavy module. Between the lines, the program forgets the command
    modules a line loaded, so the next line loads its own again."""
    program = (
        "import importlib, json, sys\nfrom gpustack.cli import run\n"
        f"results = [{LOADED.format(names=HEAVY)}]\n"
        "package = importlib.import_module('gpustack.commands')\n"
        f"for line in {[line for line, _, _ in LINES]!r}:\n"
        "    code = run(line)\n"
        "    names = sorted(n.rpartition('.')[2] for n in sys.modules if n.startswith("
        "'gpustack.commands.') and n.rpartition('.')[2] not in ('common', 'declared', 'root'))\n"
        "    results.append([code, names])\n"
        "    for name in names:\n"
        "        del sys.modules[f'gpustack.commands.{name}']\n"
        "        vars(package).pop(name, None)\n"
        "print(json.dumps(results))\n"
    )
    heavy, *runs = _results(program, tmp_path)
    assert heavy == []
    assert runs == [[code, loaded] for _, code, loaded in LINES]


def test_validating_loads_neither_the_config_model_nor_the_renderer():
    """`gpustack validate` with kubeconform's flags needs only the YAML reader and the schemas;
    the names it spells itself are the renderer's: neither loads the config model, the loader,
    the renderer or the writer, nor what only some inputs need."""
    from gpustack.profiles import data_dir
    from gpustack.validation import schemas

    assert schemas.schemas_dir() == data_dir("schemas")
    lines = [
        # kubeconform's flags
        ["validate", "-strict", "-schema-location", "default", "-schema-location", "gpustack"],
        ["validate", "--no-lint"],  # gpustack's own spelling
    ]
    names = [
        "gpustack.model",
        "gpustack.config",
        "gpustack.render",
        "gpustack.output",
        "hashlib",  # OpenSSL: for masking a secret or hashing a ConfigMap
        "gpustack.yamlio",  # the config reader: for a config file held in a ConfigMap
    ]
    program = (
        "import json, sys\nfrom gpustack.cli import app\nresults = []\n"
        f"for line in {lines!r}:\n"
        "    try:\n        app([*line, 'tests/data/validate/corpus/valid.yaml'])\n"
        "    except SystemExit as exit:\n        results.append([exit.code, "
        f"{LOADED.format(names=names)}])\n"
        "print(json.dumps(results))\n"
    )
    assert _results(program, ROOT) == [[0, []], [0, []]]


# Loaded only by the runs that use them: ruamel (the full YAML parser) for a file libyaml cannot
# read as the full parser would, jsonpatch for a config's JSON 6902 patches, difflib and the diff
# printer for a suggestion or stale output, ctypes to swap a folder that exists.
NOT_NEEDED = ["ruamel.yaml", "jsonpatch", "difflib", "gpustack.object_diff", "ctypes"]


def test_rendering_checking_and_validating_a_config_load_only_what_they_use(tmp_path):
    """`gpustack render` (the program, as the console script runs it), then `check` and
    `validate` of what it wrote, in one process: a section the config leaves out takes its
    default without building the section's own validator (the config's validator holds the
    sections' schemas; building them all was about 35 ms of every command that loads a config),
    pydantic never searches the installed distributions for plugins, and nothing of NOT_NEEDED
    is loaded, until a render replaces the folder (a config changed) and swaps it in."""
    out = str(tmp_path / "out")
    render = ["render", "examples/kubeadm.yaml", "-o", out, "-q"]
    program = (
        "import json, runpy, sys\n"
        f"sys.argv = ['gpustack', *{render!r}]\n"
        "try:\n    runpy.run_module('gpustack', run_name='__main__')\n"
        "except SystemExit as exit:\n    results = [exit.code]\n"
        "from pydantic import BaseModel\n"
        "from pydantic._internal._mock_val_ser import MockValSer\n"
        "from pydantic.plugin import _loader\n"
        "from gpustack import model\nfrom gpustack.cli import run\n"
        "results.append(sorted(name for name, cls in vars(model).items() if isinstance(cls, type)"
        " and issubclass(cls, BaseModel) and cls.__module__ == model.__name__"
        " and not isinstance(cls.__pydantic_validator__, MockValSer)))\n"
        "results.append(_loader._plugins is not None)\n"
        f"results.append(run(['check', 'examples/kubeadm.yaml', '-o', {out!r}, '-q']))\n"
        f"results.append(run(['validate', {out + '/kubeadm-lab'!r}]))\n"
        f"results.append({LOADED.format(names=NOT_NEEDED)})\n"
        f"results.append(run([*{render!r}, '--set', 'gfd.enabled=false']))\n"
        f"results.append({LOADED.format(names=NOT_NEEDED)})\n"
        "print(json.dumps(results))\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    assert _results(program, ROOT, environment) == [
        0,
        ["GPUStack", "Profile"],
        False,
        0,
        0,
        [],
        0,
        ["ctypes"],
    ]


def test_a_pydantic_plugins_setting_of_the_user_s_is_kept():
    """The program turns pydantic's plugin search off unless the user said which plugins."""
    program = (
        "import json, os, runpy, sys\nsys.argv = ['gpustack', '--version']\n"
        "try:\n    runpy.run_module('gpustack', run_name='__main__')\nexcept SystemExit:\n"
        "    print(json.dumps(os.environ['PYDANTIC_DISABLE_PLUGINS']))\n"
    )
    environment = {**os.environ, "PYDANTIC_DISABLE_PLUGINS": "other-plugin"}
    assert _results(program, ROOT, environment) == "other-plugin"


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
