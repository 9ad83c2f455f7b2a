"""Reading YAML the user wrote: plain data plus where every value came from.

Everything that can go wrong with a file (too big, not UTF-8, not YAML, duplicate keys, alias bombs)
becomes a UserError naming the file, line and column. Values come back as plain dicts, lists and
scalars; `SourceMap` remembers the position of each, keyed by its path (a tuple of keys and indexes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Set
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml as libyaml  # type: ignore[import-untyped]
from yaml.events import (  # type: ignore[import-untyped]
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from gpustack.emit import RESOLVES_TO_NON_STRING
from gpustack.errors import Location, UserError, display_path
from gpustack.read.bounded import MAX_FILE_BYTES, decode, read_bounded

# Deeper than any real config or manifest, and the parser's cost grows faster than the depth.
MAX_NESTING = 100
# Aliases may be reused, but a document that expands to more nodes than this is an alias bomb.
MAX_EXPANDED_NODES = 100_000

Path_ = tuple[str | int, ...]

# A plain (unquoted) scalar as written: up to the next space, flow punctuation or comment.
_PLAIN_TOKEN = re.compile(r"[^\s,\[\]{}#]+")


@dataclass
class SourceMap:
    """Where each value (and each mapping key) of a document was written."""

    file: str
    values: dict[Path_, Location] = field(default_factory=dict)
    keys: dict[Path_, Location] = field(default_factory=dict)
    text: str = ""

    def value(self, path: Path_) -> Location | None:
        return self.values.get(tuple(path))

    def key(self, path: Path_) -> Location | None:
        return self.keys.get(tuple(path))

    def written(self, path: Path_) -> str | None:
        """A plain scalar exactly as the user typed it (`1.30`, where YAML reads the float 1.3)."""
        location = self.value(path)
        lines = self.text.splitlines()
        if location is None or not 0 < location.line <= len(lines):
            return None
        match = _PLAIN_TOKEN.match(lines[location.line - 1], location.column - 1)
        return match.group() if match else None

    def written_at(self, location: Location) -> str | None:
        """The plain scalar written at `location`, as typed."""
        lines = self.text.splitlines()
        if not 0 < location.line <= len(lines):
            return None
        match = _PLAIN_TOKEN.match(lines[location.line - 1], location.column - 1)
        return match.group().rstrip(":") if match else None

    def nearest(self, path: Path_) -> Location:
        """The position of `path`, or of its closest ancestor that has one."""
        path = tuple(path)
        while True:
            if path in self.values:
                return self.values[path]
            if not path:
                return Location(self.file, 1, 1)
            path = path[:-1]


class LazySourceMap(SourceMap):
    """The positions of a document read by the fast path, found only when something asks for
    one, which in practice is an error message: from libyaml's events again, the marks the full
    parser would give (tests/test_fast_reader.py compares them), twenty times faster."""

    def __init__(self, file: str, text: str, index: int = 0) -> None:
        self.file = file
        self._text = text
        self._index = index  # which document of the file
        self._full: SourceMap | None = None

    def _positions(self) -> SourceMap:
        if self._full is None:
            try:
                self._full = _fast_positions(self._text, self.file, self._index)
            except _Unsure:
                documents = list(_parse_all(self._text, self.file))
                found = documents[self._index] if self._index < len(documents) else None
                self._full = found.source if found else SourceMap(self.file, text=self._text)
        return self._full

    # Read-only properties where SourceMap has fields: positions are found on first use.
    @property
    def values(self) -> dict[Path_, Location]:  # type: ignore[override]
        return self._positions().values

    @property
    def keys(self) -> dict[Path_, Location]:  # type: ignore[override]
        return self._positions().keys

    @property
    def text(self) -> str:  # type: ignore[override]
        return self._text


@dataclass
class Document:
    data: Any
    source: SourceMap


def read_text(path: Path) -> str:
    """Read a user file as UTF-8, refusing huge, binary or mis-encoded files with a clear message."""
    return decode(read_bounded(path, MAX_FILE_BYTES, "a config or profile"), display_path(path))


def load_file(path: Path) -> Document:
    """One YAML document from a user's file: see load_text."""
    return load_text(read_text(path), display_path(path))


def load_text(text: str, shown: str) -> Document:
    """Parse one YAML document into plain data and its source map.

    The well-formed files a fleet is made of are read by libyaml, twenty times faster, and their
    positions worked out only when something asks for one. Anything that path is not sure to read
    exactly as the full parser does (aliases, tags, duplicate keys, YAML 1.1-only scalars, more
    than one document, errors) goes to the full parser, which also reports every problem with its
    position."""
    documents = _fast_documents(text)
    if documents is None or len(documents) != 1:
        return _parse_one(text, shown)
    return Document(documents[0], LazySourceMap(shown, text))


def load_all_text(text: str, shown: str) -> list[Document]:
    """Every YAML document of `text`, read as load_text reads one (gpustack's own output always
    takes the fast path)."""
    documents = _fast_documents(text)
    if documents is None:
        return list(_parse_all(text, shown))
    return [
        Document(data, LazySourceMap(shown, text, index)) for index, data in enumerate(documents)
    ]


class _Unsure(Exception):
    pass


class _FastLoader(getattr(libyaml, "CSafeLoader", libyaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's parser; its events are read into data by _read_documents."""


# The YAML 1.2 core schema ruamel uses, for plain scalars (as PyYAML's resolvers match them);
# scalars the two specs read differently (yes/no/on/off, octal, sexagesimal, dates, '=') are
# refused rather than guessed: whatever some YAML 1.1 or 1.2 resolver reads as a bool, null,
# number, date or merge key (RESOLVES_TO_NON_STRING) is left to the full parser.
_CORE_WORDS: dict[str, Any] = {
    **dict.fromkeys(["true", "True", "TRUE"], True),
    **dict.fromkeys(["false", "False", "FALSE"], False),
    **dict.fromkeys(["~", "null", "Null", "NULL", ""], None),
}
_CORE_INT = re.compile(r"^-?(?:0|[1-9][0-9]*)$")
_CORE_FLOAT = re.compile(r"^-?(?:0|[1-9][0-9]*)\.[0-9]+$")
_NUMBER_START = frozenset("-0123456789")
_NO_KEY = object()
# Short plain scalars met before that read as themselves: names, labels and keys repeat across
# a fleet's files, and are resolved once (a bounded set, kept for the process).
_TEXTS: set[str] = set()
_TEXTS_KEPT = 65536


def _core_scalar(text: str) -> Any:
    if text in _CORE_WORDS:
        return _CORE_WORDS[text]
    if text[0] in _NUMBER_START:
        if _CORE_INT.match(text):
            return int(text)
        if _CORE_FLOAT.match(text):
            return float(text)
    if RESOLVES_TO_NON_STRING.match(text):
        raise _Unsure
    return text


# Characters libyaml counts as line breaks and the full parser does not (YAML 1.1's, not 1.2's):
# around one the two can read different data (`a: 1<NEL>b: 2` is two keys to libyaml, an error
# to the full parser) and would give different lines after it.
_UNICODE_BREAKS = re.compile("[\x85\u2028\u2029]")


def _fast_documents(text: str) -> list[Any] | None:
    """The documents' data as libyaml reads them, or None where the full parser must decide."""
    if not text.isascii() and _UNICODE_BREAKS.search(text):
        return None
    parser = _FastLoader(text)
    try:
        return _read_documents(parser)
    except (libyaml.YAMLError, _Unsure, RecursionError, ValueError, TypeError):
        return None
    finally:
        parser.dispose()


def _read_documents(parser: Any) -> list[Any]:
    """Every document's data, built from libyaml's parse events one at a time (no node tree,
    no recursion). Anchors, aliases and tags (the full parser checks alias bombs and tags),
    duplicate keys, keys that are neither strings nor integers, nesting past MAX_NESTING and
    unsure scalars raise _Unsure."""
    documents: list[Any] = []
    building: list[Any] = []  # the mappings and sequences open, innermost last
    keys: list[Any] = []  # for each, the key waiting for its value (_NO_KEY: none)
    get_event, texts = parser.get_event, _TEXTS
    while True:
        event = get_event()
        kind = type(event)
        if kind is ScalarEvent:
            if event.anchor is not None or event.tag is not None:
                raise _Unsure
            value = event.value
            if event.implicit[0] and value not in texts:
                value = _core_scalar(value)
                if type(value) is str and len(value) <= 128 and len(texts) < _TEXTS_KEPT:
                    texts.add(value)
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            if event.anchor is not None or event.tag is not None:
                raise _Unsure
            if building and keys[-1] is _NO_KEY and type(building[-1]) is dict:
                raise _Unsure  # a mapping or sequence as a key
            if len(building) >= MAX_NESTING:
                raise _Unsure  # the full parser refuses it, placed (data this deep breaks readers)
            building.append({} if kind is MappingStartEvent else [])
            keys.append(_NO_KEY)
            continue
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            value = building.pop()
            keys.pop()
        elif kind is AliasEvent:
            raise _Unsure
        elif kind is StreamEndEvent:
            return documents
        else:  # the stream's start, a document's start or end
            continue
        if not building:
            documents.append(value)
        elif type(building[-1]) is list:
            building[-1].append(value)
        elif keys[-1] is _NO_KEY:
            if value in building[-1]:
                raise _Unsure  # a duplicate key (1 and true are one key in Python)
            if not isinstance(value, (str, int)):
                raise _Unsure  # a float or null key, which the full parser spells as text
            keys[-1] = value
        else:
            building[-1][keys[-1]] = value
            keys[-1] = _NO_KEY


def _fast_positions(text: str, shown: str, index: int) -> SourceMap:
    """The positions of document `index` of `text` (read by the fast path) from libyaml's events,
    or _Unsure where they could differ from the full parser's."""
    source = SourceMap(shown, text=text)
    parser = _FastLoader(text)
    try:
        _read_positions(parser, index, source)
    finally:
        parser.dispose()
    return source


def _read_positions(parser: Any, index: int, source: SourceMap) -> None:
    """Record in `source` where each value and mapping key of document `index` starts, from
    libyaml's events, as _plain records ruamel's marks: a document the fast path read, so every
    key is a string or an integer and nothing is an alias. An empty value raises _Unsure: ruamel
    places it at the token after it, which libyaml's events do not tell."""
    document = -1
    # The mappings and sequences open, innermost last: each one's path, and its state (a
    # mapping's key waiting for its value, a sequence's next index).
    open_: list[tuple[Path_, dict[str, Any]]] = []
    get_event = parser.get_event
    while True:
        event = get_event()
        kind = type(event)
        if kind is DocumentStartEvent:
            document += 1
            continue
        if kind is StreamEndEvent or document > index:
            return
        if document < index or kind not in _NODE_EVENTS:
            continue
        if kind is MappingEndEvent or kind is SequenceEndEvent:
            open_.pop()
            continue
        if kind is ScalarEvent and not event.value and not event.style:  # plain and empty
            raise _Unsure
        mark = event.start_mark
        here = Location(source.file, mark.line + 1, mark.column + 1)
        if not open_:
            if kind is ScalarEvent:
                continue  # a document of one scalar has no position to look up
            path: Path_ = ()
        else:
            parent, state = open_[-1]
            if "index" in state:
                path = (*parent, state["index"])
                state["index"] += 1
            elif "key" not in state:
                key = _core_scalar(event.value) if event.implicit[0] else event.value
                state["key"] = key
                source.keys[(*parent, key)] = here
                continue
            else:
                path = (*parent, state.pop("key"))
        source.values[path] = here
        if kind is MappingStartEvent:
            open_.append((path, {}))
        elif kind is SequenceStartEvent:
            open_.append((path, {"index": 0}))


_NODE_EVENTS = (
    ScalarEvent,
    MappingStartEvent,
    MappingEndEvent,
    SequenceStartEvent,
    SequenceEndEvent,
)


def _parse_one(text: str, shown: str) -> Document:
    """One YAML document by the full parser (ruamel), positions and all."""
    # An empty document (a stray `---` at the end) holds nothing to choose between.
    documents = [document for document in _parse_all(text, shown) if document.data is not None]
    if len(documents) > 1:
        raise UserError(
            "a second YAML document starts here; a config file holds one",
            documents[1].source.nearest(()),
            hint="put each cluster in its own file",
        )
    if not documents:
        return Document(None, SourceMap(shown, text=text))
    return documents[0]


@cache
def _constructor() -> Any:
    """ruamel's round-trip constructor, but a timestamp (`2001-12-14t21:59:43.10-05:00`,
    `!!timestamp 2002-12-14`) is the text as written: Kubernetes reads YAML into JSON, where a
    timestamp is the string it was written as (go-yaml v2 decode.go keeps a resolved timestamp
    as its string outside a time.Time field), and Python's datetime would write it another way."""
    from ruamel.yaml.constructor import RoundTripConstructor  # loaded with the full parser

    class TimestampsAsWritten(RoundTripConstructor):
        pass

    def as_written(constructor: Any, node: Any) -> Any:
        return constructor.construct_scalar(node)

    TimestampsAsWritten.add_constructor("tag:yaml.org,2002:timestamp", as_written)
    return TimestampsAsWritten


def _parse_all(text: str, shown: str) -> Iterator[Document]:
    """Every YAML document by the full parser: plain data, positions, every problem located."""
    deepest, where = _flow_depth(text)
    if deepest > MAX_NESTING:
        line, column = _position(text, where)
        raise UserError(
            f"YAML nests more than {MAX_NESTING} levels deep", Location(shown, line, column)
        )
    # ruamel.yaml, the full parser, loads only here: most files are read by libyaml alone.
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError
    from ruamel.yaml.reader import ReaderError

    yaml = YAML(typ="rt", pure=True)
    yaml.allow_duplicate_keys = False
    yaml.Constructor = _constructor()
    try:
        for node in yaml.load_all(text):
            source = SourceMap(shown, text=text)
            _check_expansion(node, shown)
            yield Document(_plain(node, (), source), source)
    except DuplicateKeyError as error:
        mark = error.problem_mark
        key = (error.problem or "").split('"')[1] if '"' in (error.problem or "") else None
        location = _location(shown, mark)
        written = SourceMap(shown, text=text).written_at(location)
        if key and written and written != key and key in ("True", "False", "1", "0"):
            # Python's dicts hold true and 1 (false and 0) as one key: say so, as written.
            raise UserError(
                f"key {written} is the same key as an earlier "
                f"{'1 or true' if key in ('True', '1') else '0 or false'} in this mapping",
                location,
                hint="quote the keys to make them strings, e.g. '1' and 'true'",
            ) from None
        raise UserError(
            f"duplicate key {key!r}" if key else "duplicate key",
            location,
            hint="each key may appear once in a mapping",
        ) from None
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = error.problem or error.context or "invalid YAML"
        hint = None
        if error.problem_mark and error.context and error.context_mark:
            # The parser stops where it noticed the problem, often a line after the mistake
            # (an unclosed bracket): say where the construct it was reading began.
            start = error.context_mark
            hint = (
                f"{error.context} that starts at line {start.line + 1}, column {start.column + 1}"
            )
        raise UserError(f"invalid YAML: {problem}", _location(shown, mark), hint=hint) from None
    except ReaderError as error:
        # A character YAML does not allow raw (a control character such as DEL).
        line, column = _position(text, error.position)
        raise UserError(
            f"invalid YAML: the character U+{error.character:04X} is not allowed here",
            Location(shown, line, column),
            hint="write it as an escape in a double-quoted string, or remove it",
        ) from None
    except YAMLError as error:
        raise UserError(f"invalid YAML: {error}", Location(shown)) from None
    except RecursionError:
        raise UserError("YAML nests too deeply", _deepest(text, shown)) from None
    except ValueError:
        # Python refuses to read integers of more than 4,300 digits (int_max_str_digits).
        digits = _LONG_NUMBER.search(text)
        line, column = _position(text, digits.start()) if digits else (0, 0)
        raise UserError(
            "a number with more than 4300 digits", Location(shown, line, column)
        ) from None
    except AttributeError:
        # ruamel fails this way on a merge key (<<) that aliases the mapping it is in.
        line, column = _position(text, max(text.find("<<"), 0))
        raise UserError(
            "invalid YAML: a merge key (<<) refers to the mapping it is in",
            Location(shown, line, column),
        ) from None


_LONG_NUMBER = re.compile(r"[0-9]{4301}")


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of `offset` in `text`."""
    before = text[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def _deepest(text: str, shown: str) -> Location:
    """Where flow collections ([ and {) nest deepest, the likely cause of too deep nesting."""
    deepest, where = _flow_depth(text)
    line, column = _position(text, where)
    return Location(shown, line, column) if deepest else Location(shown)


def _flow_depth(text: str) -> tuple[int, int]:
    """How deep [ and { nest (quotes and comments not told apart) and the offset where deepest;
    a linear scan, run before the parser, which slows down more than linearly with depth."""
    if "[" not in text and "{" not in text:
        return 0, 0
    depth, deepest, where = 0, 0, 0
    for match in _BRACKETS.finditer(text):
        if match.group() in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, match.start()
        else:
            depth = max(0, depth - 1)
    return deepest, where


_BRACKETS = re.compile(r"[\[\]{}]")


def _location(shown: str, mark: Any) -> Location:
    if mark is None:
        return Location(shown)
    return Location(shown, mark.line + 1, mark.column + 1)


def _check_expansion(root: Any, shown: str) -> None:
    """Refuse documents whose aliases expand past MAX_EXPANDED_NODES (a 'billion laughs')."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq  # loaded with the full parser

    sizes: dict[int, int] = {}

    def children(node: Any) -> list[Any]:
        if isinstance(node, CommentedMap):
            return list(node.values())
        return list(node) if isinstance(node, CommentedSeq) else []

    def size(node: Any) -> int:
        if not isinstance(node, (CommentedMap, CommentedSeq)):
            return 1
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = MAX_EXPANDED_NODES + 1  # a cycle counts as too big
        total = 1
        for child in children(node):
            total += size(child)
            if total > MAX_EXPANDED_NODES:
                break
        sizes[id(node)] = total
        return total

    if size(root) <= MAX_EXPANDED_NODES:
        return
    # Point at the innermost value that is too big by itself: the anchor that multiplies.
    culprit, visited = root, {id(root)}
    while True:
        bigger = next(
            (
                child
                for child in children(culprit)
                if size(child) > MAX_EXPANDED_NODES and id(child) not in visited
            ),
            None,
        )
        if bigger is None:
            break
        culprit = bigger
        visited.add(id(bigger))
    raise UserError(
        f"aliases expand this value to more than {MAX_EXPANDED_NODES} values (an alias bomb)",
        Location(shown, culprit.lc.line + 1, culprit.lc.col + 1),
        hint="a config needs no aliases of aliases; write the values out",
    )


def _plain(node: Any, path: Path_, source: SourceMap) -> Any:
    """Copy ruamel's round-trip nodes into plain Python data, recording positions on the way."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq  # loaded with the full parser

    if isinstance(node, CommentedMap):
        if path == ():
            source.values[path] = Location(source.file, node.lc.line + 1, node.lc.col + 1)
        result: dict[Any, Any] = {}
        for key, value in node.items():
            child = (*path, key if isinstance(key, (str, int)) else str(key))
            if isinstance(key, str):
                _check_characters(key, child, source, key=True)
            try:
                key_line, key_col, value_line, value_col = node.lc.data[key]
                source.keys[child] = Location(source.file, key_line + 1, key_col + 1)
                source.values[child] = Location(source.file, value_line + 1, value_col + 1)
            except (KeyError, TypeError, ValueError):
                source.values[child] = source.nearest(path)
            result[child[-1]] = _plain(value, child, source)
        return result
    if isinstance(node, CommentedSeq):
        if path == ():
            source.values[path] = Location(source.file, node.lc.line + 1, node.lc.col + 1)
        items = []
        for index, value in enumerate(node):
            child = (*path, index)
            try:
                line, col = node.lc.data[index]
                source.values[child] = Location(source.file, line + 1, col + 1)
            except (KeyError, TypeError, ValueError, IndexError):
                source.values[child] = source.nearest(path)
            items.append(_plain(value, child, source))
        return items
    if isinstance(node, bytes):
        raise UserError(
            "binary values (!!binary) are not supported; write the value as text",
            source.nearest(path),
        )
    if isinstance(node, (Set, list, tuple)):
        # ruamel's `!!set` and `!!pairs`: neither is a mapping or a list as Kubernetes reads one.
        raise UserError(
            "sets (!!set) and ordered pairs (!!pairs) are not supported; write a mapping or a list",
            source.nearest(path),
        )
    if isinstance(node, str):
        _check_characters(node, path, source)
    return _scalar(node)


# Half of a UTF-16 surrogate pair, which the full parser reads from a `\ud800` escape.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_characters(text: str, path: Path_, source: SourceMap, key: bool = False) -> None:
    """Refuse a string holding a lone surrogate, which is no character: libyaml and Go's YAML
    (yaml.v3 scannerc.go, "found invalid Unicode character escape code") refuse the escape that
    writes one, and UTF-8 cannot encode it (a file written with it, or a pattern matched against
    it, would fail)."""
    if text.isascii() or not _SURROGATE.search(text):
        return
    where = (source.keys.get(path) if key else None) or source.nearest(path)
    raise UserError(
        "invalid YAML: an escape (\\uD800 to \\uDFFF) writes half of a UTF-16 surrogate pair, "
        "which is not a character",
        where,
        hint="write the character itself, or its \\U escape (\\U0001F600, not \\uD83D\\uDE00)",
    )


def _scalar(value: Any) -> Any:
    # ruamel's round-trip scalars subclass str/int/float/bool; return the plain builtin types.
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value) if not isinstance(value, (bytes,)) else value
