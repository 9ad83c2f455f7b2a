"""The validation benchmark the README documents still works (its timings are not asserted)."""

from __future__ import annotations

import re

from conftest import ROOT, run_script_main


def test_validate_benchmark_runs_on_both_shapes():
    # Its main() here; each validation it measures runs in processes of its own, as it must
    # (a peak memory and a start-up per run).
    result = run_script_main(
        ROOT / "bench" / "validate.py",
        *("--resources", "40", "--streams", "2", "--repeat", "1", "--keys", "1000"),
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    count = int(re.fullmatch(r"resources: (\d+); start-up \(one file\): [\d.]+ s", lines[0])[1])
    assert count >= 40  # whole clusters are rendered
    shapes = [line for line in lines[1:] if "resources/s" in line]
    assert [line.split(":")[0] for line in shapes] == [
        "one file per resource, kubeconform flags",
        "2 multi-document files, kubeconform flags",
        "one file per resource, gpustack flags",
    ]
    for line in shapes:
        # Every rendered resource is found and valid in either shape.
        assert re.search(
            rf"Summary: {count} resources found in \d+ files? - Valid: {count}, Invalid: 0", line
        )
        assert "exit 0" in line and "peak " in line
    assert re.fullmatch(
        r"one ConfigMap of 1,000 keys \(0\.0 MiB\), gpustack flags: [\d.]+ s, peak \d+ MiB, exit 0",
        lines[-1],
    )
