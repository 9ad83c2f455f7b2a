"""YAML read the way Kubernetes reads it, fast.

kubectl, the API server and kubeconform read manifests with sigs.k8s.io/yaml, which parses with
go-yaml v2 (YAML 1.1) and converts the result to JSON. So, unlike a YAML 1.2 reader:
`y`, `Y`, `yes`, `no`, `n`, `on`, `off` (in their three spellings) are booleans, `0755` is octal,
`1_000` is an int, `0b101` and `0o17` are ints, `1e3` is a float, and `08` is the float 8. Dates
stay strings, sexagesimal `1:30` stays a string (go-yaml v2 does not read base 60), mapping keys
that resolve to booleans or numbers become their JSON spelling ("true", "1"), and `.nan` or
`.inf` have no JSON form. (go-yaml v2.4.0 resolve.go: resolveMap and resolve(); decode.go keeps
timestamps as strings in an interface{}; sigs.k8s.io/yaml yaml.go convertToJSONableObject.)

libyaml parses (PyYAML's C parser); this module builds the plain data from libyaml's parse
events, one at a time (no node tree is kept, and nothing recurses), and works out a field's line
and column only when asked, by parsing that one document again.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml as libyaml  # type: ignore[import-untyped]
from yaml.events import (  # type: ignore[import-untyped]
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, ScalarNode, SequenceNode  # type: ignore[import-untyped]

# Aliases may be reused, but a document that expands to more values than this is an alias bomb.
MAX_EXPANDED_NODES = 100_000
# Mappings and sequences inside each other. Real manifests nest far less (the Node Feature
# Discovery CRDs, among the deepest, 24 levels); the schema engine (jsonschema-rs) gives up
# past about 250 levels, in an instance or a schema, so a manifest deeper than this is refused
# with its position rather than failing there.
MAX_NESTING = 200

_PLAIN = "gpustack:plain"  # an untagged plain scalar: resolved as go-yaml v2 resolves it
_TAG = "tag:yaml.org,2002:"
_MERGE = "<<"

_RESOLVED: dict[str, Any] = {}
for _words, _value in (
    (("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    (("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    (("", "~", "null", "Null", "NULL"), None),
    ((".nan", ".NaN", ".NAN"), math.nan),
    ((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    (("-.inf", "-.Inf", "-.INF"), -math.inf),
):
    for _word in _words:
        _RESOLVED[_word] = _value
_NUMERIC_START = frozenset("+-0123456789")
# Go's strconv.ParseInt(s, 0, 64): sign, then 0x, 0b, 0o or a leading 0 (octal), else decimal.
_GO_INT = re.compile(
    r"([-+]?)(?:0[xX]([0-9a-fA-F]+)|0[bB]([01]+)|0[oO]([0-7]+)|(0[0-7]*)|([1-9][0-9]*))\Z"
)
_YAML_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_DOT_FLOAT = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?\Z")
_INT64 = 2**63
_UINT64 = 2**64


def resolve_plain(text: str) -> Any:
    """A plain (unquoted, untagged) scalar as go-yaml v2 reads it into an interface{}."""
    if text in _RESOLVED:
        return _RESOLVED[text]
    first = text[0]
    if first == ".":
        return float(text) if _DOT_FLOAT.match(text) else text
    if first not in _NUMERIC_START:
        return text
    plain = text.replace("_", "")
    number = _go_int(plain)
    if number is not None:
        return number
    if _YAML_FLOAT.match(plain):
        value = float(plain)
        if not math.isinf(value):  # Go's ParseFloat fails (ErrRange) past float64
            return value
    if plain.startswith(("0b", "-0b")):
        digits = plain.removeprefix("-").removeprefix("0b")
        if digits and set(digits) <= {"0", "1"} and int(digits, 2) < _INT64:
            return -int(digits, 2) if plain.startswith("-") else int(digits, 2)
    return text


def _go_int(plain: str) -> int | None:
    match = _GO_INT.match(plain)
    if match is None:
        return None
    sign, hexadecimal, binary, octal, zero_octal, decimal = match.groups()
    digits = next(part for part in (hexadecimal, binary, octal, zero_octal, decimal) if part)
    if len(digits.lstrip("0")) > 64:  # past 64 bits in any base: ParseInt and ParseUint fail
        return None
    if hexadecimal:
        value = int(hexadecimal, 16)
    elif binary:
        value = int(binary, 2)
    elif octal:
        value = int(octal, 8)
    elif zero_octal:
        value = int(zero_octal, 8)
    else:
        value = int(decimal)
    if sign == "-":
        value = -value
    if -_INT64 <= value < _INT64 or (not sign and 0 <= value < _UINT64):  # ParseInt, ParseUint
        return value
    return None


class _Composer(getattr(libyaml, "CSafeLoader", libyaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's parser and composer; scalars are resolved by this module, not by PyYAML."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is ScalarNode:
            return _PLAIN if implicit[0] else _TAG + "str"
        return _TAG + ("seq" if kind is SequenceNode else "map")


class Problem(Exception):
    """Something in a document that Kubernetes would refuse, at a 0-based line and column."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


@dataclass
class Document:
    data: Any
    line: int  # 0-based line and column where the document's content starts
    column: int
    duplicates: list[Problem] = field(default_factory=list)  # duplicate keys (last one wins)
    # 0-based (line, column) of each item of the root mapping's `items` sequence (a List's)
    items: list[tuple[int, int]] = field(default_factory=list)


def compose(text: str) -> Iterator[Any]:
    """libyaml's node trees, one per document; raises libyaml.YAMLError."""
    loader = _Composer(text)
    try:
        while loader.check_node():
            yield loader.get_node()
    finally:
        loader.dispose()


def load(text: str) -> Iterator[Document]:
    """Plain data for each document of `text`, as sigs.k8s.io/yaml would hand it to JSON.

    Built from libyaml's parse events, one at a time: memory follows the data built, never a
    node tree of the whole document (a million-key mapping costs its dict, not gigabytes).
    Raises Problem for what Kubernetes cannot read (bad YAML, alias bombs, nesting past
    MAX_NESTING, keys or values with no JSON form); duplicate keys are not raised but listed on
    the Document."""
    parser = _Composer(text)
    try:
        parser.get_event()  # StreamStartEvent
        while type(parser.peek_event()) is not StreamEndEvent:
            parser.get_event()  # DocumentStartEvent
            yield _Events(parser).document()
            parser.get_event()  # DocumentEndEvent
    except libyaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = error.problem or error.context or "invalid YAML"
        raise Problem(
            f"invalid YAML: {problem}", mark.line if mark else 0, mark.column if mark else 0
        ) from None
    except libyaml.YAMLError as error:
        raise Problem(f"invalid YAML: {error}", 0, 0) from None
    finally:
        parser.dispose()


class _Open:
    """A mapping or sequence being built: its value so far, and (a mapping) the pending key."""

    __slots__ = ("anchor", "is_map", "key", "mark", "places", "size", "value", "written")

    def __init__(self, value: Any, anchor: str | None, mark: Any) -> None:
        self.value, self.anchor, self.mark = value, anchor, mark
        self.is_map = type(value) is dict
        self.key: Any = _NO_KEY
        self.size = 1
        # The keys written in the mapping, once a merge (`<<`) has put others in its value;
        # until then they are the value's keys.
        self.written: set[str] | None = None
        self.places: list[tuple[int, int]] | None = None  # where each item starts (`items`)


_NO_KEY = object()
_MERGING = object()
_OPEN = object()
# A plain scalar that starts with none of these, and is no word of _RESOLVED, is a string.
_MAYBE_NOT_TEXT = _NUMERIC_START | {"."}


class _Events:
    """One document's data from parse events, without recursion (an explicit stack)."""

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.duplicates: list[Problem] = []
        # anchor -> (value, expanded size, scalar (tag, text) for an alias used as a key)
        self.anchors: dict[str, Any] = {}
        self.expanded = 0  # values added by aliases, counted against MAX_EXPANDED_NODES
        self.scalars = _Scalars()

    def document(self) -> Document:
        first = self.parser.peek_event()
        get_event, scalar_of, add = self.parser.get_event, self.scalars.scalar_of, self.add
        stack: list[_Open] = []
        items: list[tuple[int, int]] = []
        str_tag = _TAG + "str"
        resolved, maybe_not_text = _RESOLVED, _MAYBE_NOT_TEXT
        while True:
            event = get_event()
            kind = type(event)
            tag = None
            if kind is ScalarEvent:
                tag, text = event.tag, event.value
                if tag is None or tag == "!":
                    tag = _PLAIN if event.implicit[0] else str_tag
                # Strings, the most common scalars, made short; scalar_of reads the others.
                if tag == str_tag or (
                    tag == _PLAIN and text not in resolved and text[0] not in maybe_not_text
                ):
                    value = text
                else:
                    value = scalar_of(tag, text, event.start_mark)
                size = 1
                if event.anchor is not None:
                    self.anchors[event.anchor] = (value, 1, (tag, text))
                if stack:
                    parent = stack[-1]
                    if parent.is_map:
                        key = parent.key
                        if key is _NO_KEY:
                            # A key: a string one (no merge `<<`) made short, add() the others.
                            if type(value) is str and (tag != _PLAIN or text != _MERGE):
                                written = parent.written
                                if value in (parent.value if written is None else written):
                                    self.duplicates.append(_at(f"duplicate key {value!r}", event))
                                if written is not None:
                                    written.add(value)
                                parent.key = value
                                parent.size += 1
                                continue
                        elif key is not _MERGING:
                            parent.value[key] = value
                            parent.key = _NO_KEY
                            parent.size += 1
                            continue
                    elif parent.places is None:
                        parent.value.append(value)
                        parent.size += 1
                        continue
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if len(stack) >= MAX_NESTING:
                    raise _at(f"YAML nests more than {MAX_NESTING} levels deep", event)
                opened = _Open({} if kind is MappingStartEvent else [], event.anchor, event)
                if len(stack) == 1 and stack[0].key == "items" and kind is SequenceStartEvent:
                    items.clear()  # `items` written twice: the last one is the data
                    opened.places = items  # a List's items: their places, found here at once
                if event.anchor is not None:
                    self.anchors[event.anchor] = _OPEN  # a later anchor of a name replaces it
                stack.append(opened)
                continue
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                done = stack.pop()
                value, size = done.value, done.size
                if done.anchor is not None:
                    self.anchors[done.anchor] = (value, size, None)
                event = done.mark  # a collection's problems are placed where it starts
            else:  # AliasEvent
                found = self.anchors.get(event.anchor)
                if found is None:
                    raise _at(f"found undefined alias {event.anchor!r}", event)
                if found is _OPEN:
                    raise _at("an alias refers to a value that contains it", event)
                value, size, raw = found
                if raw is not None:
                    tag, text = raw
                self.expanded += size
                if self.expanded > MAX_EXPANDED_NODES:
                    raise _at(
                        f"aliases expand this value to more than {MAX_EXPANDED_NODES} values "
                        "(an alias bomb)",
                        event,
                    )
            if not stack:
                mark = first.start_mark
                return Document(value, mark.line, mark.column, self.duplicates, items)
            add(stack[-1], value, size, tag, text if tag is not None else "", event)

    def add(
        self, parent: _Open, value: Any, size: int, tag: str | None, text: str, event: Any
    ) -> None:
        """Put a value (a scalar's with its tag and text) into the collection being built."""
        parent.size += size
        if not parent.is_map:
            parent.value.append(value)
            if parent.places is not None:
                parent.places.append((event.start_mark.line, event.start_mark.column))
            return
        if parent.key is _NO_KEY:  # this is a key
            if tag is None:
                raise _at("a mapping key must be a scalar", event)
            if tag == _PLAIN and text == _MERGE:
                parent.key = _MERGING
                return
            key = self.scalars.key_of(tag, text, event.start_mark)
            if key in (parent.value if parent.written is None else parent.written):
                self.duplicates.append(_at(f"duplicate key {key!r}", event))
            if parent.written is not None:
                parent.written.add(key)
            parent.key = key
            return
        if parent.key is _MERGING:
            # `<<: *anchor` or `<<: [*a, *b]`; go-yaml v2 sets the merged keys where `<<`
            # stands, the first of a list last (so it wins).
            for source in reversed(value) if type(value) is list else [value]:
                if not isinstance(source, dict):
                    raise _at("map merge requires map or sequence of maps as the value", event)
                if parent.written is None:
                    parent.written = set(parent.value)  # the keys written before the merge
                parent.value.update(source)
        else:
            parent.value[parent.key] = value
        parent.key = _NO_KEY


def _at(message: str, event: Any) -> Problem:
    return Problem(message, event.start_mark.line, event.start_mark.column)


class _Scalars:
    """Scalars and mapping keys as go-yaml v2 reads them (a node's, or an event's tag and text)."""

    def scalar(self, node: Any) -> Any:
        return self.scalar_of(node.tag, node.value, node.start_mark)

    def scalar_of(self, tag: str, text: str, mark: Any) -> Any:
        """A scalar's value from its resolved tag and its text; `mark` places a problem."""
        if tag == _PLAIN:
            value = resolve_plain(text)
        elif tag == _TAG + "str":
            return text
        elif tag == _TAG + "binary":
            try:
                return base64.b64decode(text, validate=False).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                raise _marked("!!binary value contains invalid base64 data", mark) from None
        elif tag in (_TAG + "int", _TAG + "float", _TAG + "bool", _TAG + "null"):
            value = resolve_plain(text)
            wanted = tag.removeprefix(_TAG)
            if wanted == "float" and type(value) is int:
                value = float(value)
            if _tag_of(value) != wanted:
                raise _marked(f"cannot decode !!{_tag_of(value)} `{text}` as a !!{wanted}", mark)
        else:
            return text  # go-yaml keeps an unknown tag's scalar as its text
        if type(value) is float and (math.isnan(value) or math.isinf(value)):
            raise _marked(f"`{text}` ({value}) has no JSON form", mark)
        return value

    def key(self, node: Any) -> str:
        if type(node) is not ScalarNode:
            raise _problem("a mapping key must be a scalar", node)
        return self.key_of(node.tag, node.value, node.start_mark)

    def key_of(self, tag: str, text: str, mark: Any) -> str:
        """A mapping key as sigs.k8s.io/yaml spells it in JSON."""
        value = self.scalar_of(tag, text, mark)
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            return _go_float_key(value)
        raise _marked(f"unsupported map key {text!r} (null)", mark)


def _tag_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "str"


def _go_float_key(value: float) -> str:
    """strconv.FormatFloat(v, 'g', -1, 32), as sigs.k8s.io/yaml spells a float key: the
    shortest digits that read back as the same float32, in e-notation below 1e-4 or from 1e6."""

    def as_float32(number: float) -> float:
        return float(struct.unpack("f", struct.pack("f", number))[0])

    single = as_float32(value)
    for digits in range(1, 10):
        scientific = f"{single:.{digits - 1}e}"
        if as_float32(float(scientific)) == single:
            break
    mantissa, _, exponent_text = scientific.partition("e")
    exponent = int(exponent_text)
    if exponent < -4 or exponent >= 6:
        mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
        return f"{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return f"{float(scientific):.{max(0, digits - 1 - exponent)}f}"


def _problem(message: str, node: Any) -> Problem:
    return _marked(message, node.start_mark)


def _marked(message: str, mark: Any) -> Problem:
    return Problem(message, mark.line, mark.column)


_last: list[tuple[str, list[Any] | None]] = []


def _composed(text: str) -> list[Any] | None:
    """The node trees of `text`'s documents (None when it does not parse), kept for the next
    call: the findings of one document (or of a List's items) ask for many positions in the
    same text, which is parsed once for all of them, not once for each."""
    if _last and _last[0][0] == text:
        return _last[0][1]
    try:
        nodes: list[Any] | None = list(compose(text))
    except (libyaml.YAMLError, RecursionError):
        nodes = None
    _last[:] = [(text, nodes)]
    _indexes.clear()  # only the last document's nodes are kept
    return nodes


def position(text: str, index: int, path: tuple[str | int, ...]) -> tuple[int, int, bool]:
    """0-based (line, column) of `path` in document `index` of `text`: of the value, or of the
    closest ancestor that exists; the flag says whether the whole path was found."""
    nodes = _composed(text)
    if nodes is None:
        return 0, 0, False
    if index >= len(nodes):
        return 0, 0, False
    node = nodes[index]
    found = True
    for part in path:
        child = _child(node, part)
        if child is None:
            found = False
            break
        node = child
    return node.start_mark.line, node.start_mark.column, found


def plain_scalar(text: str, index: int, path: tuple[str | int, ...]) -> str | None:
    """The text of the unquoted, untagged scalar at `path`, if that is what is written there."""
    nodes = _composed(text)
    if nodes is None:
        return None
    node: Any = nodes[index] if index < len(nodes) else None
    for part in path:
        node = _child(node, part) if node is not None else None
    if type(node) is ScalarNode and node.tag == _PLAIN:
        return str(node.value)
    return None


def key_position(
    text: str, index: int, path: tuple[str | int, ...], key: str
) -> tuple[int, int] | None:
    """0-based (line, column) of the key `key` in the mapping at `path`, if it is written there."""
    nodes = _composed(text)
    if nodes is None:
        return None
    if index >= len(nodes):
        return None
    node = nodes[index]
    for part in path:
        node = _child(node, part)
        if node is None:
            return None
    if type(node) is not MappingNode:
        return None
    for key_node, _ in node.value:
        if type(key_node) is ScalarNode and _key_text(key_node) == key:
            return key_node.start_mark.line, key_node.start_mark.column
    return None


def _key_text(node: Any) -> str | None:
    try:
        return _Scalars().key(node)
    except Problem:
        return None


def _child(node: Any, part: str | int) -> Any:
    if type(node) is SequenceNode and isinstance(part, int):
        return node.value[part] if 0 <= part < len(node.value) else None
    if type(node) is not MappingNode:
        return None
    keys, merged = _index(node)
    if part in keys:
        return keys[part]  # a key written in the mapping wins over merged ones
    for source in merged:
        found = _child(source, part)
        if found is not None:
            return found
    return None


_indexes: dict[int, tuple[Any, dict[str | int, Any], list[Any]]] = {}


def _index(node: Any) -> tuple[dict[str | int, Any], list[Any]]:
    """A mapping node's keys (the last one wins, as in the data) and merge sources, worked out
    once per node: many findings in one large mapping look up their keys in it."""
    known = _indexes.get(id(node))
    if known is not None and known[0] is node:
        return known[1], known[2]
    keys: dict[str | int, Any] = {}
    merged: list[Any] = []
    for key_node, value_node in node.value:
        if type(key_node) is ScalarNode and key_node.tag == _PLAIN and key_node.value == _MERGE:
            merged += value_node.value if type(value_node) is SequenceNode else [value_node]
        elif type(key_node) is ScalarNode:
            text = _key_text(key_node)
            if text is not None:
                keys[text] = value_node
    if len(_indexes) > 4096:
        _indexes.clear()
    _indexes[id(node)] = (node, keys, merged)
    return keys, merged
