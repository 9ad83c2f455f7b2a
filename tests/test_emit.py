"""The YAML emitter: whatever it writes, every YAML parser reads back as the same data.

Manifests are read by kubectl and kustomize (YAML 1.2-ish, Go), by Python tools (PyYAML is YAML
1.1: `yes`, `on`, `0644` are not strings there) and by ruamel (YAML 1.2). A plain scalar that any
of them reads differently would silently change a manifest, so strings are checked against both
Python parsers, on hand-picked traps and on generated data.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml as pyyaml
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from gpustack import emit

TRAPS = [
    "",
    " ",
    "  lead",
    "trail ",
    "true",
    "True",
    "TRUE",
    "false",
    "yes",
    "No",
    "on",
    "OFF",
    "y",
    "n",
    "null",
    "Null",
    "~",
    "0",
    "12",
    "-1",
    "+1",
    "1.30",
    "1.3",
    ".5",
    "1e3",
    "1_000",
    "0644",
    "0o17",
    "0x1F",
    "12:30",
    "1:2:3",
    "2024-01-01",
    "2024-1-1 10:00",
    ".inf",
    "-.inf",
    ".nan",
    "=",
    "<<",
    "-",
    "--",
    "---",
    "...",
    "- a",
    "? a",
    ": a",
    "a: b",
    "a:b",
    "a #b",
    "#a",
    "@a",
    "`a",
    "!a",
    "&a",
    "*a",
    "%a",
    "|",
    ">",
    "'",
    '"',
    "a'b",
    'a"b',
    "[a]",
    "{a}",
    "a,b",
    "a\\b",
    "tab\there",
    "line\nbreak",
    "ends\n",
    "two\n\n",
    "\nstarts",
    "trailing \nspace",
    "é ü ß",
    "nvidia.com/gpu",
    "v0.20.0",
    "cos-nvidia-installer:fixed",
    ":9400",
    "compute,utility",
    "sha256:abc",
    "http://x/y?z=1#f",
    "NoSchedule",
    "\u2028",
    "\x85",
    "\x07bell",
    "\ufeffbom",
    "a\u00a0b",
    "line\r\nbreak",
    "\ud7ff",
    "\U0001f600",
]


def readers() -> list[Any]:
    return [YAML(typ="safe", pure=True).load, pyyaml.safe_load]


def assert_round_trip(data: Any) -> None:
    text = emit.dump(data)
    for read in readers():
        assert read(text) == data, text
    assert text.endswith("\n") and "\r" not in text


@pytest.mark.parametrize("value", TRAPS)
def test_every_trap_reads_back_as_the_same_string(value):
    assert_round_trip({"key": value, value or "k": [value], "list": [{"name": value}]})


@pytest.mark.parametrize("value", [None, True, 3, 1.5, "text", "two\nlines", {}, []])
def test_a_document_may_be_a_scalar_or_empty(value):
    assert_round_trip(value)


def test_multi_document_stream_reads_back():
    documents = [{"a": 1}, {"b": ["x", {"c": None}]}, {"d": True}]
    text = emit.dump_all(documents)
    assert list(YAML(typ="safe", pure=True).load_all(text)) == documents
    assert list(pyyaml.safe_load_all(text)) == documents


def test_block_style_as_kubectl_writes_it():
    text = emit.dump({"spec": {"containers": [{"name": "a", "args": ["-f", "x"]}], "empty": {}}})
    assert text == (
        "spec:\n"
        "  containers:\n"
        "    - name: a\n"
        "      args:\n"
        '        - "-f"\n'
        "        - x\n"
        "  empty: {}\n"
    )


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


# 150 examples hold about 1,600 generated strings, keys and values (each one the emitter must
# decide how to quote), beside the hand-picked TRAPS that pin each known hazard; two parsers
# read each example back (about 14 ms an example).
@settings(max_examples=examples(150))
@given(st.dictionaries(st.text(), documents, min_size=1, max_size=4))
def test_any_json_like_document_reads_back(data):
    assert_round_trip(data)
