"""The check of NVIDIA's MIG manager: where the platform partitions GPUs itself it is refused,
where it is not deployed its settings are, and the MIG config it applies by default (the
cluster's and each pool's) is one it knows, built in or from `migManager.config.file`."""

from __future__ import annotations

from gpustack.errors import UserError, did_you_mean
from gpustack.resolve import mig
from gpustack.resolve.checks.context import CheckContext
from gpustack.resolve.layered_settings import nearest


def check_mig_manager(context: CheckContext, user_configs: mig.Configs | None) -> None:
    """`user_configs`: the MIG configs of `migManager.config.file`, read and parsed."""
    config, profile, layers = context.config, context.profile, context.layers
    settings = config.migManager
    by_settings = profile.facts.migPartitioning == "node-settings"
    if settings.enabled is True and profile.facts.migPartitioning != "mig-manager":
        raise UserError(
            f"on profile {profile.metadata.name!r} the "
            + ("node OS" if by_settings else "node pool")
            + " creates the MIG partitions itself; NVIDIA's MIG manager would fight it",
            nearest(layers, ("migManager", "enabled")),
            field="migManager.enabled",
            hint="remove migManager.enabled and set "
            + (
                "the node group's MIG profiles (nodes.eks.migProfile)"
                if by_settings
                else "the pool's partition size (nodes.gke.accelerator.gpuPartitionSize)"
            ),
        )
    if not context.stack.mig_manager_enabled:
        # A setting of a component that is not deployed would be dropped silently. (Looked up
        # in the data first: positions cost a parse, and only an error needs one.)
        for field in ("defaultConfig", "withReboot", "version", "config"):
            # What the cluster writes: a base may hold them for the clusters that run it.
            if any(
                isinstance(layer.data.get("migManager"), dict)
                and layer.data["migManager"].get(field) is not None
                for layer in context.own_layers
            ):
                written = nearest(layers[1:], ("migManager", field), key=True)
                why = (
                    "it runs with a MIG strategy, devicePlugin.migStrategy single or mixed, or "
                    "migManager.enabled: true"
                    if profile.facts.migPartitioning == "mig-manager"
                    else f"on profile {profile.metadata.name!r} the "
                    + ("node OS" if by_settings else "node pool")
                    + " partitions GPUs"
                )
                raise UserError(
                    f"has no effect: the MIG manager is not deployed ({why})",
                    written,
                    field=f"migManager.{field}",
                )
        for index, pool in enumerate(config.nodes.pools):
            if pool.migManager is not None:
                raise UserError(
                    f"pool {pool.name}: has no effect: the MIG manager is not deployed",
                    nearest(layers, ("nodes", "pools", index, "migManager"), key=True),
                    field=f"nodes.pools.{index}.migManager",
                )
        return
    known = {**mig.builtin_configs(), **(user_configs or {})}
    if settings.defaultConfig not in known:
        raise UserError(
            f"no MIG config named {settings.defaultConfig!r} (neither built in nor in "
            "migManager.config.file)",
            nearest(layers, ("migManager", "defaultConfig")),
            field="migManager.defaultConfig",
            hint=did_you_mean(settings.defaultConfig, sorted(known)),
        )
    for index, pool in enumerate(config.nodes.pools):
        layout = pool.migManager.defaultConfig if pool.migManager else None
        if layout is not None and layout not in known:
            raise UserError(
                f"pool {pool.name}: no MIG config named {layout!r} (neither built in nor in "
                "migManager.config.file)",
                nearest(layers, ("nodes", "pools", index, "migManager", "defaultConfig")),
                field=f"nodes.pools.{index}.migManager.defaultConfig",
                hint=did_you_mean(layout, sorted(known)),
            )
