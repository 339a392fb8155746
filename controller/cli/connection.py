"""How ``kubectl phalanx`` reaches the cluster, flag for flag as kubectl does.

``--kubeconfig`` / ``$KUBECONFIG`` (merged) / ``~/.kube/config``, else the pod's ServiceAccount;
``--context``, ``--cluster``, ``--user``; ``--as`` and ``--as-group`` (impersonation headers);
``--request-timeout``. Reads that the user may not make cluster-wide are retried in the namespace
the command is about, and what could not be read is recorded, so that the command can say what it
could not see instead of failing with a traceback.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from controller.api import kubeconfig, transport
from controller.api.kube import ApiError, KubeClient
from controller.api.resources import ResourceType
from shared.jsonread import JsonObject

SERVICE_ACCOUNT_NAMESPACE = transport.SERVICE_ACCOUNT / "namespace"
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def request_timeout(text: str) -> float:
    """kubectl's ``--request-timeout``: a Go duration (``1m30s``) or whole seconds; 0: none."""
    text = text.strip()
    if text.isdigit():
        return float(text)
    position, seconds = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        seconds += float(match.group(1)) * _SECONDS[match.group(2)]
        position = match.end()
    if not text or position != len(text):
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: use e.g. 30s, 1m or 0 (no timeout)")
    return seconds


@dataclass(frozen=True)
class Chosen:
    """The kubeconfig chosen, reduced to one context (None: the pod's ServiceAccount)."""

    config: dict[str, Any] | None
    described: str
    namespace: str | None = None  # the ServiceAccount's namespace, in a pod


def choose(args: argparse.Namespace, env: dict[str, str] | None = None) -> Chosen:
    """What kubectl would connect with for these flags (``ConfigError`` if nothing usable)."""
    environ = dict(os.environ if env is None else env)
    paths = kubeconfig.files(args.kubeconfig, environ)
    merged = kubeconfig.merge(paths, explicit=bool(args.kubeconfig))
    overrides = args.context or args.cluster or args.user
    if kubeconfig.empty(merged) and not overrides and environ.get("KUBERNETES_SERVICE_HOST"):
        namespace = None
        if SERVICE_ACCOUNT_NAMESPACE.exists():
            namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or None
        return Chosen(None, "the pod's ServiceAccount", namespace)
    if kubeconfig.empty(merged):
        raise transport.ConfigError(
            f"no kubeconfig: none of {', '.join(map(str, paths))} exists (use --kubeconfig or $KUBECONFIG)"
        )
    selection = kubeconfig.select(merged, args.context, args.cluster, args.user)
    return Chosen(
        selection.config, f'context "{selection.context}"' if selection.context else "the given cluster"
    )


def impersonation(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    """kubectl's ``--as``/``--as-group`` as the API server's impersonation headers."""
    if args.as_groups and not args.as_user:
        raise transport.ConfigError("--as-group needs --as (the API server impersonates a user)")
    headers = [("Impersonate-User", args.as_user)] if args.as_user else []
    headers.extend(("Impersonate-Group", group) for group in args.as_groups or ())
    return tuple(headers)


async def connect(chosen: Chosen, args: argparse.Namespace, namespace: str | None) -> PluginKube:
    """A client for ``chosen`` with the impersonation and timeout flags; reads narrow to
    ``namespace`` where the user may not read cluster-wide."""
    connections = 16  # the plugin lists a dozen types at once, once
    if chosen.config is None:
        sender = await transport.connect(None, connections)
    else:
        sender = await transport.connect_config(chosen.config, connections)
    return PluginKube(sender, namespace, impersonation(args), args.request_timeout)


@dataclass
class Access:
    """What the plugin could read: lists narrowed to one namespace, and lists refused outright."""

    narrowed: set[str] = field(default_factory=set)
    forbidden: set[str] = field(default_factory=set)

    def data(self) -> dict[str, Any]:
        return {
            "complete": not (self.narrowed or self.forbidden),
            "narrowedToNamespace": sorted(self.narrowed),
            "forbidden": sorted(self.forbidden),
        }


class PluginKube(KubeClient):
    """A ``KubeClient`` whose cluster-wide lists fall back, on 403, to the command's namespace (a
    tenant's ``view``), and to nothing for what it may not read at all (recorded in ``access``)."""

    def __init__(
        self,
        sender: transport.Transport,
        namespace: str | None,
        headers: tuple[tuple[str, str], ...],
        request_timeout: float | None,
    ) -> None:
        super().__init__(sender, headers=headers, request_timeout=request_timeout)
        self.namespace = namespace
        self.access = Access()

    async def list(
        self, rt: ResourceType, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[JsonObject], str]:
        return await list_or_narrow(super().list, self.access, self.namespace, rt, namespace, label_selector)


Lister = Callable[[ResourceType, str | None, str | None], Awaitable[tuple[list[JsonObject], str]]]


async def list_or_narrow(
    list_: Lister,
    access: Access,
    scope: str | None,
    rt: ResourceType,
    namespace: str | None,
    label_selector: str | None,
) -> tuple[list[JsonObject], str]:
    """``list_`` cluster-wide; on 403, in the ``scope`` namespace; on 403 again (or for a
    cluster-scoped type), nothing. Either way ``access`` records it."""
    try:
        return await list_(rt, namespace, label_selector)
    except ApiError as err:
        if err.status != 403 or namespace is not None:
            raise
    if rt.namespaced and scope is not None:
        try:
            items, version = await list_(rt, scope, label_selector)
        except ApiError as err:
            if err.status != 403:
                raise
        else:
            access.narrowed.add(str(rt))
            return items, version
    access.forbidden.add(str(rt))
    return [], ""
