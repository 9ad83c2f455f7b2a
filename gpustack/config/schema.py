"""The JSON Schema of a config file, for editors and CI (`gpustack schema`, `gpustack init`).

The typed model requires every field a render needs, but a config file holds only part of them:
the profile's `defaults` and any `extends:` base fill in the rest before validation. The schema
for files therefore requires only what nothing else can supply. `schemas/gpustack.schema.json`
is `gpustack schema`'s output, kept current by a test (`python dev/generate.py` rewrites it).
"""

from __future__ import annotations

import json
from typing import Any

from gpustack.config.model import GPUStack

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://gpustack.dev/schemas/gpustack.schema.json"
# List items (taints) replace rather than merge, and profiles may not set metadata: these keep
# their required fields in a file.
KEEP_REQUIRED = {"Taint", "Metadata"}
# What a config file without `extends:` must carry itself: a cluster's, and a base's.
STANDALONE_REQUIRED = ["apiVersion", "kind", "metadata", "platform"]
BASE_REQUIRED = ["apiVersion", "kind"]


def config_schema() -> dict[str, Any]:
    schema = GPUStack.model_json_schema()
    for name, definition in schema["$defs"].items():
        if name not in KEEP_REQUIRED:
            definition.pop("required", None)
    schema.pop("required", None)
    # A file that extends none is a cluster, or a base that clusters extend: a base names no
    # cluster (no `metadata`) and may leave the profile to them.
    schema["if"] = {"not": {"required": ["extends"]}}
    schema["then"] = {
        "required": BASE_REQUIRED,
        "if": {"required": ["metadata"]},
        "then": {
            "required": STANDALONE_REQUIRED,
            "properties": {"platform": {"required": ["profile"]}},
        },
    }
    schema["$schema"] = JSON_SCHEMA_DIALECT
    schema["$id"] = SCHEMA_ID
    return schema


def schema_text() -> str:
    return json.dumps(config_schema(), indent=2, sort_keys=True) + "\n"
