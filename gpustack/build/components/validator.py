"""NVIDIA's validator: proves each GPU node, step by step, and leaves a ready file per step in
/run/nvidia/validations, where the other GPU DaemonSets wait for them.

Facts from NVIDIA/gpu-operator v26.7.0: assets/state-operator-validation/ (the DaemonSet, its
RBAC and SCC), cmd/nvidia-validator/main.go (what each validation does, its env and the ready
files), validator/manifests/ (the CUDA and plugin workload pods it creates) and
controllers/object_controls.go (TransformValidator, TransformValidatorComponent: the env the
operator adds, the plugin validation dropped without a device plugin, uid 0).

The init containers run in order, each a step of the node's bring-up:
- `driver-validation` waits until nvidia-smi runs, from the host's root or the driver
  container's /run/nvidia/driver, creates the /dev/char symlinks of the NVIDIA device nodes
  (without them a `systemctl daemon-reload` takes running pods' GPUs away under the systemd
  cgroup driver: NVIDIA/nvidia-container-toolkit#48) and writes `driver-ready`;
- `toolkit-validation` runs nvidia-smi in a container the nvidia runtime hands every GPU to:
  `toolkit-ready`, which the device plugin, GFD, the DCGM exporter and the MIG manager wait for
  (after a reboot: the driver rebuilt and the runtime's CDI spec regenerated in tmpfs);
- `cuda-validation` runs NVIDIA's vectorAdd pod on the node: `cuda-ready`;
- `plugin-validation` (with NVIDIA's device plugin) waits until the node advertises GPUs:
  `plugin-ready`.
/run is a tmpfs, so a reboot clears the files and every step runs again. The main container
only keeps the pod running and removes the files when the pod goes.
"""

from __future__ import annotations

from typing import Any

from gpustack.build import pod
from gpustack.build.decorate import pulled
from gpustack.build.ready_files import (
    VALIDATIONS,
    driver_validation,
    host_folder_selinux,
    image,
    validations,
)
from gpustack.build.ready_files import VALIDATOR as NAME
from gpustack.build.ready_files import VALIDATOR_DRA as DRA_NAME
from gpustack.build.workload import (
    cluster_role_with_binding,
    daemonset,
    gpu_pod_spec,
    place_by_allocation,
    role_with_binding,
    scc_rules,
    service_account,
)
from gpustack.resolve.stack import Stack

COMPONENT = "operator-validator"
# values.yaml `validator.imagePullPolicy`, which the operator hands the workload pods.
PULL_POLICY = "IfNotPresent"


def _runs_as_root(stack: Stack) -> dict[str, Any]:
    """Validation steps that only call the API server or run nvidia-smi, and write their ready
    file: root (the folder is the kubelet's, root-owned 0755; the operator runs every validator
    container as uid 0, transformValidatorSecurityContext) and nothing more."""
    return {
        "runAsUser": 0,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        **host_folder_selinux(stack),
    }


def build(stack: Stack) -> list[dict[str, Any]]:
    if not stack.validator_enabled:
        return []
    settings = stack.config.validator
    plugin = stack.config.devicePlugin.enabled
    workloads = settings.cudaWorkload or (plugin and settings.pluginWorkload)
    rules: list[dict[str, Any]] = [
        # Driver validation lists the driver DaemonSets (isDriverManagedByOperator); the CUDA and
        # plugin workloads read this DaemonSet for its tolerations (runWorkload).
        {
            "apiGroups": ["apps"],
            "resources": ["daemonsets"],
            "verbs": ["get", "list"] if workloads else ["list"],
        },
    ]
    if workloads:
        # runWorkload lists the node's previous workload pod, deletes it, creates the new one
        # and polls it (waitForPod) until it has succeeded; upstream's Role also grants watch,
        # update and patch, which the validator never uses.
        rules.append(
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]}
        )
    # The workload pods run under this account: privileged (cuda-workload-validation.yaml), so
    # on OpenShift they need the SCC too.
    rules += scc_rules(stack)
    objects = [service_account(stack, NAME), *role_with_binding(stack, NAME, rules)]
    if plugin:
        # Plugin validation reads its node's GPU capacity (getNode); upstream's ClusterRole adds
        # list and watch on nodes and the operator's CRDs' finalizers (for owner references to
        # a ClusterPolicy, which does not exist here).
        objects += cluster_role_with_binding(
            stack, NAME, [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
        )
    if plugin and stack.gpu_allocations == {"device-plugin", "dra"}:
        # The plugin step waits for nvidia.com/gpu, which DRA nodes never advertise: it runs
        # only where the device plugin does, and the DRA nodes get a validator without it.
        objects.append(_daemonset(stack, "device-plugin"))
        objects.append(_daemonset(stack, "dra"))
    else:
        objects.append(_daemonset(stack, None))
    return objects


def _workload_env(stack: Stack) -> list[dict[str, Any]]:
    """What the validator gives the workload pods it creates (TransformValidatorComponent): the
    image it runs from (pinned and mirrored as decorate does the container's), pull policy and secrets,
    and the runtime class of GPU pods."""
    validator_image = pulled(image(stack), stack.config.images.registry, stack.image_digests)
    env = [
        pod.env("VALIDATOR_IMAGE", validator_image),
        pod.env("VALIDATOR_IMAGE_PULL_POLICY", PULL_POLICY),
    ]
    if stack.config.images.pullSecrets:
        env.append(
            {
                "name": "VALIDATOR_IMAGE_PULL_SECRETS",
                "value": ",".join(stack.config.images.pullSecrets),
            }
        )
    if stack.runtime_class_name:
        env.append(pod.env("VALIDATOR_RUNTIME_CLASS", stack.runtime_class_name))
    return env


def _validation(
    stack: Stack, component: str, env: list[dict[str, Any]], security: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": f"{component}-validation",
        "image": image(stack),
        "command": ["sh", "-c"],
        "args": ["nvidia-validator"],
        "env": [pod.env("COMPONENT", component), *env],
        "securityContext": security,
        "volumeMounts": [validations().mount()],
    }


def _daemonset(stack: Stack, allocation: str | None) -> dict[str, Any]:
    """The validator DaemonSet: on every GPU node (`allocation` None), or on the nodes whose
    GPUs the device plugin or the DRA driver hands out."""
    settings = stack.config.validator
    driver_container, volumes = driver_validation(stack)
    node_and_namespace = [
        pod.field_env("NODE_NAME", "spec.nodeName"),
        pod.field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
    ]
    init_containers = [
        driver_container,
        _validation(
            stack,
            "toolkit",
            [
                # The runtime hands this container every GPU and the driver's nvidia-smi.
                pod.env("NVIDIA_VISIBLE_DEVICES", "all"),
                pod.env("WITH_WAIT", "false"),
            ],
            _runs_as_root(stack),
        ),
        _validation(
            stack,
            "cuda",
            [
                pod.env("WITH_WAIT", "false"),
                pod.env("WITH_WORKLOAD", pod.flag(settings.cudaWorkload)),
                *node_and_namespace,
                *_workload_env(stack),
            ],
            _runs_as_root(stack),
        ),
    ]
    if stack.config.devicePlugin.enabled and allocation != "dra":
        init_containers.append(
            _validation(
                stack,
                "plugin",
                [
                    pod.env("WITH_WAIT", "false"),
                    pod.env("WITH_WORKLOAD", pod.flag(settings.pluginWorkload)),
                    pod.env("MIG_STRATEGY", stack.config.devicePlugin.migStrategy),
                    *node_and_namespace,
                    *_workload_env(stack),
                ],
                _runs_as_root(stack),
            )
        )
    pod_spec = gpu_pod_spec(stack)  # the toolkit validation needs the nvidia runtime
    if allocation is not None:
        pod_spec = place_by_allocation(stack, pod_spec, allocation)
    pod_spec.update(
        {
            "serviceAccountName": NAME,
            "initContainers": init_containers,
            "containers": [
                {
                    "name": NAME,
                    "image": image(stack),
                    "command": ["sh", "-c"],
                    "args": [
                        "echo all validations are successful; while true; do sleep 86400; done"
                    ],
                    # A pod that goes (a node drained, the DaemonSet updated) takes its ready
                    # files with it, so nothing starts on the strength of a stale one.
                    "lifecycle": pod.pre_stop(f"rm -f {VALIDATIONS}/*-ready"),
                    "securityContext": _runs_as_root(stack),
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    "volumeMounts": [validations().mount()],
                }
            ],
            "volumes": volumes,
        }
    )
    name = DRA_NAME if allocation == "dra" else NAME
    return daemonset(stack, name, pod_spec, component=COMPONENT)
