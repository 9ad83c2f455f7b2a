"""`gpustack check`: is the committed output what a render would write, and is it valid?

    check(request, say, progress) -> Checked

Every config is rendered in memory and compared with `out/<name>/` (`output_check`), then its
rendering validated and linted (`fleet.clusters.check_all`). Files named besides the configs and
folders (pre-commit's changed files) narrow the check to the clusters they affect
(`changes.configs_to_check`); when a narrowed check cannot vouch for the output folder (the
fleet's ApplicationSet would change, or a folder no YAML file of the fleet names), the whole
fleet is checked instead.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpustack.build import applicationset
from gpustack.build.pipeline import Rendering
from gpustack.compare import changes
from gpustack.compare.output_check import OutputCheck, check_json, check_output
from gpustack.errors import Location, UserError, display_path
from gpustack.feedback import Messages, StartProgress
from gpustack.fleet import clusters as fleet
from gpustack.layout import APPLICATION_SET_DIR
from gpustack.resolve import inventory
from gpustack.resolve.load import overrides
from gpustack.write import output_tree


@dataclass(frozen=True)
class CheckRequest:
    """What `gpustack check` was asked: the configs, fleet folders and changed files it was
    given (in order), the output folder, and the settings every render takes."""

    paths: tuple[Path, ...]
    out: Path
    profiles_dir: Path | None = None
    assignments: tuple[str, ...] = ()

    @property
    def folders(self) -> list[Path]:
        return [path for path in self.paths if path.is_dir()]

    @property
    def changed(self) -> list[Path]:
        """The files named that are no folder: configs, or changed inputs."""
        return [path for path in self.paths if not path.is_dir()]


@dataclass(frozen=True)
class Checked:
    """What a check found: each output folder's report, the renderings compared, the configs
    checked (`whole`: the whole fleet, not those changed files affect), the folders under `out`
    no cluster writes (`strays`, an error when the fleet's ApplicationSet deploys every folder:
    `deployed`) and the GitOps paths that miss the output folder (`misplaced`)."""

    request: CheckRequest
    reports: list[OutputCheck]
    renderings: list[Rendering]
    checked: list[Path | None]
    whole: bool
    strays: list[Path]
    deployed: bool
    misplaced: list[str]

    @property
    def stale(self) -> list[OutputCheck]:
        return [report for report in self.reports if report.stale]

    @property
    def errors(self) -> int:
        """Error findings in the rendered manifests."""
        return sum(report.errors for report in self.reports)

    @property
    def failed(self) -> bool:
        return bool(self.stale or self.errors or (self.strays and self.deployed))

    def render_again(self) -> str:
        """The `gpustack render` command line that makes the stale output current."""
        request = self.request
        force = ["--force"] if any(report.unmarked for report in self.stale) else []
        return shlex.join(
            [
                "gpustack",
                "render",
                *map(str, self._render_paths()),
                "-o",
                str(request.out),
                *(
                    ["--profiles-dir", str(request.profiles_dir)]
                    if request.profiles_dir is not None
                    else []
                ),
                *(part for assignment in request.assignments for part in ("--set", assignment)),
                *force,
            ]
        )

    def _render_paths(self) -> list[Path]:
        """What the render that fixes stale output names: the folders, else the configs
        checked (none for `./gpustack.yaml` alone)."""
        folders, changed = self.request.folders, self.request.changed
        if folders or not changed:
            return folders
        configs = [path for path in self.checked if path is not None]
        return [] if configs == [inventory.DEFAULT_CONFIG] else configs

    def stray_messages(self) -> list[str]:
        """What each stray folder is and what to do about it."""
        named = self.request.folders or list(self.request.paths)
        return [output_tree.stray_message(stray, named, self.deployed) for stray in self.strays]

    def as_json(self) -> dict[str, Any]:
        """`check --output json`: each folder's report, the strays, and whether all is current."""
        result = check_json(self.reports, self.request.out)
        result["strays"] = [str(folder) for folder in self.strays]
        result["current"] = result["current"] and not (self.strays and self.deployed)
        return result


def check(request: CheckRequest, say: Messages, progress: StartProgress) -> Checked:
    """Check the committed output in `request.out` against the configs `request` names (all of
    a fleet, or those its changed files affect); `say` hears a note when the configs are the
    embedded example, `progress` counts the renders."""
    folders, changed, out = request.folders, request.changed, request.out
    texts: dict[Path, bytes] | None = None
    if changed:
        found, whole, texts = changes.configs_to_check(
            folders, changed, out, request.profiles_dir, request.assignments, say.note
        )
    else:
        found, whole = inventory.discover_noted(request.paths, say.note), True
    fleet_folder = bool(folders)
    renderings, reports = _compare(found, request, fleet_folder, progress)
    if not whole and _unsure(reports, renderings, out, texts if fleet_folder else None):
        found, whole, _ = changes.configs_to_check(
            folders, changed, out, request.profiles_dir, request.assignments, say.note, narrow=False
        )
        renderings, reports = _compare(found, request, fleet_folder, progress)
    if not whole:
        reports = [report for report in reports if report.name != APPLICATION_SET_DIR]
    return Checked(
        request,
        reports,
        renderings,
        found,
        whole,
        # A folder of no cluster here: stale when the ApplicationSet deploys every folder in `out`.
        output_tree.strays(renderings, out) if fleet_folder and whole else [],
        applicationset.for_fleet(renderings) is not None,
        output_tree.misplaced(renderings, out),
    )


def _compare(
    found: list[Path | None],
    request: CheckRequest,
    fleet_folder: bool,
    progress: StartProgress,
) -> tuple[list[Rendering], list[OutputCheck]]:
    """The configs rendered, and each output folder's report."""
    shown = progress(len(found), "checking")
    renderings = fleet.render_all(
        found,
        None,
        request.profiles_dir,
        override=overrides(list(request.assignments)),
        progress=shown.advance,
    )
    shown.finish()
    out = request.out
    if not out.is_dir():
        raise UserError(
            "output folder does not exist" if not out.exists() else "output folder is not a folder",
            Location(display_path(out)),
            hint="give -o the folder `gpustack render -o` wrote, or render into it first",
        )
    return renderings, check_output(renderings, fleet.check_all(renderings), out, fleet_folder)


def _unsure(
    reports: list[OutputCheck],
    renderings: list[Rendering],
    out: Path,
    texts: dict[Path, bytes] | None,
) -> bool:
    """Whether a check of some clusters cannot vouch for the output folder: the fleet's
    ApplicationSet (`_gitops/`, made from every cluster) would change, or a cluster folder is
    named by no YAML file of the fleet folders (a renamed or removed cluster: a stray only a
    whole check can tell). A config outside the folders (`texts` None) leaves its folders to
    the whole check. A folder no cluster here writes is vouched for only when a config of the
    fleet surely has its name (changes.clusters_named): a renamed cluster's old name may still
    be some pool's."""
    if renderings and any(
        report.name == APPLICATION_SET_DIR and report.stale for report in reports
    ):
        return True
    if texts is None:
        return False
    unrendered = output_tree.strays(renderings, out)
    known = changes.clusters_named(texts, {folder.name for folder in unrendered})
    return any(folder.name not in known for folder in unrendered)
