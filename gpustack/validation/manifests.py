"""Reading Kubernetes manifests for validation: files, folders, stdin; one Resource per object.

Nothing here stops at the first problem: an unreadable file, a document that does not parse or
is not an object becomes a Resource carrying that error, and reading goes on with the rest.
Multi-document YAML is split on `---` lines (as kubeconform does), so one broken document does
not hide its neighbours; `kind: List` is split into its items.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpustack.errors import Location, UserError, display_path
from gpustack.reading import read_bounded
from gpustack.yamlio import SourceMap, decode, load_all_text

STDIN = "-"
EXTENSIONS = (".yaml", ".yml", ".json")
# Rendered fleets and vendor bundles (CRDs) run to megabytes; a manifest past this is a mistake.
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
_SEPARATOR = re.compile(r"^---(?=\s|$)", re.MULTILINE)


@dataclass
class Resource:
    """One object found in a file, or the reason none could be read there."""

    file: str
    line: int  # where the object starts, 1-based (0 when unknown)
    data: dict[str, Any] | None = None
    source: SourceMap | None = None
    path: tuple[str | int, ...] = ()  # where it sits in its document: ("items", 3) in a List
    error: str | None = None

    def line_of(self, field: tuple[str | int, ...]) -> int:
        """The line of a field inside the object (or of its closest ancestor)."""
        if self.source is None:
            return self.line
        return self.source.nearest((*self.path, *field)).line or self.line


def files(paths: list[str]) -> Iterator[str]:
    """Each path as given, folders walked (sorted) for .yaml, .yml and .json files.

    The host-side `node/` folder of a rendered cluster is left out: kubectl never applies those
    files (kubeadm and RKE2 settings, gcloud scripts), so they are not manifests to validate.
    """
    for path in paths:
        if path != STDIN and os.path.isdir(path):
            for root, folders, names in os.walk(path):
                folders[:] = sorted(f for f in folders if not _host_side(os.path.join(root, f)))
                for name in sorted(names):
                    if name.endswith(EXTENSIONS):
                        yield os.path.join(root, name)
        elif path == STDIN or not _host_side(os.path.dirname(os.path.abspath(path))):
            yield path


def cluster_folder(file: str) -> str | None:
    """The rendered cluster folder `file` belongs to: the outermost folder around it whose
    kustomization.yaml gpustack wrote (Flux layers and gitops/ are sub-folders of a cluster's)."""
    if file == "stdin":
        return None
    from gpustack.output import is_ours
    from gpustack.render import KUSTOMIZATION

    found = None
    folder = Path(os.path.abspath(file)).parent
    while is_ours(folder / KUSTOMIZATION):
        found = str(folder)
        folder = folder.parent
    return found


def _host_side(folder: str) -> bool:
    """A rendered cluster's `node/` folder: named `node`, beside a kustomization gpustack wrote."""
    from gpustack.output import is_ours
    from gpustack.render import KUSTOMIZATION, NODE_DIR

    if os.path.basename(folder) != NODE_DIR:
        return False
    return is_ours(Path(folder).parent / KUSTOMIZATION)


def read(path: str, stdin: Any = None) -> list[Resource]:
    """Every object in one file (or stdin), each a Resource; problems become error Resources."""
    shown = "stdin" if path == STDIN else display_path(path)
    try:
        raw = _read_bytes(path, stdin)
        text = decode(raw, shown)
    except UserError as error:
        line, column = (error.location.line, error.location.column) if error.location else (0, 0)
        return [Resource(shown, line, error=_at(error.message, line, column))]
    return list(parse(text, shown))


def _at(message: str, line: int, column: int) -> str:
    """The message with its position: the text format has no other place for it."""
    return f"{message} (line {line}, column {column})" if line else message


def _read_bytes(path: str, stdin: Any) -> bytes:
    if path == STDIN:
        raw: bytes = stdin.read(MAX_MANIFEST_BYTES + 1) if stdin is not None else b""
        if len(raw) > MAX_MANIFEST_BYTES:
            raise UserError(f"more than {MAX_MANIFEST_BYTES} bytes on stdin")
        return raw
    return read_bounded(Path(path), MAX_MANIFEST_BYTES, "a manifest file")


def parse(text: str, shown: str) -> Iterator[Resource]:
    """Objects of a YAML or JSON stream, document by document."""
    for start_line, chunk in _documents(text):
        try:
            documents = list(load_all_text(chunk, shown))
        except UserError as error:
            where = error.location
            line = start_line + (where.line - 1 if where and where.line else 0)
            column = where.column if where and where.line else 0
            yield Resource(shown, line, error=_at(error.message, line, column))
            continue
        for document in documents:
            _shift(document.source, start_line - 1)
            if () not in document.source.values:  # scalars carry no position: use the first line
                document.source.values[()] = Location(shown, start_line + _first_content(chunk), 1)
            yield from _objects(document.data, document.source, shown)


def _documents(text: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of each `---`-separated document; lines keep their numbers' offset."""
    starts = [0] + [match.start() for match in _SEPARATOR.finditer(text)]
    for begin, end in zip(starts, starts[1:] + [len(text)]):
        chunk = text[begin:end]
        if chunk.strip():
            yield text.count("\n", 0, begin) + 1, chunk


def _first_content(chunk: str) -> int:
    """Lines before the first one that holds data (past `---`, comments and blank lines)."""
    for number, line in enumerate(chunk.splitlines()):
        if line.strip() and not line.startswith(("---", "#", "%")):
            return number
    return 0


def _shift(source: SourceMap, lines: int) -> None:
    if not lines:
        return
    for table in (source.values, source.keys):
        for path, location in table.items():
            table[path] = Location(location.file, location.line + lines, location.column)


def _objects(data: Any, source: SourceMap, shown: str) -> Iterator[Resource]:
    line = source.nearest(()).line
    if data is None:
        return  # an empty document (only comments, or a bare `---`)
    if not isinstance(data, dict):
        what = "a list" if isinstance(data, list) else "a scalar"
        yield Resource(shown, line, error=_at(f"document is {what}, expected a Kubernetes object",
                                              line, source.nearest(()).column))
        return
    if data.get("kind") == "List" and isinstance(data.get("items"), list):
        for index, item in enumerate(data["items"]):
            path = ("items", index)
            item_line = source.nearest(path).line
            if isinstance(item, dict):
                yield Resource(shown, item_line, item, source, path)
            else:
                yield Resource(shown, item_line, error=_at("List item is not a Kubernetes object",
                                                           item_line, source.nearest(path).column))
        return
    yield Resource(shown, line, data, source)
