"""The commands, one module each, put together under `gpustack` by `root`.

Each command imports the library inside its function, and `root` names the command modules
without importing them: a run loads its own command's module only (start-up time)."""

# Set when a shell asks for completions (`gpustack completion SHELL` prints the scripts that set it).
COMPLETE_VARIABLE = "_GPUSTACK_COMPLETE"
