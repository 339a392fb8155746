"""``kubectl phalanx explain|top|audit``: the kubectl plugin (console script ``kubectl-phalanx``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from controller.api.kube import ApiError
from controller.api.resources import NAMESPACES, NODES, PODGROUPS, PODS
from controller.api.transport import ConfigError, kubeconfig_context
from controller.cli import audit, preflight, report, targets
from controller.cli.cluster import ClusterState, load
from controller.cli.connection import Access, Chosen, choose, connect, request_timeout
from controller.cli.render import FORMATS, dump

# Exit codes (the user guide's table): 1 is kubectl's for an object not found, and audit's for what
# would never start; 130 is the shell's for Ctrl-C.
EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_API = 0, 1, 2, 3
EXIT_NOT_FOUND, EXIT_INTERRUPTED = 1, 130
# `top -w` re-renders until Ctrl-C; tests bound it with this many renders.
WATCH_LIMIT: int | None = None
CLEAR_SCREEN = "\x1b[H\x1b[2J"


def _context_namespace(chosen: Chosen) -> str:
    """The chosen context's namespace (or the pod's), as kubectl would use it."""
    if chosen.config is None:
        return chosen.namespace or "default"
    try:
        context = kubeconfig_context(chosen.config)
    except ConfigError:
        return "default"
    return str(context.get("namespace") or "default")


def _version() -> str:
    try:
        return metadata.version("phalanx")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _common(parser: argparse.ArgumentParser, before_command: bool) -> None:
    """Flags accepted before the command and after it (``kubectl phalanx -n x top`` and
    ``kubectl phalanx top -n x``): after it, an absent flag must not reset one given before."""

    def default(value: object) -> object:
        return value if before_command else argparse.SUPPRESS

    parser.add_argument(
        "--kubeconfig",
        default=default(None),
        help="kubeconfig file (default: the files of $KUBECONFIG merged, else ~/.kube/config)",
    )
    parser.add_argument("--context", default=default(None), help="kubeconfig context to use")
    parser.add_argument("--cluster", default=default(None), help="kubeconfig cluster to use")
    parser.add_argument("--user", default=default(None), help="kubeconfig user to use")
    parser.add_argument("--as", dest="as_user", default=default(None), help="user to impersonate")
    parser.add_argument(
        "--as-group",
        dest="as_groups",
        action="append",
        default=default(None),
        help="group to impersonate (repeatable; needs --as)",
    )
    parser.add_argument(
        "--request-timeout",
        type=request_timeout,
        default=default(None),
        help="give up on a single request after this long (30s, 1m; 0: never; default 30s, a list page 120s)",
    )
    parser.add_argument("-n", "--namespace", default=default(None), help="namespace (default: the context's)")
    parser.add_argument(
        "-o", "--output", choices=FORMATS, default=default("table"), help="table, json or yaml"
    )
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
    plugin.add_argument("--version", action="version", version=f"kubectl-phalanx {_version()}")
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
        command.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
        if name == "top":
            command.add_argument("-w", "--watch", action="store_true", help="re-render until Ctrl-C")
            command.add_argument(
                "--interval", type=float, default=2.0, help="seconds between renders with -w (default 2)"
            )
    return plugin


@dataclass(frozen=True)
class _Answer:
    """What a command found, in both forms, and the exit code it calls for.

    Under ``-o json|yaml`` every command prints one object of a fixed shape: its own keys (``data``)
    and ``settings``, ``access`` and ``warnings``, always present (docs/user-guide.md)."""

    data: dict[str, Any]  # the command's own keys
    text: str  # what -o table prints
    code: int = EXIT_OK
    warnings: list[str] = field(default_factory=list)


async def _run(args: argparse.Namespace) -> int:
    chosen = choose(args)
    namespace = args.namespace or _context_namespace(chosen)
    if getattr(args, "all_namespaces", False):
        namespace = None
    controller_namespace, slash, controller_name = args.controller.partition("/")
    if not slash:
        return _fail("--controller must be namespace/name", EXIT_USAGE)
    try:
        kube = await connect(chosen, args, namespace)
    except Exception as err:  # a kubeconfig without a usable context, an unreadable certificate
        return _fail(f"error: cannot connect with {chosen.described}: {err}", EXIT_API)
    try:
        if args.command == "preflight":  # reads the server version and CRDs only
            shown, code = await preflight.command(kube, args.output)
            print(shown)
            return code
        state = await load(kube, time.time(), controller=(controller_namespace, controller_name))
    finally:
        await kube.close()
    access = kube.access
    state.unreadable = access.narrowed | access.forbidden
    answer = COMMANDS[args.command](state, access, namespace, args)
    if isinstance(answer, int):  # the command has said why it has no answer
        return answer
    warnings = [*answer.warnings, *state.settings.warnings]
    for warning in warnings:  # for people, whatever the format; scripts read them below
        print(f"Warning: {warning}", file=sys.stderr)
    if args.output == "table":
        print(answer.text)
    else:
        envelope = {
            **answer.data,
            "settings": state.settings.data(),
            "access": access.data(),
            "warnings": warnings,
        }
        print(dump(envelope, args.output))
    return answer.code


# What the plugin says when the user may not read what planning needs (every namespace's pods, the
# nodes, the PodGroups): it then shows what the controller wrote, which their namespace's `view` reads.
RESTRICTED = (
    "you may not read {what} cluster-wide, which planning needs: showing what the controller wrote "
    "on the PodGroups of namespace {namespace} instead (no order, no what-if fixes); "
    "see the user guide, RBAC for plugin users"
)
PLANNING_NEEDS = tuple(map(str, (PODS, NODES, NAMESPACES, PODGROUPS)))


def _restricted(access: Access) -> list[str]:
    return [name for name in PLANNING_NEEDS if name in access.narrowed | access.forbidden]


def _skipped(access: Access, namespace: str | None) -> list[str]:
    """Warnings for reads refused that planning can do without (PDBs, workload kinds)."""
    warnings = []
    left_out = sorted(access.forbidden - set(PLANNING_NEEDS))
    if left_out:
        warnings.append(f"not readable to you, left out: {', '.join(left_out)}")
    narrowed = sorted(access.narrowed - set(PLANNING_NEEDS))
    if narrowed and not _restricted(access):
        warnings.append(f"readable to you in namespace {namespace} only: {', '.join(narrowed)}")
    return warnings


def _explain(
    state: ClusterState, access: Access, namespace: str | None, args: argparse.Namespace
) -> _Answer | int:
    """The gang(s) of ``target`` explained, or the exit code once it has said why there is none."""
    namespace = namespace or "default"
    target = args.target
    try:
        keys = targets.resolve(state, namespace, target)
    except targets.NotFound as err:
        return _fail(f"Error from server (NotFound): {err}", EXIT_NOT_FOUND)
    except targets.BadTarget as err:
        return _fail(f"error: {err}", EXIT_USAGE)
    except targets.TargetError as err:
        return _fail(f"error: {err}", EXIT_NOT_FOUND)
    missing = _restricted(access)
    warnings = _skipped(access, namespace)
    if missing:
        found = [report.status_explain_data(state, key) for key in keys]
        warnings.insert(0, RESTRICTED.format(what=", ".join(missing), namespace=namespace))
    else:
        found = [report.explain_data(state, key) for key in keys if key in state.views]
    unplanned = [
        {"gang": str(key), "waitingFor": state.unsized[key]}
        for key in keys
        if key in state.unsized and not missing
    ]
    if not found and not unplanned:
        return _fail(
            f"error: {target}: its gang {', '.join(map(str, keys))} is not managed by Phalanx "
            f"(namespace not opted in and no gated member)",
            EXIT_NOT_FOUND,
        )
    texts = [report.explain_text(data) for data in found]
    # No PodGroup yet, and none can be made: nothing to plan.
    texts.extend(f"Gang {entry['gang']} is not planned yet: {entry['waitingFor']}" for entry in unplanned)
    if not missing and found:
        texts.append(report.settings_text(state.settings))
    return _Answer({"gangs": found, "unplanned": unplanned}, "\n\n".join(texts), warnings=warnings)


def _top(
    state: ClusterState, access: Access, namespace: str | None, args: argparse.Namespace
) -> _Answer | int:
    missing = _restricted(access)
    if missing and namespace is None:
        return _fail(
            f"error: -A needs to read {', '.join(missing)} in every namespace, which you may not", EXIT_API
        )
    if missing:
        data = report.status_top_data(state, namespace or "default")
        warning = RESTRICTED.format(what=", ".join(missing), namespace=namespace)
        return _Answer(data, report.top_text(data), warnings=[warning, *_skipped(access, namespace)])
    data = report.top_data(state, namespace)
    text = report.top_text(data) + "\n\n" + report.settings_text(state.settings)
    return _Answer(data, text, warnings=_skipped(access, namespace))


def _audit(
    state: ClusterState, access: Access, namespace: str | None, args: argparse.Namespace
) -> _Answer | int:
    missing = _restricted(access)
    if missing:
        return _fail(
            f"error: audit needs to read {', '.join(missing)} cluster-wide, which you may not", EXIT_API
        )
    findings = audit.audit(state, namespace)
    never_start = any(finding.severity == audit.ERROR for finding in findings)
    return _Answer(
        {"findings": [finding.data() for finding in findings]},
        audit.text(findings) + "\n\n" + report.settings_text(state.settings),
        EXIT_FINDINGS if never_start else EXIT_OK,
        _skipped(access, namespace),
    )


# Every subcommand that reads the cluster once and answers from that snapshot.
COMMANDS: dict[str, Callable[[ClusterState, Access, str | None, argparse.Namespace], _Answer | int]] = {
    "explain": _explain,
    "top": _top,
    "audit": _audit,
}


def _fail(message: str, code: int) -> int:
    print(message, file=sys.stderr)
    return code


def _once(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except ConfigError as err:  # no kubeconfig, no such context, cluster or user
        return _fail(f"error: {err}", EXIT_API)
    except ApiError as err:
        return _fail(f"error: the API server answered {err}", EXIT_API)


def _watch(args: argparse.Namespace, limit: int | None, sleep: Callable[[float], None]) -> int:
    """``top -w``: render, wait ``--interval`` seconds, render again, until Ctrl-C (or ``limit``
    renders). A terminal is cleared between renders; JSON and YAML print one document each."""
    renders = 0
    between = {"table": "\n", "json": "\n", "yaml": "---\n"}[args.output]
    if args.output == "table" and sys.stdout.isatty():
        between = CLEAR_SCREEN
    while True:
        if renders:
            print(between, end="")
        code = _once(args)
        sys.stdout.flush()
        renders += 1
        if code != EXIT_OK or (limit is not None and renders >= limit):
            return code
        sleep(args.interval)


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    plugin = parser()
    if not given:  # a bare `kubectl phalanx`: its usage, as kubectl plugins answer
        plugin.print_help()
        return EXIT_OK
    args = plugin.parse_args(given)
    try:
        if getattr(args, "watch", False):
            return _watch(args, WATCH_LIMIT, time.sleep)
        return _once(args)
    except KeyboardInterrupt:  # Ctrl-C: the shell's code for it, no traceback
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
