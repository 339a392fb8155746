"""``python -m certs``: make local certificates, inject a caBundle, or run the in-cluster bootstrap.

python -m certs generate --out DIR [--dns NAME ...] [--ip IP ...] [--days N] [--force]
python -m certs inject --kubeconfig K --webhook-config NAME --ca-file F
python -m certs bootstrap --namespace NS --secret S --webhook-config NAME --service SVC
                          --cert-dir DIR [--once]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from certs.bundle import CA_CRT, SERVING_DAYS, TLS_CRT, load_certs
from certs.files import ensure_local
from certs.kube import (
    DEFAULT_NAMESPACE,
    DEFAULT_SECRET,
    DEFAULT_SERVICE,
    DEFAULT_WEBHOOK_CONFIG,
    BootstrapConfig,
    KubeCertAPI,
    NotFoundError,
    inject_ca,
    reconcile,
    run,
    service_dns_names,
)
from shared.logging import configure_logging

PROG = "python -m certs"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one clear line for a person or a Job log, not a traceback
        print(f"{PROG} {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1


def _generate(args: argparse.Namespace) -> int:
    dns = args.dns or [*service_dns_names(DEFAULT_SERVICE, DEFAULT_NAMESPACE), "localhost"]
    ips = args.ip or ["127.0.0.1"]
    outcome = ensure_local(Path(args.out), dns, ips, datetime.now(UTC), days=args.days, force=args.force)
    print(f"{outcome}: {Path(args.out) / TLS_CRT} (CA {Path(args.out) / CA_CRT})")
    return 0


def _inject(args: argparse.Namespace) -> int:
    ca_pem = Path(args.ca_file).read_bytes()
    load_certs(ca_pem)  # refuse to inject something that is not a certificate
    patched = asyncio.run(_inject_async(args.kubeconfig, args.webhook_config, ca_pem))
    name = args.webhook_config
    print(f"caBundle set on {patched} webhook(s) of {name}" if patched else f"caBundle of {name} is current")
    return 0


async def _inject_async(kubeconfig: str | None, webhook_config: str, ca_pem: bytes) -> int:
    async with await KubeCertAPI.connect(kubeconfig) as api:
        try:
            return await inject_ca(api, webhook_config, ca_pem)
        except NotFoundError as exc:
            raise RuntimeError(f"MutatingWebhookConfiguration {webhook_config} not found") from exc


def _bootstrap(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    asyncio.run(_bootstrap_async(args))
    return 0


async def _bootstrap_async(args: argparse.Namespace) -> None:
    config = BootstrapConfig(
        namespace=args.namespace,
        secret=args.secret,
        webhook_config=args.webhook_config,
        service=args.service,
        cert_dir=Path(args.cert_dir),
        days=args.days,
    )
    async with await KubeCertAPI.connect(args.kubeconfig) as api:
        if args.once:
            await reconcile(api, config, datetime.now(UTC))
        else:
            await run(
                api, config, clock=lambda: datetime.now(UTC), sleep=asyncio.sleep, interval=args.interval
            )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Phalanx webhook certificates.")
    commands = parser.add_subparsers(dest="command", required=True)

    generate = commands.add_parser("generate", help="write ca.crt, ca.key, tls.crt, tls.key (idempotent)")
    generate.add_argument("--out", required=True, help="directory to write to")
    generate.add_argument("--dns", action="append", help="DNS SAN (repeatable; default: the Service names)")
    generate.add_argument("--ip", action="append", help="IP SAN (repeatable; default: 127.0.0.1)")
    generate.add_argument("--days", type=_positive_int, default=SERVING_DAYS, help="serving cert lifetime")
    generate.add_argument("--force", action="store_true", help="reissue even if the current cert is fine")
    generate.set_defaults(func=_generate)

    inject = commands.add_parser("inject", help="set caBundle on every webhook of a configuration")
    inject.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    inject.add_argument("--webhook-config", default=DEFAULT_WEBHOOK_CONFIG)
    inject.add_argument("--ca-file", required=True, help="PEM file with the CA certificate(s)")
    inject.set_defaults(func=_inject)

    bootstrap = commands.add_parser(
        "bootstrap", help="in-cluster: keep Secret, caBundle and cert files right"
    )
    bootstrap.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE", DEFAULT_NAMESPACE))
    bootstrap.add_argument("--secret", default=DEFAULT_SECRET)
    bootstrap.add_argument("--webhook-config", default=DEFAULT_WEBHOOK_CONFIG)
    bootstrap.add_argument("--service", default=DEFAULT_SERVICE)
    bootstrap.add_argument("--cert-dir", required=True, help="where the webhook loads tls.crt/tls.key from")
    bootstrap.add_argument("--days", type=_positive_int, default=SERVING_DAYS, help="serving cert lifetime")
    bootstrap.add_argument("--interval", type=float, default=60.0, help="seconds between checks")
    bootstrap.add_argument("--once", action="store_true", help="reconcile once and exit")
    bootstrap.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    bootstrap.add_argument("--log-level", default="info")
    bootstrap.set_defaults(func=_bootstrap)
    return parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _one_line(exc: BaseException) -> str:
    status, reason = getattr(exc, "status", None), getattr(exc, "reason", None)
    if status is not None:  # an API error: its str() is a multi-line dump of headers and body
        return f"API server answered HTTP {status} {reason or ''}".rstrip()
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{text} ({type(exc).__name__})" if isinstance(exc, OSError) else text


if __name__ == "__main__":
    sys.exit(main())
