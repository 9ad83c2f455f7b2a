"""The cluster config (`kind: GPUStack`) and the platform profile (`kind: Profile`) as typed
models, the config's JSON Schema, and the writer of a commented config file a person edits."""
