"""`gpustack render`: configs or fleet folders -> `out/<name>/` (or one YAML stream, --stdout)."""

from __future__ import annotations

from pathlib import Path

import typer

from gpustack.commands import common
from gpustack.commands.common import configs as discover
from gpustack.commands.common import error, handles_user_errors, warning


@handles_user_errors
def command(
    configs: list[Path] = typer.Argument(
        None, metavar="[CONFIG|DIR]...",
        help="Cluster configs or fleet folders (default ./gpustack.yaml, else the embedded "
        "kubeadm example).",
    ),
    out: Path = typer.Option(Path("out"), "-o", "--out", help="Folder that gets <name>/ per cluster."),
    profile: str | None = typer.Option(None, "--profile", help="Override platform.profile."),
    profiles_dir: Path | None = common.PROFILES_DIR,
    assignments: list[str] = common.SET,
    stdout: bool = typer.Option(
        False, "--stdout", help="Print one YAML stream, write nothing (also -o -)."
    ),
    force: bool = typer.Option(
        False, "--force",
        help="Overwrite files render would write even when they lost gpustack's marker line.",
    ),
    jobs: int | None = typer.Option(
        None, "-j", "--jobs", min=1,
        help="Worker processes that render a large fleet (default: none, render here).",
    ),
) -> None:
    """Render the GPU stack manifests for each cluster config."""
    from gpustack import fleet, output, render
    from gpustack.config import overrides

    stdout = stdout or str(out) == "-"
    from gpustack.validation.validator import explain

    override = overrides(assignments or [])
    renderings = fleet.render_all(discover(configs), profile, profiles_dir, jobs, override)
    for rendering in renderings:
        for message in rendering.warnings:
            warning(f"{rendering.name}: {message}")
    findings = [
        (rendering.name, finding)
        for rendering, found in zip(renderings, fleet.check_all(renderings, jobs))
        for finding in found
    ]
    for name, finding in findings:
        (error if finding.severity == "error" else warning)(f"{name}: {explain(finding)}")
    if any(finding.severity == "error" for _, finding in findings):
        raise typer.Exit(1)  # an invalid rendering writes nothing
    if stdout:
        typer.echo(render.stream(renderings), nl=False)
        return
    planned = fleet.output_folders(renderings, out)
    for target, files in planned:
        output.plan(target, files, force)  # refuse before anything is written
    for target, files in planned:
        written, removed = output.write_tree(target, files, force)
        if files or removed:
            typer.echo(
                f"{target}: {len(files)} files ({written} written, {removed} removed)", err=True
            )
