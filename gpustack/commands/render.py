"""`gpustack render`: config(s) -> `out/<name>/` (or one YAML stream with --stdout)."""

from __future__ import annotations

from pathlib import Path

import typer

from gpustack.commands.common import error, handles_user_errors, warning

DEFAULT_CONFIG = Path("gpustack.yaml")


@handles_user_errors
def command(
    configs: list[Path] = typer.Argument(
        None, metavar="[CONFIG|DIR]...",
        help="Cluster configs (default ./gpustack.yaml, else the embedded kubeadm example).",
    ),
    out: Path = typer.Option(Path("out"), "-o", "--out", help="Folder that gets <name>/ per cluster."),
    profile: str | None = typer.Option(None, "--profile", help="Override platform.profile."),
    profiles_dir: Path | None = typer.Option(
        None, "--profiles-dir", help="Folder of user profiles, searched before the built-in ones."
    ),
    stdout: bool = typer.Option(False, "--stdout", help="Print one YAML stream, write nothing."),
) -> None:
    """Render the GPU stack manifests for each cluster config."""
    from gpustack import output, render
    from gpustack.config import load_stack
    from gpustack.validation import check_rendering
    from gpustack.validation.validator import explain

    paths: list[Path | None] = list(configs) if configs else [
        DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None
    ]
    stacks = [load_stack(path, profile, profiles_dir) for path in paths]
    renderings = [render.render(stack) for stack in stacks]
    for rendering in renderings:
        for message in rendering.warnings:
            warning(f"{rendering.name}: {message}")
    findings = [
        (rendering.name, finding) for stack, rendering in zip(stacks, renderings)
        for finding in check_rendering(rendering.objects, stack.config.platform.kubernetesVersion)
    ]
    for name, finding in findings:
        (error if finding.severity == "error" else warning)(f"{name}: {explain(finding)}")
    if any(finding.severity == "error" for _, finding in findings):
        raise typer.Exit(1)  # an invalid rendering writes nothing
    if stdout:
        typer.echo(render.stream(renderings), nl=False)
        return
    planned = [(out / rendering.name, render.files(rendering)) for rendering in renderings]
    for target, files in planned:
        output.plan(target, files)  # refuse before anything is written
    for target, files in planned:
        written, removed = output.write_tree(target, files)
        typer.echo(f"{target}: {len(files)} files ({written} written, {removed} removed)", err=True)
