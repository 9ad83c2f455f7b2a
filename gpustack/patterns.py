"""Regular expressions from the command line, refused when Python's backtracking engine could
take exponential time on them.

kubeconform (Go's regexp, RE2) matches in linear time whatever the pattern. Python's `re`
backtracks, and a repeated group that itself repeats or alternates (`(a+)+$`, `(a|a)*$`) can
take exponential time on a short file name. Those, and backreferences and lookarounds (which RE2
does not have either), are refused with a message; every other pattern is compiled as given.
"""

from __future__ import annotations

import re
from typing import Any

from gpustack.errors import UserError

_parser: Any = getattr(re, "_parser", None)
if _parser is None:  # Python < 3.11
    import sre_parse as _parser

_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
_BRANCHING = {"BRANCH", "IN"}
_UNSUPPORTED = {"GROUPREF", "GROUPREF_EXISTS", "ASSERT", "ASSERT_NOT"}


def linear_regex(pattern: str, option: str) -> re.Pattern[str]:
    """`pattern` compiled, or a UserError naming `option` when it could backtrack without end."""
    try:
        parsed = _parser.parse(pattern)
        problem = _problem(list(parsed), inside_repeat=False)
        compiled = re.compile(pattern)
    except re.error as error:
        raise UserError(f"bad regular expression {pattern!r}: {error}", field=option) from None
    if problem:
        raise UserError(
            f"{pattern!r} {problem}; gpustack refuses patterns that can take exponential time",
            field=option,
            hint="write the repetition once, e.g. 'a+$' for '(a+)+$'",
        )
    return compiled


def _problem(items: list[tuple[Any, Any]], inside_repeat: bool) -> str | None:
    for opcode, argument in items:
        name = str(opcode)
        if name in _UNSUPPORTED:
            return "uses a backreference or lookaround, which RE2 (kubeconform) does not have"
        if name in _REPEATS:
            _, high, body = argument
            repeats = high is _parser.MAXREPEAT or high > 1
            if inside_repeat and repeats:
                return "repeats a group that itself repeats"
            found = _problem(list(body), inside_repeat or repeats)
            if found:
                return found
        elif name == "BRANCH":
            if inside_repeat:
                return "repeats a group of alternatives"
            for branch in argument[1]:
                found = _problem(list(branch), inside_repeat)
                if found:
                    return found
        elif name == "SUBPATTERN":
            found = _problem(list(argument[-1]), inside_repeat)
            if found:
                return found
        elif name in ("ATOMIC_GROUP",):
            found = _problem(list(argument), inside_repeat)
            if found:
                return found
    return None
