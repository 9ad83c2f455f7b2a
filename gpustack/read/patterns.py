"""Regular expressions a user writes (`patches[].target`, `validate --ignore-filename-pattern`),
matched by RE2, which takes time linear in the text whatever the pattern.

kustomize matches a patch's target and kubeconform its `-ignore-filename-pattern` with Go's
regexp package, whose syntax and semantics are RE2's (kustomize api/types/selector.go,
kubeconform pkg/validator, both `regexp.Compile`): matching with RE2 itself gives the same
answers, where Python's backtracking `re` could take exponential time on a pattern such as
`(a+)+$` or `(.*.*)*x` and a short name. What RE2 has no way to match in linear time,
backreferences and lookarounds, it refuses to compile, as Go does.

RE2 matches UTF-8 text. A name that is not valid UTF-8 (a file name's stray bytes, which Python
holds as lone surrogates) is matched as Go matches it: each such byte as U+FFFD; a pattern that
is not valid UTF-8 is refused, as Go's regexp refuses it (regexp/syntax ErrInvalidUTF8).
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import re2

from gpustack.errors import UserError

# RE2's limit for one compiled pattern (its default, 8 MiB): a larger one is refused, not built.
_MAX_MEMORY = 8 << 20
_SURROGATE = re.compile("[\ud800-\udfff]")


class Pattern(Protocol):
    """What gpustack asks of a compiled pattern: re.Pattern's methods of the same name."""

    def fullmatch(self, text: str) -> Any: ...

    def search(self, text: str) -> Any: ...


class _Utf8Pattern:
    """A compiled RE2 pattern that takes any str: RE2's Python binding encodes the text as
    UTF-8 and raises on a lone surrogate."""

    def __init__(self, compiled: Pattern) -> None:
        self._compiled = compiled

    def fullmatch(self, text: str) -> Any:
        return self._compiled.fullmatch(_utf8(text))

    def search(self, text: str) -> Any:
        return self._compiled.search(_utf8(text))


def _utf8(text: str) -> str:
    """`text` with each lone surrogate (a byte that is not UTF-8, as Python holds it) as U+FFFD."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def linear_regex(pattern: str, option: str) -> Pattern:
    """`pattern` compiled by RE2, or a UserError naming `option` (RE2's reason, the pattern as
    the user wrote it) when RE2 refuses it."""
    if not _is_utf8(pattern):
        raise UserError(
            f"bad regular expression {_shown(pattern)}: not valid UTF-8",
            field=option,
            hint="write the pattern as text; a character outside UTF-8 can be matched with `.`",
        )
    options = re2.Options()
    options.log_errors = False  # RE2 would print its own copy of the pattern to stderr
    options.max_mem = _MAX_MEMORY
    try:
        compiled: Pattern = re2.compile(pattern, options)
    except re2.error as error:
        reason = error.args[0] if error.args else ""
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        raise UserError(
            f"bad regular expression {_shown(pattern)}: {_first_clause(str(reason))}",
            field=option,
            hint="patterns use RE2's syntax, as Go's regexp (kustomize, kubeconform) does: no "
            "backreferences or lookarounds, repetition counts up to 1000",
        ) from None
    return _Utf8Pattern(compiled)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(pattern: str) -> str:
    """The pattern as the message quotes it: whole, unless longer than a line."""
    return (
        repr(pattern) if len(pattern) <= 80 else f"{pattern[:60]!r}... ({len(pattern)} characters)"
    )


def _first_clause(reason: str) -> str:
    """RE2's reason without the pattern it quotes after a colon (`invalid escape sequence: \\1`):
    the message shows the pattern once, whole."""
    return reason.partition(":")[0].strip() or "RE2 cannot compile it"
