"""YAML as Kubernetes reads it: go-yaml v2 (YAML 1.1) through sigs.k8s.io/yaml.

Each file of tests/data/validate/yaml11/ is a trap where YAML 1.1 and 1.2 (or other YAML 1.1
readers) disagree, with the verdict Kubernetes gives it on its `# verdicts:` line. The scalar
table below is go-yaml v2.4.0's resolve.go (resolveMap, resolve()) and decode.go (timestamps kept
as strings in an interface{}), as documented there.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from conftest import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st
from validate_helpers import DATA, expected_verdicts, verdicts

TRAPS = sorted((DATA / "yaml11").glob("*.yaml"))


@pytest.mark.parametrize("case", TRAPS, ids=[case.stem for case in TRAPS])
def test_each_trap_gets_the_verdict_kubernetes_gives(cli, case):
    assert [status for _, _, status in verdicts(cli, case)] == expected_verdicts(case)


# Plain scalar -> what go-yaml v2 hands to sigs.k8s.io/yaml.
GO_YAML_V2 = {
    **dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True"], True),
    **dict.fromkeys(["n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "FALSE"], False),
    **dict.fromkeys(["~", "null", "Null", "NULL", ""], None),
    "0755": 0o755,  # a leading 0 is octal (strconv.ParseInt with base 0)
    "0o17": 15,
    "0x1F": 31,
    "0b101": 5,
    "-0b101": -5,
    "+12": 12,
    "1_000": 1000,
    "08": 8.0,  # not octal, so not an int: yamlStyleFloat reads it
    "1e3": 1000.0,
    "1.": 1.0,
    ".5": 0.5,
    "-1.5e-3": -0.0015,
    "18446744073709551615": 2**64 - 1,  # strconv.ParseUint
    "99999999999999999999": 1e20,  # past uint64: a float
    "1:30": "1:30",
    "190:20:30": "190:20:30",  # no base 60 in go-yaml v2
    "2024-01-02": "2024-01-02",  # a timestamp, kept as its text in an interface{}
    "yes please": "yes please",
    "nginx": "nginx",
    "-": "-",
    "0x": "0x",
    "1e400": "1e400",
    "Yes!": "Yes!",
    "TRUE": True,
    "tRUE": "tRUE",
}


@pytest.mark.parametrize("written", sorted(GO_YAML_V2), ids=repr)
def test_plain_scalars_resolve_as_go_yaml_v2_resolves_them(written):
    from gpustack.validation.kubeyaml import resolve_plain

    value = resolve_plain(written)
    assert value == GO_YAML_V2[written] and type(value) is type(GO_YAML_V2[written])


def test_special_floats_resolve_but_have_no_json_form(cli, tmp_path):
    from gpustack.validation.kubeyaml import resolve_plain

    assert math.isnan(resolve_plain(".NaN")) and resolve_plain("-.inf") == -math.inf
    manifest = tmp_path / "inf.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: .inf}\n")
    result = cli("validate", manifest)
    assert result.exit_code == 1
    assert "`.inf` (inf) has no JSON form (line 4, column 11)" in result.stdout


def test_a_word_read_as_a_boolean_is_named_with_its_position_and_a_fix(cli):
    result = cli("validate", "--no-lint", DATA / "yaml11" / "label-y.yaml")
    assert result.stdout == (
        "tests/data/validate/yaml11/label-y.yaml - ConfigMap answer is invalid: "
        'metadata.labels.app: true is not of types "null", "string"; Kubernetes reads the '
        'unquoted `y` so: quote it ("y") (line 8, column 10)\n'
    )


def test_keys_that_read_as_booleans_or_numbers_become_their_json_spelling():
    from gpustack.validation.kubeyaml import load

    [document] = load("on: a\ny: b\nno: c\n1: d\n0x10: e\n1.5: f\n'yes': g\n")
    assert document.data == {
        "true": "b",
        "false": "c",
        "1": "d",
        "16": "e",
        "1.5": "f",
        "yes": "g",
    }
    assert [problem.message for problem in document.duplicates] == ["duplicate key 'true'"]


def test_a_duplicate_key_names_its_object_and_without_strict_the_last_one_wins(cli):
    case = DATA / "yaml11" / "duplicate-key.yaml"
    strict = cli("validate", "--no-lint", case)
    assert strict.stdout == (
        "tests/data/validate/yaml11/duplicate-key.yaml - ConfigMap second failed validation: "
        "duplicate key 'name' (line 9, column 3)\n"
    )
    assert cli("validate", "--no-lint", "--no-strict", "--verbose", case).stdout == (
        "tests/data/validate/yaml11/duplicate-key.yaml - ConfigMap second is valid\n"
    )


def test_alias_bombs_are_refused():
    from gpustack.validation.kubeyaml import Problem, load

    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + n)}: &{chr(98 + n)} [{', '.join(['*' + chr(97 + n)] * 10)}]\n" for n in range(5)
    )
    with pytest.raises(Problem, match="alias bomb"):
        list(load(bomb))


# Documents for the event reader to agree on with the node tree: keys that collide once read
# (`on` and `true`, `1` and `0x1`, quoted and plain), merges of anchored mappings, aliases,
# scalars that read as booleans, numbers and null, quoted or tagged strings, nesting.
_KEYS = ["a", "b", "on", "true", "'true'", "1", "0x1", '"1"', "1.5", "!!str 2", "y", "<<"]
_SCALARS = ["x", "yes", "'yes'", "~", "0755", "1_000", ".5", "08", "!!str 1", "1e3", '""', "*m"]


def _entry(pair: tuple[str, str]) -> str:
    key, value = pair
    if key == "<<":  # a merge takes a mapping or a list of them: an anchored one
        return f"<<: {value if value.startswith(('*', '[*')) else '*m'}"
    return f"{key}: {value}"


def _flow(depth: int) -> Any:
    leaf = st.sampled_from(_SCALARS)
    if depth == 0:
        return leaf
    child = _flow(depth - 1)
    return st.one_of(
        leaf,
        st.sampled_from(["*m", "[*m, *n]"]),
        st.lists(child, max_size=4).map(lambda items: f"[{', '.join(items)}]"),
        st.lists(st.tuples(st.sampled_from(_KEYS), child).map(_entry), max_size=5).map(
            lambda entries: f"{{{', '.join(entries)}}}"
        ),
    )


def _reference(node: Any, duplicates: list[tuple[str, int, int]]) -> Any:
    """The data of a node tree (compose()), recursively: the reader the event loop replaces."""
    from yaml.nodes import ScalarNode, SequenceNode

    from gpustack.validation.kubeyaml import Problem, _Scalars

    if type(node) is ScalarNode:
        return _Scalars().scalar(node)
    if type(node) is SequenceNode:
        return [_reference(child, duplicates) for child in node.value]
    mapping: dict[str, Any] = {}
    written: set[str] = set()
    for key_node, value_node in node.value:
        if (
            type(key_node) is ScalarNode
            and key_node.tag == "gpustack:plain"
            and key_node.value == "<<"
        ):
            value = _reference(value_node, duplicates)
            for source in reversed(value) if type(value) is list else [value]:
                if (
                    type(source) is not dict
                ):  # go-yaml v2 decode.go merge(): "map merge requires..."
                    mark = value_node.start_mark
                    raise Problem(
                        "map merge requires map or sequence of maps as the value",
                        mark.line,
                        mark.column,
                    )
                mapping.update(source)
            continue
        key = _Scalars().key(key_node)
        if key in written:
            mark = key_node.start_mark
            duplicates.append((f"duplicate key {key!r}", mark.line, mark.column))
        written.add(key)
        mapping[key] = _reference(value_node, duplicates)
    return mapping


@settings(max_examples=examples(100))
@given(st.lists(st.tuples(st.sampled_from(_KEYS), _flow(3)).map(_entry), max_size=6))
@example(["a: [{<<: [*m, yes]}]"])  # a merge list holding a scalar: refused by both
@example(["a: [{<<: [*m, [[a, b]]]}]"])  # ... and a list, which dict.update would take
def test_the_event_reader_reads_what_the_node_tree_holds(entries):
    """kubeyaml.load builds data from parse events with short paths for strings and string
    keys; a recursive read of the node tree gives the same data, key order, types and
    duplicate keys (or the same problem at the same place)."""
    from gpustack.validation.kubeyaml import Problem, compose, load

    text = "m: &m {a: 1, on: x}\nn: &n {b: 2, 'true': y}\n" + "".join(
        f"{entry}\n" for entry in entries
    )
    try:
        [document] = load(text)
    except Problem as problem:
        got: Any = ("problem", problem.message, problem.line, problem.column)
    else:
        found = [(problem.message, problem.line, problem.column) for problem in document.duplicates]
        got = (json.dumps(document.data), found, document.line, document.column)
    duplicates: list[tuple[str, int, int]] = []
    try:
        [node] = compose(text)
        expected: Any = (json.dumps(_reference(node, duplicates)), duplicates, 0, 0)
    except Problem as problem:
        expected = ("problem", problem.message, problem.line, problem.column)
    assert got == expected, text
