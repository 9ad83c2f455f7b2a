"""Writing manifests: plain data to block-style YAML, the same bytes every time.

A small emitter of our own instead of a general YAML library: manifests hold only mappings, lists,
strings, numbers, booleans and null, and for those we want one spelling of each value (keys in the
order the components built them, two-space indents, LF, no trailing spaces, multi-line strings as
literal blocks) and speed, since fleets write tens of thousands of objects.

Strings are written plain only when no YAML 1.1 or 1.2 parser could read them as anything but that
string; everything else is double-quoted with JSON escapes, which YAML reads back unchanged.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

# Plain scalars we trust: start with a letter, digit, '/', '.' or '_' and use only "safe" characters.
_PLAIN = re.compile(r"^[A-Za-z0-9_./][A-Za-z0-9_./@%+=-]*(?:[ :][A-Za-z0-9_./@%+=()-]+)*$")
# Anything a YAML 1.1 or 1.2 resolver turns into a bool, null, number, date or merge key.
RESOLVES_TO_NON_STRING = re.compile(
    r"""^(?:
        y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF
      | null|Null|NULL|~|<<|=
      | [-+]?(?:\d[\d_]*)?\.?[\d_]*(?:[eE][-+]?\d+)?
      | [-+]?0[box][0-9a-fA-F_]+
      | [-+]?\d[\d_]*(?::[0-5]?\d)+(?:\.[\d_]*)?
      | [-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)
      | \d\d\d\d-\d\d?-\d\d?(?:[Tt ].*)?
    )$""",
    re.VERBOSE,
)


# Characters outside YAML's printable set, and NEL / LINE SEPARATOR / PARAGRAPH SEPARATOR, which
# YAML 1.1 parsers read as line breaks: escaped in quoted strings (JSON escapes only the C0
# controls), never written into a literal block.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]"
)


def dump(data: Any) -> str:
    """One YAML document, ending in a newline."""
    if not (isinstance(data, (dict, list)) and data):
        return (_inline(data, 0) if isinstance(data, (dict, list)) else scalar(data)) + "\n"
    lines: list[str] = []
    _node(data, 0, lines, None)
    return "\n".join(lines) + "\n"


def dump_all(documents: list[Any]) -> str:
    """A multi-document stream, each document introduced by '---'."""
    return "".join("---\n" + dump(document) for document in documents)


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    raise TypeError(f"cannot write {type(value).__name__} to YAML")


@functools.lru_cache(maxsize=16384)
def _string(value: str) -> str:
    # Cached: manifests repeat the same keys and values (names, labels, images) many times.
    if value and _PLAIN.fullmatch(value) and not RESOLVES_TO_NON_STRING.fullmatch(value):
        return value
    return _UNSAFE.sub(_escape, json.dumps(value, ensure_ascii=False))


def _key(key: Any) -> str:
    return _string(key if isinstance(key, str) else str(key))


def _node(value: Any, indent: int, lines: list[str], prefix: str | None) -> None:
    """Append `value` at `indent`. `prefix` is the text that opens its first line ("key:" or "-")."""
    pad = " " * indent
    if isinstance(value, dict) and value:
        first = True
        for key, child in value.items():
            head = f"{_key(key)}:"
            if first and prefix is not None:
                # "- key: value" (list item) keeps the first key on the dash's line.
                line_prefix = f"{prefix} {head}"
                child_indent = indent + len(prefix) + 1
            else:
                line_prefix = f"{pad}{head}" if not (first and prefix) else head
                child_indent = indent
            first = False
            _entry(child, child_indent, lines, line_prefix)
        return
    if isinstance(value, list) and value:
        for item in value:
            _item(item, indent, lines, prefix)
            prefix = None
        return
    raise AssertionError("empty or scalar top-level nodes are written by _entry")


def _entry(value: Any, indent: int, lines: list[str], line_prefix: str) -> None:
    """A mapping entry: `line_prefix` is "  key:"; the value follows inline or on new lines."""
    if isinstance(value, dict) and value:
        lines.append(line_prefix)
        _node(value, indent + 2, lines, None)
    elif isinstance(value, list) and value:
        lines.append(line_prefix)
        # Lists inside mappings are indented by two, the style kubectl and Helm charts use.
        for item in value:
            _item(item, indent + 2, lines, None)
    elif isinstance(value, str) and "\n" not in value:  # the most common case, made short
        lines.append(f"{line_prefix} {_string(value)}")
    else:
        lines.append(f"{line_prefix} {_inline(value, indent + 2)}")
        if isinstance(value, str) and "\n" in value and _literal_ok(value):
            lines.extend(_literal_body(value, indent + 2))


def _item(value: Any, indent: int, lines: list[str], prefix: str | None) -> None:
    pad = " " * indent
    dash = f"{prefix} -" if prefix else f"{pad}-"
    if isinstance(value, dict) and value:
        _dict_item(value, indent, lines, dash)
    elif isinstance(value, list) and value:
        lines.append(dash)
        for child in value:
            _item(child, indent + 2, lines, None)
    elif isinstance(value, str) and "\n" not in value:
        lines.append(f"{dash} {_string(value)}")
    else:
        lines.append(f"{dash} {_inline(value, indent + 2)}")
        if isinstance(value, str) and "\n" in value and _literal_ok(value):
            lines.extend(_literal_body(value, indent + 2))


def _dict_item(value: dict[Any, Any], indent: int, lines: list[str], dash: str) -> None:
    child_pad = " " * (indent + 2)
    first = True
    for key, child in value.items():
        head = f"{dash} {_key(key)}:" if first else f"{child_pad}{_key(key)}:"
        first = False
        _entry(child, indent + 2, lines, head)


def _inline(value: Any, indent: int) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    if isinstance(value, str) and "\n" in value and _literal_ok(value):
        return "|" + (
            ""
            if value.endswith("\n") and not value.endswith("\n\n")
            else "-"
            if not value.endswith("\n")
            else "+"
        )
    return scalar(value)


def _float(value: float) -> str:
    """A float both YAML 1.1 (a '.' and a signed exponent required) and 1.2 read back exactly."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    if "." not in mantissa:
        mantissa += ".0"
    if exponent[0] not in "+-":
        exponent = "+" + exponent
    return f"{mantissa}e{exponent}"


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _literal_ok(value: str) -> bool:
    # Literal blocks cannot carry trailing spaces on a line, tabs, or a leading space/newline
    # without indentation indicators, nor characters that must be escaped; such rare strings are
    # double-quoted instead.
    if value.startswith((" ", "\n")) or "\t" in value or "\r" in value or _UNSAFE.search(value):
        return False
    return not any(line != line.rstrip(" ") for line in value.split("\n"))


def _literal_body(value: str, indent: int) -> list[str]:
    pad = " " * indent
    body = value[:-1] if value.endswith("\n") else value
    if value.endswith("\n\n"):
        body = value.rstrip("\n")
        extra = len(value) - len(body) - 1
        return [f"{pad}{line}" if line else "" for line in body.split("\n")] + [""] * extra
    return [f"{pad}{line}" if line else "" for line in body.split("\n")]
