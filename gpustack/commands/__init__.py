"""The commands, one module each, put together under `gpustack` by `root`.

Each command imports the library inside its function: `root` loads every command module to build
the command line, and a run then pays only for what its command uses (start-up time)."""

# Options of the whole program, which also work after the command (`gpustack render --debug`).
GLOBAL_FLAGS = ("--debug",)
