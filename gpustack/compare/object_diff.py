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
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from gpustack import emit, redaction
from gpustack.build.decorate import CONFIG_HASH
from gpustack.compare.rollouts import NO_RESTART, RELOADS_DRIVER, Rollout, rollout
from gpustack.errors import UserError
from gpustack.layout import APPLICATION_SET_DIR
from gpustack.objects import Identity, file_name, identity, qualified, sort_key
from gpustack.read.yamlio import load_text

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
    # For an object whose name changed only by its content hash: the name it had.
    renamed_from: str | None = None
    # The changed fields whose values are plain (a number, a string): (path, old, new) as YAML
    # would show them, `(none)` on the side that lacks the field.
    values: tuple[tuple[str, str, str], ...] = ()
    # What applying the change does to running pods and nodes (a workload's), else None.
    rollout: Rollout | None = None

    @property
    def impact(self) -> int:
        """How much applying it disturbs running work (rollouts.RELOADS_DRIVER ... NO_RESTART)."""
        return self.rollout.impact if self.rollout is not None else NO_RESTART

    def content_hashes(self) -> set[str]:
        """The content hashes this change carries: the suffix of a name that changed only by its
        hash (both sides), and the values of gpustack's config-hash annotation."""
        found = set()
        if self.renamed_from is not None and self.identity is not None:
            for name in (self.renamed_from, self.identity[3]):
                matched = _HASHED_NAME.match(name)
                if matched:
                    found.add(name[len(matched["stem"]) + 1 :])
        for path, before, after in self.values:
            if path.endswith(f'annotations["{CONFIG_HASH}"]'):
                # Values are shown as JSON strings (_plain): the hash is between the quotes.
                found |= {
                    value[1:-1]
                    for value in (before, after)
                    if re.fullmatch(r'"[0-9a-f]{8,64}"', value)
                }
        return found


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

# The one masking of every command (gpustack.redaction), by the names the formats below use.
mask, mask_text, redacted = redaction.mask, redaction.mask_text, redaction.redacted


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
    return [found for found, _, _ in changed_fields(old, new, path)]


_ABSENT = object()


def changed_fields(old: Any, new: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """changed_paths with each side's value there (`_ABSENT` on the side that lacks it)."""
    if old == new:
        return []
    found = list(_differences(old, new, path))
    return found or [(path, old, new)]


def _differences(old: Any, new: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(key for key in new if key not in old)]:
            child = join_path(path, key)
            if key not in old or key not in new:
                yield child, old.get(key, _ABSENT), new.get(key, _ABSENT)
            elif old[key] != new[key]:
                yield from changed_fields(old[key], new[key], child)
    elif isinstance(old, list) and isinstance(new, list):
        yield from _list_differences(old, new, path)
    elif isinstance(old, str) and isinstance(new, str) and (embedded := _embedded(old, new)):
        yield from changed_fields(*embedded, path)
    else:
        yield path, old, new


def plain_values(fields: list[tuple[str, Any, Any]]) -> tuple[tuple[str, str, str], ...]:
    """The fields whose values are plain on both sides, each value as short text."""
    return tuple(
        (path, _plain(before), _plain(after))
        for path, before, after in fields
        if not isinstance(before, (dict, list)) and not isinstance(after, (dict, list))
    )


def _plain(value: Any) -> str:
    if value is _ABSENT:
        return "(none)"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:79] + "…"


def _names(items: list[Any]) -> list[Any] | None:
    names = [item.get("name") if isinstance(item, dict) else None for item in items]
    # Only string names identify items (a hand-edited file may hold anything there).
    if not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
        return None
    return names


def _list_differences(old: list[Any], new: list[Any], path: str) -> Iterator[tuple[str, Any, Any]]:
    old_names, new_names = _names(old), _names(new)
    if old_names is None or new_names is None:
        for index in range(max(len(old), len(new))):
            child = f"{path}[{index}]"
            if index >= len(old) or index >= len(new):
                yield (
                    child,
                    old[index] if index < len(old) else _ABSENT,
                    new[index] if index < len(new) else _ABSENT,
                )
            elif old[index] != new[index]:
                yield from changed_fields(old[index], new[index], child)
        return
    by_name = dict(zip(old_names, old))
    found = False
    for index, (name, item) in enumerate(zip(new_names, new)):
        if name not in by_name:
            found = True
            yield f"{path}[{index}]", _ABSENT, item
        elif by_name[name] != item:
            found = True
            yield from changed_fields(by_name[name], item, f"{path}[{index}]")
    for index, name in enumerate(old_names):
        if name not in new_names:
            found = True
            yield f"{path}[{index}]", by_name[name], _ABSENT
    if not found:
        yield path, old, new  # same items, new order


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


def _masked_sort_key(obj: dict[str, Any]) -> tuple[int, str, str, str]:
    """sort_key(mask(obj)), masking only the fields it reads, unless one holds a secret."""
    found = sort_key(obj)
    if any(redaction.carries_secret(part) for part in found[1:]):
        return sort_key(mask(obj))
    return found


def _unified(old_text: str, new_text: str, old_name: str, new_name: str) -> str:
    lines = difflib.unified_diff(
        old_text.splitlines(), new_text.splitlines(), old_name, new_name, lineterm=""
    )
    return "".join(f"{line}\n" for line in lines)


# A name that ends in a content hash: gpustack's `gpu-smoke-test-<8 hex>` Job
# (components/smoke_test.py), a `-<hex>` suffix in general, and kustomize's configMapGenerator
# and secretGenerator suffix: the first 10 hex digits of a SHA-256 with 0, 1, 3, a and e
# written g, h, k, m and t (kubernetes-sigs/kustomize v5, api/hasher/hasher.go, `Encode`,
# copied from kubectl's pkg/util/hash/hash.go).
_HASHED_NAME = re.compile(r"^(?P<stem>.+)-(?:[0-9a-f]{8,64}|[24-9bcdfghkmt]{10})$")


def _renames(old_keys: set[Identity], new_keys: set[Identity]) -> dict[Identity, Identity]:
    """Removed objects paired with the added object whose name differs only by its content hash
    (same group, kind, namespace and name before the hash), new identity -> old; only where
    exactly one object on each side has that stem."""

    def stems(keys: set[Identity]) -> dict[tuple[str, str, str, str], list[Identity]]:
        found: dict[tuple[str, str, str, str], list[Identity]] = {}
        for key in keys:
            matched = _HASHED_NAME.match(key[3])
            if matched:
                found.setdefault((*key[:3], matched["stem"]), []).append(key)
        return found

    removed, added = stems(old_keys - new_keys), stems(new_keys - old_keys)
    return {
        added[stem][0]: removed[stem][0]
        for stem in removed.keys() & added.keys()
        if len(removed[stem]) == len(added[stem]) == 1
    }


def diff_objects(
    old: list[dict[str, Any]],
    new: list[dict[str, Any]],
    old_label: str = "old",
    new_label: str = "new",
    files: dict[Identity, str] | None = None,
) -> Diff:
    """Objects added, removed or changed from `old` to `new`, matched by identity, or by name
    before a content hash (the smoke-test Job): one change with its fields, not a removal and
    an addition. Each is named by its file (`files`, relative to the folder, either side's
    identities; else the name gpustack gives it)."""
    old_by_key, new_by_key = _index(old), _index(new)
    renamed = _renames(set(old_by_key), set(new_by_key))
    was = set(renamed.values())
    keys = sorted(
        (old_by_key.keys() - was) | new_by_key.keys(),
        key=lambda key: _masked_sort_key(new_by_key.get(key) or old_by_key[key]),
    )
    changes = []
    for key in keys:
        old_key = renamed.get(key, key)
        before, after = old_by_key.get(old_key), new_by_key.get(key)
        if before == after:
            continue  # equal objects are equal masked: most are, and are not masked at all
        before = mask(before) if before is not None else None
        after = mask(after) if after is not None else None
        if before == after:
            continue  # they differ only where masking hides (a secret wrapped otherwise)
        name = (files or {}).get(key) or file_name(after if after is not None else before)
        old_name = (files or {}).get(old_key) or (file_name(before) if before is not None else name)
        old_text = emit.dump(before) if before is not None else ""
        new_text = emit.dump(after) if after is not None else ""
        unified = _unified(
            old_text,
            new_text,
            f"{old_label}/{old_name}" if before is not None else "/dev/null",
            f"{new_label}/{name}" if after is not None else "/dev/null",
        )
        fields: list[tuple[str, Any, Any]] = []
        if before is None:
            status: Status = "added"
        elif after is None:
            status = "removed"
        else:
            status, fields = "changed", changed_fields(before, after)
        # Named by the masked object: a secret in a name is no more shown than one in a field.
        shown = identity(after if after is not None else before)
        changes.append(
            Change(
                status,
                qualified(shown),
                name,
                key,
                tuple(path for path, _, _ in fields),
                unified,
                old_key[3] if old_key != key else None,
                plain_values(fields),
                rollout(before, after),
            )
        )
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


def as_text(diff: Diff, color: bool = False) -> str:
    """The per-object summary (with changed field paths), then the unified diffs."""
    lines = [summary_line(diff)]
    lines.extend(f"note: left out for {side}: {field}: {why}" for side, field, why in diff.left_out)
    for change in diff.changes:
        lines.append(
            paint(
                f"{_SIGN[change.status]} {change.status:<8} {_what(change)}", change.status, color
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


def _what(change: Change) -> str:
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


# --- many clusters -----------------------------------------------------------------------------


class Unreached(NamedTuple):
    """A setting a change to a base changed that clusters extending the base set themselves, so
    that the change does not reach them: each cluster's name and where it sets it."""

    base: str
    setting: str
    clusters: tuple[tuple[str, str], ...]


# Each pair is a cluster's name and its Diff; the fleet's `_gitops/` folder (its ApplicationSet)
# may come last under APPLICATION_SET_DIR: it is compared like a cluster, but counted as none.
ClusterDiffs = list[tuple[str, Diff]]


def _counted(counts: dict[Status, int]) -> str:
    return ", ".join(f"{count} {status}" for status, count in counts.items() if count)


def total_counts(diffs: ClusterDiffs) -> dict[Status, int]:
    totals: dict[Status, int] = {"changed": 0, "added": 0, "removed": 0}
    for _, diff in diffs:
        for status, count in diff.counts().items():
            totals[status] += count
    return totals


def _clusters(diffs: ClusterDiffs) -> tuple[ClusterDiffs, Diff | None]:
    """The clusters' diffs, and the fleet folder's (None when it was not compared)."""
    clusters = [(name, diff) for name, diff in diffs if name != APPLICATION_SET_DIR]
    fleet = next((diff for name, diff in diffs if name == APPLICATION_SET_DIR), None)
    return clusters, fleet


def fleet_summary(diffs: ClusterDiffs) -> str:
    """One line: how many clusters differ, each with its counts, and the fleet's `_gitops/`."""
    clusters, fleet = _clusters(diffs)
    differing = [(name, diff) for name, diff in clusters if not diff.is_empty]
    gitops = (
        f"; the fleet's {APPLICATION_SET_DIR}/ differs ({_counted(fleet.counts())})"
        if fleet is not None and not fleet.is_empty
        else ""
    )
    if not differing:
        return f"no differences in {len(clusters)} cluster(s){gitops}"
    listed = ", ".join(f"{name} ({_counted(diff.counts())})" for name, diff in differing)
    return f"{len(differing)} of {len(clusters)} cluster(s) differ: {listed}{gitops}"


def _not_reached(note: Unreached) -> str:
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


# How Unreached names a cluster where the changed setting has no effect (review.unreached).
NO_EFFECT = "no effect there: "


def unreached_line(note: Unreached, shown: int | None = None) -> str:
    """`the change to driver.version in clusters/base.yaml does not reach 2 clusters, which set
    it themselves or where it has no effect: a (clusters/a.yaml:4:11), b (no effect there:
    ...)` (the first `shown` clusters)."""
    count = len(note.clusters)
    listed = ", ".join(f"{name} ({where})" for name, where in note.clusters[:shown])
    more = count - len(note.clusters[:shown])
    return (
        f"the change to {note.setting} in {note.base} does not reach {count} "
        f"{_not_reached(note)}: {listed}" + (f" and {more} more" if more else "")
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
    clusters, fleet = _clusters(diffs)
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


# --- Markdown: a pull-request review comment -----------------------------------------------------

# The base changes not reached that a review names at most (the text output names them all).
UNREACHED_SHOWN = 10
# GitHub refuses a comment over 65,536 characters; this leaves room for a bot's own words.
MARKDOWN_MAX_SIZE = 60_000
# What stays as it is in literal text: letters, digits, these characters, and printable
# characters beyond ASCII (Markdown's and HTML's syntax is all ASCII). Every other character
# becomes a numeric character reference, which Markdown and HTML both read as that character and
# nothing more: no code span, emphasis, link, table cell, tag or line ends there.
_SAFE = frozenset(' -.,:/"=+')


def literal(text: str) -> str:
    """`text` as literal text in Markdown, in a table cell and inside HTML alike."""
    return "".join(
        char
        if char.isalnum() or char in _SAFE or (not char.isascii() and char.isprintable())
        else f"&#{ord(char)};"
        for char in text
    )


def _code(text: str) -> str:
    return f"<code>{literal(text)}</code>"


# What the head of a review leaves at least for the summary table's header and the shortest
# closing note (about 250 characters): with it, no title or note can push a review past its size.
_HEAD_SPARE = 700


def _within(
    lines: list[str], endings: list[str], room: int, counted: Callable[[int], str]
) -> list[str]:
    """The first of `lines` that fit in `room` characters, then the first of `endings` that
    fits; past the room, the rest counted (`counted(how many)`) instead."""
    kept: list[str] = []
    used = 0
    for number, line in enumerate(lines):
        if used + len(line) + 1 > room:
            return [*kept, counted(len(lines) - number)]
        kept.append(line)
        used += len(line) + 1
    ending = next((each for each in endings if used + len(each) + 1 <= room), None)
    return kept + ([ending] if ending is not None else endings[-1:])


def _literal_within(text: str, room: int) -> str:
    """`text` as literal text in at most `room` characters: its first characters and `…` when
    the whole does not fit."""
    whole = literal(text)
    if len(whole) <= room:
        return whole
    kept, used = [], 1  # the ellipsis
    for char in text:
        shown = literal(char)
        if used + len(shown) > room:
            break
        kept.append(shown)
        used += len(shown)
    return "".join(kept) + "…"


def _fenced(text: str, language: str) -> str:
    """`text` in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{fence}\n"


def _content_hashes(diff: Diff) -> list[str]:
    """Every content hash the diff's changes carry (Change.content_hashes), longest first."""
    found = {token for change in diff.changes for token in change.content_hashes()}
    return sorted(found, key=lambda token: (-len(token), token))


def _normalised(text: str, hashes: list[str]) -> str:
    """`text` with each content hash written `<hash>`."""
    if not hashes or not text:
        return text
    return re.sub("|".join(map(re.escape, hashes)), "<hash>", text)


def _signature(diff: Diff, hashes: list[str] | None = None) -> tuple[Any, ...]:
    """What a cluster's changes are, apart from its name: clusters with equal signatures made the
    same changes (a diff's header lines name the cluster, its hunks do not). With `hashes`, each
    content hash is written `<hash>`: a change that differs only by them (a config hash, the
    smoke test's name, which hash what differs from cluster to cluster) is the same change."""
    hashes = hashes or []

    def same(text: str | None) -> str | None:
        return _normalised(text, hashes) if text is not None else None

    return (
        tuple(
            (
                change.status,
                same(change.subject),
                same(change.file),
                same(change.renamed_from),
                change.paths,
                tuple((path, same(before), same(after)) for path, before, after in change.values),
                # A unified diff without its two header lines; any other text (binary files,
                # line endings) names its cluster, which keeps it in a group of its own.
                same(
                    change.unified.split("\n", 2)[-1]
                    if change.unified.startswith("---")
                    else change.unified
                ),
                # What it does to running nodes follows from the fields above; the nodes it
                # names (by their labels) may differ from cluster to cluster, the change not.
                change.impact,
            )
            for change in diff.changes
        ),
        diff.left_out,
    )


@dataclass(frozen=True)
class _Group:
    """Clusters whose changes are the same, and the first one's diff, which shows them;
    `hashed`: the same only once content hashes are set aside."""

    names: tuple[str, ...]
    diff: Diff
    hashed: bool = False
    nodes_differ: bool = False  # the workloads' nodes (by their labels) differ between them

    @property
    def label(self) -> str:
        if self.names == (APPLICATION_SET_DIR,):
            return f"the fleet's {APPLICATION_SET_DIR}/"
        return f"{len(self.names)} {_plural(len(self.names), 'cluster')}"

    @property
    def rank(self) -> tuple[int, ...]:
        """Most disruptive first: the driver reloaded, then pods restarted (the more workloads
        the sooner), then lasting objects changed; the checks (Jobs, whose name changes with
        everything they test) and files last; then the larger group."""
        changes = self.diff.changes
        top = max((change.impact for change in changes), default=NO_RESTART)
        restarts = sum(change.impact > NO_RESTART for change in changes)
        lasting = sum(
            change.identity is not None and change.identity[1] != "Job" for change in changes
        )
        return (-top, -restarts, -lasting, -len(self.names))


def _rollouts(diff: Diff) -> tuple[str, ...]:
    return tuple(c.rollout.sentence() for c in diff.changes if c.rollout is not None)


def _plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"


def _groups(diffs: ClusterDiffs) -> list[_Group]:
    """Differing clusters grouped by the same changes (content hashes aside), most disruptive
    first (_Group.rank); `_gitops/` last."""
    clusters, fleet = _clusters(diffs)
    found: dict[tuple[Any, ...], list[tuple[str, Diff]]] = {}
    for name, diff in clusters:
        if not diff.is_empty:
            found.setdefault(_signature(diff, _content_hashes(diff)), []).append((name, diff))
    groups = [
        _Group(
            tuple(name for name, _ in members),
            members[0][1],
            len({_signature(diff) for _, diff in members}) > 1,
            len({_rollouts(diff) for _, diff in members}) > 1,
        )
        for members in found.values()
    ]
    groups.sort(key=lambda group: group.rank)
    if fleet is not None and not fleet.is_empty:
        groups.append(_Group((APPLICATION_SET_DIR,), fleet))
    return groups


def _listed(names: tuple[str, ...], shown: int | None = None) -> str:
    listed = ", ".join(_code(name) for name in names[:shown])
    more = len(names) - len(names[:shown])
    return listed + (f" and {more} more" if more else "")


def _field(change: Change, path: str) -> str:
    """A changed field, with its plain values when it has them (`replicas` 4 → 8)."""
    for each, before, after in change.values:
        if each == path:
            return f"{_code(path)} {literal(before)} → {literal(after)}"
    return _code(path)


def _shift(change: Change, limit: int) -> str:
    """The changed fields of a change (_field), at most `limit`."""
    shown = [_field(change, path) for path in change.paths[:limit]]
    more = len(change.paths) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def _by_impact(changes: tuple[Change, ...]) -> list[Change]:
    """The changes most disruptive first, in apply order among equals."""
    return sorted(changes, key=lambda change: -change.impact)


def _follows(change: Change) -> bool:
    """Whether a change only follows from others: a new config hash, a name's new hash."""
    return bool(change.paths) and all(
        path.endswith(f'annotations["{CONFIG_HASH}"]')
        or (path == "metadata.name" and change.renamed_from is not None)
        for path in change.paths
    )


def _telling(changes: tuple[Change, ...]) -> list[Change]:
    """The changes as a headline tells them: causes before what follows from them (a config
    hash), the most disruptive first, files last."""
    return sorted(
        changes,
        key=lambda change: (_follows(change), change.identity is None, -change.impact),
    )


def _effect(group: _Group) -> str:
    """What the group's changes do to running nodes, in a few words ('' when nothing restarts)."""
    rollouts = [change.rollout for change in group.diff.changes if change.rollout is not None]
    drivers = [each for each in rollouts if each.impact == RELOADS_DRIVER]
    reloads = [each for each in drivers if each.action != "removes"]
    removed = [each for each in drivers if each.action == "removes"]
    restarts = [each for each in rollouts if each.impact != RELOADS_DRIVER]
    parts = []
    if removed:
        names = ", ".join(_code(mask_text(each.name)) for each in removed)
        parts.append(f"**removes a GPU driver DaemonSet** ({names})")
    if reloads:
        where = "; ".join(
            _code(mask_text(each.name)) + (f", {literal(each.pace)}" if each.pace else "")
            for each in reloads
        )
        parts.append(f"**reloads the GPU driver** ({where})")
    if restarts:
        count = len(restarts)
        other = " other" if drivers else ""  # beside the driver's own, said first
        parts.append(f"restarts the pods of {count}{other} {_plural(count, 'workload')}")
    return "; ".join(parts)


def _headline(group: _Group) -> str:
    """What a group changes, in a few words: what it does to running nodes, then its most
    disruptive changes with their fields."""
    described = []
    for change in _telling(group.diff.changes)[:2]:
        fields = _shift(change, 2) if change.status == "changed" and change.identity else ""
        described.append(
            f"{_SIGN[change.status]} {_code(_what(change))}" + (f" {fields}" if fields else "")
        )
    more = len(group.diff.changes) - len(described)
    effect = _effect(group)
    return (
        (f"{effect}: " if effect else "")
        + "; ".join(described)
        + (f"; {more} more" if more else "")
    )


def _section(group: _Group, diff_text: str | None, note: str = "") -> str:
    """A group's collapsed details: its clusters, what it does to running nodes, its changes
    with their fields, and the unified diff of its first cluster (`diff_text`, None: left out,
    with `note`)."""
    diff = group.diff
    lines = [
        f"<details><summary>{group.label}: {literal(_counted(diff.counts()))}</summary>",
        "",
    ]
    if group.names != (APPLICATION_SET_DIR,):
        lines += [f"Clusters: {_listed(group.names)}", ""]
    rollouts = [c.rollout for c in _by_impact(diff.changes) if c.rollout is not None]
    if rollouts:
        lines += ["On running nodes:", ""]
        lines += [f"- {literal(mask_text(each.sentence()))}" for each in rollouts]
        lines.append("")
    else:
        lines += ["On running nodes: no pod restarts.", ""]
    differ = []
    if group.hashed:
        differ.append(f"content hashes (the {_code(CONFIG_HASH)} annotation, a name's hash suffix)")
    if group.nodes_differ:
        differ.append("labels of the nodes each workload runs on")
    if differ:
        lines += [
            f"The {' and '.join(differ)} differ from cluster to cluster; "
            f"shown are {_code(group.names[0])}'s.",
            "",
        ]
    lines += ["| change | object or file | fields |", "|---|---|---|"]
    for change in diff.changes:
        fields = "<br>".join(_field(change, path) for path in change.paths)
        lines.append(
            f"| {_SIGN[change.status]} {change.status} | {_code(_what(change))} | {fields} |"
        )
    lines.append("")
    first = f" of {_code(group.names[0])}" if len(group.names) > 1 else ""
    if diff_text is not None:
        lines += [f"The diff{first}{note}:", "", _fenced(diff_text, "diff")]
    else:
        lines += [f"The diff{first} is left out{note}.", ""]
    lines += ["</details>", "", ""]
    return "\n".join(lines)


def as_markdown(
    diffs: ClusterDiffs,
    title: str,
    max_size: int = MARKDOWN_MAX_SIZE,
    see_all: str | None = None,
    see_one: Callable[[str], str] | None = None,
    unreached: Sequence[Unreached] = (),
) -> str:
    """A pull-request review comment: a summary table of the clusters grouped by identical
    changes, then per group a collapsed section (its clusters, objects, fields and old → new
    values, and the unified diff of one of them).

    At most `max_size` characters (0: no limit): what does not fit is left out, largest last
    (diffs first, cut to what fits, then whole sections), and the comment ends saying what was
    left out and the commands that show it (`see_all`; `see_one(cluster)` for one cluster).
    Every text from configs or files is literal (`literal`, a fence longer than its backticks);
    secrets are masked already (diff_objects, diff_files)."""
    clusters, fleet = _clusters(diffs)
    groups = _groups(diffs)
    differing = sum(len(group.names) for group in groups if group.names != (APPLICATION_SET_DIR,))
    summary = (
        f"{differing} of {len(clusters)} {_plural(len(clusters), 'cluster')} "
        f"{'differs' if differing == 1 else 'differ'}"
        if differing
        else f"No differences in {len(clusters)} {_plural(len(clusters), 'cluster')}"
    )
    cluster_groups = len(groups) - (fleet is not None and not fleet.is_empty)
    if cluster_groups > 1:
        summary += f", in {cluster_groups} groups of identical changes"
    if fleet is not None:
        summary += f"; the fleet's {APPLICATION_SET_DIR}/ {'differs' if not fleet.is_empty else 'does not'}"
    left_out = dict.fromkeys(note for _, diff in diffs for note in diff.left_out)
    notes = [
        f"> left out for {literal(side)}: {_code(field)}: {literal(why)}  "
        for side, field, why in left_out
    ]
    # A base change that clusters set aside is news the diffs cannot show: it changed nothing.
    reached = [f"> **Not reached:** {_unreached(note)}  " for note in unreached[:UNREACHED_SHOWN]]
    more = len(unreached) - UNREACHED_SHOWN
    if more > 0:
        more_lines = [f"> and {more} more settings not reached  "]
        if see_all:
            more_lines.insert(0, f"> and {more} more settings not reached: {_code(see_all)}  ")
    else:
        more_lines = []
    rows = [_row(group) for group in groups]
    head = [f"### {literal(title)}", "", summary + ".", "", *notes, *([""] if notes else [])]
    head += [*reached, *more_lines[:1], ""] if unreached else []
    if max_size <= 0:
        sections = [_section(group, _diff_text(group)) for group in groups]
        return _joined(head, rows, 0, sections, "")
    if len("\n".join(head)) > max_size - _HEAD_SPARE:
        # The title (a path or revision the command line names) and the notes (texts of the
        # configs, and the command that shows them) then take a share of the room each, so that
        # what a pull request chooses can never push the comment past `max_size`.
        head = [f"### {_literal_within(title, max_size // 10)}", "", summary + ".", ""]
        kept_notes = _within(
            notes,
            [],
            max_size // 10,
            lambda rest: f"> and {rest} more left out {_plural(rest, 'note')}  ",
        )
        head += [*kept_notes, ""] if kept_notes else []
        kept_reached = _within(
            reached,
            more_lines,
            max_size // 4,
            lambda rest: f"> and {rest + max(more, 0)} more settings not reached  ",
        )
        head += [*kept_reached, ""] if kept_reached else []
    # The table takes at most half the room; groups it has no row for are left out.
    tabled = len(rows)
    while tabled and len(_joined(head, rows[:tabled], len(rows) - tabled, [], "")) > max_size // 2:
        tabled -= 1
    left = list(groups[tabled:])
    # Each group's section whole, else with the first lines of its diff, else without its diff,
    # else left out; while the whole is too large, the last section kept is left out.
    kept: list[tuple[_Group, str, bool]] = []
    used = len(_joined(head, rows[:tabled], len(rows) - tabled, [], ""))
    for group in groups[:tabled]:
        ending = _left_out([group], left, max_size, see_all, see_one, max_size // 4)
        room = max_size - used - len(ending)
        diff_text = _diff_text(group)
        full = _section(group, diff_text)
        if len(full) <= room:
            kept.append((group, full, False))
            used += len(full)
            continue
        short = _section(group, None, " to keep this comment short")
        first_lines = _truncated(diff_text, room - len(short) - 200)
        if first_lines:
            omitted = diff_text.count("\n") - first_lines.count("\n")
            note = f" (its first lines; {omitted} more left out)"
            kept.append((group, _section(group, first_lines, note), True))
            used += len(kept[-1][1])
        elif len(short) <= room:
            kept.append((group, short, True))
            used += len(short)
        else:
            left.append(group)
    # What was left out is named most disruptive first, and its first cluster is the one whose
    # command the ending gives.
    order = {id(group): index for index, group in enumerate(groups)}
    while True:
        cut = [group for group, _, shortened in kept if shortened]
        left.sort(key=lambda group: order[id(group)])
        body = _joined(head, rows[:tabled], len(rows) - tabled, [s for _, s, _ in kept], "")
        # The ending takes at most a quarter of the room, as it was reckoned with above.
        room = min(max_size // 4, max_size - len(body))
        ending = _left_out(cut, left, max_size, see_all, see_one, room)
        text = _joined(head, rows[:tabled], len(rows) - tabled, [s for _, s, _ in kept], ending)
        if len(text) <= max_size or not kept:
            return text
        left.insert(0, kept.pop()[0])


def _unreached(note: Unreached) -> str:
    """unreached_line in Markdown: its names and places literal, five clusters at most."""
    count = len(note.clusters)
    listed = ", ".join(f"{_code(name)} ({_code(where)})" for name, where in note.clusters[:5])
    more = count - len(note.clusters[:5])
    return (
        f"the change to {_code(note.setting)} in {_code(note.base)} does not reach {count} "
        f"{_not_reached(note)}: {listed}" + (f" and {more} more" if more else "")
    )


def _diff_text(group: _Group) -> str:
    return "".join(change.unified for change in group.diff.changes)


def _row(group: _Group) -> str:
    """The summary table's row of a group: its clusters, counts and what it changes."""
    counts = group.diff.counts()
    who = (
        _code(f"{APPLICATION_SET_DIR}/")
        if group.names == (APPLICATION_SET_DIR,)
        else f"{len(group.names)}: {_listed(group.names, 5)}"
    )
    return (
        f"| {who} | {counts['changed']} | {counts['added']} | {counts['removed']} "
        f"| {_headline(group)} |"
    )


def _joined(
    head: list[str], rows: list[str], untabled: int, sections: list[str], ending: str
) -> str:
    """The comment: its head, the summary table (`untabled`: groups left out of it), each
    section, and the note on what was left out."""
    lines = list(head)
    if rows or untabled:
        lines += [
            "| clusters | changed | added | removed | what changes |",
            "|---|---:|---:|---:|---|",
        ]
        lines += rows
        if untabled:
            lines.append(f"| {untabled} more {_plural(untabled, 'group')} | | | | left out |")
        lines.append("")
    text = "\n".join(lines) + "\n" + "".join(sections)
    return text.rstrip("\n") + "\n" + ending


def _truncated(diff_text: str, room: int) -> str:
    """The first whole lines of `diff_text` within `room` characters ('' when few fit)."""
    if room < 1000:
        return ""
    return diff_text[: diff_text.rfind("\n", 0, room) + 1]


def _counted_names(names: tuple[str, ...], named: bool = True) -> str:
    """`2 clusters (a, b)` (`named`, else `2 clusters`), and the fleet's `_gitops/` when it is
    among them."""
    clusters = tuple(name for name in names if name != APPLICATION_SET_DIR)
    listed = f" ({_listed(clusters, 5)})" if named else ""
    parts = [f"{len(clusters)} {_plural(len(clusters), 'cluster')}{listed}"]
    parts = parts if clusters else []
    parts += [f"the fleet's {APPLICATION_SET_DIR}/"] if APPLICATION_SET_DIR in names else []
    return " and ".join(parts)


def _left_out(
    cut: list[_Group],
    left: list[_Group],
    max_size: int,
    see_all: str | None,
    see_one: Callable[[str], str] | None,
    room: int,
) -> str:
    """The note on what was left out and the commands that show it, within `room` characters
    (the shortest form when none fits). The commands quote paths a pull request chooses (a config's
    file name may be thousands of characters): one that does not fit is left out, and the note
    then names only `--max-size 0`; the cluster names go, if need be, before the counts do."""
    if not cut and not left:
        return ""
    cut_names = tuple(name for group in cut for name in group.names)
    left_names = tuple(name for group in left for name in group.names)
    for named in (True, False):
        parts = []
        if cut:
            parts.append(f"all or part of the diff of {_counted_names(cut_names, named)}")
        if left:
            parts.append(f"the details of {_counted_names(left_names, named)}")
        lines = ["", f"**Left out** to stay under {max_size:,} characters: {'; '.join(parts)}."]
        commands = []
        if see_all:
            commands.append(f"Every change: {_code(see_all)} (or {_code('--max-size 0')}).")
        # The most disruptive change left out is the one cluster worth a look first.
        clusters = [group for group in (*cut, *left) if group.names != (APPLICATION_SET_DIR,)]
        if see_one and clusters:
            first = min(clusters, key=lambda group: group.rank).names[0]
            commands.append(f"One cluster: {_code(see_one(first))}.")
        shortest = f"Every change: this command with {_code('--max-size 0')}."
        for choice in (commands, commands[:1], [shortest]):
            text = "\n".join([*lines, *choice]) + "\n"
            if len(text) <= room:
                return text
    return text
