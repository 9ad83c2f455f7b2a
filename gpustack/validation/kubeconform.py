"""`gpustack validate --engine kubeconform`: run a kubeconform binary with the project's schemas.

The command line uses only kubeconform's documented flags (-strict, -summary, -verbose, -output,
-kubernetes-version, -schema-location, -skip, -reject, -ignore-missing-schemas,
-ignore-filename-pattern, -exit-on-error, -n; yannh/kubeconform pkg/config/config.go), each
passed only when the run asks for it. kubeconform prints its own report and its exit code is
passed through. stdin is handed over as it is read, and no more than a manifest file may hold
(manifests.MAX_MANIFEST_BYTES): a larger input is refused, as the builtin engine refuses it.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import threading
from typing import IO

from gpustack.errors import UserError
from gpustack.validation.manifests import MAX_MANIFEST_BYTES
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
    strict: bool = True,
    exit_on_error: bool = False,
    jobs: int | None = None,
) -> list[str]:
    """The kubeconform argv equivalent to a `gpustack validate` run."""
    argv = [binary, *(["-strict"] if strict else [])]
    argv += ["-kubernetes-version", f"{kubernetes_version}.0", "-output", output]
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
    if exit_on_error:
        argv.append("-exit-on-error")
    if jobs is not None:
        argv += ["-n", str(jobs)]
    return argv + paths


def run(argv: list[str], stdin: IO[bytes] | None) -> int:
    """Run kubeconform, its output passed through; `stdin` is copied to it in chunks, up to
    MAX_MANIFEST_BYTES (past that, kubeconform is stopped and a UserError raised)."""
    process = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    output: dict[str, bytes] = {}
    readers = [
        threading.Thread(target=lambda: output.update(out=_drain(process.stdout))),
        threading.Thread(target=lambda: output.update(err=_drain(process.stderr))),
    ]
    for reader in readers:
        reader.start()
    too_much = stdin is not None and not _feed(stdin, process.stdin)
    if too_much:
        process.kill()
    code = process.wait()
    for reader in readers:
        reader.join()
    if too_much:
        raise UserError(f"more than {MAX_MANIFEST_BYTES} bytes on stdin")
    sys.stdout.write(output.get("out", b"").decode("utf-8", "replace"))
    sys.stderr.write(output.get("err", b"").decode("utf-8", "replace"))
    return code


def _feed(source: IO[bytes], sink: IO[bytes] | None) -> bool:
    """Copy source to sink, at most MAX_MANIFEST_BYTES; False when the source had more."""
    assert sink is not None
    copied = 0
    try:
        while chunk := source.read(min(1 << 20, MAX_MANIFEST_BYTES + 1 - copied)):
            copied += len(chunk)
            if copied > MAX_MANIFEST_BYTES:
                return False
            sink.write(chunk)
    except BrokenPipeError:
        pass  # kubeconform stopped reading (it exits on its own)
    finally:
        with contextlib.suppress(BrokenPipeError):
            sink.close()
    return True


def _drain(stream: IO[bytes] | None) -> bytes:
    assert stream is not None
    return stream.read()
