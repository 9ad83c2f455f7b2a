"""The commands, one module each, put together under `gpustack` by `root`.

A command is a function whose signature declares its arguments and options (typer); it imports
the library it needs inside its body, so that loading every command to parse a command line
stays light."""
