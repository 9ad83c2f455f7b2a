"""`gpustack diff` in its three forms and `gpustack profiles diff`: what users read, exit codes.

Exit codes: 0 no difference, 1 differences, 2 usage or config error.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, runs_on_one_terminal

from gpustack.compare.diff_report import as_json, as_text
from gpustack.compare.object_diff import changed_paths, diff_objects, redacted

ANSI = "\x1b["


def write_config(folder: Path, file: str, text: str = "", profile: str = "kubeadm") -> Path:
    path = folder / file
    path.write_text(
        "apiVersion: gpustack.dev/v1alpha1\n"
        "kind: GPUStack\n"
        "metadata: {name: lab}\n"
        f"platform: {{profile: {profile}}}\n"
        "namespace: gpu-system\n" + text
    )
    return path


def summary(output: str) -> list[str]:
    """The summary block: everything before the first unified diff."""
    return output.split("\n\n", 1)[0].splitlines()


def changes_of(result: Any) -> dict[str, dict[str, Any]]:
    document = json.loads(result.stdout)
    return {
        f"{change['kind']}/{change['name']}" if change["kind"] else change["file"]: change
        for change in document["changes"]
    }


# --- gpustack diff --profile A --profile B ----------------------------------------------------


def test_two_profiles_show_who_installs_the_driver(cli, tmp_path):
    config = write_config(tmp_path, "lab.yaml")
    result = cli("diff", "--profile", "openshift", "--profile", "kubeadm", config)
    assert result.exit_code == 1, result.output
    lines = summary(result.stdout)
    assert lines[0].startswith("openshift -> kubeadm: ")
    # OpenShift builds the driver in a container and configures CRI-O with the toolkit; kubeadm's
    # driver and runtime are the host's.
    assert "- removed  DaemonSet.apps gpu-system/nvidia-driver-daemonset" in lines
    assert "- removed  DaemonSet.apps gpu-system/nvidia-container-toolkit-daemonset" in lines
    config_map = lines.index("~ changed  ConfigMap gpu-system/nvidia-device-plugin-config")
    assert '    data["config.yaml"].flags.nvidiaDriverRoot' in lines[config_map + 1 :]
    assert "~ changed  Namespace gpu-system" in lines
    assert "- removed  file node/machineset-patch.yaml" in lines
    assert "+ added    file node/join-configuration.yaml" in lines
    # The unified diff follows, named after the profiles.
    assert "--- openshift/configmap-nvidia-device-plugin-config.yaml" in result.stdout
    assert "+++ kubeadm/configmap-nvidia-device-plugin-config.yaml" in result.stdout
    assert "\n-      nvidiaDriverRoot: /run/nvidia/driver\n" in result.stdout
    assert '\n-    openshift.io/cluster-monitoring: "true"\n' in result.stdout


def test_two_profiles_as_json(cli, tmp_path):
    config = write_config(tmp_path, "lab.yaml")
    result = cli(
        "diff", "--profile", "openshift", "--profile", "kubeadm", config, "--output", "json"
    )
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert (document["old"], document["new"], document["different"]) == (
        "openshift",
        "kubeadm",
        True,
    )
    changes = changes_of(result)
    driver = changes["DaemonSet/nvidia-driver-daemonset"]
    assert (driver["change"], driver["group"], driver["namespace"]) == (
        "removed",
        "apps",
        "gpu-system",
    )
    plugin = changes["ConfigMap/nvidia-device-plugin-config"]
    assert (plugin["change"], plugin["namespace"]) == ("changed", "gpu-system")
    assert 'data["config.yaml"].flags.nvidiaDriverRoot' in plugin["paths"]
    assert "+      nvidiaDriverRoot: /" in plugin["diff"].splitlines()
    assert changes["node/machineset-patch.yaml"]["change"] == "removed"


def test_kubeadm_and_rke2_differ_in_their_node_files(cli):
    result = cli("diff", "--profile", "kubeadm", "--profile", "rke2", EXAMPLES / "kubeadm.yaml")
    assert result.exit_code == 1, result.output
    lines = summary(result.stdout)
    assert "- removed  file node/join-configuration.yaml" in lines
    assert "- removed  file node/99-nvidia.toml" in lines
    assert "+ added    file node/rke2-agent-config.yaml" in lines
    assert "+node-taint: []" in result.stdout.splitlines()


def test_the_same_profile_twice_is_no_difference(cli):
    result = cli("diff", "--profile", "rke2", "--profile", "rke2")
    assert result.exit_code == 0, result.output
    assert result.stdout == "no differences between rke2 and rke2\n"
    result = cli("diff", "--profile", "rke2", "--profile", "rke2", "--output", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["different"] is False and document["changes"] == []


def test_an_unknown_profile_is_a_usage_error_with_a_suggestion(cli):
    result = cli("diff", "--profile", "kubeadm", "--profile", "rke3")
    assert result.exit_code == 2
    assert "unknown profile 'rke3'" in result.stderr
    assert "did you mean 'rke2'?" in result.stderr
    assert result.stdout == ""
    # The mistake is on the command line, not in the config file that names another profile.
    assert "error: --profile: " in result.stderr, result.stderr


# --- gpustack diff OLD NEW --------------------------------------------------------------------


def test_a_mig_strategy_change_names_exactly_the_fields_it_changes(cli, tmp_path):
    old = write_config(tmp_path, "old.yaml")
    new = write_config(tmp_path, "new.yaml", "devicePlugin: {migStrategy: single}\n")
    result = cli("diff", old, new, "--output", "json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["counts"]["removed"] == 0
    # A MIG strategy brings the MIG manager, which creates the MIG devices; nothing else is new.
    added = [c["name"] for c in document["changes"] if c["change"] == "added"]
    assert added and all(name.startswith("nvidia-mig-manager") for name in added), added
    changes = changes_of(result)
    assert changes["ConfigMap/nvidia-device-plugin-config"]["paths"] == [
        'data["config.yaml"].flags.migStrategy'
    ]
    plugin = changes["DaemonSet/nvidia-device-plugin"]["paths"]
    container = "spec.template.spec.containers[0]"
    # The new config rolls the pods; MIG monitoring needs its env and SYS_ADMIN (helm chart).
    assert 'spec.template.metadata.annotations["gpustack.dev/config-hash"]' in plugin
    assert f"{container}.securityContext.capabilities.add" in plugin
    assert any(path.startswith(f"{container}.env[") for path in plugin)
    for untouched in (
        "Namespace/gpu-system",
        "RuntimeClass/nvidia",
        "ServiceAccount/nvidia-device-plugin",
        "ClusterRole/nvidia-device-plugin",
    ):
        assert untouched not in changes
    gfd = [key for key in changes if "feature-discovery" in key and key.startswith("DaemonSet/")]
    for key in gfd:  # GPU Feature Discovery reads the same MIG strategy
        assert changes[key]["paths"], key


def test_a_config_change_in_text(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, "old.yaml")
    write_config(tmp_path, "new.yaml", "devicePlugin: {migStrategy: single}\n")
    result = cli("diff", "old.yaml", "new.yaml")
    assert result.exit_code == 1, result.output
    lines = summary(result.stdout)
    assert lines[0].startswith("old.yaml -> new.yaml: ")
    assert "--- old.yaml/configmap-nvidia-device-plugin-config.yaml" in result.stdout
    config_map = lines.index("~ changed  ConfigMap gpu-system/nvidia-device-plugin-config")
    assert lines[config_map + 1] == '    data["config.yaml"].flags.migStrategy'
    assert lines[config_map + 2].startswith(("~", "+", "-"))
    assert "-      migStrategy: none" in result.stdout.splitlines()
    assert "+      migStrategy: single" in result.stdout.splitlines()


def test_the_same_config_twice_is_no_difference(cli, tmp_path):
    config = write_config(tmp_path, "lab.yaml")
    copy = tmp_path / "copy.yaml"
    copy.write_text(config.read_text() + "# only a comment differs\n")
    result = cli("diff", config, copy)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("no differences between ")
    result = cli("diff", config, copy, "--output", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["changes"] == []


@pytest.mark.parametrize("side", ["old", "new"])
def test_a_config_error_on_either_side_is_exit_2_with_its_position(cli, tmp_path, side):
    good = write_config(tmp_path, "good.yaml")
    bad = write_config(tmp_path, "bad.yaml", "devicePlugin:\n  migStrategy: singel\n")
    result = cli("diff", *((bad, good) if side == "old" else (good, bad)))
    assert result.exit_code == 2
    assert "bad.yaml:7:16: devicePlugin.migStrategy:" in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_one_config_alone_is_a_usage_error(cli, tmp_path):
    result = cli("diff", write_config(tmp_path, "lab.yaml"))
    assert result.exit_code == 2
    assert "nothing to compare" in result.stderr
    assert "--against DIR" in result.stderr


# --- gpustack diff CONFIG --against DIR -------------------------------------------------------


def test_a_folder_just_rendered_has_no_drift(cli, tmp_path):
    config = write_config(tmp_path, "lab.yaml")
    assert cli("render", config, "-o", tmp_path / "out").exit_code == 0
    result = cli("diff", config, "--against", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("no differences between ")
    result = cli("diff", config, "--against", tmp_path / "out", "--output", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["different"] is False


def test_a_hand_edit_in_committed_output_shows_as_drift(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = write_config(tmp_path, "lab.yaml")
    out = Path("out")
    assert cli("render", config, "-o", out).exit_code == 0
    daemonset = out / "lab" / "daemonset-nvidia-device-plugin.yaml"
    daemonset.write_text(daemonset.read_text().replace("cpu: 10m", "cpu: 20m"))
    (out / "lab" / "node" / "README.md").write_text(
        (out / "lab" / "node" / "README.md").read_text() + "edited by hand\n"
    )
    (out / "lab" / "runtimeclass-nvidia.yaml").unlink()
    # A user's own file in the folder is not gpustack output and not drift.
    (out / "lab" / "notes.yaml").write_text("mine: true\n")

    result = cli("diff", config, "--against", out)
    assert result.exit_code == 1, result.output
    lines = summary(result.stdout)
    assert lines == [
        "out/lab -> rendered: 2 changed, 1 added, 0 removed",
        "+ added    RuntimeClass.node.k8s.io nvidia",
        "~ changed  DaemonSet.apps gpu-system/nvidia-device-plugin",
        "    spec.template.spec.containers[0].resources.requests.cpu",
        # Rendering over the hand edit restarts the plugin's pods.
        "    on running nodes: DaemonSet gpu-system/nvidia-device-plugin restarts its pods on "
        "nodes matching feature.node.kubernetes.io/pci-10de.present=true, 1 node at a time",
        "~ changed  file node/README.md",
    ]
    text = result.stdout.splitlines()
    assert "--- out/lab/daemonset-nvidia-device-plugin.yaml" in text
    assert "+++ rendered/daemonset-nvidia-device-plugin.yaml" in text
    assert "-              cpu: 20m" in text and "+              cpu: 10m" in text
    assert "-edited by hand" in text

    result = cli("diff", config, "--against", out, "--output", "json")
    assert result.exit_code == 1
    changes = changes_of(result)
    assert changes["DaemonSet/nvidia-device-plugin"]["paths"] == [
        "spec.template.spec.containers[0].resources.requests.cpu"
    ]
    assert changes["RuntimeClass/nvidia"]["change"] == "added"
    assert changes["node/README.md"]["change"] == "changed"


def test_a_missing_against_folder_is_exit_2_and_writes_nothing(cli, tmp_path):
    config = write_config(tmp_path, "lab.yaml")
    before = sorted(tmp_path.rglob("*"))
    result = cli("diff", config, "--against", tmp_path / "missing")
    assert result.exit_code == 2
    assert "missing: --against folder does not exist" in result.stderr
    assert result.stdout == ""
    assert sorted(tmp_path.rglob("*")) == before


def test_a_cluster_never_rendered_there_would_be_written_whole(cli, tmp_path):
    config = write_config(tmp_path, "lab.yaml")
    (tmp_path / "out").mkdir()
    result = cli("diff", config, "--against", tmp_path / "out")
    assert result.exit_code == 1
    assert "does not exist: a render would write every file" in result.stderr
    assert "+ added    Namespace gpu-system" in summary(result.stdout)


def test_a_broken_committed_file_is_exit_2_naming_its_position(cli, tmp_path):
    config = write_config(tmp_path, "lab.yaml")
    out = tmp_path / "out"
    assert cli("render", config, "-o", out).exit_code == 0
    committed = out / "lab" / "namespace-gpu-system.yaml"
    committed.write_text(committed.read_text() + "kind: Namespace\n")
    result = cli("diff", config, "--against", out)
    assert result.exit_code == 2
    assert "namespace-gpu-system.yaml:" in result.stderr
    assert "duplicate key 'kind'" in result.stderr


# --- secrets ----------------------------------------------------------------------------------


def dummy_pem(path: Path) -> bytes:
    body = base64.encodebytes(secrets.token_bytes(600)).decode().replace("\n", "")
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    pem = "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"
    path.write_text(pem)
    return pem.encode()


def entitled(folder: Path, file: str, pem_file: str) -> Path:
    return write_config(
        folder, file, f"entitlement: {{enabled: true, pemFile: {pem_file}}}\n", profile="openshift"
    )


def leaks(output: str, pem: bytes) -> list[str]:
    """Every fragment of the PEM, raw or base64, that shows in `output`."""
    encoded = base64.b64encode(pem).decode()
    fragments = [line for line in pem.decode().splitlines() if "-----" not in line]
    fragments += [encoded[i : i + 32] for i in range(0, len(encoded) - 32, 32)]
    fragments.append("-----BEGIN CERTIFICATE")
    return [fragment for fragment in fragments if fragment in output]


def test_a_changed_entitlement_shows_as_changed_and_never_in_clear(cli, tmp_path):
    old_pem, new_pem = dummy_pem(tmp_path / "old.pem"), dummy_pem(tmp_path / "new.pem")
    old, new = entitled(tmp_path, "old.yaml", "old.pem"), entitled(tmp_path, "new.yaml", "new.pem")
    text = cli("diff", old, new)
    assert text.exit_code == 1, text.output
    lines = summary(text.stdout)
    for name in ("50-entitlement-pem", "50-entitlement-key-pem"):
        changed = lines.index(f"~ changed  MachineConfig.machineconfiguration.openshift.io {name}")
        assert lines[changed + 1] == "    spec.config.storage.files[0].contents.source"
    assert not [line for line in lines if "50-rhsm-conf" in line]  # the same in both
    assert "<redacted sha256:" in text.stdout
    as_json_result = cli("diff", old, new, "--output", "json")
    assert as_json_result.exit_code == 1
    for name in ("50-entitlement-pem", "50-entitlement-key-pem"):
        assert changes_of(as_json_result)[f"MachineConfig/{name}"]["paths"] == [
            "spec.config.storage.files[0].contents.source"
        ]
    for output in (text.output, as_json_result.output):
        assert leaks(output, old_pem) == [] and leaks(output, new_pem) == []


def test_committed_entitlement_drift_is_masked_too(cli, tmp_path):
    old_pem, new_pem = dummy_pem(tmp_path / "old.pem"), dummy_pem(tmp_path / "new.pem")
    old, new = entitled(tmp_path, "old.yaml", "old.pem"), entitled(tmp_path, "new.yaml", "new.pem")
    assert cli("render", old, "-o", tmp_path / "out").exit_code == 0
    # Same PEM: the redaction is stable, so nothing differs.
    assert cli("diff", old, "--against", tmp_path / "out").exit_code == 0
    for output in ("text", "json"):
        result = cli("diff", new, "--against", tmp_path / "out", "--output", output)
        assert result.exit_code == 1
        assert "50-entitlement-pem" in result.stdout
        assert leaks(result.output, old_pem) == [] and leaks(result.output, new_pem) == []


def test_secret_values_and_inline_pems_are_masked():
    pem = (
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
    )

    def objects(password: str) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "credentials", "namespace": "gpu-system"},
                "data": {"password": base64.b64encode(password.encode()).decode()},
                "stringData": {"token": password},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "certificates", "namespace": "gpu-system"},
                "data": {
                    "ca.pem": pem,
                    "url": "data:," + pem.replace(" ", "%20").replace("\n", "%0A") + password,
                },
            },
        ]

    difference = diff_objects(objects("hunter2-old"), objects("hunter2-new"), "a", "b")
    text = as_text(difference)
    output = text + json.dumps(as_json(difference))
    for hidden in ("hunter2", base64.b64encode(b"hunter2-old").decode(), "MIIEvQIBADAN"):
        assert hidden not in output
    assert (
        "~ changed  Secret gpu-system/credentials\n    data.password\n    stringData.token\n"
    ) in text
    assert "~ changed  ConfigMap gpu-system/certificates\n    data.url\n" in text
    assert not diff_objects(objects("same"), objects("same")).changes


def test_a_secret_only_rewrapped_is_no_change_and_a_secret_in_a_name_sorts_masked():
    """Objects are compared as they are shown, masked: a base64 certificate wrapped otherwise
    (a YAML formatter's doing) is the same value, and objects are listed in the order of their
    masked names."""
    payload = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    encoded = payload.decode()

    def config_map(name: str, value: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": {"ca": value},
        }

    wrapped = "\n  ".join(encoded[i : i + 20] for i in range(0, len(encoded), 20))
    assert not diff_objects([config_map("ca", encoded)], [config_map("ca", wrapped)]).changes
    assert diff_objects([config_map("ca", encoded)], [config_map("ca", encoded + "x")]).changes
    # Named by a certificate: its file named redacted, and sorted by that ("<" before "A").
    added = diff_objects([], [config_map("A", "1"), config_map(encoded, "2")]).changes
    assert [change.file for change in added] == [
        f"configmap-{redacted(encoded)}.yaml",
        "configmap-A.yaml",
    ]
    # Nor is the name shown anywhere else: the change's subject, the text, the JSON.
    assert added[0].subject == f"ConfigMap {redacted(encoded)}"
    shown = diff_objects([], [config_map(encoded, "2")], "a", "b")
    assert encoded not in as_text(shown) + json.dumps(as_json(shown))


# --- field paths ------------------------------------------------------------------------------


def test_an_item_inserted_into_a_named_list_names_only_that_item():
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    old = {"spec": {"containers": [{"name": "plugin", "image": "x:1", "env": env}]}}
    new = {
        "spec": {
            "containers": [
                {"name": "plugin", "image": "x:2", "env": [{"name": "Z", "value": "0"}, *env]}
            ]
        }
    }
    assert changed_paths(old, new) == [
        "spec.containers[0].image",
        "spec.containers[0].env[0]",
    ]
    # Same items in a new order: the list itself changed.
    reordered = {"spec": {"containers": [{"name": "plugin", "image": "x:1", "env": env[::-1]}]}}
    assert changed_paths(old, reordered) == ["spec.containers[0].env"]
    # Lists without names compare by position.
    assert changed_paths({"args": ["a", "b"]}, {"args": ["a", "c", "d"]}) == ["args[1]", "args[2]"]


# --- colour -----------------------------------------------------------------------------------


def test_colour_only_when_asked(cli):
    args = ("diff", "--profile", "kubeadm", "--profile", "rke2")
    assert ANSI in cli(*args, "--color", "always").stdout
    assert ANSI not in cli(*args, "--color", "never").stdout
    assert ANSI not in cli(*args).stdout  # auto, and the runner's stdout is not a terminal
    assert ANSI not in cli(*args, "--color", "always", "--output", "json").stdout


def test_colour_on_a_terminal_unless_no_color():
    env = {key: value for key, value in os.environ.items() if key != "NO_COLOR"}
    args = ["diff", "--profile", "kubeadm", "--profile", "rke2"]
    # One process, its stdout a terminal: a run as it starts, then one with NO_COLOR set.
    (code, shown), (plain_code, plain) = runs_on_one_terminal(
        [(args, {}), (args, {"NO_COLOR": "1"})], env=env
    )
    assert code == plain_code == 1  # the profiles differ
    assert ANSI in shown
    assert ANSI not in plain and "rke2" in plain


# --- gpustack profiles diff -------------------------------------------------------------------


def test_profiles_diff_is_a_side_by_side_table(cli):
    result = cli("profiles", "diff", "kubeadm", "rke2")
    assert result.exit_code == 1, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows[0] == ["path", "kubeadm", "rke2"]
    assert ["facts.runtime.runtimeClass", "optional", "required"] in rows
    assert ["facts.taintMechanism", "kubeadm-join", "rke2-agent-config"] in rows
    assert not any(row[0].startswith("metadata") for row in rows)


def test_profiles_diff_resolves_extends_and_quotes_label_keys(cli, tmp_path):
    (tmp_path / "k3s.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: Profile\nextends: rke2\n"
        "metadata: {name: k3s, description: k3s}\n"
        "facts:\n  namespaceLabels: {example.com/team: gpu}\n"
        "defaults:\n  namespace: gpu-operator\n"
    )
    result = cli("profiles", "diff", "rke2", "k3s", "--profiles-dir", tmp_path, "--output", "json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout) == {
        "a": "rke2",
        "b": "k3s",
        "differences": [
            {"path": 'facts.namespaceLabels["example.com/team"]', "a": None, "b": "gpu"},
            {"path": "defaults.namespace", "a": "gpu-system", "b": "gpu-operator"},
        ],
    }


def test_profiles_diff_of_a_profile_with_itself(cli):
    result = cli("profiles", "diff", "openshift", "openshift")
    assert result.exit_code == 0
    assert result.stdout == "profiles openshift and openshift set the same facts and defaults\n"
    result = cli("profiles", "diff", "openshift", "openshift", "--output", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["differences"] == []


def test_profiles_diff_of_an_unknown_profile(cli):
    result = cli("profiles", "diff", "kubeadm", "openshfit")
    assert result.exit_code == 2
    assert "unknown profile 'openshfit' (did you mean 'openshift'?)" in result.stderr
