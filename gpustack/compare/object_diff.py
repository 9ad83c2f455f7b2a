"""What differs between two sets of rendered output: a pure engine over plain data.

Objects are matched by `objects.identity` (group, kind, namespace, name), so a renamed file or a
reordered stream is no difference; every other file (kustomization.yaml, `node/`) is compared as
text. Each change names the field paths that differ (`spec.template.spec.containers[0].image`) and
carries a unified diff of the object as gpustack writes it.

Secrets never leave this module in clear: before anything is compared, PEM blocks, base64 or
`data:` URL payloads that hold a PEM (the entitlement MachineConfigs), and every value of a
Secret's `data`/`stringData` become `<redacted sha256:…>`. The digest is of the hidden value, so a
changed secret still shows as changed.

What a diff looks like to a reader is diff_report's (text, JSON) and diff_markdown's (a pull-request
review comment).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from gpustack import emit, redaction
from gpustack.build.decorate import CONFIG_HASH
from gpustack.compare.rollouts import NO_RESTART, Rollout, rollout
from gpustack.errors import UserError
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

# The one masking of every command (gpustack.redaction), by the names the engine uses.
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


# How Unreached names a cluster where the changed setting has no effect (review.unreached).
NO_EFFECT = "no effect there: "
