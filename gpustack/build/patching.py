"""The config's `patches:` applied to the rendered objects, in kustomize's `patches` format.

Each patch is a strategic-merge patch (a mapping) or a JSON 6902 patch (a list of operations),
told apart as kustomize tells them apart (kustomize api/filters/patchjson6902 and
api/internal/builtins/PatchTransformer.go, v5: a patch that parses as a JSON or YAML list of
operations is JSON 6902, anything else strategic merge). A `target` selects the objects;
without one a strategic-merge patch applies to the object its own apiVersion, kind, name and
namespace name.

Strategic merge follows Kubernetes' merge keys (the `patchMergeKey` and `patchStrategy` tags of
k8s.io/api core/v1 types.go) for the built-in kinds' lists: containers, initContainers,
volumes, imagePullSecrets by name, env by name, volumeMounts by mountPath (ports take a
JSON 6902 patch); every other list, tolerations included, is replaced. A
custom resource's lists are replaced whole, as kustomize does without its schema. The
directives `$patch: delete` and `$patch: replace` work on mappings and list items, and a null
value removes a key. A patch's items come first in a merged list, then the object's others, as
kustomize v5.8.1 orders them (tests/cases/patches/corpus.yaml is checked against it).

Pure: patches arrive parsed (gpustack.resolve.patches, which gpustack.resolve.load reads) and
objects are changed in place.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jsonpatch

from gpustack.errors import UserError, did_you_mean
from gpustack.objects import Identity, display, identity, name_of
from gpustack.resolve.patches import Patch, parse_selector, selector_matches

DIRECTIVE = "$patch"


# The work the patches of one render may do in all, in values (each mapping, list and scalar):
# written by a patch, copied by a JSON 6902 `copy`, or copied on the way to what a patch
# changes; and each object a patch is matched against. A rendering holds a few thousand values
# and real patches change a few dozen each: this is a hundred times more, and about a second's
# work. Without it a handful of `copy` operations, each doubling an object, would run for ever.
MAX_WORK = 250_000
# Characters of a string that count as one value of work: the patches of one render write at
# most MAX_WORK * STRING_VALUE characters (25 MB) of strings into the output.
STRING_VALUE = 100
# How deep a patched object may nest: as deep as a config may (gpustack.read.yamlio.MAX_NESTING),
# far below what the validator reads back (200) and Python's recursion limit. gpustack's own
# objects nest at most 23 levels.
MAX_NESTING = 100
# What a workload's pod template must keep: the later steps (config hashes, lint, the smoke
# test) read it, and the API server refuses a workload without it (k8s.io/api apps/v1 and
# batch/v1 types.go: `template` is required of a DaemonSet, Deployment, StatefulSet and Job).
_POD_SPEC = ("spec", "template", "spec")


class _Budget:
    """The work left to the patches of one render (MAX_WORK)."""

    def __init__(self) -> None:
        self.left = MAX_WORK

    def spend(self, amount: int, patch: Patch) -> None:
        self.left -= amount
        if self.left < 0:
            raise UserError(
                f"the patches write, copy or match more than {MAX_WORK} values in all; "
                "gpustack stops rather than run for ever (a JSON 6902 copy of an object into "
                "itself doubles it)",
                patch.location,
                field="patches",
                hint="patch each object with what it needs: copy no mapping into itself, name "
                "each patch file once",
            )


def apply(
    objects: list[dict[str, Any]],
    patches: Sequence[Patch],
    placement: Callable[[dict[str, Any]], Hashable] | None = None,
) -> dict[Identity, list[str]]:
    """Apply `patches` in order to `objects` (changed in place). Returns, for each object a patch
    changed, where those patches were written (for the findings on it).

    A patch that selects no object, that fails, that would rename or move an object, change
    its kind or its `placement` (where the rendered folder puts it: its Flux stage, Argo CD
    wave), that takes away what a later step reads (a workload's pod template, a mapping or
    list turned into something else), or that does more than MAX_WORK, is a UserError at the
    patch."""
    changed: dict[Identity, list[str]] = {}
    budget = _Budget()
    for patch in patches:
        budget.spend(len(objects) * _match_work(patch), patch)
        selected = {id(obj) for obj in objects if _selects(patch, obj)}
        if not selected:
            wanted = patch.target.name if patch.target else None
            names = sorted({name_of(obj) for obj in objects})
            raise UserError(
                f"the patch matches no object of the rendering ({_wanted(patch)})",
                patch.location,
                field="patches",
                hint=(wanted and did_you_mean(wanted, names))
                or "`gpustack render --stdout` shows every object with its kind, name and "
                "namespace; a patch must change at least one",
            )
        for index, obj in enumerate(objects):
            if id(obj) not in selected:
                continue
            before = identity(obj)
            if patch.json6902:
                result = _json6902(obj, patch, budget)
            else:
                result = _strategic(obj, patch, budget)
            if identity(result) != before or result.get("apiVersion") != obj.get("apiVersion"):
                raise UserError(
                    f"the patch would rename, move or change the kind of {display(before)}; "
                    "a patch changes an object's content, never what it is (its apiVersion, "
                    "kind, name and namespace name its file, apply order and sync wave)",
                    patch.location,
                    field="patches",
                )
            if result is obj or result == obj:
                continue
            _check_shape(obj, result, patch)
            if placement is not None and placement(result) != placement(obj):
                raise UserError(
                    f"the patch would move {display(before)} into another Flux stage or Argo "
                    "CD sync wave (its gpustack.dev/rollout label, or its "
                    "argocd.argoproj.io/sync-wave or hook annotation); gpustack places each "
                    "object by its kind and node pool, and a patch changes its content only",
                    patch.location,
                    field="patches",
                    hint="a node pool's objects roll out first when it sets "
                    "nodes.pools[].canary: true",
                )
            objects[index] = result
            changed.setdefault(before, []).append(str(patch.location))
    return changed


def _match_work(patch: Patch) -> int:
    """What matching the patch against one object costs: one, and each requirement of its
    selectors (a selector may hold thousands)."""
    target = patch.target
    if target is None:
        return 1
    selectors = (target.labelSelector, target.annotationSelector)
    return 1 + sum(len(parse_selector(selector)) for selector in selectors if selector)


def _check_shape(original: dict[str, Any], patched: dict[str, Any], patch: Patch) -> None:
    """Refuse a patched object whose shape the steps after the patches cannot read: a workload
    without its pod template or its containers, or a mapping or list of the rendered object turned into another
    kind of value (its metadata too: the name check before this one refuses metadata that is
    no mapping). Kubernetes' types never take a mapping
    and a scalar in one field (int-or-string fields are scalars either way), so such a patch is
    a mistake, whatever a later step would make of it."""
    shown = display(identity(original))
    if isinstance(_at(original, _POD_SPEC), dict) and not isinstance(_at(patched, _POD_SPEC), dict):
        raise UserError(
            f"the patch takes away the pod template of {shown} ({'.'.join(_POD_SPEC)}), which "
            "Kubernetes requires of a workload; a patch changes an object, it does not "
            "remove what it runs",
            patch.location,
            field="patches",
            hint="turn the component off in the config instead",
        )
    containers = (*_POD_SPEC, "containers")
    if _at(original, containers) and not _at(patched, containers):
        # The API server refuses a pod template without a container (k8s.io/kubernetes
        # pkg/apis/core/validation validateContainers: "Required value"); its JSON schema, which
        # validate checks, has no minimum, so this is caught here or at apply time.
        raise UserError(
            f"the patch takes away every container of {shown} ({'.'.join(containers)}), and "
            "Kubernetes refuses a pod without one; a patch changes an object, it does not "
            "remove what it runs",
            patch.location,
            field="patches",
            hint="turn the component off in the config instead",
        )
    found = _retyped(original, patched, ())
    if found is not None:
        path, was = found
        field_name = ".".join(str(part) for part in path)
        raise UserError(
            f"the patch puts another kind of value at {field_name} of {shown}, where gpustack "
            f"wrote {was}; a patch may change, remove or add values, never turn a mapping or a "
            "list into something else",
            patch.location,
            field="patches",
        )


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _retyped(
    original: Any, patched: Any, path: tuple[str | int, ...]
) -> tuple[tuple[str | int, ...], str] | None:
    """The first path, if any, where `original` holds a mapping or a list and `patched` a value
    of another kind. A list's items are paired by position: Kubernetes' lists hold items of one
    type, so an item is compared with whichever item of the same list takes its place. Parts a
    strategic merge left as they were (the same objects) are not walked again."""
    if original is patched:
        return None
    if isinstance(original, dict):
        if not isinstance(patched, dict):
            return path, "a mapping"
        for key, value in original.items():
            if key in patched:
                found = _retyped(value, patched[key], (*path, key))
                if found is not None:
                    return found
    elif isinstance(original, list):
        if not isinstance(patched, list):
            return path, "a list"
        for position, (was, now) in enumerate(zip(original, patched)):
            found = _retyped(was, now, (*path, position))
            if found is not None:
                return found
        for position in range(len(original), len(patched)) if original else ():
            found = _retyped(original[-1], patched[position], (*path, position))
            if found is not None:
                return found[0], f"{found[1]} (as the list's other items)"
    return None


def _wanted(patch: Patch) -> str:
    if patch.target is not None:
        fields = {k: v for k, v in vars(patch.target).items() if v is not None}
        return "target " + ", ".join(f"{k}={v}" for k, v in fields.items())
    if patch.from_file:
        # The kind and name a patch file gives are its content: named, never quoted.
        return "no target: the patch file's own apiVersion, kind, name and namespace"
    body = patch.body if isinstance(patch.body, dict) else {}
    meta: dict[str, Any] = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
    parts = [str(body.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", ""))]
    return "no target: the patch's own " + " ".join(p for p in parts if p)


def _selects(patch: Patch, obj: dict[str, Any]) -> bool:
    target = patch.target
    if target is None:
        # kustomize: a strategic-merge patch without a target applies to the object with its
        # own group, version, kind, name and namespace (config requires them).
        body = patch.body
        meta = body.get("metadata") or {}
        obj_meta = obj.get("metadata") or {}
        return bool(
            body.get("apiVersion") == obj.get("apiVersion")
            and body.get("kind") == obj.get("kind")
            and meta.get("name") == obj_meta.get("name")
            and meta.get("namespace", obj_meta.get("namespace")) == obj_meta.get("namespace")
        )
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    meta = obj.get("metadata") or {}
    values = {
        "group": group,
        "version": version,
        "kind": str(obj.get("kind", "")),
        "name": str(meta.get("name", "")),
        "namespace": str(meta.get("namespace", "")),
    }
    for key, pattern in patch.regexes.items():
        if not pattern.fullmatch(values[key]):
            return False
    if target.labelSelector is not None and not selector_matches(
        target.labelSelector, meta.get("labels") or {}
    ):
        return False
    return target.annotationSelector is None or selector_matches(
        target.annotationSelector, meta.get("annotations") or {}
    )


# --- JSON 6902 ---------------------------------------------------------------------------


def _json6902(obj: dict[str, Any], patch: Patch, budget: _Budget) -> dict[str, Any]:
    """`obj` with the patch's operations applied one at a time, each operation's work counted
    (the values it writes or copies, the containers on its paths) and the depth it reaches
    bounded. The object is not changed: each operation first copies the mappings and lists on
    its way (copy on write), so the result shares what the patch leaves alone."""
    result: Any = dict(obj)
    owned = {id(result)}
    for number, operation in enumerate(patch.body, 1):
        operation = dict(operation)
        try:
            path = jsonpatch.JsonPointer(str(operation.get("path", ""))).parts
            paths = [path]
            if "value" in operation:
                # Copied: a patch file's documents are shared by every object it changes.
                operation["value"], size, reached = _copy(operation["value"])
            elif operation.get("op") in ("copy", "move"):
                source = jsonpatch.JsonPointer(str(operation.get("from", "")))
                _, size, reached = _copy(source.resolve(result))
                paths.append(source.parts)
            else:
                size, reached = 1, 0
            budget.spend(size + sum(len(parts) for parts in paths), patch)
            if len(path) + reached > MAX_NESTING and operation.get("op") != "test":
                raise UserError(
                    f"the JSON 6902 patch nests {display(identity(obj))} more than "
                    f"{MAX_NESTING} levels deep",
                    patch.location,
                    field="patches",
                )
            budget.spend(sum(_own(result, parts, owned) for parts in paths), patch)
            result = jsonpatch.JsonPatch([operation]).apply(result, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
            raise UserError(
                f"the JSON 6902 patch fails on {display(identity(obj))}: "
                f"{_operation(number, operation, patch)} {_failure(error)}",
                patch.location,
                field="patches",
                hint="each operation's path must exist in the rendered object (`add` needs its "
                "parent); `gpustack render --stdout` shows the object",
            ) from None
    if not isinstance(result, dict):
        raise UserError(
            f"the JSON 6902 patch replaces {display(identity(obj))} with something that is no "
            "object",
            patch.location,
            field="patches",
        )
    return result


def _own(root: Any, parts: list[str], owned: set[int]) -> int:
    """Copy, once, each mapping and list on the way to the parent of the place `parts` names
    (those an operation there changes in place), so that the original object stays as it was;
    returns how many entries were copied. A part that names nothing stops the walk: the
    operation then fails as it would anyway."""
    node, copied = root, 0
    for part in parts[:-1]:
        key: str | int
        if isinstance(node, dict) and part in node:
            key = part
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            key = int(part)
        else:
            break
        child = node[key]
        if isinstance(child, (dict, list)) and id(child) not in owned:
            child = child.copy()
            owned.add(id(child))
            node[key] = child
            copied += len(child)
        node = child
    return copied


def _operation(number: int, operation: dict[str, Any], patch: Patch) -> str:
    """An operation as an error names it: its number, and its op and paths unless it came from a
    file (whose content is never quoted). Never the object's content, which jsonpatch's own
    messages quote (a value another patch file put there, say)."""
    if patch.from_file:
        return f"operation {number}"
    shown = " ".join(
        repr(operation[key])[:200] for key in ("op", "from", "path") if key in operation
    )
    return f"operation {number} ({shown})"


def _failure(error: Exception) -> str:
    if isinstance(error, jsonpatch.JsonPatchTestFailed):
        return "tests a value the object does not hold"
    if isinstance(error, jsonpatch.InvalidJsonPatch):
        return (
            "is not a JSON 6902 operation (add, remove, replace, move, copy or test, with "
            "the members it needs)"
        )
    return "names a path the object does not have"


def _copy(value: Any) -> tuple[Any, int, int]:
    """A copy of `value` (YAML's data: mappings, lists, scalars), its size in values (a string
    counts once for each STRING_VALUE characters: copied a thousand times, a long one would make
    gigabytes of output) and how deep it nests, in one walk."""
    if isinstance(value, dict):
        copied: dict[Any, Any] = {}
        size, depth = 1, 0
        for key, item in value.items():
            copied[key], count, deep = _copy(item)
            size, depth = size + count + _weight(key) - 1, max(depth, deep)
        return copied, size, depth + 1
    if isinstance(value, list):
        items = []
        size, depth = 1, 0
        for item in value:
            copied_item, count, deep = _copy(item)
            items.append(copied_item)
            size, depth = size + count, max(depth, deep)
        return items, size, depth + 1
    return value, _weight(value), 0


def _weight(value: Any) -> int:
    return 1 + len(value) // STRING_VALUE if isinstance(value, str) else 1


# --- strategic merge ---------------------------------------------------------------------

# Groups whose kinds kustomize knows the schema of (its built-in OpenAPI document): their lists
# merge by the keys below; a custom resource's lists are replaced.
_BUILT_IN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "rbac.authorization.k8s.io",
        "node.k8s.io",
        "scheduling.k8s.io",
        "policy",
        "storage.k8s.io",
        "networking.k8s.io",
        "apiextensions.k8s.io",
        "admissionregistration.k8s.io",
        "coordination.k8s.io",
        "autoscaling",
    }
)

# List fields and their merge keys (patchMergeKey with patchStrategy merge in k8s.io/api core/v1
# types.go, v1.34): PodSpec.containers, initContainers, ephemeralContainers, volumes,
# imagePullSecrets, resourceClaims and hostAliases; Container.env, volumeMounts and
# volumeDevices; ObjectMeta.ownerReferences. Ports are refused (see _merge_key). Lists without
# those tags (tolerations, args, command, envFrom, node affinity terms, RBAC rules and subjects)
# are replaced.
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
    "ownerReferences": "uid",
}
# ObjectMeta.finalizers: a list of strings with patchStrategy merge (a union).
_PRIMITIVE_MERGE = frozenset({("metadata", "finalizers")})
# Strategic-merge directives besides $patch (k8s.io/apimachinery pkg/util/strategicpatch
# patch.go: setElementOrderDirectivePrefix, retainKeysDirective, deleteFromPrimitiveListDirective
# Prefix), which gpustack does not apply.
_UNSUPPORTED_DIRECTIVES = ("$setElementOrder/", "$retainKeys", "$deleteFromPrimitiveList/")
_CONTAINER_LISTS = frozenset({"containers", "initContainers", "ephemeralContainers"})


def _strategic(obj: dict[str, Any], patch: Patch, budget: _Budget) -> dict[str, Any]:
    # A merge walks the patch and copies what it writes: its work is the patch's size. The
    # result nests no deeper than the object or the patch (each within MAX_NESTING).
    body, size, _ = _copy(patch.body)
    budget.spend(size + _merge_work(obj, body), patch)
    if patch.target is not None:
        # kustomize applies a targeted patch to each object it selects whatever the patch's own
        # name and kind say: they are left out rather than merged over the object's.
        body.pop("apiVersion", None)
        body.pop("kind", None)
        meta = body.get("metadata")
        if isinstance(meta, dict):
            meta.pop("name", None)
            meta.pop("namespace", None)
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    known = group in _BUILT_IN_GROUPS
    try:
        merged = merge(obj, body, (), known, str(obj.get("kind", "")))
    except _PatchProblem as problem:
        # The problem names a field of the patch: not shown for a patch file's.
        detail = "" if patch.from_file else f": {problem}"
        raise UserError(
            f"the strategic-merge patch cannot apply to {display(identity(obj))}{detail}",
            patch.location,
            field="patches",
        ) from None
    if not isinstance(merged, dict):
        raise UserError(
            f"the patch deletes {display(identity(obj))}; a patch changes objects, it does not "
            "remove them",
            patch.location,
            field="patches",
            hint="turn the component off in the config instead",
        )
    return merged


def _merge_work(original: Any, patch: Any) -> int:
    """What a merge of `patch` over `original` copies beyond the patch itself: each mapping of
    the object the patch reaches into is copied whole, and each list it merges is indexed
    whole. Walked along the patch, so this costs no more than the patch."""
    if isinstance(patch, dict) and isinstance(original, dict):
        return len(original) + sum(
            _merge_work(original.get(key), value) for key, value in patch.items()
        )
    if isinstance(patch, list) and isinstance(original, list):
        return len(original)
    return 0


class _PatchProblem(Exception):
    pass


_DELETED = object()


def merge(original: Any, patch: Any, path: tuple[str, ...], known: bool, kind: str) -> Any:
    """`patch` merged strategically over `original` (neither is changed). `path` names the
    field (keys only), `known`: the object is a built-in kind (its lists merge by key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get(DIRECTIVE)
    if directive == "delete":
        return _DELETED
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != DIRECTIVE}
    if directive is not None:
        raise _PatchProblem(f"an unknown {DIRECTIVE} directive (delete or replace)")
    if not isinstance(original, dict):
        original = {}
    result = dict(original)
    for key, value in patch.items():
        if isinstance(key, str) and key.startswith(_UNSUPPORTED_DIRECTIVES):
            # Merged as a field, it would reach the object, which no schema allows.
            raise _PatchProblem(
                f"the directive {key.partition('/')[0]} is not supported (only $patch: delete "
                "and $patch: replace are); write the list whole, or use a JSON 6902 patch"
            )
        if value is None:
            result.pop(key, None)
            continue
        child_path = (*path, str(key))
        if isinstance(value, list):
            present = original.get(key)
            existing = present if isinstance(present, list) else []
            merged = _merge_list(existing, value, child_path, known, kind)
        else:
            merged = merge(original.get(key), value, child_path, known, kind)
        if merged is _DELETED:
            result.pop(key, None)
        else:
            result[key] = merged
    return result


def _merge_key(path: tuple[str, ...], kind: str) -> str | None:
    if path[-1] == "ports" and (
        any(part in _CONTAINER_LISTS for part in path[:-1])
        or (kind == "Service" and path == ("spec", "ports"))
    ):
        # kustomize v5.8.1 (in kubectl 1.37) merges container and Service ports by port and
        # protocol, in an order of its own, and drops a patch's item that leaves the protocol
        # out: a JSON 6902 patch says exactly what it means, where a strategic merge could differ.
        raise _PatchProblem(
            "ports are patched with a JSON 6902 patch (kustomize merges them by port and "
            "protocol, in an order of its own, and drops an item without its protocol)"
        )
    return _MERGE_KEYS.get(path[-1])


def _merge_list(
    original: list[Any], patch: list[Any], path: tuple[str, ...], known: bool, kind: str
) -> Any:
    replace = any(isinstance(item, dict) and item.get(DIRECTIVE) == "replace" for item in patch)
    if replace:
        return [
            copy.deepcopy(item)
            for item in patch
            if not (isinstance(item, dict) and item.get(DIRECTIVE) == "replace")
        ]
    if not known:
        return copy.deepcopy(patch)
    if path[-2:] in _PRIMITIVE_MERGE:
        return list(dict.fromkeys([*patch, *original]))  # kustomize's order: the patch's first
    key = _merge_key(path, kind)
    if key is None:
        return copy.deepcopy(patch)
    # The order kustomize gives (apimachinery strategicpatch's normalizeElementOrder): the
    # patch's items first, in its order, then the items only the object has, in its order.
    merged: list[Any] = []
    named: set[Any] = set()
    # The object's items by merge key, the first of each (as the scan kustomize does finds it).
    by_key: dict[Any, Any] = {}
    for o in original:
        if isinstance(o, dict) and key in o:
            by_key.setdefault(_hashable(o[key]), o)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise _PatchProblem(f"each item of {'.'.join(path)} must have its merge key {key!r}")
        named.add(_hashable(item[key]))
        existing = by_key.get(_hashable(item[key]))
        if item.get(DIRECTIVE) == "delete":
            continue
        merged.append(merge(existing or {}, item, path, known, kind))
    # The object's other items as they are (shared, as merge shares the mappings it leaves).
    merged += [o for o in original if not (isinstance(o, dict) and _hashable(o.get(key)) in named)]
    return merged


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
