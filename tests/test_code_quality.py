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
    # A stage reaching up: the config's profiles into the review of a change.
    "resolve/platform_profiles.py": ["from gpustack.compare import review  # noqa"],
    # Inside a stage: the profiles reaching up into the loader for its merging.
    "resolve/mig.py": ["from gpustack.resolve import load  # noqa"],
    "build/components/gfd.py": [
        # Components take the resolved Stack from gpustack.resolve.stack, never the loader.
        "from gpustack.resolve import load  # noqa",
        # GFD reading the device plugin's config from the device plugin's module.
        "from gpustack.build.components import device_plugin  # noqa",
    ],
    # A rule reaching into another rule for its helper (one MIG rule into the other).
    "validation/lint/mig_partitions.py": [
        "from gpustack.validation.lint import mig_strategy  # noqa"
    ],
    # A command taking what it shares with another (the config schema) from that command.
    "commands/init.py": ["from gpustack.commands import schema  # noqa"],
    # The validator's engine reaching for the config model, which validate never needs.
    "validation/engine.py": ["from gpustack.config import model  # noqa"],
    # The writer and the validator side by side, one importing the other.
    "write/folders.py": ["from gpustack.validation import report  # noqa"],
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
    # Whitespace as one space: the report wraps long lines and indents its items to line up.
    return " ".join(re.split(r"\n[^\n]+\n-+\n", after, maxsplit=1)[0].split())


@pytest.mark.parametrize(
    ("importer", "imported", "broken_name"),
    [
        ("gpustack.resolve.platform_profiles", "gpustack.compare.review", "Stages of the pipeline"),
        ("gpustack.write.folders", "gpustack.validation.report", "Stages of the pipeline"),
        ("gpustack.resolve.mig", "gpustack.resolve.load", "Inside resolve"),
        (
            "gpustack.build.components.gfd",
            "gpustack.resolve.load",
            "The build takes a resolved Stack",
        ),
    ],
)
def test_an_import_against_the_tiers_breaks_the_contract(broken, importer, imported, broken_name):
    assert f"- {importer} -> {imported} (l." in broken_contract(broken.stdout, broken_name)


def test_validate_loading_the_config_model_breaks_the_contract(broken):
    found = broken_contract(broken.stdout, "validate does not load the config model")
    assert "gpustack.validation.engine -> gpustack.config.model (l." in found


@pytest.mark.parametrize(
    ("importer", "imported", "broken_name"),
    [
        (
            "gpustack.build.components.gfd",
            "gpustack.build.components.device_plugin",
            "Components are independent of each other",
        ),
        (
            "gpustack.validation.lint.mig_partitions",
            "gpustack.validation.lint.mig_strategy",
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


def tiers_enforced() -> dict[str, list[str]]:
    """Each package's tiers as the contracts enforce them: the stages of `gpustack`, and inside
    each stage its modules (`Inside <stage>`), tiers top first, side by side joined by ` | `."""
    enforced = {}
    for contract in PYPROJECT["tool"]["importlinter"]["contracts"]:
        if contract["name"] == "Stages of the pipeline":
            enforced["gpustack"] = [row.replace("gpustack.", "") for row in contract["layers"]]
        elif contract["name"].startswith("Inside "):
            stage = contract["name"].removeprefix("Inside ")
            if contract["type"] == "layers":
                enforced[stage] = contract["layers"]
            else:  # independence: one tier of modules side by side
                enforced[stage] = [" | ".join(m.rpartition(".")[2] for m in contract["modules"])]
    return enforced


def test_architecture_draws_the_tiers_that_are_enforced():
    """ARCHITECTURE.md's picture of the stages and of the tiers inside each is the contracts'
    lists, row for row."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    drawing = text.split("## The stages, as enforced", 1)[1].split("```", 2)[1]
    drawn: dict[str, list[str]] = {}
    package = ""
    for line in drawing.splitlines():
        if not line.strip():
            continue
        row = re.split(r"\s{2,}|\s*◀", line.strip())[0]
        if line.startswith(" "):
            drawn[package].append(row)
        else:
            package = row.removesuffix("/")
            drawn[package] = []
    assert drawn == tiers_enforced()


def test_every_module_is_in_a_tier_and_every_command_in_the_independence_contract():
    """import-linter checks only the modules a contract names: a new module missing from the
    tiers, or a new command missing from the commands' independence, would escape silently."""
    from gpustack.commands.root import COMMANDS

    def children(folder: Path) -> set[str]:
        modules = {path.stem for path in folder.glob("*.py")} - {"__init__", "__main__"}
        return modules | {path.parent.name for path in folder.glob("*/__init__.py")}

    package = ROOT / "gpustack"
    enforced = tiers_enforced()
    for name, tiers in enforced.items():
        placed = {module.strip() for tier in tiers for module in tier.split("|")}
        assert placed == children(package if name == "gpustack" else package / name), name
    # Every package is tiered inside, but those whose modules are independent of each other
    # (the commands, the components, the lint rules: their own contracts).
    packages = {
        str(path.parent.relative_to(package)) for path in package.glob("**/__init__.py")
    } - {".", "commands", "build/components", "validation/lint"}
    assert set(enforced) - {"gpustack"} == packages

    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
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
