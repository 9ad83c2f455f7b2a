"""The commands, one module each, put together under `gpustack` by `root`.

Each command imports the library inside its function: `root` loads every command module to build
the command line, and a run then pays only for what its command uses (start-up time)."""

# Options of the whole program, which also work after the command (`gpustack render --debug`).
GLOBAL_FLAGS = ("--debug",)

# Set when a shell asks for completions (`gpustack completion SHELL` prints the scripts that set it).
COMPLETE_VARIABLE = "_GPUSTACK_COMPLETE"
