"""`gpustack render`: configs or fleet folders -> `out/<name>/` (or one YAML stream, --stdout)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from gpustack.commands import common
from gpustack.commands.common import configs as discover
from gpustack.commands.common import echo, error, warning

app = common.application()


@app.command("render")
def run(
    configs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Cluster configs or fleet folders (default ./gpustack.yaml, else the embedded "
            "kubeadm example).",
            metavar="CONFIG|DIR",
            show_default=False,
        ),
    ] = None,
    out: common.Out = Path("out"),
    profile: common.Profile = None,
    profiles_dir: common.ProfilesDir = None,
    assignments: common.Assignments = None,
    stdout: Annotated[
        bool, typer.Option("--stdout", help="Print one YAML stream, write nothing (also -o -).")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Overwrite files render would write even when they lost gpustack's marker line.",
        ),
    ] = False,
    jobs: Annotated[
        int | None,
        typer.Option(
            "-j",
            "--jobs",
            help="Worker processes that render a large fleet (default: none, render here).",
            metavar="N",
            min=1,
        ),
    ] = None,
    quiet: common.Quiet = False,
    verbose: common.Verbose = False,
    report: Annotated[
        common.TextOrJson,
        typer.Option(
            "--output",
            help="text (one summary line on stderr) or json (each cluster's files, on stdout).",
            metavar="FORMAT",
        ),
    ] = common.TextOrJson.text,
    debug: common.Debug = False,
) -> int:
    """Render the GPU stack manifests for each cluster config."""
    from gpustack.build import applicationset
    from gpustack.build import pipeline as render
    from gpustack.fleet import clusters as fleet
    from gpustack.layout import APPLICATION_SET_DIR, OVERRIDES_ANNOTATION
    from gpustack.redaction import mask_text
    from gpustack.resolve.load import overrides
    from gpustack.validation.verdicts import explain
    from gpustack.write import folders as output
    from gpustack.write import output_tree

    stdout = stdout or str(out) == "-"
    override = overrides(assignments or [])
    paths = discover(configs, quiet)
    progress = common.Progress(len(paths), "rendering", not quiet and not stdout)
    renderings = fleet.render_all(paths, profile, profiles_dir, jobs, override, progress.advance)
    progress.finish()
    findings = [
        (rendering.name, finding)
        for rendering, found in zip(renderings, fleet.check_all(renderings, jobs))
        for finding in found
    ]
    for severity, say in (("error", error), ("warning", warning)):
        found = [(name, mask_text(explain(f))) for name, f in findings if f.severity == severity]
        for line in common.grouped(found, verbose):
            say(line)
    if any(finding.severity == "error" for _, finding in findings):
        return 1  # an invalid rendering writes nothing
    if stdout:
        if len(renderings) > 1:
            warning(
                f"--stdout: one stream holds the objects of {len(renderings)} clusters "
                f"({', '.join(r.name for r in renderings[:3])}{', ...' if len(renderings) > 3 else ''}); "
                "apply it to no single cluster (name one config for that)"
            )
        echo(render.stream(renderings), nl=False)
        return 0
    for message in output_tree.misplaced(renderings, out):
        warning(message)
    fleet_folder = any(p.is_dir() for p in configs or [])
    planned = output_tree.output_folders(renderings, out, fleet_folder)
    if fleet_folder:
        deployed = applicationset.for_fleet(renderings) is not None
        for stray in output_tree.strays(renderings, out):
            warning(output_tree.stray_message(stray, configs or [], deployed))
    modes = {
        out / r.name: output.private_modes(render.files(r), r.secret_file_mode)
        for r in renderings
        if r.secret_file_mode is not None
    }
    # Counts clusters: the fleet's _gitops/ folder is written too, but is none.
    progress = common.Progress(len(renderings), "writing", not quiet)

    def written(target: Path) -> None:
        if target.name != APPLICATION_SET_DIR:
            progress.advance()

    results: list[dict[str, Any]] = [
        {
            "name": done.target.name,
            "folder": str(done.target),
            "files": len(done.files),
            "written": done.written,
            "unchanged": len(done.files) - done.written,
            "removed": done.removed,
        }
        for done in output.write_all(out, planned, modes, force, written)
        if done.files or done.removed
    ]
    progress.finish()
    totals = {
        key: sum(int(result[key]) for result in results)
        for key in ("files", "written", "unchanged", "removed")
    }
    if report is common.TextOrJson.json:
        echo(json.dumps({**totals, "clusters": results}, indent=2))
    elif not quiet:
        echo(
            f"rendered {len(renderings)} cluster(s) into {out}: {totals['written']} files "
            f"written, {totals['unchanged']} unchanged, {totals['removed']} removed",
            err=True,
        )
    if assignments and not quiet:
        # The output is not what the configs alone render: say where that is kept, and what
        # the next check and render need.
        warning(
            f"--set is recorded in each cluster's kustomization.yaml ({OVERRIDES_ANNOTATION}); "
            "`gpustack check` and the next render need the same --set, or the settings written "
            "into the configs"
        )
    return 0
