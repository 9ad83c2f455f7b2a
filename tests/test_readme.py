"""README.md stays true to the code: the commands and options it names exist (and every one is in
its reference), the config reference lists exactly the model's fields with their defaults and
allowed values, the profiles table says what `gpustack profiles show` says, the lint table lists
exactly the rules, and CI runs the Quick start's test command."""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import typer
from conftest import EXAMPLES, ROOT
from pydantic import BaseModel
from pydantic_core import PydanticUndefined
from ruamel.yaml import YAML

from gpustack import lint, profiles
from gpustack.cli import GLOBAL_FLAGS, app
from gpustack.model import GPUStack

README = (ROOT / "README.md").read_text()
QUICK_START = [
    "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/gpustack render",
    'python3 -m venv .venv && .venv/bin/pip install ".[test]" && .venv/bin/python -m pytest -q',
]
FENCED = re.compile(r"^```\w*\n(.*?)^```", re.S | re.M)


# --- reading the README ----------------------------------------------------------------------


def section(title: str) -> str:
    """The text of the `## title` section, up to the next `## ` heading."""
    assert f"\n## {title}\n" in README, f"README has no section '## {title}'"
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def subsection(text: str, title: str) -> str:
    assert f"\n### {title}\n" in text, f"README has no section '### {title}'"
    return text.split(f"\n### {title}\n", 1)[1].split("\n### ", 1)[0]


def code_lines(text: str) -> list[str]:
    """Every line of the fenced blocks and every inline code span of `text`, without comments."""
    lines = [line for block in FENCED.findall(text) for line in block.splitlines()]
    lines += re.findall(r"`([^`\n]+)`", FENCED.sub("", text))
    return [re.sub(r"(^|\s)#.*", "", line) for line in lines]


def tables(text: str) -> list[list[list[str]]]:
    """The Markdown tables of `text`: rows of cells (header first, separator left out)."""
    found: list[list[list[str]]] = []
    previous_was_row = False
    for line in FENCED.sub("", text).splitlines():
        if not line.startswith("|"):
            previous_was_row = False
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        if not previous_was_row:
            found.append([])
        previous_was_row = True
        if not all(re.fullmatch(r":?-+:?", cell) for cell in cells):
            found[-1].append(cells)
    return found


def table_with_header(text: str, first: str) -> list[list[str]]:
    matching = [table for table in tables(text) if table[0][0] == first]
    assert len(matching) == 1, f"expected one table whose first column is '{first}'"
    return matching[0]


def code_key(cell: str) -> str | None:
    """The code span a cell consists of (`path` -> path), else None."""
    match = re.fullmatch(r"`([^`]+)`", cell)
    return match.group(1) if match else None


# --- the command line ------------------------------------------------------------------------


def is_group(command: Any) -> bool:
    return hasattr(command, "commands")


def cli_commands() -> dict[tuple[str, ...], Any]:
    """Every command and command group of `gpustack` (as typer builds them) by its words, the
    root as ()."""
    found: dict[tuple[str, ...], Any] = {}

    def walk(command: Any, words: tuple[str, ...]) -> None:
        found[words] = command
        if is_group(command):
            for name, sub in command.commands.items():
                walk(sub, (*words, name))

    walk(typer.main.get_command(app), ())
    return found


def options(command: Any) -> set[str]:
    names = {"-h", "--help"}
    for parameter in command.params:
        if parameter.param_type_name == "option":
            names.update(parameter.opts, parameter.secondary_opts)
    return names


COMMANDS = cli_commands()
LEAVES = {words: command for words, command in COMMANDS.items() if words and not is_group(command)}


def mentions() -> list[tuple[str, tuple[str, ...], list[str]]]:
    """Each `gpustack ...` in README code: (the line, the command words, the options after them
    up to a pipe, `&&`, redirection or `;`)."""
    found = []
    for line in code_lines(README):
        words = line.split()
        for index, word in enumerate(words):
            if word != "gpustack" and not word.endswith("/gpustack"):
                continue
            rest = words[index + 1 :]
            while rest and rest[0] in options(COMMANDS[()]):
                rest = rest[1:]
            command: tuple[str, ...] = ()
            while (
                rest and re.fullmatch(r"[a-z][a-z-]*", rest[0]) and is_group(COMMANDS.get(command))
            ):
                command, rest = (*command, rest[0]), rest[1:]
            if not command:
                continue  # the project's name in prose, not a command
            arguments = []
            for token in rest:
                if token in ("|", "&&", ">", ";"):
                    break
                arguments += re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])(?![\w-])", token)
            found.append((line, command, arguments))
    return found


def test_readme_names_only_commands_that_exist_with_their_options():
    checked = mentions()
    assert len(checked) > 20, "the README's commands were not found"
    for line, command, arguments in checked:
        assert command in COMMANDS, f"README: no command `gpustack {' '.join(command)}` ({line})"
        assert not is_group(COMMANDS[command]), (
            f"README: `gpustack {' '.join(command)}` needs a subcommand ({line})"
        )
        # Global flags work after the command too (gpustack.cli.GLOBAL_FLAGS).
        unknown = set(arguments) - options(COMMANDS[command]) - set(GLOBAL_FLAGS)
        assert not unknown, f"README: `gpustack {' '.join(command)}` has no {unknown} ({line})"


LONG_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def test_every_long_option_the_readme_names_exists():
    """Options on a benchmark's command line belong to that script; all others to gpustack."""
    everything = set().union(*(options(command) for command in COMMANDS.values()))
    benchmarks = set()
    for line in code_lines(README):
        for script in re.findall(r"bench/\w+\.py", line):
            source = (ROOT / script).read_text()
            for option in LONG_OPTION.findall(line):
                assert f'"{option}"' in source, f"{script} has no {option}"
                benchmarks.add(option)
    named = set(LONG_OPTION.findall(README))
    assert named - everything - benchmarks == set(), "README names options gpustack lacks"


def test_the_command_reference_covers_every_command_and_option():
    reference = section("Commands")
    for words, command in LEAVES.items():
        name = f"gpustack {' '.join(words)}"
        assert f"`{name}" in reference, f"{name} is missing from README's Commands"
        text = subsection(reference, f"gpustack {words[0]}")
        long_options = {option for option in options(command) if option.startswith("--")}
        for option in sorted(long_options - {"--help"}):
            assert f"`{option}" in text or f", {option}" in text, (
                f"{name} {option} is missing from README's Commands"
            )
    for option in options(COMMANDS[()]) - {"-h", "--help"}:
        assert f"`{option}`" in reference, f"global option {option} is missing"


# --- Quick start and CI ----------------------------------------------------------------------


def test_quick_start_holds_exactly_the_two_commands():
    blocks = FENCED.findall(section("Quick start"))
    commands = [line for block in blocks for line in block.splitlines() if line.strip()]
    assert commands == QUICK_START


def test_ci_runs_the_readme_test_command_as_written():
    ci = (ROOT / ".ci" / "run").read_text()
    runnable = [line for line in ci.splitlines() if line.strip() and not line.startswith("#")]
    assert QUICK_START[1] in runnable, ".ci/run must run the README's test command as written"
    # Nothing else installs packages or runs tests, so CI proves what the README promises.
    others = [line for line in runnable if line != QUICK_START[1]]
    assert not [line for line in others if re.search(r"\bpip\b|pytest|-m venv", line)], others
    assert runnable[0] == "set -euo pipefail"


# --- config reference ------------------------------------------------------------------------


def _models(annotation: Any) -> list[tuple[type[BaseModel], bool]]:
    """The models inside a field's type, each with whether it is a list's item."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, False)]
    if origin is list:
        return [(model, True) for model, _ in _models(arguments[0])]
    if origin in (typing.Union, types.UnionType):
        return [found for argument in arguments for found in _models(argument)]
    if origin is typing.Annotated:
        return _models(arguments[0])
    return []


def _literals(annotation: Any) -> list[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return [str(value) for value in typing.get_args(annotation)]
    return [value for argument in typing.get_args(annotation) for value in _literals(argument)]


def model_fields(model: type[BaseModel] = GPUStack, prefix: str = "") -> dict[str, Any]:
    """Every field path of the config (list items as `[]`), with its pydantic FieldInfo."""
    found: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        path = prefix + name
        found[path] = info
        for sub, is_list in _models(info.annotation):
            found.update(model_fields(sub, path + ("[]." if is_list else ".")))
    return found


def _dotted(data: dict[str, Any], prefix: str = "") -> set[str]:
    paths = set()
    for key, value in data.items():
        paths.add(prefix + key)
        if isinstance(value, dict):
            paths |= _dotted(value, f"{prefix}{key}.")
    return paths


def profile_defaults() -> set[str]:
    """Config field paths some built-in profile's `defaults` set."""
    return {path for name in profiles.BUILTIN for path in _dotted(profiles.load(name)[1].data)}


def config_reference() -> dict[str, dict[str, str]]:
    rows = table_with_header(section("Config reference"), "field")
    header = [cell.lower() for cell in rows[0]]
    assert header == ["field", "type", "default", "meaning"]
    return {code_key(row[0]) or row[0]: dict(zip(header, row)) for row in rows[1:]}


def test_config_reference_lists_exactly_the_model_fields():
    fields = model_fields()
    documented = config_reference()
    leaves = {path for path, info in fields.items() if not _models(info.annotation)}
    assert sorted(leaves - set(documented)) == [], "fields missing from README's config reference"
    assert sorted(set(documented) - set(fields)) == [], "README documents fields the model lacks"


def test_config_reference_gives_each_default_and_allowed_value():
    documented = config_reference()
    from_profile = profile_defaults()
    for path, info in model_fields().items():
        if path not in documented:
            continue
        row = documented[path]
        default = info.default
        if path in from_profile:
            assert "profile" in row["default"], f"{path}: the profile supplies its default"
        elif default is PydanticUndefined and info.default_factory is None:
            assert "required" in row["default"], f"{path} is required"
        if isinstance(default, bool):
            assert f"`{str(default).lower()}`" in row["default"], path
        elif isinstance(default, (str, int)):
            assert f"`{default}`" in row["default"], f"{path}: default {default!r}"
        for value in _literals(info.annotation):
            assert f"`{value}`" in row["type"], f"{path}: allowed value {value!r} missing"


# --- profiles --------------------------------------------------------------------------------


def _shown(cli, name: str) -> dict[str, Any]:
    result = cli("profiles", "show", name)
    assert result.exit_code == 0, result.output
    return YAML(typ="safe").load(result.stdout)


def _facts(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A profile's facts and defaults as dotted paths; label maps, node selector requirements and
    lists stay whole."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        path = prefix + key
        nested = (
            isinstance(value, dict)
            and value
            and "operator" not in value
            and all(re.fullmatch(r"[A-Za-z]+", child) for child in value)
        )
        if nested:
            flat.update(_facts(value, path + "."))
        else:
            flat[path] = value
    return flat


def _cell(value: Any) -> str:
    """How the profiles table writes a value: Kubernetes' own notations for selectors, taints and
    labels."""
    if value is None or value == {} or value == []:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ", ".join(_cell(item) for item in value)
    if isinstance(value, dict) and "operator" in value:
        if value["operator"] == "Exists":
            return value["key"]
        return f"{value['key']} in ({', '.join(value['values'])})"
    if isinstance(value, dict) and "effect" in value:
        return f"{value['key']}={value.get('value') or ''}:{value['effect']}"
    if isinstance(value, dict):
        return ", ".join(f"{key}={item}" for key, item in value.items())
    return str(value)


def test_profiles_table_says_what_profiles_show_says(cli):
    rows = table_with_header(section("Profiles"), "fact")
    columns = rows[0][1:]
    assert sorted(columns) == sorted(profiles.BUILTIN), "one column per built-in profile"
    shown = {name: _shown(cli, name) for name in profiles.BUILTIN}
    facts = {
        name: _facts({"facts": data["facts"], "defaults": data.get("defaults", {})})
        for name, data in shown.items()
    }
    every_path = set().union(*facts.values())
    table = {code_key(row[0]): row[1:] for row in rows[1:]}
    assert sorted(every_path - set(table)) == [], "profile facts missing from README's table"
    assert sorted(set(table) - every_path) == [], "README's table has rows no profile sets"
    for path, cells in table.items():
        for name, cell in zip(columns, cells):
            assert cell.replace("`", "") == _cell(facts[name].get(path)), f"{name} {path}"


def test_profiles_section_names_every_built_in_profile():
    text = section("Profiles")
    for name in profiles.BUILTIN:
        assert f"`{name}`" in text or f"| {name} |" in text, name
    assert "extends:" in text and "--profiles-dir" in text


def test_the_user_profile_example_works(cli, tmp_path, monkeypatch):
    """The profile of README's "User profiles", with its commands, as written."""
    text = subsection(section("Profiles"), "User profiles")
    blocks = FENCED.findall(text)
    profile, commands = blocks[0], blocks[1]
    path, _, content = profile.partition("\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / path.removeprefix("# ")).parent.mkdir(parents=True)
    (tmp_path / path.removeprefix("# ")).write_text(content)
    for line in commands.splitlines():
        words = line.split()
        assert words[0] == "gpustack", line
        result = cli(*words[1:])
        # `profiles diff` exits 1 because the two differ.
        assert result.exit_code == (1 if words[1:3] == ["profiles", "diff"] else 0), result.output
    (config,) = [word for word in commands.split() if word.endswith(".yaml")][-1:]
    profile_data = YAML(typ="safe").load(content)
    rendered = tmp_path / "out" / Path(config).stem
    namespace = profile_data["defaults"]["namespace"]
    assert (rendered / f"namespace-{namespace}.yaml").is_file()
    plugin = (rendered / "daemonset-nvidia-device-plugin.yaml").read_text()
    assert f"path: {profile_data['facts']['kubeletRoot']}/device-plugins" in plugin


# --- lint rules and examples -----------------------------------------------------------------


def test_lint_table_lists_exactly_the_rules_with_their_severity():
    rows = table_with_header(section("Lint rules"), "id")
    documented = {code_key(row[0]): row[1] for row in rows[1:]}
    assert documented == {rule.id: rule.severity for rule in lint.RULES}
    for rule in lint.RULES:
        assert any(f"`gpustack.dev/ignore: {rule.id}`" in row[-1] for row in rows), rule.id


def test_examples_table_names_every_example_and_its_output_folder():
    rows = table_with_header(section("Write a config"), "example")
    documented = {code_key(row[0].split(" ")[0]): code_key(row[1]) for row in rows[1:]}
    examples = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        name = YAML(typ="safe").load(path.read_text())["metadata"]["name"]
        examples[f"examples/{path.name}"] = f"out/{name}/"
    assert documented == examples
    assert all(Path(ROOT, folder).is_dir() for folder in examples.values())


def test_the_error_example_is_what_gpustack_prints():
    """The README's sample error is the bad-input corpus' expected line for that file."""
    blocks = FENCED.findall(section("Exit codes and errors"))
    (line,) = [line for block in blocks for line in block.splitlines() if line.startswith("error:")]
    source = line.split()[1].split(":")[0]
    expected = (ROOT / source).with_suffix(".expected").read_text().strip()
    assert line == expected


def test_the_diff_sample_is_what_gpustack_diff_prints(cli, monkeypatch):
    """The sample's first line is the command (run from the repository root), the rest the
    summary it prints."""
    (block,) = [block for block in FENCED.findall(section("Diff")) if block.startswith("$ ")]
    command, *summary = block.splitlines()
    monkeypatch.chdir(ROOT)
    result = cli(*command.split()[2:], "--color", "never")
    assert result.exit_code == 1, result.output  # the two profiles differ
    assert result.stdout.split("\n\n")[0].splitlines() == summary
