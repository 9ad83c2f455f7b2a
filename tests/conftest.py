"""Shared fixtures: the repository's folders and a CLI runner that calls gpustack in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHARED = ROOT.parent / "shared"


@pytest.fixture
def cli():
    """Run `gpustack ARGS...` in-process; returns the click Result (exit_code, stdout, stderr)."""
    from gpustack.cli import app

    runner = CliRunner()

    def run(*args: str, input: str | None = None):
        return runner.invoke(app, [str(arg) for arg in args], input=input)

    return run
