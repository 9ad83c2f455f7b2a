"""The output check (`gpustack check`): what a render would change in `out/`, and the findings
on the renderings, folder by folder.

    check_output(renderings, findings, out) -> per output folder, the files a render would add,
        remove or change there (byte for byte) and the rendering's findings
    compare_folder(target, expected) -> what differs between a folder and the files a render
        would write there (`diff --against` finds the same files: review.against)
    check_json(reports, out) -> `check --output json`

It compares the folders a render writes (output_tree.output_folders, as `render` writes them)
and reads committed output through gpustack.compare.committed, which never follows a link.
"""

from __future__ import annotations

import difflib
import re
import shlex
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from gpustack.build.pipeline import Rendering
from gpustack.compare import committed
from gpustack.errors import UserError
from gpustack.findings import Finding
from gpustack.layout import APPLICATION_SET_DIR, KUSTOMIZATION, OVERRIDES_ANNOTATION, is_ours
from gpustack.objects import annotations_of, file_name, identity
from gpustack.read.yamlio import load_text
from gpustack.redaction import mask_text
from gpustack.write import folders, output_tree


@dataclass
class OutputCheck:
    """What `check` found in one output folder (`name` is the folder's): the files a render would
    add, remove or change, and the findings on the rendering."""

    name: str
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    diffs: dict[str, str] = field(default_factory=dict)
    # Changed files whose first line lost gpustack's marker: only `render --force` replaces them.
    unmarked: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    # Each finding as (the file of its object, relative to the folder; the finding): how `check`
    # groups the same finding in many clusters.
    placed: list[tuple[str, str]] = field(default_factory=list)
    errors: int = 0
    # The fields of the `--set` options the committed folder was rendered with (recorded in its
    # kustomization.yaml) where the render compared with it has others: a render that leaves
    # them out drops those settings.
    dropped_overrides: list[str] = field(default_factory=list)

    @property
    def stale(self) -> bool:
        return bool(self.missing or self.extra or self.diffs)


def check_output(
    renderings: Sequence[Rendering],
    findings: Sequence[list[Finding]],
    out: Path,
    fleet_folder: bool = True,
) -> list[OutputCheck]:
    """Each folder a render writes under `out` (output_tree.output_folders) compared with what is
    there, with the findings of each rendering (`findings`, in the renderings' order) placed at
    the file of their object."""
    by_name = dict(zip((rendering.name for rendering in renderings), findings))
    objects = {rendering.name: rendering.objects for rendering in renderings}
    reports = []
    for target, files in output_tree.output_folders(renderings, out, fleet_folder):
        report = compare_folder(target, files)
        _place(report, target, objects.get(target.name, []), by_name.get(target.name, []))
        reports.append(report)
    return reports


def compare_folder(target: Path, expected: dict[str, bytes]) -> OutputCheck:
    """What differs between the folder `target` and the files a render would write there."""
    report = OutputCheck(target.name)
    committed.refuse_link(target)
    for relative, content in expected.items():
        current = committed.read_file(target, relative)
        if current is None:
            report.missing.append(relative)
        elif current != content:
            path = target / relative
            if relative == KUSTOMIZATION:
                report.dropped_overrides = _set_fields(current, content)
            report.diffs[relative] = file_diff(
                current, content, f"{path} (committed)", f"{path} (rendered)"
            )
            if not is_ours(target / relative, relative):
                report.unmarked.append(relative)
    if target.is_dir():
        report.extra = sorted(
            relative
            for relative, mode in folders.entries(target).items()
            if stat.S_ISREG(mode)
            and is_ours(target / relative, relative)
            and relative not in expected
        )
    return report


def _set_fields(committed_text: bytes, rendered: bytes) -> list[str]:
    """The fields of the `--set` options recorded in a committed kustomization.yaml that the
    rendered one does not record alike. Committed output is untrusted: only field paths (names
    of config fields, checked to be nothing else) come out of it, never a value."""

    def fields(text: bytes) -> list[str]:
        try:
            data = load_text(text.decode("utf-8", errors="replace"), KUSTOMIZATION).data
        except UserError:
            return []
        recorded = annotations_of(data).get(OVERRIDES_ANNOTATION)
        if not isinstance(recorded, str):
            return []
        try:
            words = shlex.split(recorded)
        except ValueError:
            return []
        assignments = [word for previous, word in pairwise(words) if previous == "--set"]
        named = [assignment.partition("=")[0] for assignment in assignments]
        return [name for name in named if _FIELD_PATH.fullmatch(name)]

    mine = fields(rendered)
    return [name for name in fields(committed_text) if name not in mine]


# A config field's path as `--set` names it (dots; a key holding dots escaped with a backslash).
_FIELD_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./\\-]{0,200}")


def check_json(reports: Sequence[OutputCheck], out: Path) -> dict[str, Any]:
    """`check --output json`: whether the output is current and valid, and each folder's report
    (the fleet's `_gitops/` only when it is stale)."""
    clusters = [
        {
            "name": report.name,
            "folder": str(out / report.name),
            "missing": report.missing,
            "extra": report.extra,
            "changed": list(report.diffs),
            "unmarked": report.unmarked,
            "diffs": report.diffs,
            "findings": report.findings,
            "droppedOverrides": report.dropped_overrides,
        }
        for report in reports
        if report.name != APPLICATION_SET_DIR or report.stale
    ]
    return {
        "current": not any(report.stale for report in reports),
        "valid": not any(report.errors for report in reports),
        "clusters": clusters,
    }


def _place(
    report: OutputCheck, target: Path, objects: list[dict[str, Any]], findings: list[Finding]
) -> None:
    files = {identity(obj): file_name(obj) for obj in objects}
    for found in findings:
        relative = files.get(found.object, "") if found.object else ""
        where = target / relative
        field_path = f" ({found.field})" if found.field else ""
        what = mask_text(f"{found.severity}: [{found.rule}] {found.message}{field_path}")
        report.findings.append(f"{mask_text(str(where))}: {what}")
        report.placed.append((relative, what))
        report.errors += found.severity == "error"


def file_diff(current: bytes, wanted: bytes, fromfile: str, tofile: str) -> str:
    """A unified diff of a file's bytes (every line kept as written, so a line ending that alone
    differs shows), with the entitlement certificate (and any PEM) redacted on both sides. A
    file whose only difference is CRLF line endings says so (its lines would look the same)."""
    if current and wanted and current.replace(b"\r\n", b"\n") == wanted.replace(b"\r\n", b"\n"):
        return f"Line endings differ: {fromfile} has CRLF where {tofile} has LF\n"
    lines = difflib.unified_diff(
        mask_text(current.decode("utf-8", errors="replace")).splitlines(keepends=True),
        mask_text(wanted.decode("utf-8", errors="replace")).splitlines(keepends=True),
        fromfile,
        tofile,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
