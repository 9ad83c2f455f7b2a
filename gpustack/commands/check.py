"""`gpustack check`: is the committed output what a render would write, and is it valid?

Re-renders every config in memory, compares with `DIR/<name>/` (missing, changed and extra
gpustack files, with a unified diff per changed file), then validates and lints the rendering.
Exit 0 when current and clean, 1 when stale or invalid, 2 on a config error.
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpustack.commands.common import handles_user_errors

if TYPE_CHECKING:
    from gpustack.config import Stack
    from gpustack.findings import Finding
    from gpustack.render import Rendering

DEFAULT_CONFIG = Path("gpustack.yaml")
CONFIG_KIND = "GPUStack"


@dataclass
class Report:
    """What `check` found for one cluster."""

    name: str
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    errors: int = 0

    @property
    def stale(self) -> bool:
        return bool(self.missing or self.extra or self.diffs)


@handles_user_errors
def command(
    configs: list[Path] = typer.Argument(
        None,
        metavar="[CONFIG|DIR]...",
        help="Cluster configs or folders of them (default ./gpustack.yaml).",
    ),
    out: Path = typer.Option(
        Path("out"), "-o", "--out", help="Folder holding <name>/ per cluster."
    ),
    profiles_dir: Path | None = typer.Option(
        None, "--profiles-dir", help="Folder of user profiles, searched before the built-in ones."
    ),
) -> None:
    """Fail when the committed output is stale or invalid (for CI and pre-commit)."""
    from gpustack import render
    from gpustack.config import load_stack
    from gpustack.errors import UserError

    arguments = list(configs) if configs else [DEFAULT_CONFIG]
    paths = config_paths(arguments)
    if not paths:
        raise UserError(f"no {CONFIG_KIND} config found in {', '.join(map(str, arguments))}")
    stacks = [load_stack(path, None, profiles_dir) for path in paths]
    names = [stack.name for stack in stacks]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UserError(
            f"several configs are named {', '.join(twice)}; metadata.name must be unique"
        )
    reports = [compare(stack, render.render(stack), out / stack.name) for stack in stacks]
    stale = [report for report in reports if report.stale]
    for report in reports:
        _print(report, out)
    errors = sum(report.errors for report in reports)
    if stale:
        again = shlex.join(["gpustack", "render", *map(str, configs or []), "-o", str(out)])
        typer.echo(
            f"error: {', '.join(str(out / r.name) for r in stale)}: committed output is stale; "
            f"run `{again}` and commit the result",
            err=True,
        )
    if errors:
        typer.echo(
            f"error: {errors} finding(s) in the rendered manifests; fix the config", err=True
        )
    if stale or errors:
        raise typer.Exit(1)
    typer.echo(f"{len(reports)} cluster(s) checked: output in {out} is current and valid", err=True)


def config_paths(arguments: list[Path]) -> list[Path]:
    """The configs named, with each folder replaced by the GPUStack configs directly in it.

    In a folder, a config that another config there `extends:` is a shared base, not a cluster;
    any other YAML file (a kustomization, say) is not a config.
    """
    from gpustack.yamlio import load_file

    paths: list[Path] = []
    for argument in arguments:
        if not argument.is_dir():
            paths.append(argument)
            continue
        found = {}
        for candidate in sorted([*argument.glob("*.yaml"), *argument.glob("*.yml")]):
            data = load_file(candidate).data
            # A config that extends a base may leave `kind` to the base.
            if isinstance(data, dict) and (data.get("kind") == CONFIG_KIND or "extends" in data):
                found[candidate.resolve()] = (candidate, data.get("extends"))
        bases = {
            (candidate.parent / extends).resolve()
            for candidate, extends in found.values()
            if isinstance(extends, str)
        }
        paths.extend(candidate for key, (candidate, _) in found.items() if key not in bases)
    return paths


def compare(stack: Stack, rendering: Rendering, target: Path) -> Report:
    from gpustack import output, render
    from gpustack.decorate import file_name, identity

    report = Report(rendering.name)
    expected = render.files(rendering)
    for relative, content in expected.items():
        path = target / relative
        if not path.is_file():
            report.missing.append(relative)
        elif (current := path.read_bytes()) != content:
            report.diffs[relative] = _diff(path, current, content)
    if target.is_dir():
        report.extra = sorted(
            path.relative_to(target).as_posix()
            for path in target.rglob("*")
            if path.is_file()
            and output.is_ours(path)
            and path.relative_to(target).as_posix() not in expected
        )
    files = {identity(obj): file_name(obj) for obj in rendering.objects}
    for found in findings(stack, rendering):
        where = target / files.get(found.object, "") if found.object else target
        field_path = f" ({found.field})" if found.field else ""
        report.findings.append(
            f"{where}: {found.severity}: [{found.rule}] {found.message}{field_path}"
        )
        report.errors += found.severity == "error"
    return report


def findings(stack: Stack, rendering: Rendering) -> list[Finding]:
    """Schema findings and lint findings of one rendering (what every render must pass)."""
    from gpustack import lint
    from gpustack.validation import validate_objects

    found = validate_objects(rendering.objects, stack.config.platform.kubernetesVersion)
    return found + lint.run_for_stack(stack, rendering.objects)


def _diff(path: Path, current: bytes, wanted: bytes) -> str:
    lines = difflib.unified_diff(
        current.decode("utf-8", errors="replace").splitlines(keepends=True),
        wanted.decode("utf-8", errors="replace").splitlines(keepends=True),
        fromfile=f"{path} (committed)",
        tofile=f"{path} (rendered)",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _print(report: Report, out: Path) -> None:
    folder = out / report.name
    for relative in report.missing:
        typer.echo(f"{folder / relative}: missing (a render would write it)")
    for relative in report.extra:
        typer.echo(f"{folder / relative}: extra (a render would remove it)")
    for relative, diff in report.diffs.items():
        typer.echo(f"{folder / relative}: changed")
        typer.echo(diff, nl=False)
    for line in report.findings:
        typer.echo(line)
