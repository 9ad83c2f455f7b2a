"""Regenerate everything in the repository that is generated, or check that it is current.

    python dev/generate.py           # write what is stale
    python dev/generate.py --check   # change nothing; exit 1 naming what is stale

What is generated, and from what:

    schemas/gpustack.schema.json   `gpustack schema`, from the config model (gpustack/resolve/)
    out/                           `gpustack render examples/*.yaml -o out`, one folder per example
    docs/'s reference tables       `python -m gpustack.docs`, from the model, the profiles
                                   and the lint rules (in docs/config.md, docs/profiles.md,
                                   docs/lint.md)

Run from anywhere; paths are the repository's. The tests check the same three things
(tests/test_schema.py, tests/test_golden.py, tests/test_readme.py); this is the one command
that fixes them all.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpustack import docs  # noqa: E402
from gpustack.cli import run  # noqa: E402
from gpustack.config.schema import schema_text  # noqa: E402

SCHEMA = ROOT / "schemas" / "gpustack.schema.json"
DOCS = ROOT / "docs"


def examples() -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "examples").glob("*.yaml"))


def gpustack(*args: str) -> tuple[int, str]:
    """`gpustack ARGS...` from the repository root, in this process (gpustack is imported
    already; a new interpreter would import it again): its exit code and stderr."""
    stderr = io.StringIO()
    with (
        contextlib.chdir(ROOT),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(stderr),
    ):
        try:
            code = run(list(args))
        except SystemExit as done:  # argparse's usage errors
            code = done.code if isinstance(done.code, int) else 2
    return code, stderr.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    check = parser.parse_args().check
    stale: list[str] = []

    schema = schema_text()
    if SCHEMA.read_text(encoding="utf-8") != schema:
        stale.append(str(SCHEMA.relative_to(ROOT)))
        if not check:
            SCHEMA.write_text(schema, encoding="utf-8")

    documents = docs.read(DOCS)
    try:
        tables = docs.generate(documents)
    except ValueError as error:
        print(f"error: docs: {error}", file=sys.stderr)
        return 2
    for name, text in documents.items():
        if tables[name] != text:
            stale.append(f"docs/{name} (generated tables)")
            if not check:
                (DOCS / name).write_text(tables[name], encoding="utf-8")

    # `check` compares out/ with a render byte for byte (and validates it); `render` writes only
    # the files that differ and prunes gpustack's files no render makes.
    compared, problems = gpustack("check", *examples(), "-o", "out", "--quiet")
    if compared == 2:
        sys.stderr.write(problems)
        return 2
    if compared != 0:
        stale.append("out/")
        if check:
            sys.stderr.write(problems)
        if not check:
            rendered, problems = gpustack("render", *examples(), "-o", "out", "--quiet")
            if rendered != 0:
                sys.stderr.write(problems)
                return rendered

    for what in stale:
        print(f"{'stale' if check else 'regenerated'}: {what}")
    if not stale:
        print("everything generated is current")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
