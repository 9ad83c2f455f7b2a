"""Nothing leaked: the entitlement certificate never appears in anything a command prints, and no
command follows a symbolic link out of committed output or quotes a file that is not a config."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, examples, run_gpustack
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack import redaction
from gpustack.redaction import mask_text

EXAMPLE = ROOT / "examples" / "openshift.yaml"
PEM = ROOT / "examples" / "entitlement-dummy.pem"
FOLDER = "out/openshift-entitled"
CERTIFICATE_FILE = f"{FOLDER}/machineconfig-50-entitlement-pem.yaml"


def gpustack(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command's exit code and everything it prints (in-process: all of it goes through
    sys.stdout and sys.stderr, which the runner captures)."""
    return run_gpustack(*args, cwd=cwd, env={"NO_COLOR": "1"})


def secret_pieces() -> list[str]:
    """Pieces of the certificate as it could be printed: its base64 body, the base64 of the whole
    PEM file (the MachineConfig's data URL), and the text the body decodes to."""
    pem = PEM.read_bytes()
    body = "".join(re.findall(r"^[A-Za-z0-9+/=]{20,}$", pem.decode(), re.M))
    encoded = base64.b64encode(pem).decode()
    pieces = [body[i : i + 16] for i in range(0, len(body) - 16, 8)]
    pieces += [encoded[i : i + 16] for i in range(0, len(encoded) - 16, 8)]
    return [*pieces, base64.b64decode(body).decode()[:24]]


def assert_no_secret(text: str, what: str) -> None:
    leaked = [piece for piece in secret_pieces() if piece in text]
    assert not leaked, f"{what} prints the certificate: {leaked[:3]}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLE, tmp_path / "openshift.yaml")
    shutil.copy(PEM, tmp_path / PEM.name)
    return tmp_path


def wrap_source(path: Path) -> None:
    """Re-wrap the data URL over several lines, as a YAML formatter may (same value)."""
    lines = []
    for line in path.read_text().splitlines(keepends=True):
        match = re.match(r'(\s*source: ")(data:[^"]*)(")\n', line)
        if not match:
            lines.append(line)
            continue
        indent = " " * (len(match.group(1)) - len('source: "') + 2)
        url = match.group(2)
        chunks = [url[i : i + 60] for i in range(0, len(url), 60)]
        lines.append(match.group(1) + f"\\\n{indent}".join(chunks) + '"\n')
    path.write_text("".join(lines))


def test_no_command_prints_the_certificate(project: Path) -> None:
    rendered = gpustack("render", "openshift.yaml", "-o", "out", cwd=project)
    assert rendered.returncode == 0, rendered.stderr
    assert_no_secret(rendered.stdout + rendered.stderr, "render")
    certificate_file = project / CERTIFICATE_FILE
    original = certificate_file.read_text()
    assert any(piece in original for piece in secret_pieces())  # the pieces are what is written

    # Committed output with another certificate, its data URL wrapped over several lines.
    certificate_file.write_text(original.replace("base64,RFVNTVkg", "base64,RFVNTVkh"))
    wrap_source(certificate_file)
    assert certificate_file.read_text() != original
    for args in (
        ["check", "openshift.yaml"],
        ["diff", "openshift.yaml", "--against", "out"],
        ["diff", "openshift.yaml", "--against", "out", "--output", "json"],
    ):
        result = gpustack(*args, cwd=project)
        assert result.returncode == 1, (args, result.stderr)
        assert_no_secret(result.stdout + result.stderr, " ".join(args))
    other = project / "other.pem"
    other.write_text(PEM.read_text().replace("VGhpcyBpcyBh", "VGhhdCBpcyBh"))
    changed = project / "changed.yaml"
    changed.write_text(EXAMPLE.read_text().replace(PEM.name, other.name))
    result = gpustack("diff", "openshift.yaml", "changed.yaml", cwd=project)
    assert result.returncode == 1 and "machineconfig" in result.stdout.lower()
    assert_no_secret(result.stdout + result.stderr, "diff of two configs")

    # A MachineConfig whose source fails its schema pattern: the message quotes the value.
    certificate_file.write_text(original.replace('source: "data:', 'source: "dxta:'))
    for output in ("text", "json", "junit", "tap", "sarif"):
        result = gpustack("validate", "-o", output, FOLDER, cwd=project)
        assert result.returncode == 1, (output, result.stderr)
        assert "dxta:" in result.stdout  # the finding is reported, its secret masked
        assert_no_secret(result.stdout + result.stderr, f"validate -o {output}")


def test_masking_is_linear_and_holds_for_wrapped_values() -> None:
    payload = base64.b64encode(PEM.read_bytes()).decode()
    wrapped = "\\\n    ".join(payload[i : i + 40] for i in range(0, len(payload), 40))
    masked = mask_text(f'source: "data:;base64,{wrapped}"\n  verification: {{}}\n')
    assert_no_secret(masked, "mask_text")
    assert masked.endswith("  verification: {}\n")  # the next key is not swallowed
    # Inputs that made the old patterns quadratic: a megabyte of each finishes (the suite would
    # not, at 42 s for 200 KB) and comes back unchanged.
    for hostile in ("data:" * 200_000, "A" * 1_000_000 + "!", "-----BEGIN " + "A" * 1_000_000):
        assert mask_text(hostile) == hostile or "redacted" in mask_text(hostile)


def test_short_texts_are_masked_as_long_ones() -> None:
    """Texts shorter than any base64 run that can hold a PEM still have their PEM markers and
    data: URLs masked; a base64 run of a PEM's first bytes, at the shortest, is masked too."""
    for short in ("-----BEGIN A-----", "data:,-----BEGIN", "data:,-----%42EGIN"):
        assert len(short) < 24 and "redacted" in mask_text(short), short
    run = base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()[:24]
    assert "redacted" in mask_text(run)
    assert mask_text("nvidia.com/gpu") == "nvidia.com/gpu"


def full_mask(text: str) -> str:
    """mask_text without its shortcuts: every pattern run over the whole text."""
    text = redaction._PEM_BLOCK.sub(lambda match: redaction.redacted(match.group()), text)
    text = redaction._BASE64_RUN.sub(redaction._mask_run, text)
    return redaction._DATA_URL.sub(redaction._mask_data_url, text)


WRAPS = ["\n", "\\\n    ", "\r\n\t", "\n  \\"]


def test_a_wrapped_base64_pem_is_masked_wherever_its_groups_fall() -> None:
    """mask_text decodes only texts that hold the base64 of "-----BEGIN" (at one of the three
    places the 3-byte groups can cut it): each place is found, also when wrapped mid-marker."""
    for lead in (b"", b"x", b"xy"):
        payload = base64.b64encode(lead + PEM.read_bytes()).decode()
        for width in (5, 7, 40, 10_000):
            for wrap in WRAPS:
                wrapped = wrap.join(payload[i : i + width] for i in range(0, len(payload), width))
                text = f'value: "{wrapped}"\nnext: key\n'
                masked = mask_text(text)
                assert masked == full_mask(text), (lead, width, wrap)
                assert "redacted" in masked and masked.endswith("next: key\n"), (lead, width)
                assert_no_secret(masked, "mask_text")


def wrapped_base64(lead: bytes, pem: bool, tail: bytes, width: int, wrap: str) -> str:
    encoded = base64.b64encode(lead + (b"-----BEGIN CERT" if pem else b"") + tail).decode()
    return wrap.join(encoded[i : i + width] for i in range(0, len(encoded), width))


# Text around base64 runs that may or may not decode to a PEM: base64 of random bytes with
# "-----BEGIN" at any offset, wrapped anywhere, among words, keys, data: URLs and PEM markers.
_PIECES = st.one_of(
    st.text(alphabet="abcXYZ019+/=:-_ \t\n\\%,\"'", max_size=30),
    st.sampled_from(["data:", "data:;base64,", "data:,", "-----BEGIN ", "-----END X-----", "%2D"]),
    st.builds(
        wrapped_base64,
        st.binary(max_size=8),
        st.booleans(),
        st.binary(max_size=20),
        st.integers(min_value=1, max_value=30),
        st.sampled_from(WRAPS),
    ),
)


@settings(max_examples=examples(150))
@given(st.lists(_PIECES, max_size=8).map("".join))
def test_mask_text_agrees_with_every_pattern_run_on_the_whole_text(text: str) -> None:
    assert mask_text(text) == full_mask(text)


# --- 6. committed output: links are never followed ------------------------------------------


@pytest.mark.parametrize("command", ["check", "diff"])
@pytest.mark.parametrize("link", ["kustomization.yaml", "namespace-nvidia-gpu.yaml", "node"])
def test_a_link_in_committed_output_is_an_error_not_followed(
    project: Path, command: str, link: str
) -> None:
    assert gpustack("render", "openshift.yaml", "-o", "out", cwd=project).returncode == 0
    outside = project / "environ"
    outside.write_text("CI_TOKEN=do-not-print-me\n")
    target = project / FOLDER / link
    if target.is_dir():
        shutil.rmtree(target)
        outside = project / "elsewhere"
        outside.mkdir()
        (outside / "README.md").write_text("CI_TOKEN=do-not-print-me\n")
    else:
        target.unlink()
    target.symlink_to(outside)
    args = (
        ["check", "openshift.yaml"]
        if command == "check"
        else ["diff", "openshift.yaml", "--against", "out"]
    )
    result = gpustack(*args, cwd=project)
    assert "do-not-print-me" not in result.stdout + result.stderr
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == (
        f"error: {FOLDER}/{link}: is a symbolic link; gpustack writes none and does not follow "
        "links in its output (replace it with the rendered file: run `gpustack render`)\n"
    )


@pytest.mark.parametrize("command", ["check", "diff"])
@pytest.mark.parametrize("link", ["out", "gitops"])
def test_an_output_folder_that_is_a_link_out_is_an_error_not_followed(
    project: Path, command: str, link: str
) -> None:
    """The output folder itself, or a folder on its way down from the repository's top, as a
    link a pull request commits: its target holds files named as gpustack's output."""
    assert gpustack("render", "openshift.yaml", "-o", "out", cwd=project).returncode == 0
    (project / ".git").mkdir()  # the repository's top, as a checkout has it
    elsewhere = project.parent / f"{project.name}-elsewhere"
    shutil.move(project / "out", elsewhere)
    (elsewhere / FOLDER.split("/")[1] / "kustomization.yaml").write_text(
        "CI_TOKEN: do-not-print-me\n"
    )
    output = "out" if link == "out" else "gitops/out"
    (project / link).symlink_to(elsewhere if link == "out" else elsewhere.parent)
    if link == "gitops":
        shutil.move(elsewhere, project.parent / "out")
    args = (
        ["check", "openshift.yaml", "-o", output]
        if command == "check"
        else ["diff", "openshift.yaml", "--against", output]
    )
    result = gpustack(*args, cwd=project)
    assert "do-not-print-me" not in result.stdout + result.stderr
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == (
        f"error: {link}: is a symbolic link; gpustack writes none and does not follow links in "
        "its output (give the output folder itself, inside the repository)\n"
    )


# --- 7. a file that is not a config is never quoted --------------------------------------------


@pytest.mark.parametrize("named", ["entitlement-dummy.pem", "pem.yaml", "body.yaml"])
def test_extends_naming_a_non_config_never_quotes_it(project: Path, named: str) -> None:
    shutil.copy(PEM, project / "pem.yaml")
    body = "".join(
        line
        for line in PEM.read_text().splitlines(keepends=True)
        if "DUMMY" not in line and "PEM readers" not in line
    )
    (project / "body.yaml").write_text(body)  # a bare PEM: YAML reads it as one string
    (project / "lab.yaml").write_text(f"extends: {named}\nmetadata: {{name: lab}}\n")
    result = gpustack("render", "lab.yaml", "-o", "out", cwd=project)
    assert result.returncode == 2
    assert_no_secret(result.stderr, "extends")
    assert "DUMMY" not in result.stderr and "BEGIN" not in result.stderr
    expected = {
        "entitlement-dummy.pem": "error: lab.yaml:1:10: extends: must name a YAML config file "
        "(.yaml or .yml)\n",
        "pem.yaml": "error: pem.yaml:3:1: invalid YAML: could not find expected ':' (while "
        "scanning a simple key that starts at line 2, column 1) [loading lab.yaml]\n",
        "body.yaml": "error: body.yaml:1:1: expected a GPUStack config (a mapping with "
        "apiVersion, kind, metadata, ...), found text [loading lab.yaml]\n",
    }
    assert result.stderr == expected[named]
    assert not (project / "out").exists()
