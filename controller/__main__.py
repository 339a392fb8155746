"""``phalanx-controller``: the gang controller."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from pydantic import ValidationError

from controller.api.kube import KubeClient
from controller.runtime.app import Controller, LeadershipLost
from controller.runtime.config import ControllerSettings
from shared.logging import configure_logging

log = logging.getLogger("controller")


def parse_settings(argv: list[str] | None) -> ControllerSettings:
    parser = argparse.ArgumentParser(prog="phalanx-controller", description="Phalanx gang controller")
    fields = ControllerSettings.model_fields
    for name, info in fields.items():
        flag = "--" + name.replace("_", "-")
        annotation = info.annotation
        if annotation is bool:
            parser.add_argument(
                flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=info.description
            )
        else:
            parser.add_argument(flag, dest=name, default=None, help=info.description)
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if v is not None}
    return ControllerSettings(**overrides)


async def _main(settings: ControllerSettings) -> None:
    kube = await KubeClient.connect(settings.kubeconfig, settings.patch_concurrency)
    controller = Controller(settings, kube)
    task = asyncio.create_task(controller.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        log.info("shutting down")
    finally:
        with contextlib.suppress(Exception):
            await kube.close()


def main(argv: list[str] | None = None) -> int:
    try:
        settings = parse_settings(argv)
    except ValidationError as err:  # as the webhook does: a message, not a traceback
        print(f"phalanx-controller: invalid settings:\n{err}", file=sys.stderr)
        return 2
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
