"""`gpustack schema` and schemas/gpustack.schema.json: current, usable by editors, and valid for
the configs users write.

Regenerate the file with `gpustack schema > schemas/gpustack.schema.json`.
"""

from __future__ import annotations

import functools
import json
import os
import re

import jsonschema
import pytest
from conftest import EXAMPLES, ROOT
from ruamel.yaml import YAML

from gpustack.resolve.starter import starter

SCHEMA_FILE = ROOT / "schemas" / "gpustack.schema.json"
PROFILES = ["kubeadm", "rke2", "openshift", "gke-cos", "gke-ubuntu"]


@functools.cache
def validator() -> jsonschema.Draft202012Validator:
    """The committed schema's validator, the schema checked once (a validator keeps no state
    between validations)."""
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_file_is_the_output_of_gpustack_schema(cli):
    result = cli("schema")
    assert result.exit_code == 0
    assert result.stdout.encode() == SCHEMA_FILE.read_bytes(), (
        "schemas/gpustack.schema.json is stale: "
        "run `gpustack schema > schemas/gpustack.schema.json`"
    )


def test_schema_output_is_stable(cli):
    assert cli("schema").stdout == cli("schema").stdout


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_schema_accepts_every_example_config(example):
    config = YAML(typ="safe").load(example.read_text())
    assert [error.message for error in validator().iter_errors(config)] == []


@pytest.mark.parametrize("profile", PROFILES)
def test_schema_accepts_every_starter_config(profile):
    config = YAML(typ="safe").load(starter(profile, "demo"))
    assert [error.message for error in validator().iter_errors(config)] == []


def test_schema_rejects_what_gpustack_rejects():
    config = YAML(typ="safe").load((EXAMPLES / "kubeadm.yaml").read_text())
    config["devicePlugin"]["migStrategy"] = "singel"
    config["nodes"]["taint"] = []
    messages = sorted(error.message for error in validator().iter_errors(config))
    assert any("'singel' is not one of" in message for message in messages)
    assert any("'taint' was unexpected" in message for message in messages)
    assert [e.message for e in validator().iter_errors({"metadata": {"name": "x"}})] != []


def test_a_config_that_extends_a_base_needs_only_what_it_changes():
    assert (
        list(validator().iter_errors({"extends": "base.yaml", "metadata": {"name": "edge-1"}}))
        == []
    )


def test_init_writes_a_modeline_pointing_at_the_schema(cli, tmp_path):
    path = tmp_path / "gpustack.yaml"
    assert cli("init", path).exit_code == 0
    first = path.read_text().splitlines()[0]
    match = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
    assert match, first
    assert (path.parent / match.group(1)).read_text() == SCHEMA_FILE.read_text()
    assert json.loads(SCHEMA_FILE.read_text())["$id"].endswith("/schemas/gpustack.schema.json")
    # The example configs use the same modeline, relative to the repository's schemas/ folder.
    for example in EXAMPLES.glob("*.yaml"):
        assert example.read_text().startswith(
            "# yaml-language-server: $schema=../schemas/gpustack.schema.json"
        )


def test_init_refreshes_its_own_schema_and_leaves_a_foreign_file_alone(cli, tmp_path):
    schema = tmp_path / "gpustack.schema.json"
    schema.write_text('{"$id": "https://gpustack.dev/schemas/gpustack.schema.json"}')
    assert cli("init", tmp_path / "a.yaml").exit_code == 0
    assert schema.read_text() == SCHEMA_FILE.read_text()  # an older copy of ours is refreshed
    schema.write_text('{"title": "something else"}')
    result = cli("init", tmp_path / "b.yaml")
    assert result.exit_code == 2
    assert "is not gpustack's config schema" in result.stderr
    assert (
        not (tmp_path / "b.yaml").exists() and schema.read_text() == '{"title": "something else"}'
    )
    # A FIFO in the schema's place is refused, not waited on for a writer that never comes.
    schema.unlink()
    os.mkfifo(schema)
    fifo = cli("init", tmp_path / "d.yaml")
    assert fifo.exit_code == 2 and "is not gpustack's config schema" in fifo.stderr
    assert not (tmp_path / "d.yaml").exists()
    # Pointing the modeline elsewhere writes no schema file.
    other = tmp_path / "elsewhere"
    url = "https://example.com/gpustack.schema.json"
    assert cli("init", other / "c.yaml", "--schema", url).exit_code == 0
    assert (other / "c.yaml").read_text().startswith(f"# yaml-language-server: $schema={url}\n")
    assert not (other / "gpustack.schema.json").exists()
