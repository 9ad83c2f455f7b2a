"""`gpustack validate --engine kubeconform`: run a kubeconform binary with the project's schemas.

The command line uses only kubeconform's documented flags (-strict, -summary, -verbose, -output,
-kubernetes-version, -schema-location, -skip, -reject, -ignore-missing-schemas,
-ignore-filename-pattern). kubeconform
prints its own report and its exit code is passed through.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

from gpustack.validation.schemas import PROJECT, project_template

BINARY = "kubeconform"


def find() -> str | None:
    return shutil.which(BINARY)


def command_line(
    binary: str,
    paths: list[str],
    kubernetes_version: str,
    locations: tuple[str, ...],
    output: str,
    summary: bool,
    verbose: bool,
    skip: list[str],
    reject: list[str],
    ignore_missing_schemas: bool,
    ignore_filename_patterns: list[str],
) -> list[str]:
    """The kubeconform argv equivalent to a `gpustack validate` run."""
    argv = [binary, "-strict", "-kubernetes-version", f"{kubernetes_version}.0", "-output", output]
    for location in locations:
        # `default` means the same to kubeconform; `gpustack` becomes the path of our schemas/.
        argv += ["-schema-location", project_template() if location == PROJECT else location]
    if summary:
        argv.append("-summary")
    if verbose:
        argv.append("-verbose")
    if skip:
        argv += ["-skip", ",".join(skip)]
    if reject:
        argv += ["-reject", ",".join(reject)]
    if ignore_missing_schemas:
        argv.append("-ignore-missing-schemas")
    for pattern in ignore_filename_patterns:
        argv += ["-ignore-filename-pattern", pattern]
    return argv + paths


def run(argv: list[str], stdin: bytes | None) -> int:
    completed = subprocess.run(argv, input=stdin, capture_output=True, check=False)
    sys.stdout.write(completed.stdout.decode("utf-8", "replace"))
    sys.stderr.write(completed.stderr.decode("utf-8", "replace"))
    return completed.returncode
