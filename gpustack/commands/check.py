"""`gpustack check`: is the committed output what a render would write, and is it valid?

Re-renders every config in memory, compares with `DIR/<name>/` (missing, changed and extra
gpustack files, with a unified diff per changed file), then validates and lints the rendering.
Exit 0 when current and clean, 1 when stale or invalid, 2 on a config error.
"""

from __future__ import annotations

import difflib
import json
import shlex
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpustack.commands import common
from gpustack.commands.common import configs as discover
from gpustack.commands.common import handles_user_errors

if TYPE_CHECKING:
    from gpustack.findings import Finding


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


@dataclass
class Report:
    """What `check` found for one cluster."""

    name: str
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    # Changed files whose first line lost gpustack's marker: only `render --force` replaces them.
    unmarked: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    errors: int = 0

    @property
    def stale(self) -> bool:
        return bool(self.missing or self.extra or self.diffs)


@handles_user_errors
def command(
    configs: list[Path] = typer.Argument(
        None,
        metavar="CONFIG|DIR",
        help="Cluster configs or folders of them (default ./gpustack.yaml, as for render).",
    ),
    out: Path = typer.Option(
        Path("out"), "-o", "--out", metavar="DIR", help="Folder holding <name>/ per cluster."
    ),
    profiles_dir: Path | None = common.PROFILES_DIR,
    assignments: list[str] = common.SET,
    quiet: bool = common.QUIET,
    output_format: OutputFormat = typer.Option(
        OutputFormat.text,
        "--output",
        metavar="FORMAT",
        help="text (what is stale, with a unified diff per file) or json.",
    ),
    color: common.ColorMode = common.COLOR,
) -> None:
    """Fail when the committed output is stale or invalid (for CI and pre-commit)."""
    from gpustack import fleet
    from gpustack.config import overrides
    from gpustack.errors import Location, UserError, display_path

    found = discover(configs)
    progress = common.Progress(len(found), "checking", not quiet)
    renderings = fleet.render_all(
        found, None, profiles_dir, override=overrides(assignments or []), progress=progress.advance
    )
    progress.finish()
    if not out.is_dir():
        raise UserError(
            "output folder does not exist" if not out.exists() else "output folder is not a folder",
            Location(display_path(out)),
            hint="give -o the folder `gpustack render -o` wrote, or render into it first",
        )
    findings = dict(zip((r.name for r in renderings), fleet.check_all(renderings)))
    objects = {r.name: r.objects for r in renderings}
    reports = []
    fleet_folder = any(path.is_dir() for path in configs or [])
    for target, files in fleet.output_folders(renderings, out, fleet_folder):
        report = compare(target, files)
        _findings(report, target, objects.get(target.name, []), findings.get(target.name, []))
        reports.append(report)
    stale = [report for report in reports if report.stale]
    if output_format is OutputFormat.json:
        typer.echo(json.dumps(_as_json(reports, out), indent=2, ensure_ascii=False))
    elif not quiet:
        painted = common.use_color(color)
        for report in reports:
            _print(report, out, painted)
    errors = sum(report.errors for report in reports)
    if stale:
        force = ["--force"] if any(report.unmarked for report in stale) else []
        again = shlex.join(["gpustack", "render", *map(str, configs or []), "-o", str(out), *force])
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
    if not quiet and output_format is OutputFormat.text:
        typer.echo(
            f"{len(renderings)} cluster(s) checked: output in {out} is current and valid", err=True
        )


def _as_json(reports: list[Report], out: Path) -> dict[str, Any]:
    from gpustack.gitops import FLEET_DIR

    clusters = [
        {
            "name": report.name,
            "folder": str(out / report.name),
            "missing": report.missing,
            "extra": report.extra,
            "changed": list(report.diffs),
            "unmarked": report.unmarked,
            "diffs": report.diffs,
            "findings": report.findings,
        }
        for report in reports
        if report.name != FLEET_DIR or report.stale
    ]
    return {
        "current": not any(report.stale for report in reports),
        "valid": not any(report.errors for report in reports),
        "clusters": clusters,
    }


def compare(target: Path, expected: dict[str, bytes]) -> Report:
    """What differs between the folder `target` and the files a render would write there."""
    import stat

    from gpustack import committed, output

    report = Report(target.name)
    committed.refuse_link(target)
    for relative, content in expected.items():
        current = committed.read_file(target, relative)
        if current is None:
            report.missing.append(relative)
        elif current != content:
            report.diffs[relative] = _diff(target / relative, current, content)
            if not output.is_ours(target / relative, relative):
                report.unmarked.append(relative)
    if target.is_dir():
        report.extra = sorted(
            relative
            for relative, mode in output.entries(target).items()
            if stat.S_ISREG(mode)
            and output.is_ours(target / relative, relative)
            and relative not in expected
        )
    return report


def _findings(
    report: Report, target: Path, objects: list[dict[str, Any]], findings: list[Finding]
) -> None:
    from gpustack.objects import file_name, identity
    from gpustack.secrets import mask_text

    files = {identity(obj): file_name(obj) for obj in objects}
    for found in findings:
        where = target / files.get(found.object, "") if found.object else target
        field_path = f" ({found.field})" if found.field else ""
        report.findings.append(
            mask_text(f"{where}: {found.severity}: [{found.rule}] {found.message}{field_path}")
        )
        report.errors += found.severity == "error"


def _diff(path: Path, current: bytes, wanted: bytes) -> str:
    """A unified diff with the entitlement certificate (and any PEM) redacted on both sides."""
    from gpustack.diff import mask_text

    lines = difflib.unified_diff(
        mask_text(current.decode("utf-8", errors="replace")).splitlines(keepends=True),
        mask_text(wanted.decode("utf-8", errors="replace")).splitlines(keepends=True),
        fromfile=f"{path} (committed)",
        tofile=f"{path} (rendered)",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _print(report: Report, out: Path, color: bool) -> None:
    from gpustack.diff import paint, paint_diff_line

    folder = out / report.name
    for relative in report.missing:
        line = f"{folder / relative}: missing (a render would write it)"
        typer.echo(paint(line, "added", color), color=color)
    for relative in report.extra:
        line = f"{folder / relative}: extra (a render would remove it)"
        typer.echo(paint(line, "removed", color), color=color)
    for relative, diff in report.diffs.items():
        lost = (
            " (its first line lost gpustack's marker: `gpustack render --force` overwrites it)"
            if relative in report.unmarked
            else ""
        )
        typer.echo(paint(f"{folder / relative}: changed{lost}", "changed", color), color=color)
        for line in diff.splitlines():
            typer.echo(paint_diff_line(line, color), color=color)
    for line in report.findings:
        typer.echo(line)
