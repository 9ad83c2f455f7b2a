"""`gpustack completion SHELL`: the script that makes a shell complete gpustack's commands,
options and values. Printed offline; the shell then asks `gpustack` itself (with
`_GPUSTACK_COMPLETE` set) what fits at the cursor, and `respond` answers from the same
declarations the command line is parsed by.

The scripts and what they pass (`COMP_WORDS` and `COMP_CWORD` for bash, the line so far in
`_TYPER_COMPLETE_ARGS` for zsh and fish) are those gpustack has always printed, so a script a
user installed from an earlier version keeps working.
"""

from __future__ import annotations

import os
import shlex
import sys
from enum import Enum

from gpustack.commands import COMPLETE_VARIABLE
from gpustack.commands.common import echo
from gpustack.commands.declared import (
    Arguments,
    Command,
    Group,
    Option,
    every_option,
    summary,
)

__all__ = ["COMMAND", "COMPLETE_VARIABLE", "Shell", "respond"]

# The line so far (zsh, fish), and what fish asks: the completions, or whether there are any.
LINE = "_TYPER_COMPLETE_ARGS"
FISH_ACTION = "_TYPER_COMPLETE_FISH_ACTION"
FUNCTION = "_gpustack_completion"

SCRIPTS = {
    "bash": f"""\
{FUNCTION}() {{
    local IFS=$'\\n'
    COMPREPLY=( $( env COMP_WORDS="${{COMP_WORDS[*]}}" \\
                   COMP_CWORD=$COMP_CWORD \\
                   {COMPLETE_VARIABLE}=complete_bash $1 ) )
    # A `--set` field completes to `path=`: the value follows it with no space between.
    [[ ${{#COMPREPLY[@]}} -eq 1 && ${{COMPREPLY[0]}} == *= ]] && compopt -o nospace
    return 0
}}

complete -o default -F {FUNCTION} gpustack""",
    "zsh": f"""\
#compdef gpustack

{FUNCTION}() {{
  eval $(env {LINE}="${{words[1,$CURRENT]}}" {COMPLETE_VARIABLE}=complete_zsh gpustack)
}}

compdef {FUNCTION} gpustack""",
    "fish": (
        f'complete --command gpustack --no-files --arguments "(env {COMPLETE_VARIABLE}='
        f'complete_fish {FISH_ACTION}=get-args {LINE}=(commandline -cp) gpustack)" '
        f'--condition "env {COMPLETE_VARIABLE}=complete_fish {FISH_ACTION}=is-args '
        f'{LINE}=(commandline -cp) gpustack"'
    ),
}


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def run(shell: Shell) -> int:
    """Print the shell completion script for bash, zsh or fish.

    bash: `source <(gpustack completion bash)` in ~/.bashrc; zsh: `gpustack completion zsh >
    "${fpath[1]}/_gpustack"`; fish: `gpustack completion fish >
    ~/.config/fish/completions/gpustack.fish`.
    """
    echo(SCRIPTS[shell.value])
    return 0


COMMAND = Command(
    run.__doc__ or "",
    run,
    (),
    Arguments("shell", "SHELL", "bash, zsh or fish.", Shell, 1),
)


def respond(root: Group, request: str) -> int:
    """Answer a completion script (`request`: complete_bash, complete_zsh, complete_fish)."""
    shell = request.removeprefix("complete_")
    if shell == "bash":
        words = _split(os.environ.get("COMP_WORDS", ""))
        at = int(os.environ.get("COMP_CWORD", "0") or 0)
        before, incomplete = words[1:at], words[at] if at < len(words) else ""
    else:
        line = os.environ.get(LINE, "")
        before = _split(line)[1:]
        incomplete = "" if not before or line.endswith(" ") else before.pop()
    found = candidates(root, before, incomplete)
    if shell == "bash":
        echo("\n".join(value for value, _ in found))
    elif shell == "zsh":
        shown = "\n".join(
            f'"{_zsh(value)}":"{_zsh(help)}"' if help else f'"{_zsh(value)}"'
            for value, help in found
        )
        echo(f"_arguments '*: :(({shown}))'" if found else "_files")
    elif shell == "fish":
        if os.environ.get(FISH_ACTION) == "is-args":
            return 0 if found else 1
        echo(
            "\n".join(
                f"{value}\t{' '.join(help.split())}" if help else value for value, help in found
            )
        )
    else:
        print(f"gpustack: no completion for {shell!r}", file=sys.stderr)
        return 2
    return 0


def candidates(root: Group, before: list[str], incomplete: str) -> list[tuple[str, str]]:
    """What may come at the cursor after the words `before`: (value, help) pairs."""
    entry: Command | Group = root
    options = every_option(root)
    expecting: Option | None = None
    given = 0  # positional words of the command so far
    for word in before:
        if expecting is not None:
            expecting = None
        elif word.startswith("-") and word != "-":
            option = _option(options, word.partition("=")[0])
            if option is not None and option.value is not None and "=" not in word:
                expecting = option
        elif isinstance(entry, Group) and word in entry.commands:
            entry = entry.command(word)
            options = every_option(entry)
        else:
            given += 1
    if expecting is not None:
        return [(value, "") for value in expecting.completions(incomplete)]
    if incomplete.startswith("-"):
        return [
            (spelling, option.help)
            for option in options
            for spelling, _ in option.spellings
            if spelling.startswith(incomplete)
        ]
    if isinstance(entry, Group):
        return [
            (name, summary(entry.command(name).help))
            for name in entry.commands
            if name.startswith(incomplete)
        ]
    arguments = _positional(entry.positionals, given)
    return [(value, "") for value in arguments.completions(incomplete)] if arguments else []


def _option(options: list[Option], spelling: str) -> Option | None:
    for option in options:
        if any(each == spelling for each, _ in option.spellings):
            return option
    return None


def _positional(positionals: tuple[Arguments, ...], given: int) -> Arguments | None:
    """The positional argument the next word is, after `given` of them."""
    for arguments in positionals:
        if arguments.number != 1:
            return arguments
        if given == 0:
            return arguments
        given -= 1
    return None


def _split(line: str) -> list[str]:
    """A command line's words as the shell splits them; an unclosed quote ends the last word."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: list[str] = []
    try:
        words.extend(lexer)
    except ValueError:
        words.append(lexer.token)
    return words


def _zsh(text: str) -> str:
    return (
        text.replace('"', '""')
        .replace("'", "''")
        .replace("$", "\\$")
        .replace("`", "\\`")
        .replace(":", r"\\:")
    )
