"""`gpustack check`: is the committed output what a render would write, and is it valid?

Re-renders every config in memory, compares with `DIR/<name>/` (missing, changed and extra
gpustack files, with a unified diff per changed file), then validates and lints the rendering.
Files named besides the configs and folders (pre-commit's changed files) narrow it to the
clusters they affect (gpustack.compare.changes). Exit 0 when current and clean, 1 when stale or invalid,
2 on a config error.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpustack.commands import common
from gpustack.commands.common import configs as discover
from gpustack.commands.common import echo

if TYPE_CHECKING:
    from gpustack.build.pipeline import Rendering
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
    from gpustack.build import applicationset
    from gpustack.compare.output_check import check_json, check_output
    from gpustack.errors import Location, UserError, display_path
    from gpustack.fleet import clusters as fleet
    from gpustack.layout import APPLICATION_SET_DIR
    from gpustack.resolve.load import overrides
    from gpustack.write import output_tree

    given = configs or []
    folders = [path for path in given if path.is_dir()]
    changed = [path for path in given if not path.is_dir()]
    texts: dict[Path, bytes] | None = None
    if changed:
        found, whole, texts = _affected(folders, changed, out, profiles_dir, quiet, assignments)
    else:
        found, whole = discover(configs, quiet), True
    fleet_folder = bool(folders)

    def check(found: list[Path | None]) -> tuple[list[Rendering], list[OutputCheck]]:
        progress = common.Progress(len(found), "checking", not quiet)
        renderings = fleet.render_all(
            found,
            None,
            profiles_dir,
            override=overrides(assignments or []),
            progress=progress.advance,
        )
        progress.finish()
        if not out.is_dir():
            raise UserError(
                "output folder does not exist"
                if not out.exists()
                else "output folder is not a folder",
                Location(display_path(out)),
                hint="give -o the folder `gpustack render -o` wrote, or render into it first",
            )
        return renderings, check_output(renderings, fleet.check_all(renderings), out, fleet_folder)

    renderings, reports = check(found)
    if not whole and _unsure(reports, renderings, out, texts if fleet_folder else None):
        found, whole, _ = _affected(folders, changed, out, profiles_dir, quiet, assignments, False)
        renderings, reports = check(found)
    if not whole:
        reports = [report for report in reports if report.name != APPLICATION_SET_DIR]
    stale = [report for report in reports if report.stale]
    # A folder of no cluster here: stale when the ApplicationSet deploys every folder in `out`.
    strays = output_tree.strays(renderings, out) if fleet_folder and whole else []
    deployed = applicationset.for_fleet(renderings) is not None
    if output_format is common.TextOrJson.json:
        result = check_json(reports, out)
        result["strays"] = [str(folder) for folder in strays]
        result["current"] = result["current"] and not (strays and deployed)
        echo(json.dumps(result, indent=2, ensure_ascii=False))
    elif not quiet:
        painted = common.use_color(color)
        for report in reports:
            _print(report, out, painted)
        for line in _findings(reports, out, verbose):
            echo(line)
    errors = sum(report.errors for report in reports)
    if stale:
        force = ["--force"] if any(report.unmarked for report in stale) else []
        again = shlex.join(
            [
                "gpustack",
                "render",
                *map(str, _render_paths(folders, changed, found)),
                "-o",
                str(out),
                *(["--profiles-dir", str(profiles_dir)] if profiles_dir is not None else []),
                *(part for assignment in assignments or [] for part in ("--set", assignment)),
                *force,
            ]
        )
        echo(
            f"error: {', '.join(str(out / r.name) for r in stale)}: committed output is stale; "
            f"run `{again}` and commit the result",
            err=True,
        )
        for report in stale:
            if report.dropped_overrides:
                echo(
                    f"warning: {out / report.name} was rendered with --set "
                    f"{', '.join(report.dropped_overrides)} (its kustomization.yaml records "
                    "them); the command above would drop those settings: write them into the "
                    "config, or give check and render the same --set",
                    err=True,
                )
    for message in output_tree.misplaced(renderings, out):
        echo(f"warning: {message}", err=True)
    for stray in strays:
        prefix = "error" if deployed else "warning"
        echo(
            f"{prefix}: {output_tree.stray_message(stray, folders or configs or [], deployed)}",
            err=True,
        )
    if errors:
        echo(f"error: {errors} finding(s) in the rendered manifests; fix the config", err=True)
    if stale or errors or (strays and deployed):
        return 1
    if not quiet and output_format is common.TextOrJson.text:
        which = "" if whole else f", those the {len(changed)} file(s) named affect"
        echo(
            f"{len(renderings)} cluster(s) checked{which}: output in {out} is current and valid",
            err=True,
        )
    return 0


def _affected(
    folders: list[Path],
    changed: list[Path],
    out: Path,
    profiles_dir: Path | None,
    quiet: bool,
    assignments: list[str] | None,
    narrow: bool = True,
) -> tuple[list[Path | None], bool, dict[Path, bytes] | None]:
    """The configs to check when files are named (as pre-commit passes the changed ones),
    whether they are the whole fleet, and the fleet's YAML files (changes.read_fleet).

    The fleet is the folders named, or `./gpustack.yaml`; a named file that is a cluster config
    and no base of one of its configs joins it. Each named file then selects the clusters it
    affects (gpustack.compare.changes): a config itself, a base every config extending it, a PEM, MIG
    config, patch file or user profile the configs that read it, a file under `out/<name>/`
    that cluster; a file none of them reads selects nothing. `narrow=False`: the whole fleet.
    """
    from gpustack.compare import changes
    from gpustack.errors import Location, UserError, display_path, real_path
    from gpustack.resolve import inventory
    from gpustack.resolve.load import bases

    everything = True
    fleet_configs: list[Path] = []
    texts = None
    if folders:
        # `--set` may name files too: with it, every config is looked at.
        texts = changes.read_fleet(folders) if narrow and not assignments else None
        picked = None if texts is None else changes.scan(texts, folders, changed, out, profiles_dir)
        everything = picked is None
        candidates = inventory.discover(folders) if picked is None else picked
        configs = [path for path in candidates if path is not None]
        if picked is not None:
            configs = [path for path in configs if inventory.is_config(path)]
            extended = {base for path in configs for base in bases(path)}
            configs = [path for path in configs if real_path(path) not in extended]
        fleet_configs = configs
    elif inventory.DEFAULT_CONFIG.is_file():
        fleet_configs = [inventory.DEFAULT_CONFIG]
    read = changes.index(fleet_configs)
    known = {file for each in read for file in each.files}
    for path in changed:
        resolved = real_path(path)
        if resolved in known:
            continue
        if not path.exists():
            raise UserError("file not found", Location(display_path(path)))
        if path.name.endswith(inventory.CONFIG_SUFFIXES) and inventory.is_config(path):
            fleet_configs.append(path)
            read += changes.index([path])
            known |= read[-1].files
    if not fleet_configs and not folders:
        # Nothing to narrow: as a bare `check` (./gpustack.yaml, or refused in a fleet
        # repository, or the embedded example).
        return discover([], quiet), True, texts
    if not narrow:
        return list(fleet_configs), True, texts
    chosen: list[Path | None] = list(
        changes.affected(fleet_configs, read, changed, out, profiles_dir)
    )
    return chosen, everything and len(chosen) == len(fleet_configs), texts


def _unsure(
    reports: list[OutputCheck],
    renderings: list[Rendering],
    out: Path,
    texts: dict[Path, bytes] | None,
) -> bool:
    """Whether a check of some clusters cannot vouch for the output folder: the fleet's
    ApplicationSet (`_gitops/`, made from every cluster) would change, or a cluster folder is
    named by no YAML file of the fleet folders (a renamed or removed cluster: a stray only a
    whole check can tell). A config outside the folders (`texts` None) has its folders left
    to the whole check, as before. A folder no cluster here writes is vouched for only when a
    config of the fleet surely has its name (changes.clusters_named): a renamed cluster's old
    name may still be some pool's."""
    from gpustack.compare import changes
    from gpustack.layout import APPLICATION_SET_DIR
    from gpustack.write import output_tree

    if renderings and any(
        report.name == APPLICATION_SET_DIR and report.stale for report in reports
    ):
        return True
    if texts is None:
        return False
    unrendered = output_tree.strays(renderings, out)
    known = changes.clusters_named(texts, {folder.name for folder in unrendered})
    return any(folder.name not in known for folder in unrendered)


def _render_paths(folders: list[Path], changed: list[Path], found: list[Path | None]) -> list[Path]:
    """What the `gpustack render` that fixes stale output names: the folders, else the configs
    checked (none for `./gpustack.yaml` alone)."""
    if folders or not changed:
        return folders
    configs = [path for path in found if path is not None]
    from gpustack.resolve.inventory import DEFAULT_CONFIG

    return [] if configs == [DEFAULT_CONFIG] else configs


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
    line naming the file under `out/*/` and the clusters (common.grouped)."""
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
            lines += common.grouped([(name, f"{where}: {what}") for name in names], verbose)
    return lines
