"""The code type-checks under `mypy --strict`, passes ruff and is formatted by it (configured in
pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_the_package_passes_mypy_strict(tmp_path):
    result = run("mypy", "--cache-dir", str(tmp_path), "gpustack")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_code_passes_ruff():
    result = run("ruff", "check", "--no-cache", "gpustack", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_code_is_formatted():
    # Fix with `ruff format gpustack tests bench`.
    result = run("ruff", "format", "--check", "--no-cache", "gpustack", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr
