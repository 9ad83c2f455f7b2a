"""`gpustack init`: a starter config per profile that renders as written and tells the truth."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT, run_gpustack
from manifests import gpu_workloads, pod_spec, runtime_users, workloads

from gpustack.build import pipeline
from gpustack.read.yamlio import load_text
from gpustack.resolve import platform_profiles as profiles
from gpustack.resolve.load import load_stack
from gpustack.resolve.platform_profiles import BUILTIN, available
from gpustack.resolve.stack import Stack

KUBELET_DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"


def uncommented(text: str) -> str:
    """The starter with every commented-out setting (`# key: value`, `#   - item`) written."""
    return "\n".join(
        re.sub(r"^( *)# (?=( *[A-Za-z]+:( |$)| *- ))", r"\1", line) for line in text.splitlines()
    )


def commented_fields(text: str) -> dict[str, tuple[str, str]]:
    """`section.field` -> (value, comment) for each line of a block-style config with a comment,
    the commented-out settings included."""
    fields: dict[str, tuple[str, str]] = {}
    parents: list[str] = []
    for line in uncommented(text).splitlines():
        match = re.match(r"^( *)([A-Za-z]+):([^#]*?)\s*(?:# (.*))?$", line)
        if not match:
            continue
        indent, key, value, note = match.groups()
        parents = parents[: len(indent) // 2] + [key]
        if note:
            fields[".".join(parents)] = (value.strip(), note)
    return fields


@pytest.fixture(scope="module", params=BUILTIN)
def starter(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path, Stack]:
    """The profile's starter, written once for the module's tests (they only read it)."""
    profile = request.param
    path = tmp_path_factory.mktemp(profile) / "clusters" / f"{profile}-lab.yaml"
    result = run_gpustack("init", "--profile", profile, path)
    assert result.returncode == 0, result.stderr
    return profile, path, load_stack(path)


def test_starter_has_the_schema_modeline_and_renders(starter, cli, tmp_path: Path) -> None:
    profile, path, stack = starter
    text = path.read_text()
    first = text.splitlines()[0]
    # The modeline points at the schema written beside the config: completion works offline.
    assert first == "# yaml-language-server: $schema=gpustack.schema.json"
    schema = path.parent / "gpustack.schema.json"
    assert schema.read_text() == (ROOT / "schemas" / "gpustack.schema.json").read_text()
    assert stack.profile.metadata.name == profile
    result = cli("render", path, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    # "names the output folder"
    assert (tmp_path / "out" / f"{profile}-lab" / "kustomization.yaml").is_file()


def test_starter_spells_out_exactly_the_profile_defaults(starter, tmp_path: Path) -> None:
    """'Every field below is optional except ...; left out, a field takes the profile's
    default': the same four fields alone must render the very same files."""
    profile, path, stack = starter
    assert (
        "optional except apiVersion, kind, metadata.name and platform.profile" in path.read_text()
    )
    minimal = tmp_path / "minimal.yaml"
    minimal.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
        f"metadata: {{name: {stack.name}}}\nplatform: {{profile: {profile}}}\n"
    )
    assert pipeline.files(pipeline.render(load_stack(minimal))) == pipeline.files(
        pipeline.render(stack)
    )
    # What the profile sets about the GPU nodes is shown, e.g. GKE's node pool.
    shown = load_text(uncommented(path.read_text()), str(path)).data["nodes"]
    profile_nodes = profiles.load(profile)[1].data.get("nodes", {})
    assert {key: shown[key] for key in profile_nodes} == profile_nodes


def test_starter_writes_only_what_was_chosen(starter) -> None:
    """A written default would shadow a base the config later extends: only the name and the
    profile are written, every other setting is a comment."""
    profile, path, _ = starter
    written = load_text(path.read_text(), str(path)).data
    assert written == {
        "apiVersion": "gpustack.dev/v1alpha1",
        "kind": "GPUStack",
        "metadata": {"name": f"{profile}-lab"},
        "platform": {"profile": profile},
    }


def test_starter_comments_show_the_values_in_force(starter) -> None:
    """Each commented-out value is the one the config takes without it."""
    _, path, stack = starter
    shown = load_text(uncommented(path.read_text()), str(path)).data
    in_force = stack.config.model_dump(by_alias=True, mode="json")

    def compare(shown: object, actual: object, where: str) -> None:
        if isinstance(shown, dict):
            assert isinstance(actual, dict), where
            for key, value in shown.items():
                compare(value, actual[key], f"{where}.{key}")
        else:
            assert shown == actual, where

    compare(shown, in_force, "")


def test_a_starter_given_a_base_later_takes_the_bases_settings(cli, tmp_path: Path) -> None:
    """init, then `extends:` added by hand: the base's sharing reaches the cluster (a default
    written out, `strategy: none`, would shadow it)."""
    (tmp_path / "base.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nplatform: {profile: rke2}\n"
        "devicePlugin: {sharing: {strategy: time-slicing, replicas: 8}}\n"
    )
    config = tmp_path / "gpu-west.yaml"
    assert cli("init", "--profile", "rke2", config).exit_code == 0
    config.write_text("extends: base.yaml\n" + config.read_text())
    sharing = load_stack(config).config.devicePlugin.sharing
    assert (sharing.strategy, sharing.replicas) == ("time-slicing", 8)


def test_init_extends_starts_a_fleet_member(cli, tmp_path: Path) -> None:
    clusters = tmp_path / "clusters"
    clusters.mkdir()
    (clusters / "base.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nplatform: {profile: rke2}\n"
        "devicePlugin: {sharing: {strategy: time-slicing, replicas: 8}}\n"
    )
    member = clusters / "gpu-east.yaml"
    result = cli("init", "--extends", clusters / "base.yaml", member)
    assert result.exit_code == 0, result.output
    assert "(profile rke2, extends base.yaml)" in result.stderr
    written = load_text(member.read_text(), str(member)).data
    # The base, named from the member's folder; the profile is the base's, not written again.
    assert written == {
        "extends": "base.yaml",
        "apiVersion": "gpustack.dev/v1alpha1",
        "kind": "GPUStack",
        "metadata": {"name": "gpu-east"},
    }
    fields = commented_fields(member.read_text())
    assert fields["devicePlugin.sharing.replicas"][0] == "8"  # the base's, shown
    assert fields["platform.profile"][0] == "rke2"
    stack = load_stack(member)
    assert stack.config.devicePlugin.sharing.replicas == 8
    # A base that does not exist: refused, nothing written.
    missing = cli("init", "--extends", clusters / "nope.yaml", clusters / "other.yaml")
    assert missing.exit_code == 2
    assert "error: --extends: base config" in missing.stderr
    assert not (clusters / "other.yaml").exists()


def test_starter_comments_are_true_for_its_profile(starter, cli) -> None:
    profile, path, stack = starter
    text = path.read_text()
    facts = stack.profile.facts
    objects = pipeline.render(stack).objects
    pod_specs = [pod_spec(workload) for workload in workloads(objects)]
    gpu_pod_specs = [pod_spec(workload) for workload in runtime_users(objects, stack)]

    fields = commented_fields(text)
    assert f"gpustack profiles show {profile}" in text
    assert cli("profiles", "show", profile).exit_code == 0
    assert fields["platform.profile"][1].split(" | ") == available()

    assert fields["dcgmExporter.monitor"][1].startswith(f"auto ({stack.monitor} here)")
    assert fields["driver.mode"][1].split(" | ") == [
        f"auto ({stack.driver_mode})",
        *facts.driver.modes,
    ]

    runtime = fields["runtimeClass.enabled"][1]
    runtime_classes = [obj for obj in objects if obj["kind"] == "RuntimeClass"]
    provided = "nvidia" in facts.runtime.providedRuntimeClasses
    assert ("runtimeClass.name" in fields) == provided
    if runtime.startswith("auto: on every GPU pod"):
        assert stack.runtime_class_enabled and (bool(runtime_classes) != provided)
        assert gpu_pod_specs
        assert all(spec.get("runtimeClassName") == "nvidia" for spec in gpu_pod_specs)
    else:
        assert runtime.startswith("auto: off here")
        assert not runtime_classes
        assert not any("runtimeClassName" in spec for spec in pod_specs)

    enabled, note = fields["devicePlugin.enabled"]
    mounts_plugin_dir = any(
        volume.get("hostPath", {}).get("path") == KUBELET_DEVICE_PLUGINS
        for spec in pod_specs
        for volume in spec.get("volumes", [])
    )
    if note.startswith("GKE runs its own device plugin"):
        assert facts.devicePluginProvider == "gke"
        assert enabled == "false" and not mounts_plugin_dir
    elif note.startswith("Bottlerocket runs NVIDIA's plugin as a host service"):
        assert facts.devicePluginProvider == "bottlerocket"
        assert enabled == "false" and not mounts_plugin_dir
        assert "bottlerocket-settings.toml" in pipeline.render(stack).node_files
    else:
        assert facts.devicePluginProvider == "nvidia"
        assert enabled == "true" and mounts_plugin_dir


def test_starter_metrics_comment_is_true(starter) -> None:
    _, path, stack = starter
    assert commented_fields(path.read_text())["dcgmExporter.enabled"] == (
        "true",
        "GPU metrics on port 9400",
    )
    ports = {
        port["containerPort"]
        for workload in gpu_workloads(pipeline.render(stack).objects, stack)
        for container in pod_spec(workload)["containers"]
        for port in container.get("ports", [])
    }
    assert 9400 in ports


def test_a_folder_to_be_gets_a_config_named_after_it(cli, tmp_path: Path) -> None:
    result = cli("init", tmp_path / "gpu-west")  # no .yaml: a folder, made
    assert result.exit_code == 0, result.output
    config = tmp_path / "gpu-west" / "gpustack.yaml"
    assert "name: gpu-west" in config.read_text()
    assert cli("render", config, "-o", tmp_path / "out").exit_code == 0
    assert (tmp_path / "out" / "gpu-west").is_dir()


def test_init_never_overwrites_without_force(cli, tmp_path: Path) -> None:
    path = tmp_path / "gpustack.yaml"
    path.write_text("# my own config\n")

    refused = cli("init", "--profile", "rke2", path)
    assert refused.exit_code == 2
    assert "already exists (use --force to overwrite)" in refused.output
    assert path.read_text() == "# my own config\n"

    forced = cli("init", "--profile", "rke2", "--force", path)
    assert forced.exit_code == 0, forced.output
    assert load_stack(path).profile.metadata.name == "rke2"


def test_a_user_profiles_defaults_are_what_its_starter_writes(cli, tmp_path: Path) -> None:
    """A user profile may set defaults the built-in ones leave to the model: the starter writes
    the profile's values, so the four required fields alone still render the same files."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "lab.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: Profile\nextends: kubeadm\n"
        "metadata: {name: lab, description: a lab}\n"
        "defaults:\n"
        "  dcgmExporter: {interval: 60s}\n"
        "  devicePlugin: {migStrategy: single, sharing: {strategy: time-slicing, replicas: 4}}\n"
    )
    path = tmp_path / "lab.yaml"
    result = cli("init", "--profile", "lab", "--profiles-dir", profiles, path)
    assert result.exit_code == 0, result.output
    written = commented_fields(path.read_text())
    assert written["dcgmExporter.interval"][0] == "60s"
    assert written["devicePlugin.migStrategy"][0] == "single"
    assert written["devicePlugin.sharing.replicas"][0] == "4"
    minimal = tmp_path / "minimal.yaml"
    minimal.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\n"
        "metadata: {name: lab}\nplatform: {profile: lab}\n"
    )
    stack = load_stack(path, profiles_dir=profiles)
    assert pipeline.files(
        pipeline.render(load_stack(minimal, profiles_dir=profiles))
    ) == pipeline.files(pipeline.render(stack))


def test_starter_writes_node_pool_mappings_as_yaml_not_json(starter) -> None:
    # A JSON object is valid YAML, but a config a person edits reads as the rest of the file.
    profile, path, _ = starter
    for line in path.read_text().splitlines():
        if line.lstrip().startswith(("gke:", "aks:", "eks:")):
            assert '"' not in line.partition("#")[0], (profile, line)


def test_a_bases_list_is_shown_as_yaml_and_reads_back_uncommented(tmp_path: Path) -> None:
    from gpustack.resolve.starter import starter

    (tmp_path / "base.yaml").write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nplatform:\n  profile: rke2\n"
        "images:\n  pullSecrets: [mirror-pull, 'on']\n"
    )
    text = starter("", "demo", path=str(tmp_path / "demo.yaml"), base="base.yaml")
    (line,) = [each for each in text.splitlines() if "pullSecrets:" in each]
    assert line.startswith('#   pullSecrets: [mirror-pull, "on"] ')
    document = load_text(uncommented(text), "demo.yaml").data
    assert document["images"]["pullSecrets"] == ["mirror-pull", "on"]


def test_the_schema_file_init_names_in_its_help_is_the_one_it_writes(tmp_path):
    """The command's help names the file `init` writes beside the config."""
    result = run_gpustack("init", "lab.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (written,) = [path.name for path in tmp_path.glob("*.json")]
    help_text = " ".join(run_gpustack("init", "--help").stdout.split())
    assert f"(default: {written} beside the config" in help_text
