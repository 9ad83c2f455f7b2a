"""Reading Kubernetes manifests for validation: files, folders, stdin; one Resource per object.

Nothing here stops at the first problem: an unreadable file, a document that does not parse or
is not an object becomes a Resource carrying that error, and reading goes on with the rest.
Multi-document YAML is split on `---` lines (as kubeconform does), so one broken document does
not hide its neighbours; `kind: List` is split into its items.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpustack.errors import Location, UserError, display_path
from gpustack.layout import KUBERNETES_VERSION, KUSTOMIZATION, NODE_DIR, is_ours
from gpustack.objects import kind_of
from gpustack.read.bounded import decode, read_bounded
from gpustack.validation import kubeyaml

STDIN = "-"
EXTENSIONS = (".yaml", ".yml", ".json")
# Rendered fleets and vendor bundles (CRDs) run to megabytes; a manifest past this is a mistake.
SCHEMA_SUFFIX = ".schema.json"
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
_SEPARATOR = re.compile(r"^---(?=\s|$)", re.MULTILINE)


@dataclass
class Resource:
    """One object found in a file, or the reason none could be read there.

    Positions inside the object are worked out from its document's text only when a finding
    needs one."""

    file: str
    line: int  # where the object starts, 1-based (0 when unknown)
    data: dict[str, Any] | None = None
    path: tuple[str | int, ...] = ()  # where it sits in its document: ("items", 3) in a List
    error: str | None = None
    column: int = 0
    text: str = ""  # the `---`-separated piece of the file the object was read from
    offset: int = 0  # lines of the file before `text`
    index: int = 0  # which document of `text`
    duplicates: list[tuple[str, int, int]] = field(default_factory=list)  # message, line, column
    reread: bool = False  # `text` was let go: read it again from the file when a position is asked

    def source(self) -> str:
        if not self.text and self.reread:
            self.text = _chunk_at(self.file, self.offset)
        return self.text

    def position(self, field: tuple[str | int, ...]) -> tuple[int, int]:
        """1-based line and column of a field inside the object (or of its closest ancestor)."""
        if not self.source():
            return self.line, self.column
        line, column, _ = kubeyaml.position(self.text, self.index, (*self.path, *field))
        return line + 1 + self.offset, column + 1

    def key_position(self, field: tuple[str | int, ...], key: str) -> tuple[int, int] | None:
        """Where the key `key` is written in the mapping at `field`, if it is."""
        if not self.source():
            return None
        found = kubeyaml.key_position(self.text, self.index, (*self.path, *field), key)
        return (found[0] + 1 + self.offset, found[1] + 1) if found else None

    def plain_scalar(self, field: tuple[str | int, ...]) -> str | None:
        """The unquoted scalar written at `field`, as typed (`y`, where Kubernetes reads true)."""
        if not self.source():
            return None
        return kubeyaml.plain_scalar(self.text, self.index, (*self.path, *field))

    def line_of(self, field: tuple[str | int, ...]) -> int:
        return self.position(field)[0]


def _chunk_at(file: str, offset: int) -> str:
    """The `---`-separated piece of `file` that has `offset` lines before it."""
    text = read_text(file)
    if isinstance(text, Resource):
        return ""
    return next((chunk for line, chunk in documents(text) if line - 1 == offset), "")


def files(paths: list[str]) -> Iterator[str]:
    """Each path as given, folders walked (sorted) for .yaml, .yml and .json files; JSON
    Schemas (`*.schema.json`) are not manifests and are left out.

    The host-side `node/` folder of a rendered cluster is left out: kubectl never applies those
    files (kubeadm and RKE2 settings, gcloud scripts), so they are not manifests to validate.
    """
    for path in paths:
        if path != STDIN and os.path.isdir(path):
            for root, folders, names in os.walk(path):
                folders[:] = sorted(f for f in folders if not _host_side(os.path.join(root, f)))
                for name in sorted(names):
                    if name.endswith(EXTENSIONS) and not name.endswith(SCHEMA_SUFFIX):
                        yield os.path.join(root, name)
        elif path.endswith(SCHEMA_SUFFIX):
            continue  # a JSON Schema (gpustack.schema.json, a CRD's) describes manifests
        elif path == STDIN or not _host_side(os.path.dirname(os.path.abspath(path))):
            yield path


def cluster_folder(file: str, known: dict[str, str | None] | None = None) -> str | None:
    """The rendered cluster folder `file` belongs to: the outermost folder around it whose
    kustomization.yaml gpustack wrote (Flux stages and gitops/ are sub-folders of a cluster's).
    `known` remembers the answer per folder for the files of one run."""
    if file == "stdin":
        return None
    parent = os.path.dirname(os.path.abspath(file))
    if known is not None and parent in known:
        return known[parent]
    found = None
    folder = Path(parent)
    while is_ours(folder / KUSTOMIZATION):
        found = str(folder)
        folder = folder.parent
    if known is not None:
        known[parent] = found
    return found


# A kustomization.yaml is a short list of file names; gpustack's are a few kilobytes.
MAX_KUSTOMIZATION_BYTES = 1024 * 1024


def cluster_version(folder: str) -> tuple[str, Location] | None:
    """The Kubernetes version the rendered cluster `folder` was rendered for (its
    kustomization.yaml's `gpustack.dev/kubernetes-version` annotation) and where it is written;
    None when the folder's kustomization does not say (one rendered before it did)."""
    path = os.path.join(folder, KUSTOMIZATION)
    name = shown(path)
    try:
        text = decode(read_bounded(path, MAX_KUSTOMIZATION_BYTES, "a kustomization", False), name)
    except UserError:
        return None  # too large, not text, gone: validating the file itself reports it
    at = ("metadata", "annotations", KUBERNETES_VERSION)
    try:
        document = next(iter(kubeyaml.load(text)), None)
    except kubeyaml.Problem:
        return None  # validating the file itself reports it, with the rest
    value: Any = document.data if document is not None else None
    for key in at:
        value = value.get(key) if isinstance(value, dict) else None
    if value is None:
        return None
    line, column, _ = kubeyaml.position(text, 0, at)
    where = Location(name, line + 1, column + 1)
    if not isinstance(value, str):
        raise UserError(
            'must be a Kubernetes version, such as "1.31"',
            where,
            field=f"metadata.annotations.{KUBERNETES_VERSION}",
        )
    return value, where


def _host_side(folder: str) -> bool:
    """A rendered cluster's `node/` folder: named `node`, beside a kustomization gpustack wrote."""
    if os.path.basename(folder) != NODE_DIR:
        return False
    return is_ours(Path(folder).parent / KUSTOMIZATION)


def shown(path: str) -> str:
    """A path as reports name it: relative to the working directory when below it (as
    errors.display_path, without resolving links: this runs for every file)."""
    if path == STDIN:
        return "stdin"
    if not os.path.isabs(path):
        return os.path.normpath(path) if ".." not in path else display_path(path)
    cwd = os.getcwd()
    return path[len(cwd) + 1 :] if path.startswith(cwd + os.sep) else path


def read(path: str, stdin: Any = None) -> list[Resource]:
    """Every object in one file (or stdin), each a Resource; problems become error Resources."""
    text = read_text(path, stdin)
    if isinstance(text, Resource):
        return [text]
    return list(parse(text, shown(path)))


def read_text(path: str, stdin: Any = None, name: str | None = None) -> str | Resource:
    """The text of a file (or stdin), or an error Resource saying why it cannot be read; `name`
    is the path as reports show it (shown(path)), when the caller has it already."""
    name = name or shown(path)
    try:
        return decode(_read_bytes(path, stdin), name)
    except UserError as error:
        line, column = (error.location.line, error.location.column) if error.location else (0, 0)
        return Resource(name, line, error=_at(error.message, line, column), column=column)


def _at(message: str, line: int, column: int) -> str:
    """The message with its position: the text format has no other place for it."""
    return f"{message} (line {line}, column {column})" if line else message


def _read_bytes(path: str, stdin: Any) -> bytes:
    if path == STDIN:
        raw: bytes = stdin.read(MAX_MANIFEST_BYTES + 1) if stdin is not None else b""
        if len(raw) > MAX_MANIFEST_BYTES:
            raise UserError(f"more than {MAX_MANIFEST_BYTES} bytes on stdin")
        return raw
    return read_bounded(path, MAX_MANIFEST_BYTES, "a manifest file")


def parse(text: str, shown: str) -> Iterator[Resource]:
    """Objects of a YAML or JSON stream, document by document, read as Kubernetes reads YAML."""
    for start_line, chunk in documents(text):
        yield from parse_chunk(chunk, start_line - 1, shown)


def parse_chunk(chunk: str, offset: int, shown: str) -> Iterator[Resource]:
    """Objects of one `---`-separated piece of a file, which has `offset` lines before it."""
    try:
        loaded = list(kubeyaml.load(chunk))
    except kubeyaml.Problem as problem:
        line, column = offset + problem.line + 1, problem.column + 1
        yield Resource(shown, line, error=_at(problem.message, line, column), column=column)
        return
    for index, document in enumerate(loaded):
        yield from _objects(document, chunk, offset, index, shown)


def documents(text: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each `---`-separated document; lines keep their numbers' offset.

    One at a time, as the separators are found: a stream of a million documents is never held
    as a list, and a bare `---` (an empty document) is passed over without parsing it."""
    # Most files hold one document: no need to scan them line by line.
    ends = (match.start() for match in _SEPARATOR.finditer(text)) if "---" in text else ()
    begin, line = 0, 1
    for end in itertools.chain(ends, (len(text),)):
        chunk = text[begin:end]
        content = chunk.strip()
        if content and content != "---":
            yield line, chunk
        line += chunk.count("\n")
        begin = end


def _json_schema(data: dict[str, Any]) -> bool:
    if "kind" in data or "apiVersion" in data:
        return False
    return "$schema" in data or (data.get("type") == "object" and "properties" in data)


def _objects(
    document: kubeyaml.Document, chunk: str, offset: int, index: int, shown: str
) -> Iterator[Resource]:
    data = document.data
    line, column = offset + document.line + 1, document.column + 1
    if data is None:
        return  # an empty document (only comments, or a bare `---`)
    duplicates = [
        (problem.message, offset + problem.line + 1, problem.column + 1)
        for problem in document.duplicates
    ]
    if not isinstance(data, dict):
        what = "a list" if isinstance(data, list) else "a scalar"
        message = f"document is {what}, expected a Kubernetes object"
        yield Resource(shown, line, error=_at(message, line, column), column=column)
        return
    if _json_schema(data):
        return  # a JSON Schema (a CRD schema in kubeconform's layout) describes manifests
    if kind_of(data) == "List" and isinstance(data.get("items"), list):
        places = document.items
        for number, item in enumerate(data["items"]):
            path = ("items", number)
            if number < len(places):  # found while parsing: a List of many items is linear
                item_line, item_column = places[number]
            else:  # `items` given by an alias, or set twice
                item_line, item_column, _ = kubeyaml.position(chunk, index, path)
            item_line, item_column = item_line + offset + 1, item_column + 1
            if isinstance(item, dict):
                yield Resource(
                    shown,
                    item_line,
                    item,
                    path,
                    column=item_column,
                    text=chunk,
                    offset=offset,
                    index=index,
                    duplicates=duplicates,
                )
            else:
                message = _at("List item is not a Kubernetes object", item_line, item_column)
                yield Resource(shown, item_line, error=message, column=item_column)
        return
    yield Resource(
        shown,
        line,
        data,
        column=column,
        text=chunk,
        offset=offset,
        index=index,
        duplicates=duplicates,
    )
