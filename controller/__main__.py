"""``phalanx-controller``: the gang controller. Every ControllerSettings field is a flag
(shared.cli); flags override ``PHALANX_CONTROLLER_*`` environment variables, which override the
defaults."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence

from controller.api.kube import KubeClient
from controller.runtime.app import Controller, LeadershipLost
from controller.runtime.config import ControllerSettings
from shared.cli import settings_from_cli
from shared.logging import configure_logging

log = logging.getLogger("controller")
LEASE_CONNECTIONS = 2


def parse_settings(argv: Sequence[str] | None = None) -> ControllerSettings:
    """Settings from defaults, environment and ``argv``; exits 2 with a message if invalid."""
    return settings_from_cli(ControllerSettings, argv, prog="phalanx-controller")


async def _main(settings: ControllerSettings) -> None:
    kube = await KubeClient.connect(settings.kubeconfig, settings.patch_concurrency)
    # Leadership on a connection pool of its own: lifting a large gang's gates fills the main pool,
    # and a renewal queued behind those requests would lose the lease (and the process) mid-admission.
    lease_kube = await KubeClient.connect(settings.kubeconfig, LEASE_CONNECTIONS)
    controller = Controller(settings, kube, lease_kube=lease_kube)
    task = asyncio.create_task(controller.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        log.info("shutting down")
    finally:
        for client in (kube, lease_kube):
            with contextlib.suppress(Exception):
                await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_settings(argv)
    configure_logging(settings.log_level, json=settings.log_json)
    code = 0
    try:
        asyncio.run(_main(settings))
    except* LeadershipLost as lost:
        log.error("exiting", extra={"reason": str(lost.exceptions[0])})
        code = 1  # restarted as a standby
    return code


if __name__ == "__main__":
    sys.exit(main())
