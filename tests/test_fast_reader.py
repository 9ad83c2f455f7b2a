"""The fast YAML reader (yamlio's, libyaml's events read into data) agrees with the full parser
(ruamel) on every text it reads, and leaves to the full parser what it is not sure of."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack.errors import UserError
from gpustack.read import yamlio

# Scalars both parsers read alike, and (fewer) where YAML 1.1 and 1.2 or the two parsers part
# ways; keys that collide once read (1 and true, null and ~); anchors, aliases, tags, a merge key.
SURE = ["x", "a b", "-", "true", "False", "~", "null", "''", "0", "-0", "12", "-3", "1.5", "-0.0"]
SURE += ["", "'on'", '"1"', "'true'", '"multi\\nline"']
UNSURE = ["=", "<<", "12:30", "2024-01-01", "0x1F", "0755", "1_0", "1e3", ".5", "yes", "on"]
UNSURE += ["!!str 1", "&a x", "*a", "1.0e+3", "'x\u2028y'", '"a\x85b"']
SCALARS = SURE * 8 + UNSURE
KEYS = [*"abcdefghij" * 4, "1", "true", "'1'", "x y", "1.0", "~", "<<", "[k]"]


def _flow(depth: int, scalars: list[str], keys: list[str], unique: bool) -> Any:
    leaf = st.sampled_from(scalars)
    if depth == 0:
        return leaf
    child = _flow(depth - 1, scalars, keys, unique)
    return st.one_of(
        leaf,
        st.lists(child, max_size=3).map(lambda items: f"[{', '.join(items)}]"),
        _entries(keys, child, unique, max_size=3).map(
            lambda pairs: "{" + ", ".join(f"{key}: {value}" for key, value in pairs) + "}"
        ),
    )


def _entries(keys: list[str], values: Any, unique: bool, **size: int) -> Any:
    """Lists of (key, value), the keys different where `unique`."""
    pairs = st.tuples(st.sampled_from(keys), values)
    return st.lists(pairs, unique_by=(lambda pair: pair[0]) if unique else None, **size)


def _block(entries: list[tuple[str, Any]], indent: str = "") -> str:
    lines = []
    for key, value in entries:
        if isinstance(value, list):  # a nested block mapping, or a block sequence of values
            if value and isinstance(value[0], tuple):
                lines.append(f"{indent}{key}:\n{_block(value, indent + '  ')}")
            else:
                lines.append(f"{indent}{key}:\n" + "".join(f"{indent}- {v}\n" for v in value))
        else:
            lines.append(f"{indent}{key}: {value}\n")
    return "".join(lines)


def _streams(scalars: list[str], keys: list[str], unique: bool = False) -> Any:
    """YAML streams of one or two block documents: mappings of flow values, nested block
    mappings and block sequences, built of `scalars` and `keys`."""
    flow = _flow(1, scalars, keys, unique)
    document = _entries(
        keys,
        st.one_of(
            flow,
            _entries(keys, flow, unique, min_size=1, max_size=3),
            st.lists(flow, min_size=1, max_size=3),
        ),
        unique,
        max_size=5,
    ).map(_block)
    return st.lists(document, min_size=1, max_size=2).map("---\n".join)


@settings(max_examples=examples(100))
@given(_streams(SCALARS, KEYS))
def test_what_the_fast_reader_reads_the_full_parser_reads_alike(text: str) -> None:
    fast = yamlio._fast_documents(text)
    if fast is None:
        return  # left to the full parser, which reads it or explains what is wrong
    full = [document.data for document in yamlio._parse_all(text, "f")]
    assert repr(fast) == repr(full), text  # the same values, types and key order


# Documents the fast path reads (scalars it is sure of, keys that never collide), now and then
# with an empty value, which the full parser places.
PLACED = [scalar for scalar in SURE if scalar] * 6 + [""]
PLACED_KEYS = [*"abcdefghij", "1", "'2'", "x y"]


@settings(max_examples=examples(100))
@given(_streams(PLACED, PLACED_KEYS, unique=True))
def test_the_fast_reader_places_each_value_and_key_where_the_full_parser_does(text: str) -> None:
    """Error messages name the same line and column whichever reader read the file: libyaml's
    events where they can tell (most of these documents), the full parser where not."""
    fast = yamlio._fast_documents(text)
    if fast is None:
        return
    full = list(yamlio._parse_all(text, "f"))
    for index, document in enumerate(full):
        try:
            placed: yamlio.SourceMap = yamlio._fast_positions(text, "f", index)
        except yamlio._Unsure:
            placed = yamlio.LazySourceMap("f", text, index)
        assert (placed.values, placed.keys) == (document.source.values, document.source.keys)


def test_positions_agree_across_the_forms_a_config_is_written_in(monkeypatch) -> None:
    """Forms the generated documents above leave out: comments, block scalars, indented and
    indentless sequences, quoted and multi-line scalars, flow collections over several lines,
    explicit document markers. An empty value is placed by the full parser."""
    text = (
        "%YAML 1.2\n---\n# a comment\nkind: GPUStack  # trailing\nmetadata:\n  name: a\n"
        "  labels: {a: b,\n    c: [1, 2,\n      3]}\nscript: |\n  echo a\n  echo b\n"
        "folded: >-\n  one\n  two\nlist:\n- a\n-   b: 1\n    c: 2\n- - nested\n"
        "indented:\n    - 'single'\n    - \"double\\n\"\nplain: multi\n  line\n...\n"
        "---\n- 1\n-\n  k: v\n---\nkind: GPUStack\nempty:\nafter: 1\n"
    )
    assert yamlio._fast_documents(text) is not None
    full = list(yamlio._parse_all(text, "f"))
    assert len(full) == 3
    placed = [yamlio.LazySourceMap("f", text, index) for index in range(3)]
    with monkeypatch.context() as patch:
        patch.setattr(yamlio, "_parse_all", None)  # the first two from libyaml's events alone
        for document, where in zip(full[:2], placed[:2], strict=True):
            assert (where.values, where.keys) == (document.source.values, document.source.keys)
    assert (placed[2].values, placed[2].keys) == (full[2].source.values, full[2].source.keys)
    assert placed[2].value(("empty",)) == yamlio.Location("f", 34, 1)  # the key after it


def test_line_breaks_only_libyaml_counts_leave_the_text_to_the_full_parser() -> None:
    """NEL, LS and PS end a line for libyaml (YAML 1.1) and not for the full parser: in a comment,
    a quoted scalar or a flow collection they would shift every position after them, and in a
    plain scalar change what the text says. The full parser reads such a text, data and places."""
    for text in ["# \u2028\na: 1\n", "a: 'x\x85y'\nb: 2\n", "a: [1,\u2029 2]\n"]:
        assert yamlio._fast_documents(text) is None
        document = yamlio.load_text(text, "f")
        (full,) = yamlio._parse_all(text, "f")
        assert (document.data, document.source.values) == (full.data, full.source.values)
    # Two keys to libyaml, a mistake to the full parser: a mistake, whichever reads it.
    with pytest.raises(UserError, match="f:1:7: invalid YAML"):
        yamlio.load_text("a: 1\x85b: 2\n", "f")


def test_the_fast_reader_reads_plain_data_and_leaves_the_rest() -> None:
    """It takes what it can be sure of (so most files skip the full parser) and nothing else."""
    sure = "a: 1\nb: [true, ~, -0.5, 'on', x y]\nc:\n  d: {e: null}\n---\n- 12\n- ''\n"
    assert yamlio._fast_documents(sure) == [
        {"a": 1, "b": [True, None, -0.5, "on", "x y"], "c": {"d": {"e": None}}},
        [12, ""],
    ]
    assert yamlio._fast_documents("") == []
    for unsure in [
        "a: &x 1\nb: *x\n",  # anchors and aliases: alias bombs are the full parser's to refuse
        "a: !!str 1\n",  # tags
        "a: 1\na: 2\n",  # duplicate keys
        "1: a\ntrue: b\n",  # one key in Python
        "1.0: a\n",  # a float key: the full parser makes it the string "1.0"
        "~: a\n",
        "<<: {a: 1}\n",  # a merge key
        "a: yes\n",  # YAML 1.1 and 1.2 read differently
        "a: 0755\n",
        "? [a]\n: b\n",  # a key that is a sequence
        "a: [1\n",  # not YAML
    ]:
        assert yamlio._fast_documents(unsure) is None, unsure
