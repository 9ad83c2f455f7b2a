"""The cluster config (`kind: GPUStack`) and the platform profile (`kind: Profile`) as typed
models, the config's JSON Schema, and the writer of a commented config file a person edits."""

# The config schema's file, written beside a config so editors complete and check it offline
# (yaml-language-server). Here, in the package itself, so that `gpustack init`'s help names it
# without loading the model.
SCHEMA_FILE = "gpustack.schema.json"
