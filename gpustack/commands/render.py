"""`gpustack render`: configs or fleet folders -> `out/<name>/` (or one YAML stream, --stdout)."""

from __future__ import annotations

from pathlib import Path

import typer

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
    profiles_dir: Path | None = typer.Option(
        None, "--profiles-dir", help="Folder of user profiles, searched before the built-in ones."
    ),
    stdout: bool = typer.Option(False, "--stdout", help="Print one YAML stream, write nothing."),
    jobs: int | None = typer.Option(
        None, "-j", "--jobs", min=1,
        help="Worker processes that render a large fleet (default: none, render here).",
    ),
) -> None:
    """Render the GPU stack manifests for each cluster config."""
    from gpustack import fleet, output, render
    from gpustack.secrets import mask_text
    from gpustack.validation.validator import explain

    renderings = fleet.render_all(fleet.discover(configs or []), profile, profiles_dir, jobs)
    for rendering in renderings:
        for message in rendering.warnings:
            warning(f"{rendering.name}: {message}")
    findings = [
        (rendering.name, finding)
        for rendering, found in zip(renderings, fleet.check_all(renderings, jobs))
        for finding in found
    ]
    for name, finding in findings:
        (error if finding.severity == "error" else warning)(
            mask_text(f"{name}: {explain(finding)}")
        )
    if any(finding.severity == "error" for _, finding in findings):
        raise typer.Exit(1)  # an invalid rendering writes nothing
    if stdout:
        typer.echo(render.stream(renderings), nl=False)
        return
    planned = fleet.output_folders(
        renderings, out, fleet_folder=any(p.is_dir() for p in configs or [])
    )
    modes = {
        out / r.name: output.private_modes(render.files(r), r.secret_file_mode)
        for r in renderings
        if r.secret_file_mode is not None
    }
    for done in output.write_all(out, planned, modes):
        if done.files or done.removed:
            typer.echo(
                f"{done.target}: {len(done.files)} files ({done.written} written, "
                f"{done.removed} removed)",
                err=True,
            )
