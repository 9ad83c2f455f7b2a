"""`gpustack schema`: the JSON Schema of a config file, for editors and CI.

The typed model requires every field a render needs, but a config file holds only part of them:
the profile's `defaults` and any `extends:` base fill in the rest before validation. The schema
for files therefore requires only what nothing else can supply. `schemas/gpustack.schema.json`
is this command's output, kept current by a test (`gpustack schema > schemas/gpustack.schema.json`).
"""

from __future__ import annotations

import json
from typing import Any

from gpustack.commands.common import echo
from gpustack.commands.declared import Command

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://gpustack.dev/schemas/gpustack.schema.json"
# List items (taints) replace rather than merge, and profiles may not set metadata: these keep
# their required fields in a file.
KEEP_REQUIRED = {"Taint", "Metadata"}
# What a config file without `extends:` must carry itself.
STANDALONE_REQUIRED = ["apiVersion", "kind", "metadata", "platform"]


def config_schema() -> dict[str, Any]:
    from gpustack.model import GPUStack

    schema = GPUStack.model_json_schema()
    for name, definition in schema["$defs"].items():
        if name not in KEEP_REQUIRED:
            definition.pop("required", None)
    schema.pop("required", None)
    schema["if"] = {"not": {"required": ["extends"]}}
    schema["then"] = {
        "required": STANDALONE_REQUIRED,
        "properties": {"platform": {"required": ["profile"]}},
    }
    schema["$schema"] = JSON_SCHEMA_DIALECT
    schema["$id"] = SCHEMA_ID
    return schema


def render_schema() -> str:
    return json.dumps(config_schema(), indent=2, sort_keys=True) + "\n"


def run() -> int:
    """Print the JSON Schema of the GPUStack config file."""
    echo(render_schema(), nl=False)
    return 0


COMMAND = Command(run.__doc__ or "", run, ())
