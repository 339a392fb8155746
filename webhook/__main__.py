"""``phalanx-webhook``: every WebhookSettings field is a flag (shared.cli); flags override
``PHALANX_WEBHOOK_*`` environment variables, which override the defaults."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence

from shared.cli import settings_from_cli
from shared.logging import configure_logging
from webhook.config import WebhookSettings
from webhook.server import run

try:
    import uvloop
except ImportError:  # not installed where it does not build (Windows, PyPy)
    uvloop = None  # type: ignore[assignment]


def parse_settings(argv: Sequence[str] | None = None) -> WebhookSettings:
    """Settings from defaults, environment and ``argv``; exits 2 with a message if invalid."""
    return settings_from_cli(WebhookSettings, argv, prog="phalanx-webhook")


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop to serve on: uvloop's (its event loop and TLS transport are C, where
    asyncio's TLS is Python: every admission goes through it) or asyncio's own (None)."""
    if choice == "asyncio" or (uvloop is None and choice == "auto"):
        return None
    if uvloop is None:
        raise SystemExit("phalanx-webhook: --event-loop uvloop, but uvloop is not installed")
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_settings(argv)
    configure_logging(settings.log_level, json=settings.log_json)
    with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
        runner.run(run(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
