"""`gpustack validate`'s engine: files in, one Result per resource out, in input order.

Fast and bounded for any number of files:
- each file is read once and parsed once, by libyaml (kubeyaml); positions are worked out only
  for findings;
- a document met before (clusters of a fleet share most objects byte for byte) is not parsed or
  validated again: its results are reused, moved to the new file and line;
- many files (or a few large ones) are spread over worker processes, in contiguous runs so
  results come back in input order;
- once a resource is checked only what the report needs is kept (its apiVersion, kind and
  names), unless the lint rules, which look across objects, need the whole object.
CustomResourceDefinitions among the inputs give the schemas of their custom resources: a
resource no schema location knows is checked again against them at the end.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any

from gpustack.validation import crds, manifests
from gpustack.validation.manifests import Resource
from gpustack.validation.schemas import SchemaError, SchemaStore, store
from gpustack.validation.verdicts import Result, header, validate_resources

# Below this many files (or this much input), starting workers costs more than it saves.
PARALLEL_FROM_FILES = 1000
PARALLEL_FROM_BYTES = 64 * 1024 * 1024
# Of many files (fewer bytes than PARALLEL_FROM_BYTES), this many are checked here first. When
# most of their documents are repeats, as a fleet's clusters repeat their objects, the rest is
# checked here too: a repeat costs less than taking its result back from a worker.
PROBE_FILES = 256
# A file this large is split between workers by its documents.
SPLIT_FROM_BYTES = 16 * 1024 * 1024
# Documents remembered for reuse (a fleet repeats its clusters' objects every few dozen files).
CACHE_SIZE = 4096
_BATCH_BYTES = 256 * 1024


@dataclass(frozen=True)
class Settings:
    kubernetes_version: str
    locations: tuple[str, ...]
    skip: frozenset[str] = frozenset()
    reject: frozenset[str] = frozenset()
    ignore_missing_schemas: bool = False
    strict: bool = True
    require_name: bool = True
    keep_objects: bool = True  # for lint: keep whole objects and their text for positions

    def schemas(self) -> SchemaStore:
        return store(self.kubernetes_version, self.locations, strict=self.strict)


class _Checker:
    """Parses and validates documents, remembering the results of the ones it has seen."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.schemas = settings.schemas()
        self.seen: dict[str, list[Result]] = {}
        self.documents = self.repeats = 0

    def text(self, text: str, shown: str, part: tuple[int, int] = (0, 1)) -> list[Result]:
        number, parts = part
        documents = manifests.documents(text)  # one at a time: never all of them held at once
        if parts > 1:
            count = sum(1 for _ in manifests.documents(text))
            begin, end = count * number // parts, count * (number + 1) // parts
            documents = itertools.islice(documents, begin, end)
        results: list[Result] = []
        for start_line, chunk in documents:
            results.extend(self.chunk(chunk, start_line - 1, shown))
        return results

    def chunk(self, chunk: str, offset: int, shown: str) -> list[Result]:
        known = self.seen.get(chunk)
        self.documents += 1
        if known is not None:
            self.repeats += 1
            return [_moved(result, shown, offset) for result in known]
        settings = self.settings
        results = validate_resources(
            manifests.parse_chunk(chunk, offset, shown),
            self.schemas,
            settings.skip,
            settings.reject,
            settings.ignore_missing_schemas,
            settings.strict,
            settings.require_name,
        )
        for result in results:
            _lighten(result, settings.keep_objects)
        if all(
            result.resource.error is None and not result.resource.duplicates for result in results
        ):
            if len(self.seen) >= CACHE_SIZE:
                del self.seen[next(iter(self.seen))]
            self.seen[chunk] = [_moved(result, shown, -offset) for result in results]
        return results


def _unresolved(result: Result) -> bool:
    """No schema location knew the resource's kind: an input CRD may."""
    return result.status == "error" and any(
        finding.message.startswith("could not find schema for") for finding in result.findings
    )


def _lighten(result: Result, keep_objects: bool) -> None:
    """Keep of a checked resource what the report needs (and what a later pass needs)."""
    resource = result.resource
    if resource.file != "stdin" and resource.text:
        resource.text, resource.reread = "", True  # positions are rarely asked for again
    if keep_objects or crds.is_crd(resource.data) or _unresolved(result):
        return
    resource.data = header(resource.data)


def _moved(result: Result, file: str, lines: int) -> Result:
    """A result reused for the same document at another place (file and line offset)."""
    moved = Resource.__new__(Resource)  # a shallow copy: dataclasses.replace takes longer
    moved.__dict__.update(result.resource.__dict__)
    moved.file, moved.line, moved.offset = file, moved.line + lines, moved.offset + lines
    findings = [
        replace(finding, file=file, line=finding.line + lines if finding.line else None)
        for finding in result.findings
    ]
    return Result(moved, result.status, findings, result.pointers)


_worker: _Checker | None = None


def _work(arguments: tuple[Settings, list[tuple[str, int, int]]]) -> list[list[Result]]:
    global _worker
    settings, batch = arguments
    if _worker is None or _worker.settings != settings:
        _worker = _Checker(settings)
    return [_read_and_check(_worker, path, (number, parts)) for path, number, parts in batch]


def _read_and_check(
    checker: _Checker, path: str, part: tuple[int, int], shown: str | None = None
) -> list[Result]:
    shown = shown or manifests.shown(path)
    resources = manifests.read_text(path, name=shown)
    if isinstance(resources, Resource):
        return validate_resources([resources], checker.schemas) if part[0] == 0 else []
    return checker.text(resources, shown, part)


def check_files(
    paths: list[str], settings: Settings, stdin: Any = None, jobs: int | None = None
) -> Generator[tuple[str, list[Result]], None, None]:
    """(file as shown, its results) for each path, in order; stdin for `-`. Closing it early
    stops the workers."""
    global _worker
    sizes = [_size(path) for path in paths]
    workers = 1 if manifests.STDIN in paths else _workers(len(paths), sum(sizes), jobs)
    checker = _Checker(settings)
    if workers > 1 and jobs is None and sum(sizes) < PARALLEL_FROM_BYTES:
        for path in paths[:PROBE_FILES]:
            shown = manifests.shown(path)
            yield shown, _read_and_check(checker, path, (0, 1), shown)
        paths, sizes = paths[PROBE_FILES:], sizes[PROBE_FILES:]
        if checker.repeats * 2 >= checker.documents:
            workers = 1
    if workers <= 1:
        for path in paths:
            if path == manifests.STDIN:
                yield "stdin", _stdin(checker, stdin)
            else:
                shown = manifests.shown(path)
                yield shown, _read_and_check(checker, path, (0, 1), shown)
        return
    # Work units: a file, or one of the parts a large file is split into; batched by size.
    batches: list[list[tuple[str, int, int]]] = [[]]
    filled = 0
    for path, size in zip(paths, sizes):
        parts = min(workers, size // SPLIT_FROM_BYTES) if size >= SPLIT_FROM_BYTES else 1
        for number in range(parts):
            batches[-1].append((path, number, parts))
            filled += size // parts + 512
            if filled >= _BATCH_BYTES:
                batches.append([])
                filled = 0
    batches = [batch for batch in batches if batch]
    # The process pool loads only when a large input starts workers.
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    current: tuple[str, list[Result]] | None = None
    # Forked workers start with this checker: its compiled schemas, the documents it has met.
    _worker = checker
    fork = get_context("fork") if sys.platform == "linux" else None
    with ProcessPoolExecutor(workers, mp_context=fork) as pool:
        outputs = pool.map(_work, [(settings, batch) for batch in batches])
        try:
            for batch, output in zip(batches, outputs):
                for (path, _, _), results in zip(batch, output):
                    file = manifests.shown(path)
                    if current is not None and current[0] == file:
                        current[1].extend(results)  # the next part of a split file
                        continue
                    if current is not None:
                        yield current
                    current = (file, results)
        finally:  # the caller stopped early (--exit-on-error): drop the work not started
            pool.shutdown(cancel_futures=True)
            _worker = None
    if current is not None:
        yield current


def _stdin(checker: _Checker, stdin: Any) -> list[Result]:
    resources = manifests.read(manifests.STDIN, stdin)
    return validate_resources(
        resources,
        checker.schemas,
        checker.settings.skip,
        checker.settings.reject,
        checker.settings.ignore_missing_schemas,
        checker.settings.strict,
        checker.settings.require_name,
    )


def _size(path: str) -> int:
    if path == manifests.STDIN:
        return 0
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _workers(files: int, total_bytes: int, jobs: int | None) -> int:
    if jobs is not None:
        return max(1, jobs)
    if files < PARALLEL_FROM_FILES and total_bytes < PARALLEL_FROM_BYTES:
        return 1
    return len(os.sched_getaffinity(0))


def resolve_custom_resources(results: list[Result], settings: Settings) -> None:
    """Check again, against the CRDs among the inputs, the resources no location had a schema
    for; results are updated in place."""
    pending = [result for result in results if _unresolved(result)]
    if not pending:
        return
    found: dict[tuple[str, str], dict[str, Any] | SchemaError] = {}
    for result in results:
        if result.status in ("valid", "invalid") and crds.is_crd(result.resource.data):
            assert result.resource.data is not None
            found.update(crds.schemas(result.resource.data, settings.strict))
    if not found:
        return
    schemas = settings.schemas().with_schemas(found)
    for result in pending:
        resource = result.resource
        [again] = validate_resources(
            [resource],
            schemas,
            ignore_missing_schemas=settings.ignore_missing_schemas,
            strict=settings.strict,
            require_name=settings.require_name,
        )
        result.status, result.findings, result.pointers = (
            again.status,
            again.findings,
            again.pointers,
        )
        _lighten(result, settings.keep_objects)
