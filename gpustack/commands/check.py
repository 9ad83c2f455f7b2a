"""`gpustack check`: is the committed output what a render would write, and is it valid?

Re-renders every config in memory, compares with `DIR/<name>/` (missing, changed and extra
gpustack files, with a unified diff per changed file), then validates and lints the rendering.
Files named besides the configs and folders (pre-commit's changed files) narrow it to the
clusters they affect. The check is `gpustack.compare.check`; this module prints what it found.
Exit 0 when current and clean, 1 when stale or invalid, 2 on a config error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpustack.commands import common
from gpustack.commands.common import echo

if TYPE_CHECKING:
    from gpustack.compare.output_check import OutputCheck

app = common.application()


@app.command("check")
def run(
    configs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Cluster configs or folders of them (default ./gpustack.yaml, as for render); "
            "other files (bases, PEMs, patch and MIG files, user profiles, files under the "
            "output folder) are changed inputs, and only the clusters they affect are checked.",
            metavar="CONFIG|DIR|FILE",
            show_default=False,
        ),
    ] = None,
    out: common.Out = Path("out"),
    profiles_dir: common.ProfilesDir = None,
    assignments: common.Assignments = None,
    quiet: common.Quiet = False,
    verbose: common.Verbose = False,
    output_format: Annotated[
        common.TextOrJson,
        typer.Option(
            "--output",
            help="text (what is stale, with a unified diff per file) or json.",
            metavar="FORMAT",
        ),
    ] = common.TextOrJson.text,
    color: common.Color = common.ColorMode.auto,
    debug: common.Debug = False,
) -> int:
    """Fail when the committed output is stale or invalid (for CI and pre-commit)."""
    from gpustack.compare.check import CheckRequest, check

    request = CheckRequest(tuple(configs or []), out, profiles_dir, tuple(assignments or []))
    checked = check(request, common.messages(quiet), common.progress(not quiet))
    if output_format is common.TextOrJson.json:
        echo(json.dumps(checked.as_json(), indent=2, ensure_ascii=False))
    elif not quiet:
        painted = common.use_color(color)
        for report in checked.reports:
            _print(report, out, painted)
        for line in _findings(checked.reports, out, verbose):
            echo(line)
    if checked.stale:
        echo(
            f"error: {', '.join(str(out / r.name) for r in checked.stale)}: committed output is "
            f"stale; run `{checked.render_again()}` and commit the result",
            err=True,
        )
        for report in checked.stale:
            if report.dropped_overrides:
                echo(
                    f"warning: {out / report.name} was rendered with --set "
                    f"{', '.join(report.dropped_overrides)} (its kustomization.yaml records "
                    "them); the command above would drop those settings: write them into the "
                    "config, or give check and render the same --set",
                    err=True,
                )
    for message in checked.misplaced:
        echo(f"warning: {message}", err=True)
    for message in checked.stray_messages():
        echo(f"{'error' if checked.deployed else 'warning'}: {message}", err=True)
    if checked.errors:
        echo(
            f"error: {checked.errors} finding(s) in the rendered manifests; fix the config",
            err=True,
        )
    if checked.failed:
        return 1
    if not quiet and output_format is common.TextOrJson.text:
        which = "" if checked.whole else f", those the {len(request.changed)} file(s) named affect"
        echo(
            f"{len(checked.renderings)} cluster(s) checked{which}: output in {out} is current and "
            "valid",
            err=True,
        )
    return 0


def _print(report: OutputCheck, out: Path, color: bool) -> None:
    if not report.stale:
        return  # current output prints nothing here: a check that passes loads no diff printer
    from gpustack.compare.diff_report import paint, paint_diff_line

    folder = out / report.name
    for relative in report.missing:
        line = f"{folder / relative}: missing (a render would write it)"
        echo(paint(line, "added", color), color=color)
    for relative in report.extra:
        line = f"{folder / relative}: extra (a render would remove it)"
        echo(paint(line, "removed", color), color=color)
    for relative, diff in report.diffs.items():
        lost = (
            " (its first line lost gpustack's marker: `gpustack render --force` overwrites it)"
            if relative in report.unmarked
            else ""
        )
        echo(paint(f"{folder / relative}: changed{lost}", "changed", color), color=color)
        for line in diff.splitlines():
            echo(paint_diff_line(line, color), color=color)


def _findings(reports: list[OutputCheck], out: Path, verbose: bool) -> list[str]:
    """Every report's findings, each line once: a finding in many clusters' same file is one
    line naming the file under `out/*/` and the clusters (feedback.grouped)."""
    from gpustack.feedback import grouped
    from gpustack.redaction import mask_text

    found = [
        (report.name, (relative, what)) for report in reports for relative, what in report.placed
    ]
    clusters: dict[tuple[str, str], list[str]] = {}
    for name, placed in found:
        clusters.setdefault(placed, []).append(name)
    lines = []
    for (relative, what), names in clusters.items():
        if len(names) == 1:
            where = mask_text(str(out / names[0] / relative))
            lines.append(f"{where}: {what}")
        else:
            where = mask_text(str(out / "*" / relative))
            lines += grouped([(name, f"{where}: {what}") for name in names], verbose)
    return lines
