"""The static checks run as their own steps in `.ci/run`, before the tests: `mypy --strict`, ruff's
lint and formatter check, and import-linter's contracts (all configured in pyproject.toml). These
tests keep those steps and their configuration in place, and prove the contracts catch a breach."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CI_STEPS = [
    line
    for line in (ROOT / ".ci" / "run").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
CODE = "gpustack tests bench dev"


def test_ci_runs_each_static_check_before_the_tests():
    steps = {
        ".venv/bin/python -m mypy gpustack",
        f".venv/bin/python -m ruff check --no-cache {CODE}",
        f".venv/bin/python -m ruff format --check --no-cache {CODE}",
        ".venv/bin/lint-imports --no-cache",
    }
    assert steps <= set(CI_STEPS[:-1]), steps - set(CI_STEPS)
    assert "pytest" in CI_STEPS[-1]  # after all of them


def test_mypy_checks_the_package_strictly():
    assert PYPROJECT["tool"]["mypy"]["strict"] is True
    assert PYPROJECT["tool"]["mypy"]["packages"] == ["gpustack"]


def test_import_linter_has_contracts_for_the_package():
    linter = PYPROJECT["tool"]["importlinter"]
    assert linter["root_package"] == "gpustack"
    assert linter["contracts"]


LINT_IMPORTS = "from importlinter.cli import lint_imports_command as c; c()"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's contracts in `root`/pyproject.toml, checked on `root`/gpustack."""
    return subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


# Imports that break a contract, each a mistake the contract is there to catch, all in one copy
# of the package checked by one run: import-linter reports every broken contract with the imports that break
# it, so each test finds its own import in the report of its own contract.
BREAKING_IMPORTS = {
    # A cycle: profiles reaching up into the loader for its merging.
    "profiles.py": ["from gpustack import config  # noqa"],
    "components/gfd.py": [
        # Components take the resolved Stack from gpustack.stack; the loader sits above them.
        "from gpustack import config  # noqa",
        # GFD reading the device plugin's config from the device plugin's module.
        "from gpustack.components import device_plugin  # noqa",
    ],
    # A rule reaching into another rule for its helper (one MIG rule into the other).
    "lint/mig_partitions.py": ["from gpustack.lint import mig_strategy  # noqa"],
    # A command taking what it shares with another (the config schema) from that command.
    "commands/init.py": ["from gpustack.commands import schema  # noqa"],
    # The validator's engine reaching for the config model, which validate never needs.
    "validation/engine.py": ["from gpustack import model  # noqa"],
}


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """lint-imports on a copy of the package with every import of BREAKING_IMPORTS added."""
    root = tmp_path_factory.mktemp("broken")
    shutil.copytree(ROOT / "gpustack", root / "gpustack")
    shutil.copy(ROOT / "pyproject.toml", root)
    for module, lines in BREAKING_IMPORTS.items():
        path = root / "gpustack" / module
        path.write_text(path.read_text() + "".join(f"\n{line}\n" for line in lines))
    result = lint_imports(root)
    assert result.returncode == 1, result.stdout + result.stderr
    return result


def broken_contract(report: str, name: str) -> str:
    """The part of lint-imports' report that says why the contract `name` is broken."""
    details = report.split("Broken contracts\n", 1)[1]
    _, found, after = details.partition(f"\n{name}\n{'-' * len(name)}\n")
    assert found, f"{name!r} is not among the broken contracts:\n{report}"
    return re.split(r"\n[^\n]+\n-+\n", after, maxsplit=1)[0]


def test_an_import_against_the_tiers_breaks_the_contract(broken):
    assert "gpustack.profiles -> gpustack.config" in broken.stdout
    tiers = broken_contract(broken.stdout, "Tiers of the pipeline")
    assert "- gpustack.profiles -> gpustack.config (l." in tiers


def test_a_component_importing_the_loader_breaks_the_contract(broken):
    assert "gpustack.components.gfd -> gpustack.config" in broken.stdout
    tiers = broken_contract(broken.stdout, "Tiers of the pipeline")
    assert "- gpustack.components.gfd -> gpustack.config (l." in tiers


def test_validate_loading_the_config_model_breaks_the_contract(broken):
    found = broken_contract(broken.stdout, "validate does not load the config model")
    assert "gpustack.validation.engine -> gpustack.model (l." in found


@pytest.mark.parametrize(
    ("importer", "imported", "broken_name"),
    [
        (
            "gpustack.components.gfd",
            "gpustack.components.device_plugin",
            "Components are independent of each other",
        ),
        (
            "gpustack.lint.mig_partitions",
            "gpustack.lint.mig_strategy",
            "Lint rules are independent of each other",
        ),
        (
            "gpustack.commands.init",
            "gpustack.commands.schema",
            "Commands are independent of each other",
        ),
    ],
)
def test_an_import_between_independent_modules_breaks_their_contract(
    broken, importer, imported, broken_name
):
    assert f"{broken_name} BROKEN" in broken.stdout
    # Broken by that import itself, not by another of the copy's.
    assert f"- {importer} -> {imported} (l." in broken_contract(broken.stdout, broken_name)


def test_architecture_draws_the_tiers_that_are_enforced():
    """ARCHITECTURE.md's picture of the tiers is the contract's list, row for row."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    tiers = next(c for c in contracts["contracts"] if c["type"] == "layers")["layers"]
    enforced = [tier.replace("gpustack.", "") for tier in tiers]
    text = (ROOT / "ARCHITECTURE.md").read_text()
    drawing = text.split("## The tiers, as enforced", 1)[1].split("```", 2)[1]
    drawn = [
        re.split(r"\s{2,}|\s*◀", line.strip())[0]
        for line in drawing.splitlines()
        if line.strip() and not line.startswith(" ")
    ]
    assert drawn == enforced


def test_every_module_is_in_a_tier_and_every_command_in_the_independence_contract():
    """import-linter checks only the modules a contract names: a new module missing from the
    tiers, or a new command missing from the commands' independence, would escape silently."""
    from gpustack.commands.root import COMMANDS

    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    tiers = next(c for c in contracts if c["type"] == "layers")["layers"]
    placed = {name.strip() for tier in tiers for name in tier.split("|")}
    package = ROOT / "gpustack"
    modules = {f"gpustack.{path.stem}" for path in package.glob("*.py")} - {
        "gpustack.__init__",
        "gpustack.__main__",
    }
    modules |= {f"gpustack.{path.parent.name}" for path in package.glob("*/__init__.py")}
    assert sorted(modules - placed) == [] and sorted(placed - modules) == []

    independent = next(
        c for c in contracts if c["name"] == "Commands are independent of each other"
    )
    assert sorted(independent["modules"]) == sorted(COMMANDS.values())


def test_no_module_is_named_like_a_standard_library_module():
    """A module named like one of the standard library's (`secrets`, `types`, `copy`) reads as
    that module wherever it is imported by name, and a script run from its folder would import
    it in place of the standard one."""
    clashes = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "gpustack").rglob("*.py"))
        if path.stem in sys.stdlib_module_names or path.parent.name in sys.stdlib_module_names
    ]
    assert clashes == []
