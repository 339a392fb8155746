"""An in-memory CertAPI with hooks to play the other replica."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from certs.kube import ConflictError, NotFoundError, Secret

WEBHOOK_NAMES = (
    "workloads.phalanx.io",
    "pods.phalanx.io",
    "opted-in-workloads.phalanx.io",
    "opted-in-pods.phalanx.io",
)


class FakeCertAPI:
    def __init__(self, webhook_config: str = "phalanx-webhook") -> None:
        self.secrets: dict[tuple[str, str], Secret] = {}
        self.webhook_config_name = webhook_config
        self.webhook_config: dict[str, Any] | None = {
            "metadata": {"name": webhook_config},
            "webhooks": [
                {"name": name, "clientConfig": {"service": {"name": "x"}}} for name in WEBHOOK_NAMES
            ],
        }
        self.patches: list[list[dict[str, Any]]] = []
        self.creates = 0
        self.updates = 0
        # Called before the operation runs: lets a test make "another replica" write first.
        self.before_create: Callable[[], None] | None = None
        self.before_update: Callable[[], None] | None = None
        self._version = 0

    # -- helpers for tests -------------------------------------------------------------------
    def put_secret(self, namespace: str, name: str, data: Mapping[str, bytes]) -> None:
        self._version += 1
        self.secrets[(namespace, name)] = Secret(data=dict(data), resource_version=str(self._version))

    # -- CertAPI -------------------------------------------------------------------------------
    async def get_secret(self, namespace: str, name: str) -> Secret | None:
        return self.secrets.get((namespace, name))

    async def create_secret(self, namespace: str, name: str, data: Mapping[str, bytes]) -> None:
        if self.before_create is not None:
            hook, self.before_create = self.before_create, None
            hook()
        if (namespace, name) in self.secrets:
            raise ConflictError("already exists")
        self.creates += 1
        self.put_secret(namespace, name, data)

    async def update_secret(
        self, namespace: str, name: str, data: Mapping[str, bytes], resource_version: str
    ) -> None:
        if self.before_update is not None:
            hook, self.before_update = self.before_update, None
            hook()
        current = self.secrets.get((namespace, name))
        if current is None or current.resource_version != resource_version:
            raise ConflictError("stale resourceVersion")
        self.updates += 1
        self.put_secret(namespace, name, data)

    async def get_webhook_config(self, name: str) -> dict[str, Any]:
        if self.webhook_config is None or name != self.webhook_config_name:
            raise NotFoundError(name)
        return copy.deepcopy(self.webhook_config)

    async def patch_webhook_config(self, name: str, patch: list[dict[str, Any]]) -> None:
        if self.webhook_config is None or name != self.webhook_config_name:
            raise NotFoundError(name)
        updated = copy.deepcopy(self.webhook_config)
        for op in patch:
            parent, key = _resolve(updated, op["path"])
            if op["op"] == "test":
                actual = parent[int(key)] if isinstance(parent, list) else parent.get(key)
                if actual != op["value"]:
                    raise ConflictError(f"test failed at {op['path']}")
            elif op["op"] == "add":
                parent[key] = op["value"]
            else:
                raise AssertionError(f"unexpected op {op['op']}")
        self.patches.append(patch)
        self.webhook_config = updated

    def ca_bundles(self) -> list[str | None]:
        assert self.webhook_config is not None
        return [w.get("clientConfig", {}).get("caBundle") for w in self.webhook_config["webhooks"]]


def _resolve(document: Any, path: str) -> tuple[Any, str]:
    """The container holding the last segment of a JSON pointer, and that segment."""
    *parents, last = path.lstrip("/").split("/")
    node = document
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, last
