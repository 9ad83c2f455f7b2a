"""`gpustack diff`: one config on two profiles, two configs, a render against committed output
(one cluster or a whole fleet), or the configs against themselves at a git revision.

The comparison is `gpustack.compare.diff`; this module prints it. Exit 0 when there is no
difference, 1 when there is, 2 on a usage or config error.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from gpustack.commands import common
from gpustack.commands.common import ColorMode, echo, use_color


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


app = common.application()


@app.command("diff")
def run(
    configs: Annotated[
        list[Path] | None,
        typer.Argument(
            help="One config (default ./gpustack.yaml, else the embedded kubeadm example), or "
            "two; with --against or --git-ref, any configs and fleet folders.",
            metavar="CONFIG|DIR",
            show_default=False,
        ),
    ] = None,
    profiles: Annotated[
        list[str] | None,
        typer.Option(
            "--profile",
            help="Twice: compare the config on two profiles. Once: override platform.profile.",
            metavar="NAME",
            autocompletion=common.profile_names,
            show_default=False,
        ),
    ] = None,
    against: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--against",
            help="Compare a render with the output committed in DIR/<metadata.name>/ (the "
            "folder render -o wrote).",
            metavar="DIR",
        ),
    ] = None,
    git_ref: Annotated[
        str | None,
        typer.Option(
            "--git-ref",
            help="Compare the configs as they were at git revision REF with the working tree's.",
            metavar="REF",
        ),
    ] = None,
    profiles_dir: common.ProfilesDir = None,
    assignments: common.Assignments = None,
    output: Annotated[
        OutputFormat,
        typer.Option(
            "--output",
            help="text (summary, then unified diff), json, or markdown (a review comment).",
            metavar="FORMAT",
        ),
    ] = OutputFormat.text,
    max_size: Annotated[
        int,
        typer.Option(
            "--max-size",
            help="markdown: the most characters the comment may take (GitHub refuses a comment "
            "over 65,536); what does not fit is left out and named. 0: no limit, else at least "
            "2000.",
            metavar="N",
            min=0,
        ),
    ] = 60_000,
    color: common.Color = ColorMode.auto,
    debug: common.Debug = False,
) -> int:
    """Show what differs, per object (with the changed field paths), then as a unified diff."""
    from gpustack.compare.diff import DiffRequest, diff
    from gpustack.compare.diff_markdown import as_markdown
    from gpustack.compare.diff_report import as_json, as_text, fleet_as_text, fleet_json

    request = DiffRequest(
        tuple(configs or []),
        tuple(profiles or []),
        against,
        git_ref,
        profiles_dir,
        tuple(assignments or []),
        max_size,
    )
    compared = diff(request, common.messages())
    single, fleet, unreached = compared.single, compared.fleet, compared.unreached
    if output is OutputFormat.markdown:
        again = compared.again if compared.sources else None
        echo(
            as_markdown(fleet, compared.title, max_size, compared.again(), again, unreached),
            nl=False,
        )
    elif output is OutputFormat.json:
        data = as_json(single) if single is not None else fleet_json(fleet, unreached)
        echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        painted = use_color(color)
        text = as_text(single, painted) if single else fleet_as_text(fleet, painted, unreached)
        # echo strips escape codes when stdout is no terminal unless told the colour is wanted.
        echo(text, nl=False, color=painted)
    return 1 if compared.differs else 0
