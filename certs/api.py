"""The API-server operations the in-cluster bootstrap needs, as a Protocol (``kube`` implements it
on kubernetes_asyncio; tests use a fake)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class ConflictError(Exception):
    """HTTP 409: the Secret already exists (create) or changed since it was read (update)."""


class NotFoundError(Exception):
    """HTTP 404 on an object that must exist (the MutatingWebhookConfiguration)."""


@dataclass(frozen=True)
class Secret:
    data: Mapping[str, bytes]  # base64-decoded
    resource_version: str


class CertAPI(Protocol):
    async def get_secret(self, namespace: str, name: str) -> Secret | None:
        """The Secret, or None when it does not exist."""
        ...

    async def create_secret(self, namespace: str, name: str, data: Mapping[str, bytes]) -> None:
        """Create a ``kubernetes.io/tls`` Secret; raise ConflictError when it already exists."""
        ...

    async def update_secret(
        self, namespace: str, name: str, data: Mapping[str, bytes], resource_version: str
    ) -> None:
        """Replace the Secret's data; raise ConflictError when ``resource_version`` is stale."""
        ...

    async def get_webhook_config(self, name: str) -> dict[str, Any]:
        """The MutatingWebhookConfiguration as JSON (camelCase keys); raise NotFoundError when absent."""
        ...

    async def patch_webhook_config(self, name: str, patch: list[dict[str, Any]]) -> None:
        """JSON-patch the MutatingWebhookConfiguration; raise ConflictError when a test op fails."""
        ...
