"""`gpustack diff`: what two renderings differ in, object by object, for one config on two
profiles, two configs, a render against committed output (one cluster or a whole fleet), or the
configs against themselves at a git revision.

    diff(request, say) -> Compared

Which comparison a request asks for follows from what it names (`--git-ref`, `--against` with
several configs or a folder, `--profile` twice, two configs); a request that names none, or two
at once, is a usage error that says which to give (`USAGE`). A fleet's comparisons are
`fleet_diff`'s; the diff itself is `review`'s (`between`, `against`, `against_output`,
`compare`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from gpustack.build import pipeline
from gpustack.compare import review
from gpustack.compare.object_diff import ClusterDiffs, Diff, Unreached
from gpustack.errors import Location, UserError, display_path
from gpustack.feedback import Messages
from gpustack.resolve import inventory
from gpustack.resolve.layered_settings import Layer
from gpustack.resolve.load import load_stack, overrides
from gpustack.resolve.stack import Stack

# The smallest --max-size: the summary and the note on what was left out need some room.
MARKDOWN_SMALLEST = 2000

USAGE = (
    "give two CONFIGs to see what a config change does, --profile twice to compare one config "
    "on two platforms, --against DIR to see what a render would change in committed output, or "
    "--git-ref REF to see what the configs' changes since REF do"
)


@dataclass(frozen=True)
class DiffRequest:
    """What `gpustack diff` was asked: the configs or fleet folders, the profiles (twice: one
    config on each), the committed output to compare a render with (`against`) or the git
    revision to compare the configs with (`git_ref`), the settings every render takes, and the
    markdown comment's size limit (`max_size`, 0: none)."""

    paths: tuple[Path, ...] = ()
    profiles: tuple[str, ...] = ()
    against: Path | None = None
    git_ref: str | None = None
    profiles_dir: Path | None = None
    assignments: tuple[str, ...] = ()
    max_size: int = 0


@dataclass(frozen=True)
class Compared:
    """What differs: each cluster's diff (`fleet`; `single` too when one cluster was compared
    on its own), each cluster's config for a fleet (`sources`), the settings a changed base
    changed that clusters set themselves (`unreached`), and a title naming both sides."""

    request: DiffRequest
    fleet: ClusterDiffs
    title: str
    single: Diff | None = None
    sources: dict[str, str] = field(default_factory=dict)
    unreached: list[Unreached] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        return not all(diff.is_empty for _, diff in self.fleet)

    def again(self, cluster: str | None = None) -> str:
        """This diff's command line (for text output), for every cluster or `cluster` alone."""
        request = self.request
        again = ["gpustack", "diff"]
        again += [part for name in request.profiles for part in ("--profile", name)]
        again += ["--against", str(request.against)] if request.against is not None else []
        again += ["--git-ref", request.git_ref] if request.git_ref is not None else []
        if request.profiles_dir is not None:
            again += ["--profiles-dir", str(request.profiles_dir)]
        again += [part for each in request.assignments for part in ("--set", each)]
        if cluster in self.sources:
            again += [self.sources[cluster]]
        else:
            again += [str(path) for path in request.paths]
        return shlex.join(again)


def diff(request: DiffRequest, say: Messages) -> Compared:
    """Compare what `request` names; `say` hears a note on the embedded example and warnings
    about the output folder as they come."""
    paths, names, against = list(request.paths), list(request.profiles), request.against
    if 0 < request.max_size < MARKDOWN_SMALLEST:
        raise _usage(
            f"--max-size {request.max_size} leaves no room for a review: give 0 (no limit) or "
            f"at least {MARKDOWN_SMALLEST:,} characters"
        )
    override = overrides(list(request.assignments))
    profile = names[0] if names else None
    if request.git_ref is not None:
        if against is not None or len(names) > 1:
            raise _usage("--git-ref compares the configs with themselves at REF")
        # Here, not on top: only a fleet's diff renders a fleet, which loads the lint rules.
        from gpustack.compare import fleet_diff

        diffs, sources, unreached = fleet_diff.since_revision(
            request.git_ref, paths, profile, request.profiles_dir, override, say
        )
        title = f"gpustack diff: {request.git_ref} → working tree"
        return Compared(request, diffs, title, sources=sources, unreached=unreached)
    if against is not None and (len(paths) > 1 or any(path.is_dir() for path in paths)):
        if len(names) > 1:
            raise _usage("--profile twice compares one config on two profiles")
        _check_folder(against)
        from gpustack.compare import fleet_diff  # as above: a fleet's diff alone lints

        diffs, sources = fleet_diff.against_output(
            paths, against, profile, request.profiles_dir, override, say
        )
        return Compared(request, diffs, f"gpustack diff: {against} → rendered", sources=sources)
    cluster, single = _compare(paths, names, against, request.profiles_dir, override, say)
    title = f"gpustack diff: {single.old_label} → {single.new_label}"
    return Compared(request, [(cluster, single)], title, single=single)


def _usage(message: str) -> UserError:
    return UserError(message, hint=USAGE)


def _compare(
    configs: list[Path],
    profiles: list[str],
    against: Path | None,
    profiles_dir: Path | None,
    override: Layer | None,
    say: Messages,
) -> tuple[str, Diff]:
    """The cluster's name and what differs."""
    if len(profiles) > 2:
        raise _usage("--profile may be given at most twice")
    if len(profiles) == 2:
        if against is not None or len(configs) > 1:
            raise _usage("--profile twice compares one config on two profiles")
        path = configs[0] if configs else _default_config(say)
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
        path = configs[0] if configs else _default_config(say)
        stack = load_stack(path, profile, profiles_dir, override=override)
        return stack.name, _against_committed(stack, against / stack.name, say)
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
    if not against.is_dir():
        raise UserError(
            "--against folder does not exist"
            if not against.exists()
            else "--against must be a folder",
            Location(display_path(against)),
            hint="give the folder `gpustack render -o` wrote, the one holding <metadata.name>/",
        )


def _default_config(say: Messages) -> Path | None:
    return inventory.discover_noted([], say.note)[0]


def _between(old_stack: Stack, old_label: str, new_stack: Stack, new_label: str) -> Diff:
    old, new = (review.snapshot(pipeline.render(stack)) for stack in (old_stack, new_stack))
    return review.between(old, new, old_label, new_label)


def _against_committed(stack: Stack, folder: Path, say: Messages) -> Diff:
    shown = display_path(folder)
    if not folder.is_dir():
        say.warning(f"{shown} does not exist: a render would write every file")
    rendering = pipeline.render(stack)
    return review.against(folder, review.snapshot(rendering), pipeline.files(rendering), "rendered")
