"""``kubectl phalanx explain|top|audit``: the kubectl plugin (console script ``kubectl-phalanx``)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.api.kube import ApiError, KubeClient
from controller.api.transport import ConfigError, kubeconfig_context
from controller.cli import audit, preflight, report, targets
from controller.cli.cluster import ClusterState, load
from controller.cli.render import FORMATS, dump

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
        context = kubeconfig_context(yaml.safe_load(Path(path).read_text()) or {})
    except (OSError, yaml.YAMLError, ConfigError):
        return "default"
    return str(context.get("namespace") or "default")


def _common(parser: argparse.ArgumentParser, before_command: bool) -> None:
    """Flags accepted before the command and after it (``kubectl phalanx -n x top`` and
    ``kubectl phalanx top -n x``): after it, an absent flag must not reset one given before."""

    def default(value: object) -> object:
        return value if before_command else argparse.SUPPRESS

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
    plugin = argparse.ArgumentParser(
        prog="kubectl phalanx",
        description="Explain, watch and audit Phalanx gang scheduling (read-only).",
    )
    _common(plugin, before_command=True)
    after_command = argparse.ArgumentParser(add_help=False)
    _common(after_command, before_command=False)
    commands = plugin.add_subparsers(dest="command", required=True)
    explain = commands.add_parser(
        "explain",
        parents=[after_command],
        help="why a gang waits and what would make it start",
        description="kind: job, statefulset, mpijob, podgroup, pod, or any owner kind of gang members",
    )
    explain.add_argument("target", help="<kind>/<name>, e.g. job/train")
    commands.add_parser("preflight", parents=[after_command], help=preflight.HELP, description=preflight.HELP)
    for name, what in (("top", "gangs in the planner's order"), ("audit", "dry-run opting namespaces in")):
        command = commands.add_parser(name, parents=[after_command], help=what)
        command.add_argument("-A", "--all-namespaces", action="store_true")
    return plugin


@dataclass(frozen=True)
class _Answer:
    """What a command found, in both forms, and the exit code it calls for."""

    data: Any  # what -o json|yaml prints
    text: str  # what -o table prints
    code: int = EXIT_OK


async def _run(args: argparse.Namespace) -> int:
    path = _kubeconfig(args.kubeconfig)
    namespace = args.namespace or _context_namespace(path)
    if getattr(args, "all_namespaces", False):
        namespace = None
    controller_namespace, slash, controller_name = args.controller.partition("/")
    if not slash:
        return _fail("--controller must be namespace/name", EXIT_USAGE)
    try:
        kube = await KubeClient.connect(path)
    except Exception as err:  # kubeconfig missing, unreadable or without a usable context
        return _fail(f"error: cannot use kubeconfig {path}: {err}", EXIT_API)
    try:
        if args.command == "preflight":  # reads the server version and CRDs only
            shown, code = await preflight.command(kube, args.output)
            print(shown)
            return code
        state = await load(kube, time.time(), controller=(controller_namespace, controller_name))
    finally:
        await kube.close()
    if args.command == "explain":
        answer = _explain(state, namespace or "default", args.target)
    elif args.command == "top":
        answer = _top(state, namespace)
    else:
        answer = _audit(state, namespace)
    if isinstance(answer, int):  # the command has said why it has no answer
        return answer
    print(answer.text if args.output == "table" else dump(answer.data, args.output))
    return answer.code


def _explain(state: ClusterState, namespace: str, target: str) -> _Answer | int:
    """The gang(s) of ``target`` explained, or the exit code once it has said why there is none."""
    try:
        keys = targets.resolve(state, namespace, target)
    except targets.TargetError as err:
        return _fail(f"error: {err}", EXIT_USAGE)
    found = [report.explain_data(state, key) for key in keys if key in state.views]
    if found:
        text = "\n\n".join(report.explain_text(data) for data in found)
        return _Answer(found[0] if len(found) == 1 else found, text)
    unsized = [key for key in keys if key in state.unsized]
    if unsized:
        for key in unsized:  # no PodGroup yet, and none can be made: nothing to plan
            print(f"Gang {key} is not planned yet: {state.unsized[key]}")
        return EXIT_OK
    return _fail(
        f"error: {target}: its gang {', '.join(map(str, keys))} is not managed by Phalanx "
        f"(namespace not opted in and no gated member)",
        EXIT_USAGE,
    )


def _top(state: ClusterState, namespace: str | None) -> _Answer:
    data = report.top_data(state, namespace)
    return _Answer(data, report.top_text(data))


def _audit(state: ClusterState, namespace: str | None) -> _Answer:
    findings = audit.audit(state, namespace)
    never_start = any(finding.severity == audit.ERROR for finding in findings)
    return _Answer(
        [finding.data() for finding in findings],
        audit.text(findings),
        EXIT_FINDINGS if never_start else EXIT_OK,
    )


def _fail(message: str, code: int) -> int:
    print(message, file=sys.stderr)
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
