"""The project's CRD schemas (schemas/{group}/{kind}_{version}.json) against the upstream ones.

The upstream CRD schemas in shared/crd-schemas/ are the oracle: everything gpustack emits must
pass them too, and for the fields gpustack uses the project's schemas must reject what they reject.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import as_upstream, yaml_document
from validate_helpers import CRD_OBJECTS, UPSTREAM_CRDS, UPSTREAM_TEMPLATE

from gpustack.resolve.platform_profiles import BUILTIN, data_dir
from gpustack.validation.schemas import store
from gpustack.validation.verdicts import check_object

PROJECT_SCHEMAS = data_dir("schemas")
CRD_SCHEMA_FILES = sorted(PROJECT_SCHEMAS.glob("*/*.json"))
VERSION = "1.31"


def ours():
    return store(VERSION)


def upstream():
    return store(VERSION, ("default", UPSTREAM_TEMPLATE))


def load(path: Path) -> dict:
    return yaml_document(path.read_text(encoding="utf-8"))


def problems(obj: dict, schemas) -> tuple[str, list[str]]:
    status, findings = check_object(obj, schemas)
    return status, [f"{finding.field}: {finding.message}" for finding in findings]


# --- what gpustack renders ---------------------------------------------------------------------

VARIANTS = {
    "defaults": "",
    "argocd": "gitops:\n  tool: argocd\n  argocd: {repoURL: https://git.example.com/fleet.git}\n",
    "flux": "gitops:\n  tool: flux\n  flux: {sourceRef: {name: fleet}}\n",
}
CASES = [(profile, variant, VARIANTS[variant]) for profile in BUILTIN for variant in VARIANTS] + [
    ("openshift", "entitlement", "entitlement:\n  enabled: true\n  pemFile: entitlement.pem\n"),
    ("kubeadm", "servicemonitor", "dcgmExporter:\n  monitor: servicemonitor\n"),
    ("gke-cos", "podmonitoring", "dcgmExporter:\n  monitor: podmonitoring\n"),
]


def rendered(profile: str, extra: str, folder: Path) -> list[dict]:
    from gpustack.build.pipeline import render
    from gpustack.resolve.load import load_stack

    (folder / "entitlement.pem").write_text(
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", encoding="utf-8"
    )
    config = folder / "gpustack.yaml"
    config.write_text(
        "apiVersion: gpustack.dev/v1alpha1\nkind: GPUStack\nmetadata:\n  name: lab\n"
        f"platform:\n  profile: {profile}\n" + extra,
        encoding="utf-8",
    )
    return render(load_stack(config, None, None)).objects


@pytest.mark.shared
@pytest.mark.parametrize("profile, variant, extra", CASES, ids=[f"{p}-{v}" for p, v, _ in CASES])
def test_every_rendered_object_validates_against_project_and_upstream_schemas(
    profile, variant, extra, tmp_path
):
    objects = rendered(profile, extra, tmp_path)
    assert objects
    for obj in objects:
        assert problems(obj, ours()) == ("valid", []), obj["kind"]
        # Core kinds come from the same package either way; the CRD kinds meet upstream's schemas
        # (Red Hat's NodeFeatureRule as upstream's, whose spec it serves).
        assert problems(as_upstream(obj), upstream()) == ("valid", []), obj["kind"]


# --- one object per CRD kind, as gpustack writes it ---------------------------------------------

SAMPLES = sorted(CRD_OBJECTS.glob("*.yaml"))


def test_every_project_crd_schema_has_a_sample_object():
    kinds = {(load(path)["apiVersion"], load(path)["kind"]) for path in SAMPLES}
    for schema_file in CRD_SCHEMA_FILES:
        schema = json.loads(schema_file.read_text())
        api_version = schema["properties"]["apiVersion"]["enum"][0]
        kind = schema["properties"]["kind"]["enum"][0]
        assert (api_version, kind) in kinds, schema_file


def has_upstream_schema(obj: dict) -> bool:
    upstream_obj = as_upstream(obj)
    group, _, version = upstream_obj["apiVersion"].partition("/")
    return (UPSTREAM_CRDS / group / f"{upstream_obj['kind'].lower()}_{version}.json").is_file()


@pytest.mark.parametrize("sample", SAMPLES, ids=[path.stem for path in SAMPLES])
def test_sample_objects_are_valid_for_both(sample):
    obj = load(sample)
    assert problems(obj, ours()) == ("valid", [])
    if has_upstream_schema(obj):  # all but kustomize's kustomization.yaml, which is no CRD
        assert problems(as_upstream(obj), upstream()) == ("valid", [])


DELETE = object()
# (sample, path to change, new value or DELETE): each is something the upstream schema rejects
# in a field gpustack sets; the project's schema must reject it too.
MUTATIONS = [
    ("servicemonitor", ("spec", "endpoints", 0, "bogus"), 1),
    # Azure Monitor's copy: its scrape limits are integers, as prometheus-operator's.
    ("servicemonitor-azure", ("spec", "labelLimit"), "63"),
    ("servicemonitor-azure", ("spec", "endpoints", 0, "bogus"), 1),
    ("servicemonitor", ("spec", "endpoints", 0, "scheme"), "ftp"),
    ("servicemonitor", ("spec", "endpoints", 0, "interval"), 15),
    ("servicemonitor", ("spec", "endpoints", 0, "interval"), "15 seconds"),
    ("servicemonitor", ("spec", "selector", "matchLabels", "app"), 1),
    ("servicemonitor", ("spec", "namespaceSelector", "bogus"), True),
    ("servicemonitor", ("spec", "endpoints"), DELETE),
    ("servicemonitor", ("spec", "endpoints", 0, "relabelings", 0, "action"), "rename"),
    ("prometheusrule", ("spec", "groups", 0, "rules", 0, "for"), 5),
    ("prometheusrule", ("spec", "groups", 0, "bogus"), 1),
    ("prometheusrule", ("spec", "groups", 0, "name"), DELETE),
    ("clusterrules", ("spec", "groups", 1, "rules", 0, "for"), 5),
    ("clusterrules", ("spec", "groups", 0, "bogus"), 1),
    ("clusterrules", ("spec", "groups", 0, "name"), DELETE),
    ("podmonitoring", ("spec", "endpoints", 0, "bogus"), 1),
    ("podmonitoring", ("spec", "endpoints", 0, "interval"), 15),
    ("podmonitoring", ("spec", "endpoints", 0, "port"), [9400]),
    ("podmonitoring", ("spec", "endpoints", 0, "port"), DELETE),
    ("podmonitoring", ("spec", "selector"), DELETE),
    ("podmonitoring", ("spec", "targetLabels", "bogus"), []),
    (
        "nodefeaturerule",
        ("spec", "rules", 0, "matchFeatures", 0, "matchExpressions", "vendor", "op"),
        "Equals",
    ),
    ("nodefeaturerule", ("spec", "rules", 0, "bogus"), 1),
    ("nodefeaturerule", ("spec", "rules", 0, "labels", "x"), 1),
    ("nodefeaturerule", ("spec", "rules", 0, "name"), DELETE),
    ("nodefeaturerule", ("spec", "rules", 0, "matchFeatures", 0, "feature"), DELETE),
    ("nodefeaturerule", ("spec",), DELETE),
    (
        "nodefeaturerule-openshift",
        ("spec", "rules", 0, "matchFeatures", 0, "matchExpressions", "class", "op"),
        "Matches",
    ),
    ("nodefeaturerule-openshift", ("spec", "rules", 0, "bogus"), 1),
    ("nodefeaturerule-openshift", ("spec", "rules", 0, "name"), DELETE),
    ("nodefeaturerule-openshift", ("spec", "rules", 0, "matchFeatures", 0, "feature"), DELETE),
    ("machineconfig", ("spec", "bogus"), 1),
    ("machineconfig", ("spec", "kernelArguments"), "quiet"),
    ("machineconfig", ("spec", "fips"), "yes"),
    ("securitycontextconstraints", ("bogus",), 1),
    ("securitycontextconstraints", ("allowHostPID",), "no"),
    ("securitycontextconstraints", ("priority",), "high"),
    ("securitycontextconstraints", ("volumes",), DELETE),
    ("securitycontextconstraints", ("runAsUser", "bogus"), 1),
    ("securitycontextconstraints", ("seLinuxContext", "type"), 5),
    ("application", ("spec", "destination", "bogus"), 1),
    ("application", ("spec", "syncPolicy", "automated", "prune"), "yes"),
    ("application", ("spec", "syncPolicy", "bogus"), 1),
    ("application", ("spec", "source", "repoURL"), DELETE),
    ("application", ("spec", "project"), DELETE),
    ("application", ("spec", "syncPolicy", "retry", "limit"), "five"),
    ("applicationset", ("spec", "syncPolicy", "applicationsSync"), "sometimes"),
    ("applicationset", ("spec", "generators", 0, "bogus"), {}),
    ("applicationset", ("spec", "goTemplate"), "yes"),
    ("applicationset", ("spec", "generators", 0, "git", "revision"), DELETE),
    ("applicationset", ("spec", "template", "spec", "destination", "bogus"), 1),
    ("applicationset", ("spec", "template", "metadata", "bogus"), 1),
    ("appproject", ("spec", "destinations", 0, "bogus"), 1),
    ("appproject", ("spec", "sourceRepos"), "https://git.example.com/x.git"),
    ("appproject", ("spec", "clusterResourceWhitelist", 0, "kind"), DELETE),
    ("flux-kustomization", ("spec", "sourceRef", "kind"), "HelmRepository"),
    ("flux-kustomization", ("spec", "prune"), "yes"),
    ("flux-kustomization", ("spec", "interval"), "10 minutes"),
    ("flux-kustomization", ("spec", "prune"), DELETE),
    ("flux-kustomization", ("spec", "dependsOn", 0, "bogus"), 1),
    ("flux-kustomization", ("spec", "targetNamespace"), ""),
    ("gitrepository", ("spec", "url"), "ftp://git.example.com/x.git"),
    ("gitrepository", ("spec", "ref", "bogus"), "x"),
    ("gitrepository", ("spec", "provider"), "gitlab"),
    ("gitrepository", ("spec", "interval"), DELETE),
]


def mutated(sample: str, path: tuple, value) -> dict:
    obj = copy.deepcopy(load(CRD_OBJECTS / f"{sample}.yaml"))
    node = obj
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return obj


@pytest.mark.shared
@pytest.mark.parametrize(
    "sample, path, value", MUTATIONS, ids=[f"{s}:{'.'.join(map(str, p))}" for s, p, _ in MUTATIONS]
)
def test_project_schema_rejects_what_upstream_rejects(sample, path, value):
    obj = mutated(sample, path, value)
    status, found = problems(as_upstream(obj), upstream())
    assert status == "invalid", f"upstream accepts this, so it is no test: {found}"
    status, found = problems(obj, ours())
    assert status == "invalid", "the project's schema accepts what upstream rejects"


@pytest.mark.shared
def test_every_project_schema_but_kustomizes_is_for_an_upstream_crd():
    without = [
        path.relative_to(PROJECT_SCHEMAS)
        for path in CRD_SCHEMA_FILES
        if not (UPSTREAM_CRDS / path.relative_to(PROJECT_SCHEMAS)).is_file()
    ]
    # Red Hat's NodeFeatureRule is upstream's under another group (conftest.UPSTREAM_GROUP). The
    # DRA driver's CRDs are not among the shared schemas: their schemas are the conversion of the
    # CRDs gpustack renders from the chart (test_dra.py).
    assert without == [
        Path("kustomize.config.k8s.io/kustomization_v1beta1.json"),
        Path("nfd.openshift.io/nodefeaturerule_v1alpha1.json"),
        Path("resource.nvidia.com/computedomain_v1beta1.json"),
        Path("resource.nvidia.com/computedomainclique_v1beta1.json"),
    ]


def test_a_rendered_folder_validates_as_a_whole(cli, tmp_path):
    """Every file gpustack writes for a cluster, kustomization.yaml included, except the
    host-side node/ files, which are no Kubernetes objects."""
    assert cli("render", "-o", tmp_path).exit_code == 0
    result = cli("validate", "--summary", "--ignore-filename-pattern", "/node/", tmp_path)
    assert result.exit_code == 0, result.output
    assert "Invalid: 0, Errors: 0" in result.stdout


# --- the schema files themselves ---------------------------------------------------------------


@pytest.mark.parametrize(
    "schema_file",
    CRD_SCHEMA_FILES,
    ids=[str(p.relative_to(PROJECT_SCHEMAS)) for p in CRD_SCHEMA_FILES],
)
def test_schema_files_follow_kubeconforms_layout_and_are_strict(schema_file):
    schema = json.loads(schema_file.read_text())
    api_version = schema["properties"]["apiVersion"]["enum"][0]
    kind = schema["properties"]["kind"]["enum"][0]
    group, _, version = api_version.partition("/")
    expected = Path(group) / f"{kind.lower()}_{version}.json"
    assert schema_file.relative_to(PROJECT_SCHEMAS) == expected

    def strict(node, where):
        if isinstance(node, dict):
            if "properties" in node:
                assert node.get("additionalProperties") is False, where
            for key, child in node.items():
                strict(child, f"{where}/{key}")
        elif isinstance(node, list):
            for index, child in enumerate(node):
                strict(child, f"{where}/{index}")

    strict(schema, schema_file.name)


@pytest.mark.parametrize("op", ["Ge", "Le", "GeLe"])
def test_red_hats_node_feature_rule_takes_only_the_operators_its_crd_lists(op):
    """Red Hat's NodeFeatureRule CRD lists ten match operators, without upstream NFD's Ge, Le and
    GeLe (openshift/cluster-nfd-operator manifests/stable/manifests/
    nfd.openshift.io_nodefeaturerules.yaml, release-4.18 and release-4.22): its API server
    refuses a rule with them, so the project's schema does too, while its schema of upstream's
    NodeFeatureRule takes them."""
    path = ("spec", "rules", 0, "matchFeatures", 0, "matchExpressions", "class", "op")
    obj = mutated("nodefeaturerule-openshift", path, op)
    assert problems(obj, ours())[0] == "invalid"
    assert problems(mutated("nodefeaturerule", path[:-2] + ("vendor", "op"), op), ours()) == (
        "valid",
        [],
    )
