"""The import's state and its result: the config being written (each setting with the input
fields it came from) and the report, one entry per input field with its outcome (mapped to a
config field, the same as gpustack's default, not carried over with why, or unknown). The report
names fields, never values: the inputs are untrusted."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from gpustack.adopt.inputs import OPERATOR_DEFAULTS, Input, dotted, printable
from gpustack.adopt.releases import Release
from gpustack.config.commented import Field
from gpustack.config.field_types import DNS1123_LABEL
from gpustack.config.model import field_accepts, field_default
from gpustack.config.profile_model import Profile
from gpustack.errors import Location
from gpustack.read.yamlio import Path_

Outcome = Literal["mapped", "default", "dropped", "unknown"]


OUTCOMES: tuple[Outcome, ...] = ("mapped", "default", "dropped", "unknown")


HEADINGS = {
    "mapped": "mapped",
    "default": "same as gpustack's default",
    "dropped": "not carried over",
    "unknown": "unknown fields (not read)",
}


@dataclass(frozen=True)
class Entry:
    """One input field and what became of it."""

    input: str
    field: str
    location: str
    outcome: Outcome
    target: str | None = None
    why: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "field": self.field,
            "location": self.location,
            "outcome": self.outcome,
            "target": self.target,
            "why": self.why,
        }


@dataclass
class Imported:
    config: list[Field]  # the config's fields, in the order the file has them
    entries: list[Entry]
    profile: str
    profile_reason: str
    # What the operator (or the device-plugin chart) runs for these inputs: aspect -> value.
    expected: dict[str, str] = field(default_factory=dict)
    # The operator release whose defaults filled in what the inputs leave out, and why that one
    # (None: no operator input, a device-plugin chart's values or plugin configs alone).
    release: str | None = None
    release_reason: str = ""
    # Where each config field came from: the input fields' locations.
    origins: dict[str, list[Location]] = field(default_factory=dict)
    # Every value the inputs gave the config, for messages that must not show them.
    values: list[str] = field(default_factory=list)


_MISSING = object()


class Import:
    """The config being written and the report, for one profile."""

    def __init__(self, profile: Profile, inputs: list[Input], release: Release) -> None:
        self.profile = profile
        self.release = release
        self.inputs = [id(each) for each in inputs]
        self.order: list[tuple[int, int, int]] = []  # each entry's input and position
        self.settings: dict[str, tuple[Any, list[str]]] = {}
        self.entries: list[Entry] = []
        self.expected: dict[str, str] = {}
        self.done: set[tuple[int, Path_]] = set()  # (input id, path) given an outcome
        self.mapped_at: dict[str, list[int]] = {}  # config field -> its entries
        self.paths: list[tuple[str, Path_]] = []  # each entry's input kind and path
        self.hidden: set[int] = set()  # entries of the defaults that an input's field replaced
        self.locations: dict[str, list[Location]] = {}  # config field -> its inputs' places

    # -- outcomes -------------------------------------------------------------------------
    def record(
        self,
        source: Input,
        path: Path_,
        outcome: Outcome,
        target: str | None = None,
        why: str | None = None,
    ) -> None:
        self.done.add((id(source), path))
        where = source.location(path)
        self.order.append((self.inputs.index(id(source)), where.line, where.column))
        self.paths.append((source.kind, path[len(source.root) :]))
        shown = printable(str(where), 4096)  # a file's name on one line, as every name
        self.entries.append(Entry(source.name, dotted(path), shown, outcome, target, why))

    def default(self, source: Input, path: Path_, why: str = "same as gpustack's") -> None:
        self.record(source, path, "default", why=why)

    def dropped(self, source: Input, path: Path_, why: str) -> None:
        self.record(source, path, "dropped", why=why)

    def gpustack_default(self, target: str) -> Any:
        node: Any = self.profile.defaults
        for part in target.split("."):
            node = node.get(part, _MISSING) if isinstance(node, dict) else _MISSING
        if node is not _MISSING:
            return node
        try:
            return field_default(target)
        except KeyError:
            return _MISSING

    def auto(self, target: str) -> Any:
        """What a setting left at `auto` comes to on this profile with the settings so far
        (stack.Stack: toolkit_enabled, monitor); None where it depends on more."""
        facts = self.profile.facts
        if target == "toolkit.enabled":
            mode = self.settings.get("driver.mode", (facts.driver.default,))[0]
            required = facts.runtime.toolkit is not None and facts.runtime.toolkit.required
            return mode in ("container", "driver-toolkit") or required
        if target == "dcgmExporter.monitor":
            return facts.monitoring
        if target == "driver.mode":
            return facts.driver.default
        return None

    def set(self, source: Input, path: Path_, target: str, value: Any, why: str = "") -> None:
        """Map the field at `path` to the config field `target`; the same value as gpustack's
        default is left out of the config."""
        if not field_accepts(target, value):
            # Said without the value: the inputs are untrusted, and a credential in a
            # repository would otherwise reach the CI log.
            self.dropped(source, path, f"not a value gpustack's {target} takes")
            return
        known = self.settings.get(target)
        origin = source.shown(path)
        defaulted = known is not None and self.from_defaults(target)
        if known is not None and (known[0] != value or defaulted):
            # A later input overrides an earlier one, as a kustomize patch or a second values
            # file does: the earlier field is reported as overridden; a default the inputs
            # replace is left out of the report.
            self.leave_out(target, f"overridden by {origin}")
            known = None
        if known is None and self.gpustack_default(target) == value:
            self.record(source, path, "default", target, why or f"{target} is the same")
            return
        if known is None and self.gpustack_default(target) == "auto" and self.auto(target) == value:
            self.record(source, path, "default", target, f"what {target} auto gives here")
            return
        if known is None:
            self.settings[target] = (value, [origin])
        elif origin not in known[1]:
            known[1].append(origin)
        self.locations.setdefault(target, []).append(source.location(path))
        self.mapped_at.setdefault(target, []).append(len(self.entries))
        self.record(source, path, "mapped", target, why or None)

    def leave_out(self, target: str, why: str) -> None:
        """Take `target` out of the config: the input fields that set it are reported as not
        carried over, with `why`; those of the operator release's defaults are left out of the
        report."""
        for index in self.mapped_at.pop(target, []):
            if self.paths[index][0] == OPERATOR_DEFAULTS:
                self.hidden.add(index)
                continue
            entry = self.entries[index]
            self.entries[index] = Entry(
                entry.input, entry.field, entry.location, "dropped", target, why
            )
        del self.settings[target]
        self.locations.pop(target, None)

    def from_defaults(self, target: str) -> bool:
        """The config field holds the operator's default, no input's field."""
        indexes = self.mapped_at.get(target)
        return bool(indexes) and all(self.paths[i][0] == OPERATOR_DEFAULTS for i in indexes or ())

    # -- the walk -------------------------------------------------------------------------
    def leaves(self, source: Input) -> Iterator[tuple[Path_, Any]]:
        """Every field of `source` that has no outcome yet, as (path, value); a list or mapping
        that is a value of its own (env, tolerations, labels...) counts as one field."""

        def walk(node: Any, path: Path_) -> Iterator[tuple[Path_, Any]]:
            if (id(source), path) in self.done:
                return
            whole = path and path[-1] in _WHOLE_VALUES
            if isinstance(node, dict) and node and not whole:
                for key, value in node.items():
                    yield from walk(value, (*path, str(key)))
            else:
                yield path, node

        yield from walk(source.data, ())

    def config(self) -> list[Field]:
        """The settings, each with the input fields it came from, in the order `gpustack init`
        writes the config's sections."""
        # One line whatever the inputs' names hold: a line break in a comment would start a key
        # of its own.
        return [
            Field(target, value, printable("from " + " and ".join(origins), 400))
            for target, (value, origins) in sorted(self.settings.items(), key=_config_order)
        ]


# Fields whose value is a whole list or mapping of the user's (they map, or not, as one).
_WHOLE_VALUES = {
    "env",
    "args",
    "tolerations",
    "labels",
    "annotations",
    "resources",
    "imagePullSecrets",
    "nodeSelector",
    "affinity",
    "additionalLabels",
    "relabelings",
    "managedFields",
    "conditions",
    "podSecurityContext",
    "securityContext",
    "selectorLabelsOverride",
    "podAnnotations",
    "map",
    "data",
    "extraObjects",
    "node-feature-discovery",
    "draDriver",
    "fallbackStrategies",
    "featureGates",
    "logging",
    "initContainer",
    "startupProbe",
    "livenessProbe",
    "readinessProbe",
}


# The config's sections in the order `gpustack init` writes them (model.GPUStack).
_ORDER = [
    "apiVersion",
    "kind",
    "metadata",
    "platform",
    "namespace",
    "nodes",
    "devicePlugin",
    "gfd",
    "migManager",
    "nfd",
    "dcgmExporter",
    "runtimeClass",
    "driver",
    "toolkit",
    "validator",
    "nodeStatusExporter",
    "images",
]


def _config_order(item: tuple[str, Any]) -> tuple[int, str]:
    target = item[0]
    section = target.split(".")[0]
    return (_ORDER.index(section) if section in _ORDER else len(_ORDER), target)


def leave_out(imported: Imported, target: str, why: str) -> Imported:
    """`imported` without the config field `target`, which only the operator's defaults set and
    gpustack refuses on this profile (`why`, a message without the inputs' values): the defaults'
    entries for it say so."""
    config = [
        each
        for each in imported.config
        if each.path != target and not each.path.startswith(target + ".")
    ]
    entries = [
        Entry(
            entry.input,
            entry.field,
            entry.location,
            "dropped",
            target,
            f"the operator's default, which gpustack refuses here: {why}",
        )
        if entry.target == target and not entry.location
        else entry
        for entry in imported.entries
    ]
    origins = {key: value for key, value in imported.origins.items() if key != target}
    return replace(imported, config=config, entries=entries, origins=origins)


def report_text(imported: Imported, shown: list[str]) -> str:
    names = ", ".join(printable(each, 400) for each in shown)
    lines = [f"imported {names} for profile {imported.profile} ({imported.profile_reason})"]
    if imported.release is not None:
        lines.append(
            f"what the inputs leave out: GPU Operator {imported.release}'s defaults "
            f"({imported.release_reason})"
        )
    for outcome in OUTCOMES:
        entries = [entry for entry in imported.entries if entry.outcome == outcome]
        if not entries:
            continue
        lines.append(f"{HEADINGS[outcome]} ({len(entries)}):")
        for entry in entries:
            where = f"{entry.location}: " if entry.location else ""
            text = f"  {where}{entry.input} {entry.field}"
            if entry.target:
                text += f" -> {entry.target}"
            if entry.why:
                text += f": {entry.why}"
            lines.append(text)
    return "\n".join(lines) + "\n"


def config_name(stem: str | None) -> str:
    """metadata.name: the -o file's name where it is a DNS label, else `imported`."""
    return stem if stem and re.fullmatch(DNS1123_LABEL, stem) and len(stem) <= 63 else "imported"
