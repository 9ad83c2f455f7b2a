"""A config file a person edits, as gpustack writes it: one writer for `gpustack init`'s
starter, `gpustack import`'s config and `gpustack driver-toolkit-builds --config`.

A new file is plain data with a comment per field (`Field`): what a field is for, or which
input it came from. A field can be written, or shown as a commented-out line with the value it
takes when left out (the starter's defaults), so that uncommenting it is the whole edit. Comments
line up: in one column for the whole file (a table of settings), or per mapping, two spaces after
its longest line. Collections are written in block style, or in flow style on their key's line
(`{vmSize: Standard_NC4as_T4_v3}`), a list of mappings one flow mapping a line, as kubectl lists
taints. A scalar is plain where YAML reads it back as the same value, else double-quoted.

A user's file is edited with ruamel.yaml's round-trip loader (`edited`), which keeps its comments,
quoting and key order; the fields set are written as a new file's are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from io import StringIO
from typing import Any

import yaml as pyyaml  # type: ignore[import-untyped]
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

# Wide enough that no value is folded onto a second line.
WIDTH = 4096
# Characters that end a plain scalar inside a flow collection (where a leading `?` starts a key).
_FLOW_INDICATORS = set(",[]{}")


@dataclass(frozen=True)
class Field:
    """One setting of the file: its dotted path, its value and its comment. A field not
    `written` is shown commented out (`# key: value`), with the value it takes when left out."""

    path: str
    value: Any
    comment: str = ""
    written: bool = True


@dataclass
class _Node:
    """A mapping of the file being written: its sections and fields in the order given."""

    children: dict[str, _Node | Field] = field(default_factory=dict)


def config_text(
    fields: Iterable[Field], header: str = "", column: int | None = None, flow: bool = False
) -> str:
    """The file: `header` (comment lines, each ending in a line break), then the fields, each
    section where its first field is. Comments start at `column` (1-based), or with None two
    spaces after the longest commented line of their mapping; collections in block style, or
    with `flow` on their key's line."""
    root = _Node()
    for each in fields:
        node = root
        *sections, name = each.path.split(".")
        for section in sections:
            child = node.children.setdefault(section, _Node())
            if not isinstance(child, _Node):
                raise ValueError(f"{each.path}: {section} is a field and a section")
            node = child
        node.children[name] = each
    lines: list[tuple[str, str, int]] = []  # text, comment, the mapping it is in
    _emit(root, 0, None, flow, lines)
    if column is not None:
        return header + "".join(_line(text, comment, column - 2) for text, comment, _ in lines)
    widths: dict[int, int] = {}
    for text, comment, mapping in lines:
        if comment:
            widths[mapping] = max(widths.get(mapping, 0), len(text) + 1)
    return header + "".join(
        _line(text, comment, widths.get(mapping, 0)) for text, comment, mapping in lines
    )


def edited(text: str, fields: Iterable[Field], remove: Sequence[str] = ()) -> str:
    """`text`, a user's YAML mapping, with the dotted paths of `remove` taken out and `fields`
    set (a missing section added at the end of its mapping), its comments, quoting and order
    kept. The caller has checked that every section on the way is a mapping."""
    yaml = _round_trip()
    root = yaml.load(text)
    for path in remove:
        *sections, name = path.split(".")
        node = root
        for section in sections:
            node = node.get(section) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(name, None)
    for each in fields:
        *sections, name = each.path.split(".")
        node = root
        for section in sections:
            if node.get(section) is None:
                node[section] = CommentedMap()
            node = node[section]
        node[name] = _commented(each.value)
        if each.comment:
            node.yaml_add_eol_comment(each.comment, name)
    out = StringIO()
    yaml.dump(root, out)
    return out.getvalue()


def _round_trip() -> YAML:
    yaml = YAML(typ="rt", pure=True)
    yaml.preserve_quotes = True
    yaml.width = WIDTH
    yaml.indent(mapping=2, sequence=2, offset=0)
    return yaml


def _commented(value: Any) -> Any:
    """Plain data as ruamel.yaml's round-trip types, which the edited file is made of."""
    if isinstance(value, dict):
        mapping = CommentedMap()
        for key, item in value.items():
            mapping[key] = _commented(item)
        return mapping
    if isinstance(value, list):
        return CommentedSeq([_commented(item) for item in value])
    return value


def _emit(
    node: _Node, depth: int, hidden: int | None, flow: bool, lines: list[tuple[str, str, int]]
) -> None:
    """The lines of `node`'s keys at `depth`; `hidden`: the depth of the commented-out section
    they are in (its `# ` marks each line at that depth), None where they are written."""
    for name, child in node.children.items():
        written = _written(child)
        marker = hidden if hidden is not None or written else depth
        key = _scalar(name, flow=False)
        if isinstance(child, _Node):
            lines.append((_indent(depth, marker) + f"{key}:", "", id(node)))
            _emit(child, depth + 1, marker, flow, lines)
            continue
        value = child.value
        nested = _nested(value, depth, flow)
        if nested is None:
            text = f"{key}: {_inline(value)}"
            lines.append((_indent(depth, marker) + text, child.comment, id(node)))
            continue
        lines.append((_indent(depth, marker) + f"{key}:", child.comment, id(node)))
        lines += [(_indent(at, marker) + text, "", 0) for at, text in nested]


def _written(child: _Node | Field) -> bool:
    if isinstance(child, Field):
        return child.written
    return any(_written(each) for each in child.children.values())


def _indent(depth: int, marker: int | None) -> str:
    """A line's indent at `depth`, with the `# ` of a commented-out section at its depth."""
    if marker is None:
        return "  " * depth
    return "  " * marker + "# " + "  " * (depth - marker)


def _nested(value: Any, depth: int, flow: bool) -> list[tuple[int, str]] | None:
    """The lines below a key for a value that does not fit on the key's line (a non-empty
    collection in block style; in flow style a list of mappings, one a line), else None."""
    if not isinstance(value, (dict, list)) or not value:
        return None
    if flow:
        if isinstance(value, list) and all(isinstance(item, dict) for item in value):
            return [(depth, f"- {_flow(item)}") for item in value]
        return None
    # A sequence's items start at its key's indent, as kubectl and ruamel.yaml write them.
    return _block(value, depth + 1 if isinstance(value, dict) else depth)


def _block(value: Any, depth: int) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            name = _scalar(key, flow=False)
            if isinstance(item, (dict, list)) and item:
                lines.append((depth, f"{name}:"))
                lines += _block(item, depth + 1 if isinstance(item, dict) else depth)
            else:
                lines.append((depth, f"{name}: {_inline(item)}"))
        return lines
    for item in value:
        if isinstance(item, (dict, list)) and item:
            first, *rest = _block(item, depth + 1)
            lines.append((depth, f"- {first[1]}"))
            lines += rest
        else:
            lines.append((depth, f"- {_inline(item)}"))
    return lines


def _inline(value: Any) -> str:
    """A value on its key's line: a scalar as in block style, a collection in flow style."""
    return _flow(value) if isinstance(value, (dict, list)) else _scalar(value, flow=False)


def _flow(value: Any) -> str:
    """A value on one line: a scalar, `{key: value, ...}` or `[item, ...]`."""
    if isinstance(value, dict):
        items = (f"{_scalar(key, True)}: {_flow(item)}" for key, item in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(item) for item in value) + "]"
    return _scalar(value, flow=True)


def _scalar(value: Any, flow: bool) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    if _plain(text) and not (flow and (_FLOW_INDICATORS & set(text) or text[0] == "?")):
        return text
    return json.dumps(text)


@cache
def _plain(text: str) -> bool:
    """Whether YAML reads `text` unquoted back as the same string, not a number, a boolean,
    null, nor something that ends or starts a key or a comment: ruamel.yaml's emitter decides,
    as it would for the file, and a YAML 1.1 reader (libyaml's, which gpustack reads configs
    with) must agree (`on`, `yes` and `1:30` are no strings to it)."""
    if text.lower() in _YAML_1_1_WORDS:
        return False
    out = StringIO()
    yaml = YAML(typ="rt", pure=True)
    yaml.width = WIDTH
    yaml.dump(text, out)
    if out.getvalue().split("\n", 1)[0] != text:
        return False
    try:
        return bool(pyyaml.safe_load(text) == text)
    except pyyaml.YAMLError:
        return False


# Words a YAML 1.1 reader takes for booleans: `y` and `n` too, in the specification's list.
_YAML_1_1_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false"}


def _line(text: str, comment: str, column: int) -> str:
    if not comment:
        return text + "\n"
    return f"{text.ljust(column)} # {comment}\n" if column else f"{text} # {comment}\n"
