"""`gpustack diff`: one config on two profiles, two configs, a render against committed output
(one cluster or a whole fleet), or the configs against themselves at a git revision.

Exit 0 when there is no difference, 1 when there is, 2 on a usage or config error.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpustack.commands import common
from gpustack.commands.common import ColorMode, echo, use_color, warning

if TYPE_CHECKING:
    from gpustack.compare.object_diff import ClusterDiffs, Diff, Unreached
    from gpustack.resolve.layered_settings import Layer
    from gpustack.resolve.stack import Stack


# The smallest --max-size: the summary and the note on what was left out need some room.
MARKDOWN_SMALLEST = 2000


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


USAGE = (
    "give two CONFIGs to see what a config change does, --profile twice to compare one config "
    "on two platforms, --against DIR to see what a render would change in committed output, or "
    "--git-ref REF to see what the configs' changes since REF do"
)


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
    from gpustack.compare.diff_markdown import as_markdown
    from gpustack.compare.diff_report import as_json, as_text, fleet_as_text, fleet_json
    from gpustack.resolve.load import overrides

    paths, names = list(configs or []), list(profiles or [])
    if 0 < max_size < MARKDOWN_SMALLEST:
        raise _usage(
            f"--max-size {max_size} leaves no room for a review: give 0 (no limit) or at least "
            f"{MARKDOWN_SMALLEST:,} characters"
        )
    override = overrides(assignments or [])
    single: Diff | None = None
    fleet: ClusterDiffs
    sources: dict[str, str] = {}  # each cluster's config, for a fleet
    unreached: list[Unreached] = []  # base changes that clusters set aside
    if git_ref is not None:
        if against is not None or len(names) > 1:
            raise _usage("--git-ref compares the configs with themselves at REF")
        fleet, sources, unreached = _since_revision(
            git_ref, paths, names[0] if names else None, profiles_dir, override
        )
        title = f"gpustack diff: {git_ref} → working tree"
    elif against is not None and (len(paths) > 1 or any(path.is_dir() for path in paths)):
        if len(names) > 1:
            raise _usage("--profile twice compares one config on two profiles")
        fleet, sources = _fleet_against(
            paths, against, names[0] if names else None, profiles_dir, override
        )
        title = f"gpustack diff: {against} → rendered"
    else:
        cluster, single = _compare(paths, names, against, profiles_dir, override)
        fleet = [(cluster, single)]
        title = f"gpustack diff: {single.old_label} → {single.new_label}"
    if output is OutputFormat.markdown:

        def shown(cluster: str | None) -> str:
            """This command with text output, for every cluster or for `cluster` alone."""
            again = ["gpustack", "diff"]
            again += [part for name in names for part in ("--profile", name)]
            again += ["--against", str(against)] if against is not None else []
            again += ["--git-ref", git_ref] if git_ref is not None else []
            again += ["--profiles-dir", str(profiles_dir)] if profiles_dir is not None else []
            again += [part for each in assignments or [] for part in ("--set", each)]
            again += [sources[cluster]] if cluster in sources else [str(path) for path in paths]
            return shlex.join(again)

        echo(
            as_markdown(fleet, title, max_size, shown(None), shown if sources else None, unreached),
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
    return 0 if all(diff.is_empty for _, diff in fleet) else 1


def _usage(message: str) -> Exception:
    from gpustack.errors import UserError

    return UserError(message, hint=USAGE)


def _compare(
    configs: list[Path],
    profiles: list[str],
    against: Path | None,
    profiles_dir: Path | None,
    override: Layer | None,
) -> tuple[str, Diff]:
    """The cluster's name and what differs."""
    from gpustack.compare.object_diff import Diff
    from gpustack.errors import display_path
    from gpustack.resolve.load import load_stack

    if len(profiles) > 2:
        raise _usage("--profile may be given at most twice")
    if len(profiles) == 2:
        if against is not None or len(configs) > 1:
            raise _usage("--profile twice compares one config on two profiles")
        path = configs[0] if configs else _default_config()
        first, second = (load_stack(path, name, profiles_dir, True, override) for name in profiles)
        difference = _between(first, profiles[0], second, profiles[1])
        left_out = tuple(
            (side, field, why)
            for side, stack in zip(profiles, (first, second))
            for field, why in stack.left_out
        )
        changes = difference.changes
        return second.name, Diff(difference.old_label, difference.new_label, changes, left_out)
    profile = profiles[0] if profiles else None
    if against is not None:
        _check_folder(against)
        path = configs[0] if configs else _default_config()
        stack = load_stack(path, profile, profiles_dir, override=override)
        return stack.name, _against_committed(stack, against / stack.name)
    if len(configs) != 2:
        raise _usage("nothing to compare")
    old, new = configs
    new_stack = load_stack(new, profile, profiles_dir, override=override)
    return new_stack.name, _between(
        load_stack(old, profile, profiles_dir, override=override),
        display_path(old),
        new_stack,
        display_path(new),
    )


def _check_folder(against: Path) -> None:
    from gpustack.errors import Location, UserError, display_path

    if not against.is_dir():
        raise UserError(
            "--against folder does not exist"
            if not against.exists()
            else "--against must be a folder",
            Location(display_path(against)),
            hint="give the folder `gpustack render -o` wrote, the one holding <metadata.name>/",
        )


def _default_config() -> Path | None:
    from gpustack.commands.common import configs

    return configs([])[0]


def _between(old_stack: Stack, old_label: str, new_stack: Stack, new_label: str) -> Diff:
    from gpustack.build import pipeline as render
    from gpustack.compare import review

    old, new = (review.snapshot(render.render(stack)) for stack in (old_stack, new_stack))
    return review.between(old, new, old_label, new_label)


def _against_committed(stack: Stack, folder: Path) -> Diff:
    from gpustack.build import pipeline as render
    from gpustack.compare import review
    from gpustack.errors import display_path

    shown = display_path(folder)
    if not folder.is_dir():
        warning(f"{shown} does not exist: a render would write every file")
    rendering = render.render(stack)
    return review.against(folder, review.snapshot(rendering), render.files(rendering), "rendered")


def _fleet_against(
    paths: list[Path],
    against: Path,
    profile: str | None,
    profiles_dir: Path | None,
    override: Layer | None,
) -> tuple[ClusterDiffs, dict[str, str]]:
    """Every cluster the paths name against `against/<name>/` (and the fleet's `_gitops/`), and
    each cluster's config."""
    from gpustack.build import applicationset
    from gpustack.commands.common import configs
    from gpustack.compare import review
    from gpustack.fleet import clusters as fleet
    from gpustack.write import output_tree

    _check_folder(against)
    renderings = fleet.render_all(configs(paths), profile, profiles_dir, override=override)
    fleet_folder = any(path.is_dir() for path in paths)
    if fleet_folder:  # a render leaves them, so they are no difference; but they are deployed
        deployed = applicationset.for_fleet(renderings) is not None
        for stray in output_tree.strays(renderings, against):
            warning(output_tree.stray_message(stray, paths, deployed))
    sources = {rendering.name: rendering.source for rendering in renderings}
    return review.against_output(renderings, against, fleet_folder), sources


def _since_revision(
    ref: str,
    paths: list[Path],
    profile: str | None,
    profiles_dir: Path | None,
    override: Layer | None,
) -> tuple[ClusterDiffs, dict[str, str], list[Unreached]]:
    """The clusters the paths name, rendered from git revision `ref` and from the working tree,
    each cluster's config (in the working tree), and the settings a changed base changed that
    clusters set themselves (review.unreached)."""
    from gpustack.commands.common import configs
    from gpustack.compare import review, revision
    from gpustack.errors import UserError
    from gpustack.fleet import clusters as fleet
    from gpustack.read.bounded import read_bounded
    from gpustack.resolve import inventory

    if any(str(path) == "-" for path in paths):
        raise UserError(
            "--git-ref compares files of the repository, and a config from standard input has "
            "no committed version",
            hint="name the config's file",
        )
    new_configs = configs(paths)
    top = revision.repository_top(Path.cwd())
    given = paths or [config for config in new_configs if config is not None]
    inside_profiles = profiles_dir is not None and _inside(profiles_dir, top)
    folders = [path for path in given if path.is_dir()]
    if inside_profiles and profiles_dir is not None:
        folders.append(profiles_dir)
    with tempfile.TemporaryDirectory(prefix="gpustack-git-ref-") as temporary:
        tree = Path(temporary) / "repository"
        tree.mkdir()
        elsewhere = [profiles_dir] if profiles_dir is not None and not inside_profiles else []
        with revision.tree_at(ref, top, tree, folders, elsewhere):
            old_paths = [revision.at_revision(path, top, tree) for path in given]
            old_dir = profiles_dir
            if inside_profiles and profiles_dir is not None:
                old_dir = revision.at_revision(profiles_dir, top, tree)
            old_configs: list[Path | None] = []
            for path in old_paths:
                if not path.is_dir():
                    try:
                        read_bounded(path)  # brings the revision's file, when it has one
                    except UserError as problem:
                        # A file the revision lacks is one the change adds; any other problem
                        # (a submodule whose commit is not checked out, a link out of the
                        # repository) is no reason to show every object as added.
                        if problem.message != "file not found":
                            raise
                if not path.exists():
                    continue  # a file or folder the change adds: its clusters are all new
                try:
                    old_configs += inventory.discover([path])
                except UserError as problem:
                    if problem.message != "no GPUStack configs in this folder":
                        raise
            if not given:
                old_configs = [None]  # the embedded example, the same on both sides
            # In this process: the revision's files are brought in as they are read.
            old = review.rendered(
                fleet.render_all(old_configs, profile, old_dir, override=override)
            )
            old_chains = review.chains(old_configs, tree)
    renderings = fleet.render_all(new_configs, profile, profiles_dir, override=override)
    sources = {rendering.name: rendering.source for rendering in renderings}
    diffs = review.compare(
        old,
        review.rendered(renderings),
        lambda name: f"{ref}/{name}",
        lambda name: f"worktree/{name}",
    )
    effects = review.effects_of(new_configs, profile, profiles_dir, override)
    return diffs, sources, review.unreached(old_chains, review.chains(new_configs, top), effects)


def _inside(path: Path, top: Path) -> bool:
    resolved = path.resolve()
    return resolved == top.resolve() or top.resolve() in resolved.parents
