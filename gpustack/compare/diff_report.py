"""A diff as a person or a program reads it: text (with colour on a terminal) and JSON, for one
cluster (`as_text`, `as_json`) or a fleet (`fleet_as_text`, `fleet_json`, the clusters' diffs
under their names, and the base changes clusters do not take, `unreached_line`).

Secrets are masked already (object_diff.diff_objects, diff_files); a name or other identity field
is masked again as shown, since a secret may be one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpustack.compare.object_diff import (
    NO_EFFECT,
    Change,
    ClusterDiffs,
    Diff,
    Status,
    Unreached,
)
from gpustack.layout import APPLICATION_SET_DIR
from gpustack.redaction import mask_text

# How the text and the Markdown review mark each kind of change.
SIGN: dict[Status, str] = {"changed": "~", "added": "+", "removed": "-"}
_COLOR: dict[str, str] = {
    "changed": "33",
    "added": "32",
    "removed": "31",
    "hunk": "36",
    "header": "1",
}


def paint(text: str, color: str, enabled: bool) -> str:
    return f"\x1b[{_COLOR[color]}m{text}\x1b[0m" if enabled else text


def summary_line(diff: Diff) -> str:
    if diff.is_empty:
        return f"no differences between {diff.old_label} and {diff.new_label}"
    counts = diff.counts()
    return f"{diff.old_label} -> {diff.new_label}: " + ", ".join(
        f"{count} {status}" for status, count in counts.items()
    )


def as_text(diff: Diff, color: bool = False) -> str:
    """The per-object summary (with changed field paths), then the unified diffs."""
    lines = [summary_line(diff)]
    lines.extend(f"note: left out for {side}: {field}: {why}" for side, field, why in diff.left_out)
    for change in diff.changes:
        lines.append(
            paint(
                f"{SIGN[change.status]} {change.status:<8} {what_changed(change)}",
                change.status,
                color,
            )
        )
        lines.extend(f"    {path}" for path in change.paths)
        if change.rollout is not None:
            lines.append(f"    on running nodes: {_masked(change.rollout.sentence())}")
    for change in diff.changes:
        lines.append("")
        for line in change.unified.splitlines():
            lines.append(paint_diff_line(line, color))
    return "\n".join(lines) + "\n"


def what_changed(change: Change) -> str:
    """What a change is to, as the text and Markdown summaries name it."""
    if change.identity is None:
        return f"file {change.subject}"
    if change.renamed_from is not None:
        return f"{change.subject} (was {_masked(change.renamed_from)})"
    return change.subject


def _masked(name: str | None) -> str | None:
    """A name or other identity field as a report shows it: masked, since a secret may be one."""
    return mask_text(name) if name is not None else None


def paint_diff_line(line: str, color: bool) -> str:
    if line.startswith(("---", "+++")):
        return paint(line, "header", color)
    if line.startswith("@@"):
        return paint(line, "hunk", color)
    if line.startswith("+"):
        return paint(line, "added", color)
    if line.startswith("-"):
        return paint(line, "removed", color)
    return line


def as_json(diff: Diff) -> dict[str, Any]:
    """The diff as JSON-ready data: labels, counts, and each change with its paths and diff."""
    return {
        "old": diff.old_label,
        "new": diff.new_label,
        "different": not diff.is_empty,
        "counts": diff.counts(),
        "leftOut": [
            {"profile": side, "field": field, "reason": why} for side, field, why in diff.left_out
        ],
        "changes": [
            {
                "change": change.status,
                **dict(
                    zip(
                        ("group", "kind", "namespace", "name"),
                        map(_masked, change.identity or (None, None, None, None)),
                    )
                ),
                "file": change.file,
                "renamedFrom": _masked(change.renamed_from),
                "paths": list(change.paths),
                "values": [
                    {"path": path, "old": before, "new": after}
                    for path, before, after in change.values
                ],
                # What applying it does to running pods and nodes (a workload's), else null.
                "onRunningNodes": _masked(change.rollout.sentence()) if change.rollout else None,
                "diff": change.unified,
            }
            for change in diff.changes
        ],
    }


def counted(counts: dict[Status, int]) -> str:
    return ", ".join(f"{count} {status}" for status, count in counts.items() if count)


def total_counts(diffs: ClusterDiffs) -> dict[Status, int]:
    totals: dict[Status, int] = {"changed": 0, "added": 0, "removed": 0}
    for _, diff in diffs:
        for status, count in diff.counts().items():
            totals[status] += count
    return totals


def clusters_and_fleet(diffs: ClusterDiffs) -> tuple[ClusterDiffs, Diff | None]:
    """The clusters' diffs, and the fleet folder's (None when it was not compared)."""
    clusters = [(name, diff) for name, diff in diffs if name != APPLICATION_SET_DIR]
    fleet = next((diff for name, diff in diffs if name == APPLICATION_SET_DIR), None)
    return clusters, fleet


def fleet_summary(diffs: ClusterDiffs) -> str:
    """One line: how many clusters differ, each with its counts, and the fleet's `_gitops/`."""
    clusters, fleet = clusters_and_fleet(diffs)
    differing = [(name, diff) for name, diff in clusters if not diff.is_empty]
    gitops = (
        f"; the fleet's {APPLICATION_SET_DIR}/ differs ({counted(fleet.counts())})"
        if fleet is not None and not fleet.is_empty
        else ""
    )
    if not differing:
        return f"no differences in {len(clusters)} cluster(s){gitops}"
    listed = ", ".join(f"{name} ({counted(diff.counts())})" for name, diff in differing)
    return f"{len(differing)} of {len(clusters)} cluster(s) differ: {listed}{gitops}"


def why_not_reached(note: Unreached) -> str:
    """`cluster, which sets it itself`, `clusters, where it has no effect`...: why the clusters
    of `note` do not take the change (their places say which is which)."""
    count = len(note.clusters)
    no_effect = sum(where.startswith(NO_EFFECT) for _, where in note.clusters)
    if no_effect == count:
        reason = "where it has no effect"
    else:
        reason = "which sets it itself" if count == 1 else "which set it themselves"
        if no_effect:
            reason += " or where it has no effect"
    return f"{'cluster' if count == 1 else 'clusters'}, {reason}"


def unreached_line(note: Unreached, shown: int | None = None) -> str:
    """`the change to driver.version in clusters/base.yaml does not reach 2 clusters, which set
    it themselves or where it has no effect: a (clusters/a.yaml:4:11), b (no effect there:
    ...)` (the first `shown` clusters)."""
    count = len(note.clusters)
    listed = ", ".join(f"{name} ({where})" for name, where in note.clusters[:shown])
    more = count - len(note.clusters[:shown])
    return (
        f"the change to {note.setting} in {note.base} does not reach {count} "
        f"{why_not_reached(note)}: {listed}" + (f" and {more} more" if more else "")
    )


def fleet_as_text(
    diffs: ClusterDiffs, color: bool = False, unreached: Sequence[Unreached] = ()
) -> str:
    """The fleet summary line (and a note for each base change that clusters do not take,
    since they set that value themselves), then each differing cluster's text (as_text) under
    its name."""
    parts = [fleet_summary(diffs) + "\n"]
    parts += [f"note: {unreached_line(note)}\n" for note in unreached]
    for name, diff in diffs:
        if not diff.is_empty:
            parts.append(f"\n{paint(f'== {name}', 'header', color)}\n{as_text(diff, color)}")
    return "".join(parts)


def fleet_json(diffs: ClusterDiffs, unreached: Sequence[Unreached] = ()) -> dict[str, Any]:
    """Every cluster's diff (as_json) and, apart, the fleet's `_gitops/` folder's (or null), and
    the base changes clusters do not take (`unreached`)."""
    clusters, fleet = clusters_and_fleet(diffs)
    return {
        "unreached": [
            {
                "base": note.base,
                "setting": note.setting,
                "clusters": [{"name": name, "where": where} for name, where in note.clusters],
            }
            for note in unreached
        ],
        "different": any(not diff.is_empty for _, diff in diffs),
        "counts": total_counts(diffs),
        "clustersDiffering": sum(not diff.is_empty for _, diff in clusters),
        "clusters": [{"name": name, **as_json(diff)} for name, diff in clusters],
        "fleet": {"name": APPLICATION_SET_DIR, **as_json(fleet)} if fleet is not None else None,
    }
