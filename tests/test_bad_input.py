"""The bad-input corpus: every mistake a user can make in a config gets one clear line on stderr.

Each case is `tests/cases/bad/<case>.yaml` (the input) and `<case>.expected` (exactly what the user
sees on stderr: one `error:` line per mistake). The harness runs the real command line (in-process,
conftest.run_gpustack) from the repository root, `gpustack render <case>.yaml -o OUT` unless
`<case>.args` gives another command line (`{config}` is the case's file, `{out}` the output
folder), so paths print as a user in a checkout would see them, and checks that nothing on disk
changed: the output folder holds a previous render and a user's own files, and both must come
through byte-identical. Inputs too large to commit are generated at run time (GENERATED), into a
copy of the checkout's layout in a temporary folder (the command runs there), never into the
repository, which tests running in parallel share.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, run_gpustack

from gpustack.read.yamlio import MAX_FILE_BYTES

CASES = ROOT / "tests" / "cases" / "bad"
PREVIOUS_RENDER = CASES / "support" / "previous-render.yaml"


def _too_large(path: Path) -> None:
    """A valid config padded with comments to one byte over the size limit."""
    config = (ROOT / "examples" / "kubeadm.yaml").read_bytes()
    padding = MAX_FILE_BYTES + 1 - len(config)
    line = b"# padding\n"
    path.write_bytes(config + line * (padding // len(line)) + b"#" * (padding % len(line)))
    assert path.stat().st_size == MAX_FILE_BYTES + 1


def _lint_beyond_its_bound(path: Path) -> None:
    """DaemonSets whose selectors (an `Exists`, which no label index narrows) all select each
    other's pods: more pairs than lint compares (lint._objects.MAX_COMPARISONS)."""
    documents = []
    for number in range(720):
        documents.append(
            "apiVersion: apps/v1\nkind: DaemonSet\n"
            f"metadata: {{name: ds-{number}, namespace: gpu}}\n"
            "spec:\n  selector: {matchExpressions: [{key: tier, operator: Exists}]}\n"
            f"  template:\n    metadata: {{labels: {{tier: gpu, app: ds-{number}}}}}\n"
            "    spec: {containers: [{name: main, image: 'example.com/main:1'}]}\n"
        )
    path.write_text("---\n".join(documents))


def _naming(field: str, special: Callable[[Path], None]) -> Callable[[Path], None]:
    """A config whose `field` (a patch or MIG config file) names a special file made beside it
    (git keeps no FIFO, nor a folder without files)."""
    parent, _, key = field.rpartition(".")

    def generate(path: Path) -> None:
        target = path.with_name(f"{path.stem}-target.yaml")
        special(target)
        if parent == "patches":
            setting = f"patches:\n- path: {target.name}\n"
        else:
            setting = (
                f"devicePlugin:\n  migStrategy: single\nmigManager:\n  config:\n"
                f"    {key}: {target.name}\n"
            )
        path.write_text(
            "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata:\n  name: lab\n"
            f"platform:\n  profile: rke2\n{setting}"
        )

    return generate


def _broken_link(path: Path) -> None:
    path.symlink_to(path.with_name("missing.yaml"))


GENERATED: dict[str, Callable[[Path], None]] = {
    "too-large": _too_large,
    "patch-file-is-a-fifo": _naming("patches.path", os.mkfifo),
    "patch-file-is-a-folder": _naming("patches.path", Path.mkdir),
    "patch-file-is-a-broken-link": _naming("patches.path", _broken_link),
    "mig-config-file-is-a-fifo": _naming("migManager.config.file", os.mkfifo),
    "mig-config-file-is-a-broken-link": _naming("migManager.config.file", _broken_link),
    "lint-beyond-its-bound": _lint_beyond_its_bound,
}


def case_names() -> list[str]:
    return sorted(path.stem for path in CASES.glob("*.expected"))


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) below `folder`."""
    return {
        str(path.relative_to(folder)): None if path.is_dir() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
    }


@pytest.fixture(scope="module")
def previous_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An output folder as a user has it: an earlier render plus files of the user's own."""
    out = tmp_path_factory.mktemp("previous") / "out"
    result = run_gpustack("render", str(PREVIOUS_RENDER), "-o", str(out))
    assert result.returncode == 0, result.stderr
    (out / "lab" / "NOTES.md").write_text("My notes about this cluster.\n")
    (out / "README.md").write_text("Rendered GPU stacks, one folder per cluster.\n")
    return out


@pytest.fixture(scope="module")
def generated_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder laid out like the checkout (tests/cases/bad/) holding the generated inputs."""
    root = tmp_path_factory.mktemp("checkout")
    (root / CASES.relative_to(ROOT)).mkdir(parents=True)
    for name, generate in GENERATED.items():
        generate(root / CASES.relative_to(ROOT) / f"{name}.yaml")
    return root


def test_every_case_has_an_input_and_an_expected_message() -> None:
    committed = {path.stem for path in CASES.glob("*.yaml")} - set(GENERATED)
    assert set(case_names()) == committed | set(GENERATED)


@pytest.mark.parametrize("case", case_names())
def test_bad_input(
    case: str, previous_output: Path, generated_checkout: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    # Hard links, not copies: gpustack never writes into an existing file (it writes new files
    # and swaps folders), so the shared previous output stays as it is; a file written in place
    # would differ from `before` below all the same.
    shutil.copytree(previous_output, out, copy_function=os.link)
    before = snapshot(out)
    expected = (CASES / f"{case}.expected").read_text(encoding="utf-8").replace("{out}", str(out))

    arguments = CASES / f"{case}.args"
    command = arguments.read_text() if arguments.exists() else "render {config} -o {out}"
    config = f"tests/cases/bad/{case}.yaml"
    result = run_gpustack(
        *(word.format(config=config, out=out) for word in command.split()),
        cwd=generated_checkout if case in GENERATED else ROOT,
    )

    assert "Traceback" not in result.stderr
    assert result.stderr == expected
    assert result.returncode == 2
    assert result.stdout == ""
    assert snapshot(out) == before, "a failed render changed the output folder"


def test_expected_messages_are_one_line_per_error_naming_the_file() -> None:
    for case in case_names():
        message = (CASES / f"{case}.expected").read_text(encoding="utf-8")
        assert message.endswith("\n"), case
        for line in message.splitlines():
            assert line.startswith(
                (
                    "error: tests/cases/bad/",
                    "error: {out}",
                    "error: --set:",
                    "error: --schema-location:",
                    "error: --kubernetes-version:",
                    "error: --operator-version:",
                )
            ), case
