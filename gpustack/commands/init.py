"""`gpustack init`: a commented starter config for a profile."""

from __future__ import annotations

from pathlib import Path

import typer

from gpustack.commands.common import handles_user_errors

SCHEMA_URL = "https://gpustack.dev/schemas/gpustack.schema.json"

TEMPLATE = """\
# yaml-language-server: $schema={schema}
# gpustack cluster config: `gpustack render` turns it into manifests under out/{name}/.
# Every field below is optional except apiVersion, kind, metadata.name and platform.profile;
# left out, a field takes the profile's default (see `gpustack profiles show {profile}`).
apiVersion: gpustack.dev/v1alpha1
kind: GPUStack
metadata:
  name: {name}                  # DNS-1123 label; names the output folder
platform:
  profile: {profile}             # {profiles}
  kubernetesVersion: "{kubernetes}"     # target for schema validation and API deprecations
{openshift}namespace: {namespace}
nodes:
  selector: {{}}                 # labels GPU nodes carry, ANDed into every GPU workload's placement
  taints:                       # taints GPU nodes carry; every GPU workload tolerates them
{taints}devicePlugin:
  enabled: {plugin}
  migStrategy: none             # none | single | mixed
  sharing:
    strategy: none              # none | time-slicing | mps
    replicas: 4                 # pods per GPU when sharing
gfd:
  enabled: {gfd}
nfd:
  mode: {nfd}                  # deploy | external (installed elsewhere) | disabled
dcgmExporter:
  enabled: true
  monitor: auto                 # auto ({monitor} on this profile) | servicemonitor | podmonitoring | none
  interval: 15s
  monitorLabels: {{}}            # e.g. {{release: kube-prometheus-stack}} so Prometheus picks it up
runtimeClass:
  enabled: auto                 # auto: {runtime_class}
  name: nvidia
  handler: nvidia
driver:
  mode: auto                    # auto ({driver}) | {drivers}
"""


@handles_user_errors
def command(
    path: Path = typer.Argument(Path("gpustack.yaml"), help="Where to write the config."),
    profile: str = typer.Option("kubeadm", "--profile", help="Platform profile to start from."),
    name: str = typer.Option("", "--name", help="Cluster name (default: from the file name)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
    profiles_dir: Path | None = typer.Option(None, "--profiles-dir", help="User profiles."),
) -> None:
    """Write a commented starter config (never overwriting without --force)."""
    from gpustack.errors import Location, UserError, display_path
    from gpustack.model import dns_label

    if path.exists() and not force:
        raise UserError("already exists (use --force to overwrite)", Location(display_path(path)))
    cluster = name or (path.stem if path.stem != "gpustack" else "my-cluster")
    if not dns_label(cluster):
        raise UserError(
            f"{cluster!r} is not a valid DNS-1123 label; pass --name", field="metadata.name"
        )
    text = starter(profile, cluster, profiles_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {display_path(path)} (profile {profile}); next: gpustack render {path}", err=True)


def starter(profile_name: str, cluster: str, profiles_dir: Path | None = None) -> str:
    from gpustack import profiles
    from gpustack.config import merge
    profile, layer = profiles.load(profile_name, profiles_dir)
    defaults = layer.data
    facts = profile.facts
    taints = merge({}, defaults).get("nodes", {}).get("taints", [])
    taint_lines = "".join(
        f"  - {{key: {t['key']}, "
        + (f"value: {t['value']}, " if t.get("value") is not None else "")
        + f"effect: {t['effect']}}}\n"
        for t in taints
    ) or "  []\n"
    platform = defaults.get("platform", {})
    openshift = (
        f'  openshiftVersion: "{platform["openshiftVersion"]}"\n'
        if platform.get("openshiftVersion") else ""
    )
    runtime = {
        "required": "this profile needs the RuntimeClass on every GPU pod",
        "optional": "created; GPU pods use it unless nvidia is containerd's default runtime",
        "cdi-only": "not needed on this profile unless CDI is used",
        "none": "not used on this profile (the platform mounts the driver)",
    }[facts.runtime.runtimeClass]
    text = TEMPLATE.format(
        schema=SCHEMA_URL,
        name=cluster,
        profile=profile_name,
        profiles=" | ".join(profiles.available(profiles_dir)),
        kubernetes=platform.get("kubernetesVersion", "1.31"),
        openshift=openshift,
        namespace=defaults.get("namespace", "gpu-system"),
        taints=taint_lines,
        plugin=str(defaults.get("devicePlugin", {}).get("enabled", True)).lower(),
        gfd=str(defaults.get("gfd", {}).get("enabled", True)).lower(),
        nfd=defaults.get("nfd", {}).get("mode", "deploy"),
        monitor=facts.monitoring,
        runtime_class=runtime,
        driver=facts.driver.default,
        drivers=" | ".join(facts.driver.modes),
    )
    return text
