"""What differs between two sets of rendered output: a pure engine over plain data.

Objects are matched by `objects.identity` (group, kind, namespace, name), so a renamed file or a
reordered stream is no difference; every other file (kustomization.yaml, `node/`) is compared as
text. Each change names the field paths that differ (`spec.template.spec.containers[0].image`) and
carries a unified diff of the object as gpustack writes it.

Secrets never leave this module in clear: before anything is compared, PEM blocks, base64 or
`data:` URL payloads that hold a PEM (the entitlement MachineConfigs), and every value of a
Secret's `data`/`stringData` become `<redacted sha256:…>`. The digest is of the hidden value, so a
changed secret still shows as changed.
"""

from __future__ import annotations

import difflib
import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from gpustack import emit, secrets
from gpustack.errors import UserError
from gpustack.objects import Identity, file_name, identity, qualified, sort_key
from gpustack.yamlio import load_text

Status = Literal["added", "removed", "changed"]


@dataclass(frozen=True)
class Change:
    """One object or file that differs. `identity` is None for a file compared as text."""

    status: Status
    subject: str
    file: str
    identity: Identity | None
    paths: tuple[str, ...]
    unified: str


@dataclass(frozen=True)
class Diff:
    """The changes from `old_label` to `new_label`, objects in apply order, then files by path."""

    old_label: str
    new_label: str
    changes: tuple[Change, ...] = ()
    # Settings left out on one side because they do not apply there: (side, field, why).
    left_out: tuple[tuple[str, str, str], ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.changes

    def counts(self) -> dict[Status, int]:
        counts: dict[Status, int] = {"changed": 0, "added": 0, "removed": 0}
        for change in self.changes:
            counts[change.status] += 1
        return counts

    def __add__(self, other: Diff) -> Diff:
        """Both diffs' changes under this one's labels (objects, then files)."""
        return Diff(
            self.old_label,
            self.new_label,
            self.changes + other.changes,
            self.left_out + other.left_out,
        )


# --- masking ---------------------------------------------------------------------------------

# One implementation of masking for every command (gpustack.secrets); names kept for callers.
mask, mask_text, redacted = secrets.mask, secrets.mask_text, secrets.redacted


# --- field paths -----------------------------------------------------------------------------

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def join_path(path: str, key: Any) -> str:
    """`path.key`, or `path["key"]` when the key holds dots or slashes (label keys)."""
    if isinstance(key, str) and _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(str(key))}]"


def changed_paths(old: Any, new: Any, path: str = "") -> list[str]:
    """The dotted paths at which `old` and `new` differ, in document order.

    Lists of named items (containers, env, volumes) are matched by name, as Kubernetes merges
    them, so inserting one item names that item and not every item after it. An embedded YAML
    document (a ConfigMap's config file) is compared field by field.
    """
    if old == new:
        return []
    found = list(_differences(old, new, path))
    return found or [path]


def _differences(old: Any, new: Any, path: str) -> Iterator[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(key for key in new if key not in old)]:
            child = join_path(path, key)
            if key not in old or key not in new:
                yield child
            elif old[key] != new[key]:
                yield from changed_paths(old[key], new[key], child)
    elif isinstance(old, list) and isinstance(new, list):
        yield from _list_differences(old, new, path)
    elif isinstance(old, str) and isinstance(new, str) and (embedded := _embedded(old, new)):
        yield from changed_paths(*embedded, path)
    else:
        yield path


def _names(items: list[Any]) -> list[Any] | None:
    names = [item.get("name") if isinstance(item, dict) else None for item in items]
    # Only string names identify items (a hand-edited file may hold anything there).
    if not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
        return None
    return names


def _list_differences(old: list[Any], new: list[Any], path: str) -> Iterator[str]:
    old_names, new_names = _names(old), _names(new)
    if old_names is None or new_names is None:
        for index in range(max(len(old), len(new))):
            child = f"{path}[{index}]"
            if index >= len(old) or index >= len(new):
                yield child
            elif old[index] != new[index]:
                yield from changed_paths(old[index], new[index], child)
        return
    by_name = dict(zip(old_names, old))
    found = False
    for index, (name, item) in enumerate(zip(new_names, new)):
        if name not in by_name:
            found = True
            yield f"{path}[{index}]"
        elif by_name[name] != item:
            found = True
            yield from changed_paths(by_name[name], item, f"{path}[{index}]")
    for index, name in enumerate(old_names):
        if name not in new_names:
            found = True
            yield f"{path}[{index}]"
    if not found:
        yield path  # same items, new order


def _embedded(old: str, new: str) -> tuple[Any, Any] | None:
    """Both strings parsed, when both are multi-line YAML (or JSON) mappings or lists."""
    if "\n" not in old or "\n" not in new:
        return None
    try:
        parsed = (load_text(old, "old").data, load_text(new, "new").data)
    except UserError:
        return None
    if all(isinstance(value, (dict, list)) for value in parsed):
        return parsed
    return None


# --- building the diff -----------------------------------------------------------------------


def _index(objects: list[dict[str, Any]]) -> dict[Identity, dict[str, Any]]:
    indexed: dict[Identity, dict[str, Any]] = {}
    for obj in objects:
        key = identity(obj)
        if key in indexed:
            raise ValueError(f"{qualified(key)} appears twice")
        indexed[key] = obj
    return indexed


def _unified(old_text: str, new_text: str, old_name: str, new_name: str) -> str:
    lines = difflib.unified_diff(
        old_text.splitlines(), new_text.splitlines(), old_name, new_name, lineterm=""
    )
    return "".join(f"{line}\n" for line in lines)


def diff_objects(
    old: list[dict[str, Any]],
    new: list[dict[str, Any]],
    old_label: str = "old",
    new_label: str = "new",
    files: dict[Identity, str] | None = None,
) -> Diff:
    """Objects added, removed or changed from `old` to `new`, matched by identity; each named by
    its file (`files`, relative to the folder; else the name gpustack gives it)."""
    old_by_key = {key: mask(obj) for key, obj in _index(old).items()}
    new_by_key = {key: mask(obj) for key, obj in _index(new).items()}
    keys = sorted(
        old_by_key.keys() | new_by_key.keys(),
        key=lambda key: sort_key(new_by_key.get(key) or old_by_key[key]),
    )
    changes = []
    for key in keys:
        before, after = old_by_key.get(key), new_by_key.get(key)
        if before == after:
            continue
        name = (files or {}).get(key) or file_name(new_by_key.get(key) or old_by_key[key])
        old_text = emit.dump(before) if before is not None else ""
        new_text = emit.dump(after) if after is not None else ""
        unified = _unified(
            old_text,
            new_text,
            f"{old_label}/{name}" if before is not None else "/dev/null",
            f"{new_label}/{name}" if after is not None else "/dev/null",
        )
        if before is None:
            status: Status = "added"
            paths: list[str] = []
        elif after is None:
            status, paths = "removed", []
        else:
            status, paths = "changed", changed_paths(before, after)
        changes.append(Change(status, qualified(key), name, key, tuple(paths), unified))
    return Diff(old_label, new_label, tuple(changes))


def diff_files(
    old: dict[str, bytes],
    new: dict[str, bytes],
    old_label: str = "old",
    new_label: str = "new",
) -> Diff:
    """Files (keyed by relative path) added, removed or changed, compared as text."""
    changes = []
    for path in sorted(old.keys() | new.keys()):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        status: Status = "added" if before is None else "removed" if after is None else "changed"
        old_text, new_text = _text(before), _text(after)
        if old_text is None or new_text is None:
            unified = f"Binary files {old_label}/{path} and {new_label}/{path} differ\n"
        else:
            unified = _unified(
                old_text,
                new_text,
                f"{old_label}/{path}" if before is not None else "/dev/null",
                f"{new_label}/{path}" if after is not None else "/dev/null",
            )
        changes.append(Change(status, path, path, None, (), unified))
    return Diff(old_label, new_label, tuple(changes))


def _text(content: bytes | None) -> str | None:
    if content is None:
        return ""
    try:
        return mask_text(content.decode("utf-8"))
    except UnicodeDecodeError:
        return None


# --- presenting it ---------------------------------------------------------------------------

_SIGN: dict[Status, str] = {"changed": "~", "added": "+", "removed": "-"}
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


def render_text(diff: Diff, color: bool = False) -> str:
    """The per-object summary (with changed field paths), then the unified diffs."""
    lines = [summary_line(diff)]
    lines.extend(f"note: left out for {side}: {field}: {why}" for side, field, why in diff.left_out)
    for change in diff.changes:
        what = change.subject if change.identity else f"file {change.subject}"
        lines.append(
            paint(f"{_SIGN[change.status]} {change.status:<8} {what}", change.status, color)
        )
        lines.extend(f"    {path}" for path in change.paths)
    for change in diff.changes:
        lines.append("")
        for line in change.unified.splitlines():
            lines.append(paint_diff_line(line, color))
    return "\n".join(lines) + "\n"


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
                "group": change.identity[0] if change.identity else None,
                "kind": change.identity[1] if change.identity else None,
                "namespace": change.identity[2] if change.identity else None,
                "name": change.identity[3] if change.identity else None,
                "file": change.file,
                "paths": list(change.paths),
                "diff": change.unified,
            }
            for change in diff.changes
        ],
    }


# --- many clusters -----------------------------------------------------------------------------

ClusterDiffs = list[tuple[str, Diff]]


def _counted(counts: dict[Status, int]) -> str:
    return ", ".join(f"{count} {status}" for status, count in counts.items() if count)


def total_counts(diffs: ClusterDiffs) -> dict[Status, int]:
    totals: dict[Status, int] = {"changed": 0, "added": 0, "removed": 0}
    for _, diff in diffs:
        for status, count in diff.counts().items():
            totals[status] += count
    return totals


def fleet_summary(diffs: ClusterDiffs) -> str:
    """One line: how many clusters differ, each with its counts."""
    differing = [(name, diff) for name, diff in diffs if not diff.is_empty]
    if not differing:
        return f"no differences in {len(diffs)} cluster(s)"
    listed = ", ".join(f"{name} ({_counted(diff.counts())})" for name, diff in differing)
    return f"{len(differing)} of {len(diffs)} cluster(s) differ: {listed}"


def render_fleet_text(diffs: ClusterDiffs, color: bool = False) -> str:
    """The fleet summary line, then each differing cluster's text (render_text) under its name."""
    parts = [fleet_summary(diffs) + "\n"]
    for name, diff in diffs:
        if not diff.is_empty:
            parts.append(f"\n{paint(f'== {name}', 'header', color)}\n{render_text(diff, color)}")
    return "".join(parts)


def fleet_json(diffs: ClusterDiffs) -> dict[str, Any]:
    return {
        "different": any(not diff.is_empty for _, diff in diffs),
        "counts": total_counts(diffs),
        "clusters": [{"name": name, **as_json(diff)} for name, diff in diffs],
    }


def _cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, no line breaks."""
    return text.replace("|", "\\|").replace("\n", " ")


def _fenced(text: str, language: str) -> str:
    """`text` in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{fence}\n"


def render_markdown(diffs: ClusterDiffs, title: str) -> str:
    """A pull-request review comment: a table of the clusters, then per differing cluster a
    collapsible section with its objects and field paths and the unified diffs. Secrets are
    masked already (diff_objects, diff_files)."""
    lines = [f"### {title}", "", fleet_summary(diffs).replace("(s)", "s") + ".", ""]
    for _, diff in diffs:
        lines += [
            f"> left out for {html.escape(side)}: `{_cell(field)}`: {html.escape(why, quote=False)}  "
            for side, field, why in diff.left_out
        ]
    if any(diff.left_out for _, diff in diffs):
        lines.append("")
    differing = [(name, diff) for name, diff in diffs if not diff.is_empty]
    if differing:
        lines += ["| cluster | changed | added | removed |", "|---|---:|---:|---:|"]
        for name, diff in differing:
            counts = diff.counts()
            lines.append(
                f"| `{_cell(name)}` | {counts['changed']} | {counts['added']} | {counts['removed']} |"
            )
        lines.append("")
    for name, diff in differing:
        lines += [
            f"<details><summary><code>{html.escape(name)}</code>: "
            f"{html.escape(_counted(diff.counts()))}</summary>",
            "",
            "| change | object or file | fields |",
            "|---|---|---|",
        ]
        for change in diff.changes:
            what = change.subject if change.identity else f"file {change.subject}"
            fields = "<br>".join(f"`{_cell(path)}`" for path in change.paths)
            lines.append(f"| {_SIGN[change.status]} {change.status} | `{_cell(what)}` | {fields} |")
        lines += [
            "",
            _fenced("".join(change.unified for change in diff.changes), "diff"),
            "</details>",
            "",
        ]
    return "\n".join(lines).rstrip("\n") + "\n"
