"""The command starts fast because each command imports its heavy parts only when it runs:
`gpustack --version` and `--help` must not load pydantic, the schemas or the YAML parser
(bench/cli.py measures the time; this guards the import structure that keeps it low)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_importing_the_cli_loads_no_heavy_module():
    code = (
        "import sys, gpustack.cli\n"
        "heavy = ['pydantic', 'ruamel.yaml', 'jsonschema', 'jsonschema_rs', 'kubernetes_validate',"
        " 'yaml', 'gpustack.config', 'gpustack.render']\n"
        "print(' '.join(name for name in heavy if name in sys.modules))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == []
