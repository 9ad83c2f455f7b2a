"""`gpustack completion SHELL`: the script that makes a shell complete gpustack's commands,
options and values. Printed offline; the shell then asks `gpustack` itself (with
`_GPUSTACK_COMPLETE` set) what fits at the cursor.
"""

from __future__ import annotations

from enum import Enum

import typer

from gpustack.commands import COMPLETE_VARIABLE
from gpustack.commands.common import handles_user_errors

__all__ = ["COMPLETE_VARIABLE", "Shell", "command", "prepare"]


# In typer's bash script, the end of its completion function.
BASH_RETURN = "    return 0\n}"
BASH_NO_SPACE = "    [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == *= ]] && compopt -o nospace\n"


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def prepare() -> None:
    """Register typer's completion for each shell (its scripts call `complete_<shell>`)."""
    from typer._completion_classes import completion_init

    completion_init()


@handles_user_errors
def command(
    shell: Shell = typer.Argument(..., metavar="SHELL", help="bash, zsh or fish."),
) -> None:
    """Print the shell completion script for bash, zsh or fish.

    bash: `source <(gpustack completion bash)` in ~/.bashrc; zsh: `gpustack completion zsh >
    "${fpath[1]}/_gpustack"`; fish: `gpustack completion fish >
    ~/.config/fish/completions/gpustack.fish`.
    """
    from typer._completion_shared import get_completion_script

    prepare()
    script = get_completion_script(
        prog_name="gpustack", complete_var=COMPLETE_VARIABLE, shell=shell.value
    )
    if shell is Shell.bash:
        # A `--set` field completes to `path=`: the value follows it with no space between.
        script = script.replace(BASH_RETURN, BASH_NO_SPACE + BASH_RETURN, 1)
    typer.echo(script)
