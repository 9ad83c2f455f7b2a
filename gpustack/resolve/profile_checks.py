"""The checks of a config against its profile: what the platform cannot run, what would be
dropped silently, what would never start on its nodes, is refused with the file, line and column
that set it, before anything renders. `check` runs them all, in order, for the loader
(gpustack.resolve.load), and reads the two files whose content it checks: the entitlement PEM and the
MIG configs of `migManager.config.file`. The checks themselves are the modules of `resolve/checks/`, one per
part of the config, each given the `CheckContext` of one pass (gpustack.resolve.checks.context).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpustack.config.model import GPUStack
from gpustack.config.profile_model import Profile
from gpustack.errors import UserError
from gpustack.resolve.checks import dra as dra_checks
from gpustack.resolve.checks import driver as driver_checks
from gpustack.resolve.checks import files as checked_files
from gpustack.resolve.checks import managed_nodes as managed_node_checks
from gpustack.resolve.checks import mig as mig_checks
from gpustack.resolve.checks import no_effect as no_effect_checks
from gpustack.resolve.checks import platforms as platform_checks
from gpustack.resolve.checks import pools as pool_checks
from gpustack.resolve.checks.context import CheckContext
from gpustack.resolve.layered_settings import Layer
from gpustack.resolve.mig import Configs


@dataclass(frozen=True)
class Checked:
    """A config that passed its profile's checks, and what they read and left out."""

    config: GPUStack
    # Settings left out because they do not apply to the profile: (field path, why).
    left_out: tuple[tuple[str, str], ...] = ()
    entitlement_pem: bytes | None = None
    entitlement_mode: int | None = None  # the PEM file's permission bits
    user_mig_configs: Configs | None = None  # migManager.config.file, parsed


def check(
    config: GPUStack,
    profile: Profile,
    layers: list[Layer],
    leave_out: Callable[[str], GPUStack] | None = None,
) -> Checked:
    """Check `config` (merged from `layers`, the profile's defaults first) against `profile`;
    the first problem is a `UserError` at the layer that set it.

    `leave_out` (comparing one config on several profiles): given the field of a setting the
    profile refuses, the config without it, which is checked again; each field left out is named
    in `Checked.left_out` with the reason. The files the config names are read, and the MIG
    manager and node pools checked, only once the settings fit the profile.
    """
    left_out: list[tuple[str, str]] = []
    while True:
        context = CheckContext(config, profile, layers)
        try:
            _check_settings(context, {field for field, _ in left_out})
            break
        except UserError as problem:
            done = {field for field, _ in left_out}
            if leave_out is None or problem.field is None or problem.field in done:
                raise
            config = leave_out(problem.field)
            left_out.append((problem.field, problem.message))
    pem, mode = checked_files.read_pem(context) if config.entitlement.enabled else (None, None)
    user_mig_configs = (
        checked_files.read_mig_configs(context) if config.migManager.config.file else None
    )
    mig_checks.check_mig_manager(context, user_mig_configs)
    pool_checks.check_pools(context)
    return Checked(config, tuple(left_out), pem, mode, user_mig_configs)


def _check_settings(context: CheckContext, left_out: set[str]) -> None:
    """The checks of the settings alone, in the order that gives the most useful first error:
    what the platform does itself, then the driver and what reaches it, the DRA driver, the
    validator, the node OS, the driver's upgrade, the managed platforms' node settings, and last
    what has no effect (`left_out`: the fields already left out, no longer in force)."""
    platform_checks.check_platform(context)
    driver_checks.check_toolkit(context)
    dra_checks.check_dra(context)
    dra_checks.check_kubernetes_gates(context)
    driver_checks.check_validator(context)
    driver_checks.check_node_status_exporter(context)
    driver_checks.check_platform_os(context)
    driver_checks.check_os_sku(context)
    driver_checks.check_drain(context)
    managed_node_checks.check_gke_node_pool(context)
    managed_node_checks.check_aks_node_pool(context)
    managed_node_checks.check_eks_node_group(context)
    no_effect_checks.check_no_effect(context, left_out)
