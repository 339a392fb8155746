"""``kubectl phalanx explain|top|audit``: the kubectl plugin (console script ``kubectl-phalanx``)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from controller.cli import audit, report, targets
from controller.cli.cluster import load
from controller.cli.render import FORMATS, dump
from controller.kube import ApiError, KubeClient

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_API = 0, 1, 2, 3


def _kubeconfig(given: str | None) -> str:
    if given:
        return given
    env = os.environ.get("KUBECONFIG")
    if env:
        return env.split(os.pathsep)[0]
    return str(Path.home() / ".kube" / "config")


def _context_namespace(path: str) -> str:
    """The current context's namespace, as kubectl would use it."""
    try:
        config = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return "default"
    current = config.get("current-context")
    for ctx in config.get("contexts") or ():
        if ctx.get("name") == current:
            return str((ctx.get("context") or {}).get("namespace") or "default")
    return "default"


def _common(parser: argparse.ArgumentParser, top: bool) -> None:
    """Flags accepted before the command and after it (``kubectl phalanx -n x top`` and
    ``kubectl phalanx top -n x``): after it, an absent flag must not reset one given before."""

    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    parser.add_argument(
        "--kubeconfig",
        default=default(None),
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    parser.add_argument("-n", "--namespace", default=default(None), help="namespace (default: the context's)")
    parser.add_argument("-o", "--output", choices=FORMATS, default=default("table"))
    parser.add_argument(
        "--controller",
        default=default("phalanx-system/phalanx-controller"),
        help="namespace/name of the controller Deployment whose planner settings to use",
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="kubectl phalanx",
        description="Explain, watch and audit Phalanx gang scheduling (read-only).",
    )
    _common(top, top=True)
    common = argparse.ArgumentParser(add_help=False)
    _common(common, top=False)
    sub = top.add_subparsers(dest="command", required=True)
    explain = sub.add_parser(
        "explain",
        parents=[common],
        help="why a gang waits and what would make it start",
        description="kind: job, statefulset, mpijob, podgroup, pod, or any owner kind of gang members",
    )
    explain.add_argument("target", help="<kind>/<name>, e.g. job/train")
    for name, what in (("top", "gangs in the planner's order"), ("audit", "dry-run opting namespaces in")):
        cmd = sub.add_parser(name, parents=[common], help=what)
        cmd.add_argument("-A", "--all-namespaces", action="store_true")
    return top


async def _run(args: argparse.Namespace) -> int:
    path = _kubeconfig(args.kubeconfig)
    namespace = args.namespace or _context_namespace(path)
    if getattr(args, "all_namespaces", False):
        namespace = None
    controller = tuple(args.controller.split("/", 1))
    if len(controller) != 2:
        print("--controller must be namespace/name", file=sys.stderr)
        return EXIT_USAGE
    try:
        kube = await KubeClient.connect(path)
    except Exception as err:  # kubeconfig missing, unreadable or without a usable context
        print(f"error: cannot use kubeconfig {path}: {err}", file=sys.stderr)
        return EXIT_API
    try:
        state = await load(kube, time.time(), controller=(controller[0], controller[1]))
    finally:
        await kube.close()
    out: Any
    code = EXIT_OK
    if args.command == "explain":
        try:
            keys = targets.resolve(state, namespace or "default", args.target)
        except targets.TargetError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_USAGE
        found = [report.explain_data(state, key) for key in keys if key in state.views]
        if not found:
            print(
                f"error: {args.target}: its gang {', '.join(map(str, keys))} is not managed by Phalanx "
                f"(namespace not opted in and no gated member)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        out = found[0] if len(found) == 1 else found
        text = "\n\n".join(report.explain_text(d) for d in found)
    elif args.command == "top":
        out = report.top_rows(state, namespace)
        text = report.top_text(out)
    else:
        findings = audit.audit(state, namespace)
        out = [f.data() for f in findings]
        text = audit.text(findings)
        code = EXIT_FINDINGS if any(f.severity == audit.ERROR for f in findings) else EXIT_OK
    print(text if args.output == "table" else dump(out, args.output))
    return code


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return asyncio.run(_run(args))
    except ApiError as err:
        print(f"error: the API server answered {err}", file=sys.stderr)
        return EXIT_API


if __name__ == "__main__":
    sys.exit(main())
