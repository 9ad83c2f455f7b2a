"""README.md stays true to the code: the commands and options it names exist (and every one is in
its reference), its generated tables (config reference, profiles, lint rules) are what
`python -m gpustack.docs README.md` writes, its examples work as written, and CI runs the Quick
start's test command.

Commands are found by the word `gpustack` followed by a subcommand; the regenerate command runs
the module `gpustack.docs`, a word of its own, so it is not taken for one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from conftest import EXAMPLES, ROOT
from ruamel.yaml import YAML

from gpustack import docs
from gpustack.commands.declared import DEBUG, Group
from gpustack.commands.root import ROOT as PROGRAM

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
    return isinstance(command, Group)


def cli_commands() -> dict[tuple[str, ...], Any]:
    """Every command and command group of `gpustack` (as declared for its parser) by its words,
    the root as ()."""
    found: dict[tuple[str, ...], Any] = {}

    def walk(command: Any, words: tuple[str, ...]) -> None:
        found[words] = command
        if is_group(command):
            for name, sub in command.each():
                walk(sub, (*words, name))

    walk(PROGRAM, ())
    return found


def options(command: Any) -> set[str]:
    """The spellings a user writes (a hidden option is the command line's own bookkeeping)."""
    names = {"-h", "--help"}
    for option in command.options:
        if not option.hidden:
            names.update(spelling for spelling, _ in option.spellings)
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
        # --debug works after the command too.
        unknown = set(arguments) - options(COMMANDS[command]) - set(DEBUG.names)
        assert not unknown, f"README: `gpustack {' '.join(command)}` has no {unknown} ({line})"


LONG_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def test_every_long_option_the_readme_names_exists():
    """Options on a benchmark's or a dev script's command line belong to that script; all others
    to gpustack."""
    everything = set().union(*(options(command) for command in COMMANDS.values()))
    benchmarks = set()
    for line in code_lines(README):
        for script in re.findall(r"(?:bench|dev)/\w+\.py", line):
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
    assert runnable[-1] == QUICK_START[1], ".ci/run must end with the README's test command"
    # The static checks before it use the environment that command makes, installed first by its
    # own first steps; nothing else installs packages or runs tests, so CI proves what the README
    # promises.
    install = QUICK_START[1].rpartition(" && ")[0]
    others = [line for line in runnable[:-1] if line != install]
    assert not [line for line in others if re.search(r"\bpip\b|pytest|-m venv", line)], others
    assert runnable[0] == "set -euo pipefail"


# --- generated tables ------------------------------------------------------------------------


def test_the_generated_tables_are_current():
    """The config reference, the profiles table and the lint table are generated (gpustack.docs)
    from the model, the profiles and the rules; README.md must hold what the generator writes."""
    assert docs.generate(README) == README, (
        f"README.md's generated tables are stale: run `{docs.REGENERATE}` and commit the result"
    )


def test_regenerating_rewrites_only_the_tables(tmp_path):
    """A stale table is rewritten from its source, the prose around it is kept; a README missing
    a table's region, or naming a table that does not exist, is an error (exit 2)."""
    stale = re.sub(r"\| `image-not-pinned` \|[^\n]*\n", "", README).replace(
        "\n## Lint rules\n", "\n## Lint rules\n\nProse edited by hand.\n"
    )
    path = tmp_path / "README.md"
    path.write_text(stale)
    assert docs.main([str(path)]) == 0
    regenerated = path.read_text()
    assert "| `image-not-pinned` | error |" in regenerated
    assert regenerated == README.replace(
        "\n## Lint rules\n", "\n## Lint rules\n\nProse edited by hand.\n"
    )
    for broken in (
        re.sub(r"<!-- generated: lint-rules .*?<!-- end generated -->", "", README, flags=re.S),
        README + "\n<!-- generated: commands -->\n<!-- end generated -->\n",
    ):
        path.write_text(broken)
        assert docs.main([str(path)]) == 2
        assert path.read_text() == broken


def test_every_section_link_names_a_heading():
    """Links such as `[Resources](#resources)`, hand-written or generated, point at a heading."""
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", FENCED.sub("", README), re.M)
    }
    linked = set(re.findall(r"\]\(#([^)]+)\)", README))
    assert sorted(linked - anchors) == [], "README links to sections it does not have"


# --- examples ----------------------------------------------------------------------------------


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
