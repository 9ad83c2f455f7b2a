"""The project's examples rendered in memory: what the committed `out/` must hold, byte for byte."""

from __future__ import annotations

import functools
from pathlib import Path

from conftest import EXAMPLES, ROOT

from gpustack.build import pipeline
from gpustack.resolve.load import load_stack
from gpustack.resolve.stack import Stack

OUT = ROOT / "out"


def example_configs() -> list[Path]:
    """Every cluster config in examples/ (at least one per profile)."""
    return sorted(EXAMPLES.glob("*.yaml"))


def regenerate_command() -> str:
    configs = " ".join(str(path.relative_to(ROOT)) for path in example_configs())
    return f"python -m gpustack render {configs} -o out"


def render_example(path: Path) -> tuple[Stack, pipeline.Rendering]:
    stack = load_stack(path)
    return stack, pipeline.render(stack)


def expected_out() -> dict[str, bytes]:
    """Every file of `out/`, keyed by its path relative to `out/` (rendered once a process; each
    caller gets its own dict)."""
    return dict(_expected_out())


@functools.cache
def _expected_out() -> dict[str, bytes]:
    expected: dict[str, bytes] = {}
    for path in example_configs():
        _, rendering = render_example(path)
        for relative, content in pipeline.files(rendering).items():
            expected[f"{rendering.name}/{relative}"] = content
    return expected


def committed_files(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() or path.is_symlink()
    }
