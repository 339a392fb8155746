"""``phalanx-webhook``: flags override ``PHALANX_WEBHOOK_*`` environment variables and defaults."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from shared.logging import configure_logging
from webhook.config import WebhookSettings
from webhook.server import run


def parse_args(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Only the flags given, as WebhookSettings field values."""
    parser = argparse.ArgumentParser(
        prog="phalanx-webhook", description="Phalanx mutating admission webhook (gang scheduling gates)."
    )
    parser.add_argument("--bind-address", help="address for both ports (default 0.0.0.0)")
    parser.add_argument("--port", type=int, help="TLS admission port (default 9443)")
    parser.add_argument("--health-port", type=int, help="plain HTTP /healthz /readyz /metrics (default 8080)")
    parser.add_argument("--cert-dir", help="directory holding tls.crt and tls.key")
    parser.add_argument("--cert-reload-seconds", type=float, help="certificate poll interval (default 5)")
    parser.add_argument("--max-body-bytes", type=int, help="larger requests get HTTP 413 (default 3 MiB)")
    parser.add_argument("--foreign-schedulers", help="comma list of schedulerNames rewritten")
    parser.add_argument("--target-scheduler", help="schedulerName they are rewritten to")
    parser.add_argument("--excluded-namespaces", help="comma list of namespaces never mutated")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING, ERROR")
    args = parser.parse_args(argv)
    return {key: value for key, value in vars(args).items() if value is not None}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = WebhookSettings(**parse_args(argv))
    except ValidationError as err:
        print(f"phalanx-webhook: invalid settings:\n{err}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, json=settings.log_json)
    asyncio.run(run(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
