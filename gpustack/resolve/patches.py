"""The config's `patches:` as data: each patch's body, where it was written and its target
(kustomize's `patches` entries and Selector), and the label selectors a target matches by.
`gpustack.build.patching` applies them to the rendered objects; `gpustack.resolve.load` reads
them from the config and the files it names.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpustack.errors import Location
from gpustack.read.patterns import Pattern


@dataclass(frozen=True)
class Target:
    """Which objects a patch applies to; every field given must match (kustomize's Selector).
    group, version, kind, name and namespace are regular expressions matched whole."""

    group: str | None = None
    version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    labelSelector: str | None = None
    annotationSelector: str | None = None


@dataclass(frozen=True)
class Patch:
    """One entry of `patches:`: its parsed body (a mapping or a list of operations), where it
    was written (shown in every error and in findings on the objects it changed) and its
    target."""

    body: Any
    location: Location
    target: Target | None = None
    # A patch read from a file (`path:`): its content is never quoted in an error.
    from_file: bool = False
    regexes: dict[str, Pattern] = field(default_factory=dict, compare=False)

    @property
    def json6902(self) -> bool:
        return isinstance(self.body, list)


# One requirement of a label selector (k8s.io/apimachinery pkg/labels/selector.go Parse):
# `key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`.
# Each form is matched whole against one requirement, and neighbouring parts of a form share no
# character (a key holds no space, `=` or `(`), so matching is linear in the selector, where a
# single pattern over the whole selector, with `\s*` beside `\s+`, takes quadratic time on a
# run of spaces.
_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_FORMS = (
    ("!", re.compile(rf"!\s*(?P<key>{_KEY})")),
    ("=", re.compile(rf"(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>[-A-Za-z0-9_.]*)")),
    ("in", re.compile(rf"(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)")),
    ("exists", re.compile(_KEY)),
)


@functools.lru_cache(maxsize=64)  # a patch's selector is matched against every object
def parse_selector(selector: str) -> tuple[tuple[str, str, frozenset[str]], ...]:
    """A label selector as (key, operator, values) requirements; ValueError when malformed."""
    requirements: list[tuple[str, str, frozenset[str]]] = []
    for start, text in _requirements(selector):
        for form, pattern in _FORMS:
            found = pattern.fullmatch(text)
            if found is None:
                continue
            if form == "!":
                requirements.append((found["key"], "!", frozenset()))
            elif form == "=":
                op = "!=" if found["op"] == "!=" else "="
                requirements.append((found["key"], op, frozenset([found["value"]])))
            elif form == "in":
                values = frozenset(v.strip() for v in found["values"].split(",") if v.strip())
                requirements.append((found["key"], found["op"], values))
            else:
                requirements.append((text, "exists", frozenset()))
            break
        else:
            raise ValueError(f"cannot parse the selector at character {start + 1}")
    return tuple(requirements)


def _requirements(selector: str) -> list[tuple[int, str]]:
    """The selector's requirements, split at the commas outside parentheses, each stripped and
    with the offset where it starts; none for an empty selector."""
    if not selector.strip():
        return []
    parts: list[tuple[int, str]] = []
    start, depth = 0, 0
    for position, character in enumerate([*selector, ","]):
        if character == "(":
            depth += 1
        elif character == ")":
            depth = max(0, depth - 1)
        elif character == "," and (depth == 0 or position == len(selector)):
            text = selector[start:position]
            parts.append((start + len(text) - len(text.lstrip()), text.strip()))
            start = position + 1
    return parts


def selector_matches(selector: str, labels: Mapping[str, Any]) -> bool:
    """Whether `labels` satisfy every requirement of `selector` (Kubernetes' semantics: `!=` and
    `notin` also match when the key is absent)."""
    for key, op, values in parse_selector(selector):
        present = key in labels
        value = str(labels.get(key, ""))
        if op == "exists" and not present:
            return False
        if op == "!" and present:
            return False
        if op in ("=", "in") and not (present and value in values):
            return False
        if op in ("!=", "notin") and present and value in values:
            return False
    return True
