"""The contributor's tools: `dev/generate.py` (regenerate or check everything generated) and the
repository's own `.pre-commit-config.yaml`, run for real on copies of the repository."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_script_main
from pre_commit.clientlib import load_config

GENERATED_FROM = ["gpustack", "profiles", "schemas", "examples", "out", "dev", "docs"]


def copy_repository(target: Path) -> Path:
    for name in GENERATED_FROM:
        source = ROOT / name
        if source.is_dir():
            # __pycache__ too, its sources' times kept (copy2): the copy's commands start from
            # the compiled modules rather than compile the package again.
            shutil.copytree(source, target / name)
        else:
            shutil.copy2(source, target / name)
    return target


def generate(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The copy's `dev/generate.py ARGS...` as a contributor runs it: a script of its own,
    here started from outside the copy (it finds the repository from its own path)."""
    return subprocess.run(
        [sys.executable, str(root / "dev" / "generate.py"), *args],
        cwd=root.parent,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


def generate_in_process(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The copy's dev/generate.py loaded as a module and its main() called with ARGS, in this
    process: the script's own code, its paths the copy's; what main() returns is the exit code
    the script ends with (`sys.exit(main())`, which the runs of `generate` show)."""
    spec = importlib.util.spec_from_file_location("generate", root / "dev" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    stdout, stderr = io.StringIO(), io.StringIO()
    path, argv = list(sys.path), sys.argv
    try:
        spec.loader.exec_module(module)  # puts the copy first on sys.path, as the script does
        assert root.resolve() == module.ROOT
        sys.argv = [str(root / "dev" / "generate.py"), *args]
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = module.main()
    finally:
        sys.path[:], sys.argv = path, argv
    return subprocess.CompletedProcess(
        ["generate.py", *args], code, stdout.getvalue(), stderr.getvalue()
    )


def test_generate_finds_and_fixes_each_kind_of_stale_file(tmp_path: Path) -> None:
    root = copy_repository(tmp_path)
    # That the repository as it is is current, tests/test_schema.py, tests/test_golden.py and
    # tests/test_readme.py prove; here the check names each damaged file, the fix restores the
    # repository's bytes exactly, and the check then passes.
    schema = root / "schemas" / "gpustack.schema.json"
    config_reference = root / "docs" / "config.md"
    output = next(path for path in sorted((root / "out").rglob("daemonset-*.yaml")))
    originals = {path: path.read_bytes() for path in (schema, config_reference, output)}
    schema.write_text(schema.read_text().replace('"type": "object"', '"type": "array"', 1))
    # A row of the generated config reference, hand-edited.
    config_reference.write_text(
        config_reference.read_text().replace("| `metadata.name` | DNS", "| `metadata.nam` | DNS", 1)
    )
    output.write_text(output.read_text() + "# edited by hand\n")
    damaged = {path: path.read_bytes() for path in originals}
    assert damaged != originals

    checked = generate(root, "--check")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert checked.stdout.splitlines() == [
        "stale: schemas/gpustack.schema.json",
        "stale: docs/config.md (generated tables)",
        "stale: out/",
    ]
    assert {path: path.read_bytes() for path in originals} == damaged, "--check changed a file"

    # The fix and the check after it call the same script's main() in this process.
    fixed = generate_in_process(root)
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.splitlines() == [
        "regenerated: schemas/gpustack.schema.json",
        "regenerated: docs/config.md (generated tables)",
        "regenerated: out/",
    ]
    assert {path: path.read_bytes() for path in originals} == originals
    again = generate_in_process(root, "--check")
    assert (again.returncode, again.stdout) == (0, "everything generated is current\n")


def test_the_contributor_hooks_run_with_the_pre_commit_framework(tmp_path: Path) -> None:
    """A file that breaks ruff's format is refused and fixed by the ruff-format hook; the
    configuration loads with pre-commit's own schema and runs the tools .ci/run runs."""
    config = load_config(str(ROOT / ".pre-commit-config.yaml"))
    hooks = {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}
    assert set(hooks) == {"ruff", "ruff-format", "mypy", "generated"}
    assert hooks["generated"]["entry"] == "python dev/generate.py --check"

    repository = tmp_path / "repo"
    (repository / "gpustack").mkdir(parents=True)
    shutil.copy2(ROOT / ".pre-commit-config.yaml", repository)
    shutil.copy2(ROOT / "pyproject.toml", repository)
    module = repository / "gpustack" / "badly_formatted.py"
    module.write_text("x = {  'a':1 }\n")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PRE_COMMIT_HOME": str(tmp_path / "cache"),
        "HOME": str(tmp_path / "cache"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    subprocess.run(["git", "init", "-q"], cwd=repository, env=env, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repository, env=env, check=True)
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "ruff-format", "--all-files"],
        cwd=repository,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "files were modified by this hook" in result.stdout
    assert module.read_text() == 'x = {"a": 1}\n'


@pytest.mark.parametrize(
    "script", sorted((ROOT / "bench").glob("*.py")), ids=lambda path: path.name
)
def test_each_benchmark_loads_and_reads_its_command_line(script: Path) -> None:
    """The benchmarks are run by hand and measure nothing here (docs/performance.md); each
    still imports what it measures and reads its own command line."""
    result = run_script_main(script, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: "), result.stdout
