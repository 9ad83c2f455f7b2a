"""Validation benchmark: `gpustack validate` on a generated corpus of rendered resources, in two
shapes, each run in a fresh process.

    python bench/validate.py --resources 20000 [--streams 4] [--repeat 3] [--keys 1000000]

The corpus is what a fleet renders (clusters of several profiles; many objects alike, as in a
real fleet) in a temporary folder: once as one file per resource (as `gpustack render` writes
them), once as `--streams` large multi-document files. Each shape is validated with kubeconform's
command line (`-strict -summary`, what kubeconform is measured with) and, for the file-per-resource
shape, with gpustack's own (`--summary`: strict, with lint). Reported per run, fastest of the
repetitions: seconds, resources per second (start-up included), CPU seconds of all its processes,
and the peak resident memory of the largest process (resource.getrusage children maxrss). Start-up is a run on one small file.
With `--keys N`, also one ConfigMap of N data keys (hostile input: memory must follow the data,
not the size of a parser's tree of it), validated with gpustack's flags.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpustack.build import pipeline
from gpustack.fleet import clusters as fleet

BASE = """\
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
"""
PROFILES = [("rke2", "1.31"), ("kubeadm", "1.31"), ("openshift", "1.33")]
SHARING = ["none", "time-slicing"]
COMMANDS = {
    # The schema locations kubeconform is given for rendered output (core kinds, then the
    # project's CRD schemas); schemas only (--no-lint), the checks kubeconform makes.
    "kubeconform flags": [
        "--no-lint",
        "-strict",
        "-summary",
        "-kubernetes-version",
        "1.31.0",
        "-schema-location",
        "default",
        "-schema-location",
        "gpustack",
    ],
    "gpustack flags": ["--summary", "--kubernetes-version", "1.31"],
}


def generate(folder: Path, resources: int, streams: int) -> tuple[Path, Path, int]:
    """Render whole clusters until there are at least `resources` objects; write both shapes."""
    configs = folder / "configs"
    configs.mkdir()
    (configs / "base.yaml").write_text(BASE)
    files, documents = folder / "files", []
    count, index = 0, 0
    while count < resources:
        batch = []
        for _ in range(50):
            profile, _version = PROFILES[index % len(PROFILES)]
            path = configs / f"gpu-{index:05}.yaml"
            path.write_text(
                "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nextends: base.yaml\n"
                f"metadata:\n  name: gpu-{index:05}\n"
                f'platform:\n  profile: {profile}\n  kubernetesVersion: "1.31"\n'
                "nodes:\n  taints:\n"
                "  - {key: nvidia.com/gpu, value: present, effect: NoSchedule}\n"
                f"  - {{key: pool, value: pool-{index % 7}, effect: NoSchedule}}\n"
                f"devicePlugin:\n  sharing: {{strategy: {SHARING[index % 2]}}}\n"
            )
            batch.append(path)
            index += 1
        for rendering in fleet.render_all(batch):
            if count >= resources:
                break
            for relative, content in sorted(pipeline.files(rendering).items()):
                if relative.startswith("node/") or not relative.endswith(".yaml"):
                    continue  # host-side files are not manifests
                target = files / rendering.name / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
                documents.append(content)
                count += 1
    multi = folder / "multi"
    multi.mkdir()
    per_stream = -(-len(documents) // streams)
    for number in range(streams):
        chunk = documents[number * per_stream : (number + 1) * per_stream]
        (multi / f"stream-{number}.yaml").write_bytes(b"---\n".join(chunk))
    return files, multi, count


def measure(argv: list[str]) -> None:
    """Run one command as a child; print its seconds and peak memory (KiB) as JSON."""
    start = time.perf_counter()
    completed = subprocess.run(argv, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "peak_kib": usage.ru_maxrss,
                "exit": completed.returncode,
                "cpu_seconds": usage.ru_utime + usage.ru_stime,
                "last_line": completed.stdout.decode().strip().splitlines()[-1:],
            }
        )
    )


def run(arguments: list[str]) -> dict[str, object]:
    """One measured run, in a fresh process (so the memory peak is this run's alone)."""
    gpustack = [sys.executable, "-m", "gpustack", "validate", *arguments]
    completed = subprocess.run(
        [sys.executable, __file__, "--measure", "--", *gpustack],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(completed.stdout)
    return result


def fastest(arguments: list[str], repeat: int) -> dict[str, object]:
    runs = [run(arguments) for _ in range(repeat)]
    best = min(runs, key=lambda measured: float(str(measured["seconds"])))
    best["peak_kib"] = max(int(str(measured["peak_kib"])) for measured in runs)
    return best


def main() -> None:
    if "--measure" in sys.argv:
        measure(sys.argv[sys.argv.index("--") + 1 :])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resources", type=int, default=20000)
    parser.add_argument("--streams", type=int, default=4, help="multi-document files")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keys", type=int, default=0, help="also one ConfigMap of N keys")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpustack-bench-validate-") as temporary:
        folder = Path(temporary)
        files, multi, count = generate(folder, options.resources, options.streams)
        os.chdir(folder)
        one = next(files.rglob("*.yaml"))
        start_up = fastest([*COMMANDS["kubeconform flags"], str(one)], options.repeat)
        print(f"resources: {count}; start-up (one file): {float(str(start_up['seconds'])):.2f} s")
        shapes = [
            ("one file per resource", files, "kubeconform flags"),
            (f"{options.streams} multi-document files", multi, "kubeconform flags"),
            ("one file per resource", files, "gpustack flags"),
        ]
        for shape, path, flags in shapes:
            measured = fastest([*COMMANDS[flags], str(path.relative_to(folder))], options.repeat)
            seconds = float(str(measured["seconds"]))
            peak = int(str(measured["peak_kib"])) / 1024
            summary = " ".join(str(line) for line in measured["last_line"])  # type: ignore[attr-defined]
            cpu = float(str(measured["cpu_seconds"]))
            print(
                f"{shape}, {flags}: {seconds:.2f} s, {count / seconds:,.0f} resources/s, "
                f"CPU {cpu:.2f} s, peak {peak:.0f} MiB, exit {measured['exit']} ({summary})"
            )
        if options.keys:
            keys = folder / "keys.yaml"
            with keys.open("w") as stream:
                stream.write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keys}\ndata:\n")
                stream.writelines(f"  key-{number}: value\n" for number in range(options.keys))
            measured = fastest([*COMMANDS["gpustack flags"], "keys.yaml"], options.repeat)
            size = keys.stat().st_size / (1024 * 1024)
            print(
                f"one ConfigMap of {options.keys:,} keys ({size:.1f} MiB), gpustack flags: "
                f"{float(str(measured['seconds'])):.2f} s, "
                f"peak {int(str(measured['peak_kib'])) / 1024:.0f} MiB, exit {measured['exit']}"
            )


if __name__ == "__main__":
    main()
