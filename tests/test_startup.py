"""Start-up: what keeps a run's work small (pydantic's plugin search off, sections left out
taking their defaults, the built-in API groups known without parsing every schema). Which
modules `validate` may load is a contract of `[tool.importlinter]` ("validate does not load the
config model"); bench/cli.py measures the time."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
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

    checked = 0
    for cls in _config_model_classes():
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
    from gpustack.validation.lint import api_versions

    assert api_versions.definition_sizes() == api_versions.SHIPPED_SIZES
    assert api_versions.read_built_in_groups() == api_versions.SHIPPED_GROUPS


def test_other_schema_files_are_read_for_the_built_in_api_groups(monkeypatch):
    from gpustack.validation.lint import api_versions

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

    models = [cls for cls in _config_model_classes() if issubclass(cls, BaseModel)]
    assert len(models) > 50
    for cls in models:
        written = vars(cls).get("__annotations__", {})
        assert not [name for name, value in written.items() if isinstance(value, str)], cls


def _config_model_classes() -> list[type]:
    """The classes the config model's modules define (the config's, the profile's)."""
    import gpustack.config

    modules = [
        importlib.import_module(f"gpustack.config.{module.name}")
        for module in pkgutil.iter_modules(gpustack.config.__path__)
    ]
    return [
        cls
        for module in modules
        for cls in vars(module).values()
        if isinstance(cls, type) and cls.__module__ == module.__name__
    ]
