"""``phalanx-webhook``: every WebhookSettings field is a flag (shared.cli); flags override
``PHALANX_WEBHOOK_*`` environment variables, which override the defaults."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from shared.cli import settings_from_cli
from shared.logging import configure_logging
from webhook.config import WebhookSettings
from webhook.server import run


def parse_settings(argv: Sequence[str] | None = None) -> WebhookSettings:
    """Settings from defaults, environment and ``argv``; exits 2 with a message if invalid."""
    return settings_from_cli(WebhookSettings, argv, prog="phalanx-webhook")


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_settings(argv)
    configure_logging(settings.log_level, json=settings.log_json)
    asyncio.run(run(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
