"""Every rendering is validated (schema and lint) before anything is written."""

from __future__ import annotations

import pytest

from gpustack.build import components
from gpustack.findings import Finding
from gpustack.validation import lint


def snapshot(folder):
    return {
        path.relative_to(folder): path.read_bytes() for path in folder.rglob("*") if path.is_file()
    }


@pytest.fixture
def broken_component(monkeypatch):
    """A component that emits a ConfigMap with a number where a string belongs."""

    def build(stack):
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "broken", "namespace": stack.namespace},
                "data": {"replicas": 4},
            }
        ]

    monkeypatch.setattr(components, "COMPONENTS", (*components.COMPONENTS, build))


def test_an_invalid_rendering_writes_nothing_and_exits_1(cli, tmp_path, broken_component):
    result = cli("render", "-o", tmp_path / "out")
    assert result.exit_code == 1
    assert (
        "error: kubeadm-lab: ConfigMap gpu-system/broken: data.replicas: "
        '4 is not of types "null", "string"'
    ) in result.stderr
    assert not (tmp_path / "out").exists()


def test_an_invalid_rendering_leaves_earlier_output_untouched(cli, tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert cli("render", "-o", out).exit_code == 0
    before = snapshot(out)
    monkeypatch.setattr(
        components,
        "COMPONENTS",
        (
            *components.COMPONENTS,
            lambda stack: [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": "typo"},
                    "spec": {"ports": [{"port": 9400}], "bogus": True},
                }
            ],
        ),
    )
    result = cli("render", "-o", out)
    assert result.exit_code == 1
    assert "Additional properties are not allowed ('bogus' was unexpected)" in result.stderr
    assert snapshot(out) == before


def test_stdout_prints_nothing_when_invalid(cli, broken_component):
    result = cli("render", "--stdout")
    assert result.exit_code == 1
    assert result.stdout == ""


def test_lint_errors_block_and_warnings_do_not(cli, tmp_path, monkeypatch):
    findings: list[Finding] = []
    monkeypatch.setattr(lint, "run", lambda objects, kubernetes_version=None, **context: findings)
    # The lint rules are written elsewhere; this stand-in returns what a rule would.
    findings.append(
        Finding(
            "images-pinned",
            "warning",
            "pin the image by digest",
            object=("apps", "DaemonSet", "gpu-system", "nvidia-device-plugin"),
        )
    )
    result = cli("render", "-o", tmp_path / "a")
    assert result.exit_code == 0
    assert (
        "warning: kubeadm-lab: DaemonSet gpu-system/nvidia-device-plugin: [images-pinned] "
        "pin the image by digest"
    ) in result.stderr
    findings.append(
        Finding(
            "taints-tolerated",
            "error",
            "add a toleration for nodetype",
            object=("apps", "DaemonSet", "gpu-system", "nvidia-device-plugin"),
            field="spec.template.spec.tolerations",
        )
    )
    result = cli("render", "-o", tmp_path / "b")
    assert result.exit_code == 1
    assert (
        "error: kubeadm-lab: DaemonSet gpu-system/nvidia-device-plugin: [taints-tolerated] "
        "spec.template.spec.tolerations: add a toleration for nodetype"
    ) in result.stderr
    assert not (tmp_path / "b").exists()
