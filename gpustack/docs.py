"""The reference tables of the documentation in docs/, generated from what they describe: the
config reference (docs/config.md) from the model (`gpustack.config.model` and its sections: field paths, types, defaults,
`Field(description=...)`), the profiles table (docs/profiles.md) from `profiles/*.yaml`, the lint
table (docs/lint.md) from the lint rules.

Each table sits between marker comments in one of the documents, `<!-- generated: NAME -->` and
`<!-- end generated -->`; everything outside them is written by hand. A field's `Doc(see=...)`
names a section by its heading, wherever in docs/ it is: the table links to it. Regenerate with
`python -m gpustack.docs` (the folder `docs`, or the one it is given); tests/test_readme.py fails
while a document differs from what this module writes.
"""

from __future__ import annotations

import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from gpustack.config.field_types import Doc, WithResources
from gpustack.config.model import GPUStack
from gpustack.config.profile_model import NodeSelectorRequirement, ProfileFacts
from gpustack.resolve import platform_profiles as profiles
from gpustack.validation import lint

REGENERATE = "python -m gpustack.docs"
# A heading's text -> (the document holding it, its anchor).
Headings = dict[str, tuple[str, str]]
_REGION = re.compile(r"<!-- generated: ([a-z-]+)\b[^\n]*-->\n.*?(<!-- end generated -->)", re.S)


# --- the model's fields ----------------------------------------------------------------------


def _args(annotation: Any) -> tuple[Any, ...]:
    return typing.get_args(annotation)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _strip(annotation: Any) -> tuple[Any, list[Any]]:
    """The type under `Annotated[...]` and its metadata."""
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *metadata = _args(annotation)
        inner, more = _strip(inner)
        return inner, [*metadata, *more]
    return annotation, []


def _model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The config model a field holds (possibly optional or in a list), and whether in a list."""
    annotation, _ = _strip(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if typing.get_origin(annotation) is list:
        model, _ = _model(_args(annotation)[0])
        return model, model is not None
    if _is_union(annotation):
        for argument in _args(annotation):
            model, in_list = _model(argument)
            if model is not None:
                return model, in_list
    return None, False


def fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """Every field of `model` and of the models inside it, depth first, a model's own fields
    before those it inherits (`resources` last): (dotted path, list items as `[]`; FieldInfo)."""
    inherited = {name for base in model.__mro__[1:] for name in getattr(base, "model_fields", {})}
    names = sorted(model.model_fields, key=lambda name: name in inherited)
    for name in names:
        info = model.model_fields[name]
        path = prefix + name
        yield path, info
        sub, in_list = _model(info.annotation)
        if sub is not None:
            yield from fields(sub, path + ("[]." if in_list else "."))


def _doc(info: FieldInfo) -> Doc:
    """The field's Doc: what the field says, else what the (aliased) type it holds says."""
    found = [item for item in info.metadata if isinstance(item, Doc)]
    stack = [info.annotation]
    while stack:
        annotation = stack.pop()
        inner, metadata = _strip(annotation)
        found += [item for item in metadata if isinstance(item, Doc)]
        if _is_union(inner):
            stack += [arg for arg in _args(inner) if arg is not type(None)]
    return Doc(
        type=next((doc.type for doc in found if doc.type), None),
        default=next((doc.default for doc in found if doc.default), None),
        see=next((doc.see for doc in found if doc.see), None),
    )


def _type_words(annotation: Any, metadata: list[Any]) -> str:
    annotation, more = _strip(annotation)
    metadata = [*metadata, *more]
    for item in metadata:
        if isinstance(item, Doc) and item.type:
            return item.type
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(f"`{value}`" for value in _args(annotation))
    if _is_union(annotation):
        parts = [_type_words(arg, []) for arg in _args(annotation) if arg is not type(None)]
        return " | ".join(dict.fromkeys(parts))
    if origin is list:
        item = _type_words(_args(annotation)[0], [])
        return "list of strings" if item == "string" else f"list of {item}"
    if origin is dict:
        key, value = (_type_words(arg, []) for arg in _args(annotation))
        return f"map of {key} to {value}"
    if annotation is bool:
        return "bool"
    if annotation is int:
        low = next((item.ge for item in metadata if hasattr(item, "ge")), None)
        high = next((item.le for item in metadata if hasattr(item, "le")), None)
        if low is None:
            return "int"
        return f"int, at least {low}" if high is None else f"int, {low} to {high}"
    if annotation is str:
        return "string"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    raise ValueError(f"no words for the type {annotation!r}: give the field a Doc(type=...)")


def _value(value: Any) -> str:
    return f"`{str(value).lower()}`" if isinstance(value, bool) else f"`{value}`"


def _dotted(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        flat[prefix + key] = value
        if isinstance(value, dict):
            flat.update(_dotted(value, f"{prefix}{key}."))
    return flat


def _profile_defaults() -> dict[str, dict[str, Any]]:
    """For each config path a built-in profile's `defaults` set: the value per profile."""
    found: dict[str, dict[str, Any]] = {}
    for name in profiles.BUILTIN:
        profile, _ = profiles.load(name)
        for path, value in _dotted(profile.defaults).items():
            found.setdefault(path, {})[name] = value
    return found


def _default(path: str, info: FieldInfo, doc: Doc, from_profiles: dict[str, Any]) -> str:
    if doc.default:
        return doc.default
    if info.default is not PydanticUndefined:
        own = "none" if info.default is None else _value(info.default)
    elif info.default_factory is not None:
        own = _value(info.default_factory())  # type: ignore[call-arg]
    else:
        own = "(required)"
    if not from_profiles:
        return own
    if len(from_profiles) == len(profiles.BUILTIN):
        return "profile"
    if any(isinstance(value, dict) for value in from_profiles.values()):
        return f"profile ({', '.join(from_profiles)})"  # a section: its fields say the values
    by_value: dict[str, list[str]] = {}
    for name, value in from_profiles.items():
        by_value.setdefault(_value(value), []).append(name)
    which = "; ".join(f"{', '.join(names)}: {value}" for value, names in by_value.items())
    mine = "" if own in ("(required)", "none") else f"{own}; "
    return f"{mine}profile ({which})"


def _link(section: str, headings: Headings, here: str) -> str:
    """A Markdown link from the document `here` to the section of that heading."""
    if section not in headings:
        raise ValueError(
            f"no section '{section}', or more than one, in the documents (a Doc(see=...) names it)"
        )
    document, anchor = headings[section]
    return f"[{section}]({'' if document == here else document}#{anchor})"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def config_fields(headings: Headings, here: str) -> str:
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    from_profiles = _profile_defaults()
    for path, info in fields(GPUStack):
        sub, in_list = _model(info.annotation)
        if sub is not None and not in_list and info.default is not None:
            continue  # a section that is always there: its fields have their own rows
        doc = _doc(info)
        description = info.description or ""
        default = _default(path, info, doc, from_profiles.get(path, {}))
        section, resources, leaf = path.partition(".resources")
        if resources and section in _WITH_RESOURCES:
            # One model for every component's container requirements, described per component.
            component = _WITH_RESOURCES[section]
            description = description.replace("the container", component.container)
            own = component.resource_defaults.get(leaf.removeprefix("."))
            default = f"none (gpustack's: {own})" if own else default
        if doc.see:
            description += f" ({_link(doc.see, headings, here)})"
        type_words = _type_words(info.annotation, info.metadata)
        cells = [f"`{path}`", type_words, default, description]
        rows.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(rows)


def _sections_with_resources() -> dict[str, type[WithResources]]:
    found = {}
    for name, info in GPUStack.model_fields.items():
        model, _ = _model(info.annotation)
        if model is not None and issubclass(model, WithResources):
            found[name] = model
    return found


_WITH_RESOURCES = _sections_with_resources()


# --- profiles --------------------------------------------------------------------------------


def _leaves(model: type[BaseModel], data: dict[str, Any], prefix: str) -> dict[str, Any]:
    """`data` (dumped from `model`) as dotted paths down to the fields that hold no model."""
    flat: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name not in data:
            continue
        sub, in_list = _model(info.annotation)
        # A node selector requirement stays whole: the table writes it as `key in (values)`.
        whole = in_list or sub is NodeSelectorRequirement
        if sub is not None and not whole and isinstance(data[name], dict):
            flat.update(_leaves(sub, data[name], f"{prefix}{name}."))
        else:
            flat[prefix + name] = data[name]
    return flat


def _profile_value(value: Any) -> str:
    """A fact in Kubernetes' own notations for selectors, taints and labels."""
    if value is None or value == {} or value == []:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ", ".join(_profile_value(item) for item in value)
    if isinstance(value, dict) and "operator" in value:
        if value["operator"] == "Exists":
            return str(value["key"])
        return f"{value['key']} in ({', '.join(value['values'])})"
    if isinstance(value, dict) and "effect" in value:
        return f"{value['key']}={value.get('value') or ''}:{value['effect']}"
    if isinstance(value, dict) and set(value) == {"first", "last"}:
        return f"{value['first']}–{value['last']}"
    if isinstance(value, dict):
        return ", ".join(f"{key}={_profile_value(item)}" for key, item in value.items())
    return str(value)


def profile_facts() -> str:
    columns = profiles.BUILTIN
    settings = {}
    for name in columns:
        profile, _ = profiles.load(name)
        dumped = profile.model_dump(mode="json", exclude_none=True)
        facts = _leaves(ProfileFacts, dumped["facts"], "facts.")
        defaults = _leaves(GPUStack, dumped["defaults"], "defaults.")
        settings[name] = {**facts, **defaults}
    order = [f"facts.{path}" for path, _ in fields(ProfileFacts)]
    order += [f"defaults.{path}" for path, _ in fields(GPUStack)]
    paths = [path for path in order if any(path in setting for setting in settings.values())]
    unknown = set().union(*settings.values()) - set(paths)
    if unknown:
        raise ValueError(f"profile settings outside the model: {sorted(unknown)}")
    rows = ["| fact | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for path in paths:
        cells = [_profile_value(settings[name].get(path)) for name in columns]
        shown = [f"`{cell}`" if cell else "–" for cell in cells]
        rows.append(f"| `{path}` | " + " | ".join(_cell(cell) for cell in shown) + " |")
    return "\n".join(rows)


# --- lint rules ------------------------------------------------------------------------------


def lint_rules() -> str:
    rows = [
        "| id | severity | what it catches | how to fix | how to suppress |",
        "|---|---|---|---|---|",
    ]
    for rule in lint.RULES:
        cells = [
            f"`{rule.id}`",
            rule.severity,
            rule.description,
            rule.fix,
            f"`{lint.IGNORE_ANNOTATION}: {rule.id}`",
        ]
        rows.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(rows)


# --- the documents ---------------------------------------------------------------------------

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_HEADING = re.compile(r"^#{1,6} +(.+?) *#* *$", re.M)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces made hyphens (a
    second heading of the same text gets `-1`, and so on; see `headings`)."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def headings(documents: dict[str, str]) -> Headings:
    """Every heading of the documents (outside code blocks) with its document and anchor; a
    heading written twice (in one document or two) is left out, so no link can lead to the
    wrong one."""
    found: Headings = {}
    shared: set[str] = set()
    for name, text in documents.items():
        seen: dict[str, int] = {}
        for heading in _HEADING.findall(_FENCE.sub("", text)):
            base = anchor(heading)
            count = seen.get(base, 0)
            seen[base] = count + 1
            if heading in found or heading in shared:
                shared.add(heading)
                found.pop(heading, None)
                continue
            found[heading] = (name, base if count == 0 else f"{base}-{count}")
    return found


# Each generated table: how it is made and what to edit instead of the table.
TABLES: dict[str, tuple[Callable[[Headings, str], str], str]] = {
    "config-fields": (config_fields, "gpustack/config/model.py"),
    "profile-facts": (lambda headings, here: profile_facts(), "profiles/*.yaml"),
    "lint-rules": (
        lambda headings, here: lint_rules(),
        "the RULE of each module in gpustack/validation/lint/",
    ),
}


def generate(documents: dict[str, str]) -> dict[str, str]:
    """The documents (file name -> text, all of one folder) with every generated region
    rewritten; the rest stays as it is. Each table is in exactly one document."""
    found = headings(documents)
    seen: dict[str, str] = {}

    def rewrite(name: str, text: str) -> str:
        def table(match: re.Match[str]) -> str:
            table_name = match.group(1)
            if table_name not in TABLES:
                raise ValueError(
                    f"{name}: no generated table '{table_name}' (known: {', '.join(TABLES)})"
                )
            if table_name in seen:
                raise ValueError(f"{name}: the table '{table_name}' is in {seen[table_name]} too")
            seen[table_name] = name
            make, source = TABLES[table_name]
            marker = f"<!-- generated: {table_name} from {source} by {REGENERATE}: "
            marker += "edit that, not this -->"
            return f"{marker}\n\n{make(found, name)}\n\n{match.group(2)}"

        return _REGION.sub(table, text)

    result = {name: rewrite(name, text) for name, text in documents.items()}
    missing = [name for name in TABLES if name not in seen]
    if missing:
        raise ValueError(f"no region <!-- generated: {missing[0]} --> ... <!-- end generated -->")
    return result


def read(folder: Path) -> dict[str, str]:
    """The Markdown documents of `folder` by file name."""
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.md"))}


def main(argv: list[str]) -> int:
    """`python -m gpustack.docs [FOLDER]`: rewrite the generated tables of the documents in
    FOLDER (default `docs`) in place."""
    folder = Path(argv[0] if argv else "docs")
    if not folder.is_dir():
        print(f"error: {folder}: not a folder of Markdown documents", file=sys.stderr)
        return 2
    documents = read(folder)
    try:
        new = generate(documents)
    except ValueError as error:
        print(f"error: {folder}: {error}", file=sys.stderr)
        return 2
    changed = [name for name in documents if new[name] != documents[name]]
    for name in changed:
        (folder / name).write_text(new[name], encoding="utf-8")
        print(f"{folder / name}: regenerated")
    if not changed:
        print(f"{folder}: up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
