"""The JSON patch that puts a CA bundle into every webhook of a webhook configuration. Pure."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any


def ca_bundle_patch(config: Mapping[str, Any], ca_pem: bytes) -> list[dict[str, Any]]:
    """JSON patch ops setting ``webhooks[i].clientConfig.caBundle`` to ``ca_pem`` where it differs;
    empty when every entry is already right. Each change is guarded by a ``test`` of the entry's
    name, so a concurrent reorder makes the patch fail instead of writing to the wrong webhook."""
    value = base64.b64encode(ca_pem).decode()
    ops: list[dict[str, Any]] = []
    for index, webhook in enumerate(config.get("webhooks") or []):
        client_config = webhook.get("clientConfig") or {}
        if _decode(client_config.get("caBundle")) == ca_pem:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": webhook["name"]})
        # "add" sets the member whether or not it exists yet ("replace" fails on a missing one).
        ops.append({"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": value})
    return ops


def webhook_count(ops: list[dict[str, Any]]) -> int:
    """How many webhook entries a patch from ``ca_bundle_patch`` changes."""
    return sum(1 for op in ops if op["op"] == "add")


def _decode(value: object) -> bytes | None:
    if isinstance(value, bytes):
        return value  # a client that already decoded the byte field
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError):
        return None
