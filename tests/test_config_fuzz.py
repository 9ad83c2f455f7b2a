"""No config, however broken, gets a traceback: loading either succeeds or raises UserError
(which the CLI prints as `file:line:col: field: message`, exit 2).

Generated inputs: the example configs with bytes cut, inserted or replaced, and valid configs
with a generated value put at a generated place.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from conftest import EXAMPLES, examples, invoke, read_manifest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack import emit
from gpustack.build.pipeline import render
from gpustack.errors import UserError
from gpustack.read.yamlio import load_file
from gpustack.resolve.load import load_stack

EXAMPLE_TEXTS = {path.name: path.read_bytes() for path in sorted(EXAMPLES.glob("*.yaml"))}
# A config whose every field is present, to put generated values into.
FIELDS = [
    ("metadata", "name"),
    ("platform", "profile"),
    ("platform", "kubernetesVersion"),
    ("namespace",),
    ("nodes", "selector"),
    ("nodes", "taints"),
    ("nodes", "controlPlane"),
    ("devicePlugin", "enabled"),
    ("devicePlugin", "migStrategy"),
    ("devicePlugin", "sharing"),
    ("devicePlugin", "sharing", "replicas"),
    ("gfd", "enabled"),
    ("nfd", "mode"),
    ("dcgmExporter", "monitor"),
    ("dcgmExporter", "interval"),
    ("dcgmExporter", "monitorLabels"),
    ("runtimeClass", "enabled"),
    ("runtimeClass", "name"),
    ("driver", "mode"),
    ("entitlement", "enabled"),
    ("gitops", "tool"),
    ("gitops", "argocd"),
    ("gitops", "flux"),
    ("extends",),
    ("bogus",),
]


RKE2 = load_file(EXAMPLES / "rke2.yaml").data  # parsed once; each example changes a copy


def loads_or_explains(path: Path) -> None:
    try:
        render(load_stack(path))
    except UserError as error:
        assert str(error)  # a message for the user, never empty


@settings(max_examples=examples(150), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(sorted(EXAMPLE_TEXTS)),
    cut=st.integers(min_value=0, max_value=2000),
    length=st.integers(min_value=0, max_value=40),
    insert=st.binary(max_size=12),
)
def test_a_damaged_example_loads_or_is_explained(tmp_path, name, cut, length, insert):
    original = EXAMPLE_TEXTS[name]
    position = cut % (len(original) + 1)
    damaged = original[:position] + insert + original[position + length :]
    folder = tmp_path / "case"
    folder.mkdir(exist_ok=True)
    # The OpenShift example reads its PEM beside it.
    (folder / "entitlement-dummy.pem").write_bytes(
        (EXAMPLES / "entitlement-dummy.pem").read_bytes()
    )
    path = folder / name
    path.write_bytes(damaged)
    loads_or_explains(path)


values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=10), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS), value=values)
def test_any_value_in_any_field_loads_or_is_explained(tmp_path, field, value):
    config: dict[str, Any] = copy.deepcopy(RKE2)
    node = config
    for key in field[:-1]:
        node = node.setdefault(key, {}) if isinstance(node.get(key, {}), dict) else {}
    node[field[-1]] = value
    path = tmp_path / "gpustack.yaml"
    path.write_text(emit.dump(config))
    loads_or_explains(path)


manifest_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=12)),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(
            st.sampled_from(["apiVersion", "kind", "metadata", "name", "spec", "items", "x"]),
            children,
            max_size=4,
        ),
    ),
    max_leaves=10,
)


@settings(max_examples=examples(150))
@given(documents=st.lists(manifest_values, min_size=1, max_size=3), noise=st.binary(max_size=8))
def test_validate_reports_any_input_without_a_traceback(documents, noise):
    """`gpustack validate` on whatever arrives (pre-commit passes any staged YAML): every
    resource gets a verdict, and the run ends with 0 or 1, never an exception."""
    stream = emit.dump_all(documents).encode() + noise
    result = invoke(["validate", "-o", "json", "-"], input=stream)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1), result.output


RENDERED = sorted((EXAMPLES.parent / "out").glob("*/*.yaml"))


@functools.cache
def committed_object(path: Path) -> Any:
    """A committed file's object, read once (with libyaml: the same data as gpustack's own
    reader gives for every committed file, faster); callers that change it take a copy."""
    return read_manifest(path.read_text())


def folder_objects(folder: Path) -> list[Any]:
    """The objects of a committed folder, read when a test first needs them (not at collection,
    in every worker); the test only reads them."""
    return [committed_object(path) for path in sorted(folder.glob("*.yaml"))]


def paths_in(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += paths_in(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += paths_in(child, (*prefix, index))
    return found


# Each example validates a whole rendered folder (about 0.13 s): fewer examples than the others.
@settings(max_examples=examples(40))
@given(file=st.sampled_from(RENDERED), pick=st.integers(min_value=0), value=values)
def test_lint_and_schemas_survive_any_damage_to_a_rendered_object(file, pick, value):
    """A committed manifest edited into any shape gets verdicts, not an exception."""
    obj = copy.deepcopy(committed_object(file))
    paths = paths_in(obj)[1:]
    if not paths:
        return
    *parents, last = paths[pick % len(paths)]
    node = obj
    for key in parents:
        node = node[key]
    node[last] = value
    neighbours = folder_objects(file.parent)
    stream = emit.dump_all([obj, *neighbours]).encode()
    result = invoke(["validate", "-o", "sarif", "-"], input=stream)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (0, 1), result.output
