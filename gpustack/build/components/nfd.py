"""Node Feature Discovery: labels nodes from their hardware, e.g. the NVIDIA PCI devices.

nfd.mode `deploy` emits NFD itself (kubernetes-sigs/node-feature-discovery v0.19.0,
deployment/overlays/default): its CRDs, nfd-master, nfd-worker, nfd-gc, their RBAC and config.
`external` assumes NFD is installed (e.g. OpenShift's NFD operator) and `disabled` emits nothing.

Both `deploy` and `external` emit the NodeFeatureRule that gives NVIDIA GPU nodes the label every
GPU workload selects on, in the API group of the NFD that reads it (`facts.nodeFeatureRuleGroup`
for an external one: Red Hat's NFD operator serves nfd.openshift.io). NFD's own PCI label is `pci-<class>_<vendor>.present`, so a data-center GPU
(class 0302, "3D controller") shows up as `pci-0302_10de.present` and a VGA-class one as
`pci-0300_10de.present`, while the device plugin's chart, the GPU Operator and the field reports
expect `pci-10de.present`: the mismatch leaves the plugin at 0 pods (k8s-device-plugin #1213).
"""

from __future__ import annotations

from typing import Any

from gpustack import emit
from gpustack.build import pod
from gpustack.build.decorate import DISCOVERY, rollout
from gpustack.build.pod import HostPath
from gpustack.build.workload import (
    COMPONENT_LABEL,
    CONTROL_PLANE_TAINT,
    FEATURES_D,
    cluster_role_with_binding,
    config_map,
    daemonset,
    gpu_tolerations,
    role_with_binding,
    scc_rules,
    selector_labels,
    service_account,
)
from gpustack.resolve.stack import Stack

GROUP = "nfd.k8s-sigs.io"
GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"
NVIDIA_PCI_VENDOR = "10de"
MASTER = "nfd-master"
WORKER = "nfd-worker"
GARBAGE_COLLECTOR = "nfd-gc"
# nfd-master and nfd-worker read `<name>.conf` from this folder by default.
CONFIG_DIR = "/etc/kubernetes/node-feature-discovery"


def build(stack: Stack) -> list[dict[str, Any]]:
    mode = stack.config.nfd.mode
    if mode == "disabled":
        return []
    objects = [node_feature_rule(stack)]
    if mode == "deploy":
        objects += [
            *custom_resource_definitions(),
            *_master(stack),
            *_worker(stack),
            *_garbage_collector(stack),
        ]
    if any(pool.canary for pool in stack.pools):
        # Before the canary's driver, which selects its nodes by NFD's labels
        # (gpustack.build.decorate DISCOVERY).
        for obj in objects:
            rollout(obj, DISCOVERY)
    return objects


def node_feature_rule(stack: Stack) -> dict[str, Any]:
    """`pci-10de.present=true` on nodes with an NVIDIA (vendor 10de) display controller (class
    03xx: 0300 VGA, 0302 3D), whatever label NFD's PCI source is configured to produce.

    In the API group the NFD in charge serves: gpustack's own (`deploy`) upstream's, an NFD
    installed elsewhere (`external`) the profile's, e.g. Red Hat's NFD operator nfd.openshift.io."""
    external = stack.config.nfd.mode == "external"
    group = stack.facts.nodeFeatureRuleGroup if external else GROUP
    return {
        "apiVersion": f"{group}/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": "nvidia-gpu-pci-10de"},
        "spec": {
            "rules": [
                {
                    "name": "nvidia-gpu-present",
                    "labels": {GPU_LABEL: "true"},
                    "matchFeatures": [
                        {
                            "feature": "pci.device",
                            "matchExpressions": {
                                "vendor": {"op": "In", "value": [NVIDIA_PCI_VENDOR]},
                                "class": {"op": "InRegexp", "value": ["^03"]},
                            },
                        }
                    ],
                }
            ]
        },
    }


# ---------------------------------------------------------------------------------------------
# CRDs: structural schemas for the v1alpha1 API (pkg/apis/nfd/v1alpha1/types.go, v0.19.0).

_STRING: dict[str, Any] = {"type": "string"}
_STRINGS: dict[str, Any] = {"type": "array", "items": _STRING}
# The operators of a MatchExpression (types.go MatchOp).
_MATCH_OPS = [
    "In",
    "NotIn",
    "InRegexp",
    "Exists",
    "DoesNotExist",
    "Gt",
    "Ge",
    "Lt",
    "Le",
    "GtLt",
    "GeLe",
    "IsTrue",
    "IsFalse",
]


def _object(
    properties: dict[str, Any] | None = None,
    required: list[str] | None = None,
    values: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An object schema: named `properties`, or a map whose every value matches `values`."""
    schema: dict[str, Any] = {"type": "object"}
    if properties:
        schema["properties"] = properties
    if values:
        schema["additionalProperties"] = values
    if required:
        schema["required"] = required
    return schema


def _string_map() -> dict[str, Any]:
    return _object(values=_STRING)


def _match_expression() -> dict[str, Any]:
    return _object(
        {"op": {"type": "string", "enum": _MATCH_OPS}, "type": _STRING, "value": _STRINGS},
        ["op"],
    )


def _match_features() -> dict[str, Any]:
    """A list of terms, all of which must match: one feature set and expressions on it."""
    term = _object(
        {
            "feature": _STRING,
            "matchExpressions": _object(values=_match_expression()),
            "matchName": _match_expression(),
        },
        ["feature"],
    )
    return {"type": "array", "items": term}


def _rule_properties() -> dict[str, Any]:
    """What NodeFeatureRule rules and NodeFeatureGroup rules share: a name, variables, matchers."""
    return {
        "matchAny": {
            "type": "array",
            "items": _object({"matchFeatures": _match_features()}, ["matchFeatures"]),
        },
        "matchFeatures": _match_features(),
        "name": _STRING,
        "vars": _string_map(),
        "varsTemplate": _STRING,
    }


def _node_feature_rule_spec() -> dict[str, Any]:
    taint = _object(
        {
            "effect": _STRING,
            "key": _STRING,
            "timeAdded": {"type": "string", "format": "date-time"},
            "value": _STRING,
        },
        ["effect", "key"],
    )
    rule = _object(
        {
            **_rule_properties(),
            "annotations": _string_map(),
            "extendedResources": _string_map(),
            "labels": _string_map(),
            "labelsTemplate": _STRING,
            "taints": {"type": "array", "items": taint},
        },
        ["name"],
    )
    return _object({"rules": {"type": "array", "items": rule}}, ["rules"])


def _node_feature_spec() -> dict[str, Any]:
    def feature_sets(elements: dict[str, Any]) -> dict[str, Any]:
        return _object(values=_object({"elements": elements}, ["elements"]))

    instance = _object({"attributes": _string_map()}, ["attributes"])
    features = _object(
        {
            "attributes": feature_sets(_string_map()),
            "flags": feature_sets(_object(values=_object())),
            "instances": feature_sets({"type": "array", "items": instance}),
        }
    )
    return _object({"features": features, "labels": _string_map()})


def _node_feature_group_spec() -> dict[str, Any]:
    rule = _object(_rule_properties(), ["name"])
    return _object({"featureGroupRules": {"type": "array", "items": rule}}, ["featureGroupRules"])


def _node_feature_group_status() -> dict[str, Any]:
    nodes = {
        "type": "array",
        "items": _object({"name": _STRING}, ["name"]),
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
    }
    return _object({"nodes": nodes})


def _crd(
    kind: str,
    scope: str,
    description: str,
    spec: dict[str, Any],
    *,
    short_names: tuple[str, ...] = (),
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    plural = f"{kind.lower()}s"
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short_names:
        names["shortNames"] = list(short_names)
    properties = {
        "apiVersion": _STRING,
        "kind": _STRING,
        "metadata": {"type": "object"},
        "spec": spec,
    }
    version: dict[str, Any] = {"name": "v1alpha1", "served": True, "storage": True}
    if status:
        properties["status"] = status
        version["subresources"] = {"status": {}}
    schema = _object(properties, ["spec"])
    version["schema"] = {"openAPIV3Schema": {"description": description, **schema}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "names": names, "scope": scope, "versions": [version]},
    }


def custom_resource_definitions() -> list[dict[str, Any]]:
    return [
        _crd(
            "NodeFeature",
            "Namespaced",
            "Features discovered for one node, published by nfd-worker or another agent (GFD).",
            _node_feature_spec(),
        ),
        _crd(
            "NodeFeatureGroup",
            "Namespaced",
            "A group of nodes whose features match a set of rules.",
            _node_feature_group_spec(),
            short_names=("nfg",),
            status=_node_feature_group_status(),
        ),
        _crd(
            "NodeFeatureRule",
            "Cluster",
            "Rules that turn discovered features into node labels, annotations, taints and "
            "extended resources.",
            _node_feature_rule_spec(),
            short_names=("nfr",),
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Workloads (deployment/base and overlays/default, v0.19.0).


def image(stack: Stack) -> str:
    return f"registry.k8s.io/nfd/node-feature-discovery:{stack.config.nfd.version}"


def _container(
    stack: Stack,
    name: str,
    *,
    requests: dict[str, str],
    memory_limit: str,
    liveness: dict[str, Any],
    readiness: dict[str, Any],
    mounts: list[dict[str, Any]],
) -> dict[str, Any]:
    health = {"httpGet": {"path": "/healthz", "port": "http"}}
    container: dict[str, Any] = {
        "name": name,
        "image": image(stack),
        "command": [name],
        # Identity from the downward API: NFD names its NodeFeature and owner references by it.
        "env": [
            pod.field_env("NODE_NAME", "spec.nodeName"),
            pod.field_env("POD_NAME", "metadata.name"),
            pod.field_env("POD_UID", "metadata.uid"),
        ],
        "ports": [{"name": "http", "containerPort": 8080}],
        "livenessProbe": {**health, **liveness},
        "readinessProbe": {**health, **readiness},
        "resources": {"limits": {"memory": memory_limit}, "requests": requests},
        # Least privilege, as upstream: NFD only reads the host and talks to the API server.
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
        },
    }
    if mounts:
        container["volumeMounts"] = mounts
    return container


def _config_map(stack: Stack, name: str, config: dict[str, Any]) -> dict[str, Any]:
    return config_map(stack, f"{name}-conf", {f"{name}.conf": emit.dump(config)})


def _config_volume(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        pod.config_map_volume(f"{name}-conf", f"{name}-conf"),
        pod.mount(f"{name}-conf", CONFIG_DIR, read_only=True),
    )


def _cluster_tolerations(stack: Stack) -> list[dict[str, Any]]:
    """nfd-master and nfd-gc may run anywhere; they tolerate the control-plane taint (upstream)
    and the GPU nodes' taints, so that they still run where every node is a GPU node."""
    tolerations = gpu_tolerations(stack)
    control_plane = {"key": CONTROL_PLANE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
    if control_plane not in tolerations:
        tolerations.append(control_plane)
    return tolerations


def _deployment(stack: Stack, name: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    selector = selector_labels(name)
    labels = {**selector, COMPONENT_LABEL: name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": stack.namespace, "labels": dict(labels)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def _master(stack: Stack) -> list[dict[str, Any]]:
    rules = [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["watch", "list"]},
        {
            "apiGroups": [""],
            "resources": ["nodes", "nodes/status"],
            "verbs": ["get", "patch", "update", "list"],
        },
        {
            "apiGroups": [GROUP],
            "resources": ["nodefeatures", "nodefeaturerules", "nodefeaturegroups"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": [GROUP],
            "resources": ["nodefeaturegroups/status"],
            "verbs": ["patch", "update"],
        },
        # Leader election (overlays/default: one replica, but the lease is taken all the same).
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["nfd-master.nfd.kubernetes.io"],
            "verbs": ["get", "update"],
        },
    ]
    # NFD v0.13+ accepts vendor namespaces unless denied; older masters refused GFD's labels
    # ("Namespace 'nvidia.com' is not allowed", gpu-feature-discovery #5). Allowing it explicitly,
    # as NVIDIA's chart does (helm values nfd.master.config), keeps GFD's labels accepted.
    config = {"extraLabelNs": ["nvidia.com"]}
    volume, mount = _config_volume(MASTER)
    pod_spec = {
        "serviceAccountName": MASTER,
        "enableServiceLinks": False,
        # Upstream prefers control-plane nodes for the one cluster-wide component.
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {
                            "matchExpressions": [
                                {"key": CONTROL_PLANE_TAINT, "operator": "In", "values": [""]}
                            ]
                        },
                    }
                ]
            }
        },
        "tolerations": _cluster_tolerations(stack),
        "containers": [
            _container(
                stack,
                MASTER,
                requests={"cpu": "100m", "memory": "128Mi"},
                memory_limit="4Gi",
                liveness={},
                readiness={"failureThreshold": 10},
                mounts=[mount],
            )
        ],
        "volumes": [volume],
    }
    return [
        service_account(stack, MASTER),
        *cluster_role_with_binding(stack, MASTER, rules),
        _config_map(stack, MASTER, config),
        _deployment(stack, MASTER, pod_spec),
    ]


def _worker(stack: Stack) -> list[dict[str, Any]]:
    """The worker must run on GPU nodes before they carry the label it is there to produce, so it
    is placed by `nodes.selector` alone (never by the GPU label, never with the GPU RuntimeClass,
    whose scheduling adds that label) and tolerates every GPU taint (upstream has no tolerations:
    NFD #734, GFD #70)."""
    rules = [
        {
            "apiGroups": [GROUP],
            "resources": ["nodefeatures"],
            "verbs": ["create", "get", "update", "delete"],
        },
        # Owner references from the NodeFeature to the worker pod.
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        # OpenShift: hostPath volumes, read-only and without privilege, as hostmount-anyuid allows.
        *scc_rules(stack, "hostmount-anyuid"),
    ]
    # NFD's default rescan period, stated so that a review shows how soon a new node is labelled.
    config = {"core": {"sleepInterval": "60s"}}
    config_volume, config_mount = _config_volume(WORKER)
    # Read-only views of the host that the feature sources inspect.
    views = [
        ("host-boot", "/boot", "/host-boot"),
        ("host-os-release", "/etc/os-release", "/host-etc/os-release"),
        ("host-sys", "/sys", "/host-sys"),
        ("host-proc-swaps", "/proc/swaps", "/host-proc/swaps"),
        ("host-usr-lib", "/usr/lib", "/host-usr/lib"),
        ("host-lib", "/lib", "/host-lib"),
        ("features-d", FEATURES_D, FEATURES_D),
    ]
    volumes, mounts = pod.host_paths(
        HostPath(name, path, mount_path, read_only=True) for name, path, mount_path in views
    )
    volumes.append(config_volume)
    mounts.append(config_mount)
    pod_spec: dict[str, Any] = {"serviceAccountName": WORKER}
    if stack.config.nodes.selector:
        pod_spec["nodeSelector"] = dict(stack.config.nodes.selector)
    pod_spec.update(
        {
            "tolerations": gpu_tolerations(stack),
            "containers": [
                _container(
                    stack,
                    WORKER,
                    requests={"cpu": "5m", "memory": "64Mi"},
                    memory_limit="512Mi",
                    liveness={"initialDelaySeconds": 10, "periodSeconds": 10},
                    readiness={
                        "failureThreshold": 10,
                        "initialDelaySeconds": 5,
                        "periodSeconds": 10,
                    },
                    mounts=mounts,
                )
            ],
            "volumes": volumes,
        }
    )
    return [
        service_account(stack, WORKER),
        *role_with_binding(stack, WORKER, rules),
        _config_map(stack, WORKER, config),
        daemonset(stack, WORKER, pod_spec, component=WORKER),
    ]


def _garbage_collector(stack: Stack) -> list[dict[str, Any]]:
    """Deletes the NodeFeature objects (and topology objects) of nodes that no longer exist."""
    rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
        {
            "apiGroups": ["topology.node.k8s.io"],
            "resources": ["noderesourcetopologies"],
            "verbs": ["delete", "list"],
        },
        {"apiGroups": [GROUP], "resources": ["nodefeatures"], "verbs": ["delete", "list"]},
    ]
    pod_spec = {
        "serviceAccountName": GARBAGE_COLLECTOR,
        "tolerations": _cluster_tolerations(stack),
        "containers": [
            _container(
                stack,
                GARBAGE_COLLECTOR,
                requests={"cpu": "10m", "memory": "128Mi"},
                memory_limit="1Gi",
                liveness={"initialDelaySeconds": 10},
                readiness={"initialDelaySeconds": 5},
                mounts=[],
            )
        ],
    }
    return [
        service_account(stack, GARBAGE_COLLECTOR),
        *cluster_role_with_binding(stack, GARBAGE_COLLECTOR, rules),
        _deployment(stack, GARBAGE_COLLECTOR, pod_spec),
    ]
