"""Where the Kubernetes API's JSON Schemas are: the kubernetes-validate package's data folder,
one `v<version>-local[-strict]` folder per Kubernetes release. Validation reads the schemas from
there, and the api-version lint rule reads which API versions each release serves."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any


def kubernetes_schemas_root() -> Path:
    # Located without importing kubernetes_validate, which would load jsonschema for nothing.
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or spec.origin is None:
        raise RuntimeError("the kubernetes-validate package is not installed")
    return Path(spec.origin).parent / "kubernetes-json-schema"


@functools.lru_cache(maxsize=2)
def definitions(folder: str) -> Any:
    """A release folder's `_definitions.json` (about 1-2 MB), parsed once for both of its
    readers in a run: validation's schema registry and the api-version lint rule."""
    path = kubernetes_schemas_root() / folder / "_definitions.json"
    return json.loads(path.read_text(encoding="utf-8"))
