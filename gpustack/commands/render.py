"""`gpustack render`: configs or fleet folders -> `out/<name>/` (or one YAML stream, --stdout).

The render is `gpustack.fleet.render`; this module prints what it wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from gpustack.commands import common
from gpustack.commands.common import echo, warning

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
    from gpustack.fleet.render import RenderRequest, render
    from gpustack.layout import OVERRIDES_ANNOTATION

    stdout = stdout or str(out) == "-"
    request = RenderRequest(
        tuple(configs or []),
        out,
        profile,
        profiles_dir,
        tuple(assignments or []),
        stdout,
        force,
        jobs,
        verbose,
    )
    rendered = render(request, common.messages(quiet), common.progress(not quiet and not stdout))
    if not rendered.valid:
        return 1  # an invalid rendering writes nothing
    if rendered.stream is not None:
        echo(rendered.stream, nl=False)
        return 0
    totals = rendered.totals
    if report is common.TextOrJson.json:
        echo(json.dumps({**totals, "clusters": list(rendered.folders)}, indent=2))
    elif not quiet:
        echo(
            f"rendered {len(rendered.renderings)} cluster(s) into {out}: {totals['written']} "
            f"files written, {totals['unchanged']} unchanged, {totals['removed']} removed",
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
