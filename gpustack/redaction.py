"""Keeping the entitlement certificate (and any other PEM) out of everything gpustack prints.

`mask_text` redacts, in any text, every PEM block and every base64 or `data:` URL payload that
holds one, also when the payload is wrapped over several lines (a YAML formatter folds long
strings; a double-quoted YAML string may continue after a backslash). `mask` does the same for
every string of an object, and every value of a Secret's `data`/`stringData`. A redacted value
reads `<redacted sha256:…>`: the digest is of the hidden value, so a changed secret still shows
as changed. Every pattern here runs in time linear in the text (no nested quantifiers that can
backtrack), so a large value cannot stall a command.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any
from urllib.parse import unquote

from gpustack.objects import kind_of

_PEM_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]++-----.*?(?:-----END [A-Z0-9 ]++-----|\Z)", re.S)
# A base64 run, possibly wrapped: a line break (after an optional backslash, as in a double-quoted
# YAML string) and indentation may separate its pieces. A piece followed by ':' is a YAML key,
# not a continuation.
_BASE64_RUN = re.compile(
    r"[A-Za-z0-9+/]++=*+(?:\\?\r?\n[ \t]*+\\?[A-Za-z0-9+/]++=*+(?![:A-Za-z0-9+/=]))*+"
)
# Long enough to hold "-----BEGIN X-----" once decoded; shorter runs cannot carry a PEM.
_MIN_RUN = 24
_WRAPPING = re.compile(r"[\s\\]")
# `data:` URLs; the media type holds no ':' or ',' (so every scan stops at the next URL).
_DATA_URL = re.compile(r"data:([^,\s\"':]*+),([^\s\"']++)")
_PEM_MARK = b"-----BEGIN"
# The base64 of "-----BEGIN" at each of the three places a run's 3-byte groups can cut it, whole
# groups only: a run that decodes to a PEM holds one of them once its wrapping is taken out, so a
# text that holds none (most texts) has no run to decode.
_ENCODED_MARKS = tuple(
    base64.b64encode(_PEM_MARK[start : start + (len(_PEM_MARK) - start) // 3 * 3]).decode()
    for start in range(3)
)
# What may separate a wrapped run's pieces (a line break only joins them: without one, a run is a
# single piece of base64 characters).
_UNWRAP = str.maketrans("", "", " \t\r\n\\")


def redacted(secret: str) -> str:
    return f"<redacted sha256:{hashlib.sha256(secret.encode()).hexdigest()[:12]}…>"


def mask_text(text: str) -> str:
    """`text` with every PEM, and every base64 or `data:` URL payload holding one, redacted."""
    if len(text) < _MIN_RUN and "-----BEGIN" not in text and "data:" not in text:
        return text  # no PEM, no data: URL, and every base64 run in it too short to hold one
    if "-----BEGIN" in text:
        text = _PEM_BLOCK.sub(lambda match: redacted(match.group()), text)
    if _may_hold_encoded_pem(text):
        text = _BASE64_RUN.sub(_mask_run, text)
    if "data:" in text:
        text = _DATA_URL.sub(_mask_data_url, text)
    return text


def carries_secret(text: str) -> bool:
    """Whether `text` holds something `mask_text` redacts (a file to keep private)."""
    return mask_text(text) != text


def _may_hold_encoded_pem(text: str) -> bool:
    """Whether some base64 run of `text` could decode to a PEM: a quick test on the whole text
    that spares decoding each of its words (every word is a base64 run)."""
    unwrapped = text.translate(_UNWRAP) if "\n" in text else text
    return any(mark in unwrapped for mark in _ENCODED_MARKS)


def _mask_run(match: re.Match[str]) -> str:
    run = match.group()
    if len(run) < _MIN_RUN:
        return run
    joined = _WRAPPING.sub("", run) if "\n" in run else run
    if len(joined) >= _MIN_RUN and _decodes_to_pem(joined):
        return redacted(joined)
    return run


def _decodes_to_pem(run: str) -> bool:
    try:
        decoded = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
    except (ValueError, binascii.Error):
        return False
    return _PEM_MARK in decoded


def _mask_data_url(match: re.Match[str]) -> str:
    media_type, payload = match.groups()
    # Percent-encoded payloads (`data:,-----BEGIN%20...`); base64 ones were handled above.
    if "base64" not in media_type and _PEM_MARK.decode() in unquote(payload):
        return f"data:{media_type},{redacted(payload)}"
    return match.group()


def mask(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of `obj` with every secret-bearing value redacted."""
    masked: dict[str, Any] = mask_value(obj)
    if kind_of(obj) == "Secret":
        for field in ("data", "stringData"):
            values = masked.get(field)
            if isinstance(values, dict):
                masked[field] = {key: redacted(str(value)) for key, value in values.items()}
    return masked


def mask_value(value: Any) -> Any:
    """`value` (any YAML data) with every string masked (mask_text)."""
    if isinstance(value, str):  # the most common value first
        return mask_text(value)
    if isinstance(value, dict):
        return {key: mask_value(child) for key, child in value.items()}
    if isinstance(value, list):
        return [mask_value(child) for child in value]
    return value
