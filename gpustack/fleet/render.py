"""`gpustack render`: configs or fleet folders rendered, validated and linted, then written into
`out/<name>/` (with the fleet's `_gitops/`) or as one YAML stream.

    render(request, say, progress) -> Rendered

A rendering with an error finding writes nothing. Each finding (an error or a warning) a fleet's
clusters share is said once (`feedback.grouped`), as it is found, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpustack.build import applicationset, pipeline
from gpustack.build.pipeline import Rendering
from gpustack.feedback import Messages, StartProgress, grouped
from gpustack.fleet import clusters as fleet
from gpustack.layout import APPLICATION_SET_DIR
from gpustack.redaction import mask_text
from gpustack.resolve import inventory
from gpustack.resolve.load import overrides
from gpustack.validation.verdicts import explain
from gpustack.write import folders as output
from gpustack.write import output_tree

# What `Rendered.totals` counts, over the clusters written.
COUNTS = ("files", "written", "unchanged", "removed")


@dataclass(frozen=True)
class RenderRequest:
    """What `gpustack render` was asked: the configs and fleet folders (none: ./gpustack.yaml,
    else the embedded example), the output folder or one stream (`stdout`), the settings every
    render takes, whether to overwrite files that lost gpustack's marker (`force`), worker
    processes (`jobs`), and whether a shared message names every cluster (`verbose`)."""

    paths: tuple[Path, ...]
    out: Path
    profile: str | None = None
    profiles_dir: Path | None = None
    assignments: tuple[str, ...] = ()
    stdout: bool = False
    force: bool = False
    jobs: int | None = None
    verbose: bool = False


@dataclass(frozen=True)
class Rendered:
    """What a render did: the renderings, whether they are valid (an invalid one writes
    nothing), the one YAML stream (`--stdout`), or each cluster folder written (`folders`:
    name, folder and the counts of `COUNTS`)."""

    renderings: list[Rendering]
    valid: bool = True
    stream: str | None = None
    folders: tuple[dict[str, Any], ...] = ()

    @property
    def totals(self) -> dict[str, int]:
        return {key: sum(int(folder[key]) for folder in self.folders) for key in COUNTS}


def render(request: RenderRequest, say: Messages, progress: StartProgress) -> Rendered:
    """Render the configs `request` names, check each rendering, and write them (or make
    the one stream); `say` hears the warnings and findings as they are found, `progress`
    counts the clusters rendered and written."""
    override = overrides(list(request.assignments))
    paths = inventory.discover_noted(request.paths, say.note)
    rendering = progress(len(paths), "rendering")
    renderings = fleet.render_all(
        paths, request.profile, request.profiles_dir, request.jobs, override, rendering.advance
    )
    rendering.finish()
    findings = [
        (rendered.name, finding)
        for rendered, found in zip(renderings, fleet.check_all(renderings, request.jobs))
        for finding in found
    ]
    for severity, said in (("error", say.error), ("warning", say.warning)):
        found = [(name, mask_text(explain(f))) for name, f in findings if f.severity == severity]
        for line in grouped(found, request.verbose):
            said(line)
    if any(finding.severity == "error" for _, finding in findings):
        return Rendered(renderings, valid=False)
    if request.stdout:
        if len(renderings) > 1:
            named = ", ".join(r.name for r in renderings[:3])
            say.warning(
                f"--stdout: one stream holds the objects of {len(renderings)} clusters "
                f"({named}{', ...' if len(renderings) > 3 else ''}); "
                "apply it to no single cluster (name one config for that)"
            )
        return Rendered(renderings, stream=pipeline.stream(renderings))
    return Rendered(renderings, folders=_write(request, renderings, say, progress))


def _write(
    request: RenderRequest, renderings: list[Rendering], say: Messages, progress: StartProgress
) -> tuple[dict[str, Any], ...]:
    """The renderings written into `request.out`, after the warnings about the output folder
    (GitOps paths that miss it, folders of no cluster here)."""
    out = request.out
    for message in output_tree.misplaced(renderings, out):
        say.warning(message)
    fleet_folder = any(path.is_dir() for path in request.paths)
    planned = output_tree.output_folders(renderings, out, fleet_folder)
    if fleet_folder:
        deployed = applicationset.for_fleet(renderings) is not None
        for stray in output_tree.strays(renderings, out):
            say.warning(output_tree.stray_message(stray, request.paths, deployed))
    modes = {
        out / r.name: output.private_modes(pipeline.files(r), r.secret_file_mode)
        for r in renderings
        if r.secret_file_mode is not None
    }
    # Counts clusters: the fleet's _gitops/ folder is written too, but is none.
    writing = progress(len(renderings), "writing")

    def written(target: Path) -> None:
        if target.name != APPLICATION_SET_DIR:
            writing.advance()

    done = output.write_all(out, planned, modes, request.force, written)
    writing.finish()
    return tuple(
        {
            "name": each.target.name,
            "folder": str(each.target),
            "files": len(each.files),
            "written": each.written,
            "unchanged": len(each.files) - each.written,
            "removed": each.removed,
        }
        for each in done
        if each.files or each.removed
    )
