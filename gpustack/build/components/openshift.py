"""OpenShift's GPU-only MachineConfigPool, and the legacy entitlement: three MachineConfigs that
put the entitlement certificate and an rhsm.conf on the GPU nodes, so that entitled driver builds
(before the Driver Toolkit, OpenShift < 4.9.9) can reach Red Hat's repositories.

The pool `worker-gpu` is a custom pool as the Machine Config Operator defines them
(openshift/machine-config-operator docs/custom-pools.md; the same shape as
openshift/cluster-node-tuning-operator examples/realtime-mcp.yaml): its machineConfigSelector takes
the worker role's MachineConfigs and its own, its nodeSelector the nodes labelled with its role. A
node labelled both worker and worker-gpu belongs to the custom pool only, so a MachineConfig for
role worker-gpu drains and reboots the GPU nodes and no other worker.

Facts from NVIDIA/cloud-native-docs openshift/download/0003-cluster-wide-machineconfigs.yaml.template
(names, paths, the same PEM in both files) and openshift/machine-config-operator
docs/IgnitionSupport.md (Ignition 3.2.0, `data:` URLs, decimal modes). The upstream template uses
Ignition 2.2.0 and `mode: 0644`, which a YAML 1.2 parser reads as the decimal 644; this module
writes 3.2.0 and 420 (= 0o644).

The PEM is a secret: it is base64-encoded into the objects and never appears in a message.
"""

from __future__ import annotations

import base64
from typing import Any

from gpustack.build.workload import NODE_ROLE_PREFIX
from gpustack.resolve.stack import Stack

IGNITION_VERSION = "3.2.0"
FILE_MODE = 0o644  # written as 420: MachineConfig modes are decimal integers
ROLE_LABEL = "machineconfiguration.openshift.io/role"

# subscription-manager's settings for Red Hat's CDN, as in the upstream template's rhsm.conf, minus
# the proxy and logging keys that only restate subscription-manager's defaults.
RHSM_CONF = """\
# Red Hat Subscription Manager settings for entitled builds on OpenShift workers (gpustack).
[server]
hostname = subscription.rhsm.redhat.com
prefix = /subscription
port = 443
insecure = 0

[rhsm]
baseurl = https://cdn.redhat.com
ca_cert_dir = /etc/rhsm/ca/
repo_ca_cert = %(ca_cert_dir)sredhat-uep.pem
productCertDir = /etc/pki/product
entitlementCertDir = /etc/pki/entitlement
consumerCertDir = /etc/pki/consumer
manage_repos = 1
"""


def build(stack: Stack) -> list[dict[str, Any]]:
    objects = []
    pool = stack.gpu_machine_config_pool
    if pool:
        objects.append(machine_config_pool(pool))
    pem = stack.entitlement_pem
    if pem is None:
        return objects
    role = stack.machine_config_role
    return [
        *objects,
        machine_config(role, "50-rhsm-conf", "/etc/rhsm/rhsm.conf", RHSM_CONF.encode()),
        # The entitlement certificate file holds both the certificate and its key.
        machine_config(role, "50-entitlement-pem", "/etc/pki/entitlement/entitlement.pem", pem),
        machine_config(
            role, "50-entitlement-key-pem", "/etc/pki/entitlement/entitlement-key.pem", pem
        ),
    ]


def machine_config_pool(pool: str) -> dict[str, Any]:
    """A custom pool that inherits from worker: the worker role's MachineConfigs and its own,
    on the nodes labelled `node-role.kubernetes.io/<pool>`. maxUnavailable is left to the
    operator's default (1): one GPU node drained at a time."""
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        # The label the operator's own pools carry (pools.operator.machineconfiguration.
        # openshift.io/worker), which KubeletConfigs and ContainerRuntimeConfigs select pools by.
        "metadata": {
            "name": pool,
            "labels": {f"pools.operator.machineconfiguration.openshift.io/{pool}": ""},
        },
        "spec": {
            "machineConfigSelector": {
                "matchExpressions": [
                    {"key": ROLE_LABEL, "operator": "In", "values": ["worker", pool]}
                ]
            },
            "nodeSelector": {"matchLabels": {NODE_ROLE_PREFIX + pool: ""}},
        },
    }


def machine_config(role: str, name: str, path: str, content: bytes) -> dict[str, Any]:
    """A MachineConfig for `role`'s pool that writes one file; applying it drains and reboots
    that pool's nodes one by one."""
    source = "data:text/plain;charset=utf-8;base64," + base64.b64encode(content).decode("ascii")
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "labels": {ROLE_LABEL: role}},
        "spec": {
            "config": {
                "ignition": {"version": IGNITION_VERSION},
                "storage": {
                    "files": [
                        {
                            "path": path,
                            "mode": FILE_MODE,
                            # RHCOS ships an rhsm.conf, and Ignition 3 fails on a file that
                            # exists unless overwrite is set (MCO IgnitionSupport.md allows it).
                            "overwrite": True,
                            "contents": {"source": source},
                        }
                    ]
                },
            }
        },
    }
