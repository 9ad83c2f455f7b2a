"""`gpustack diff` over many clusters: a fleet's renders against its committed output
(`against_output`), and the configs against themselves at a git revision (`since_revision`).
These render a fleet (`fleet.clusters`), which loads the lint rules; `diff.diff` imports this
module only for them, so a diff of one cluster loads no lint rules.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from gpustack.build import applicationset
from gpustack.compare import review, revision
from gpustack.compare.object_diff import ClusterDiffs, Unreached
from gpustack.errors import UserError
from gpustack.feedback import Messages
from gpustack.fleet import clusters as fleet
from gpustack.read.bounded import read_bounded
from gpustack.resolve import inventory
from gpustack.resolve.layered_settings import Layer
from gpustack.write import output_tree


def against_output(
    paths: list[Path],
    against: Path,
    profile: str | None,
    profiles_dir: Path | None,
    override: Layer | None,
    say: Messages,
) -> tuple[ClusterDiffs, dict[str, str]]:
    """Every cluster the paths name against `against/<name>/` (and the fleet's `_gitops/`), and
    each cluster's config; `against` is a folder (diff checks it first)."""
    configs = inventory.discover_noted(paths, say.note)
    renderings = fleet.render_all(configs, profile, profiles_dir, override=override)
    fleet_folder = any(path.is_dir() for path in paths)
    if fleet_folder:  # a render leaves them, so they are no difference; but they are deployed
        deployed = applicationset.for_fleet(renderings) is not None
        for stray in output_tree.strays(renderings, against):
            say.warning(output_tree.stray_message(stray, paths, deployed))
    sources = {rendering.name: rendering.source for rendering in renderings}
    return review.against_output(renderings, against, fleet_folder), sources


def since_revision(
    ref: str,
    paths: list[Path],
    profile: str | None,
    profiles_dir: Path | None,
    override: Layer | None,
    say: Messages,
) -> tuple[ClusterDiffs, dict[str, str], list[Unreached]]:
    """The clusters the paths name, rendered from git revision `ref` and from the working tree,
    each cluster's config (in the working tree), and the settings a changed base changed that
    clusters set themselves (review.unreached)."""
    if any(str(path) == "-" for path in paths):
        raise UserError(
            "--git-ref compares files of the repository, and a config from standard input has "
            "no committed version",
            hint="name the config's file",
        )
    new_configs = inventory.discover_noted(paths, say.note)
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
            # No paths: the embedded example, the same on both sides.
            old_configs = _configs_at_revision(old_paths) if given else [None]
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


def _configs_at_revision(paths: list[Path]) -> list[Path | None]:
    """The configs `paths` (in the revision's tree, revision.at_revision) name: a path the
    revision lacks (one the change adds) names none."""
    configs: list[Path | None] = []
    for path in paths:
        if not path.is_dir():
            try:
                read_bounded(path)  # brings the revision's file, when it has one
            except UserError as problem:
                # A file the revision lacks is one the change adds; any other problem (a
                # submodule whose commit is not checked out, a link out of the repository) is
                # no reason to show every object as added.
                if problem.message != "file not found":
                    raise
        if not path.exists():
            continue  # a file or folder the change adds: its clusters are all new
        try:
            configs += inventory.discover([path])
        except UserError as problem:
            if problem.message != "no GPUStack configs in this folder":
                raise
    return configs


def _inside(path: Path, top: Path) -> bool:
    resolved = path.resolve()
    return resolved == top.resolve() or top.resolve() in resolved.parents
