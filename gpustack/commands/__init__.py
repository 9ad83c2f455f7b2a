"""The commands, one module each, put together under `gpustack` by `root`."""

# Options of the whole program, which also work after the command (`gpustack render --debug`).
GLOBAL_FLAGS = ("--debug",)
