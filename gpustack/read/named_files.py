"""Where a file a config names may lie: the one rule for every path a config, a base or a profile
writes (`extends:`, `patches[].path`, `entitlement.pemFile`, `migManager.config.file`) and for
the image lock read beside a config.

A pull request into a GitOps repository brings configs that CI renders, checks and diffs; a path
in them could name any file of the CI machine (`/etc/...`, `../../home/ci/.docker/config.json`,
a link to either) and have it merged into a rendered object, shown by `check` and `diff`, or
quoted as an error's position. So a named file must lie inside the repository holding the file
that names it, symbolic links followed, never in `.git`, and that is decided from the path alone,
before a byte of it is read. A path typed on the command line (`--set`) is the user's own choice
and is not confined.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from gpustack.errors import Location, UserError, display_path, real_path
from gpustack.read.bounded import repository_top, revision_tops

# Names of the roots, as an error says them.
_REPOSITORY = "the git repository holding the config"
_WORKING_FOLDER = "the working folder"
_CONFIG_FOLDER = "the config's folder"
_ARGOCD_REPOSITORY = "the repository Argo CD gave the plugin"
# Argo CD runs a sidecar config management plugin in the Application's folder of a copy of the
# repository, sent as a tarball that may leave `.git` out (argo-cd util/cmp/stream.go: v2.4's
# `compressFiles` excludes it; later releases, the repo server's --plugin-tar-exclude globs), and
# names that folder, relative to the copy's top, in the plugin's environment (argo-cd
# docs/user-guide/build-environment.md, ARGOCD_APP_SOURCE_PATH).
ARGOCD_SOURCE_PATH = "ARGOCD_APP_SOURCE_PATH"


def root(folder: Path) -> tuple[Path, str]:
    """The folder every file named from `folder` must lie in, and its name for an error: the top
    of the git repository holding `folder` (under `diff --git-ref`, the revision's tree); outside
    any repository, the working folder when `folder` is in it (a fleet before `git init`), else
    `folder` itself; in an Argo CD plugin's copy of the repository, which has no `.git`, the
    top of that copy. Real paths, symbolic links resolved."""
    return _root(
        str(folder), os.getcwd(), tuple(revision_tops), os.environ.get(ARGOCD_SOURCE_PATH, "")
    )


@cache  # a fleet names files from a few folders, thousands of times: once per folder
def _root(folder: str, cwd: str, tops: tuple[str, ...], source: str) -> tuple[Path, str]:
    # What the answer depends on is the key: the folder as named, the working folder, the trees
    # standing for a revision's repository (`diff --git-ref`) and the Argo CD plugin's path.
    top = repository_top(Path(cwd, folder))
    if top is not None:
        return top, _REPOSITORY
    real, working = Path(os.path.realpath(Path(cwd, folder))), Path(os.path.realpath(cwd))
    plugin = _argocd_top(working, source)
    if plugin is not None and real.is_relative_to(plugin):
        return plugin, _ARGOCD_REPOSITORY
    if real.is_relative_to(working):
        return working, _WORKING_FOLDER
    return real, _CONFIG_FOLDER


def _argocd_top(working: Path, source: str) -> Path | None:
    """The top of the repository copy an Argo CD plugin runs in: the working folder less the
    Application's path (`source`), when the working folder ends with it; None anywhere else."""
    parts = [part for part in source.split("/") if part not in ("", ".")]
    if not parts or ".." in parts or source.startswith("/") or len(parts) >= len(working.parts):
        return None
    if list(working.parts[-len(parts) :]) != parts:
        return None
    return Path(*working.parts[: -len(parts)])


def inside_repository(
    folder: Path,
    written: str,
    location: Location | None,
    field: str | None,
    what: str,
    hint: str | None = None,
) -> Path:
    """The real path of the file `written` names, relative to `folder` (the folder of the file
    that names it), or a UserError at `location` and `field` when it lies outside `root(folder)`
    or in a `.git` folder. `what` names the file in the error ("base config", "patch file"),
    which gives the path as written, never anything of the file; `hint` says what to do instead.
    Nothing is read: a file that is missing, a FIFO or a folder is the reader's to report."""
    if "\x00" in written:
        raise UserError("a file name cannot contain a NUL byte", location, field)
    top, where = root(folder)
    named = folder / written
    real = real_path(named)
    if not _under(real, top):
        advice = "keep it in the repository, beside the configs that name it"
        if where in (_WORKING_FOLDER, _CONFIG_FOLDER):
            advice += ", or in a git repository that holds both"
        raise UserError(
            f"{what} {display_path(named)} is outside {where} (symbolic links followed); a config "
            "names only files of its own repository",
            location,
            field,
            hint=f"{advice}; {hint}" if hint else advice,
        )
    if _in_git(real, top):
        raise UserError(
            f"{what} {display_path(named)} is in the repository's .git folder, which holds git's "
            "own data, never a config's file",
            location,
            field,
        )
    return real


def is_inside(folder: Path, path: Path) -> bool:
    """Whether `path` (a file found in `folder`, say by a fleet's discovery) lies inside
    `root(folder)`, symbolic links followed, and not in `.git`: the rule for a file no config
    names, which is then left out rather than read."""
    top, _ = root(folder)
    real = real_path(path)
    return _under(real, top) and not _in_git(real, top)


def _under(real: Path, top: Path) -> bool:
    # On the strings: Path.is_relative_to costs more than all the rest of the check.
    inner, outer = str(real), str(top)
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def _in_git(real: Path, top: Path) -> bool:
    # Without regard to case: on a file system that ignores it (macOS's by default) `.GIT/config`
    # is git's own file, and real paths keep the case they were written in.
    return ".git" in str(real)[len(str(top)) :].lower().split("/")
