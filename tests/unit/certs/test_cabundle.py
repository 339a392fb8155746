from __future__ import annotations

import base64

from certs.cabundle import ca_bundle_patch, webhook_count

CA = b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"
B64 = base64.b64encode(CA).decode()


def _config(*bundles: str | None) -> dict[str, object]:
    hooks = []
    for i, bundle in enumerate(bundles):
        client_config = {} if bundle is None else {"caBundle": bundle}
        hooks.append({"name": f"w{i}.phalanx.io", "clientConfig": client_config})
    return {"webhooks": hooks}


def test_patches_missing_and_different_bundles_guarded_by_name() -> None:
    ops = ca_bundle_patch(_config(None, B64, "b3RoZXI="), CA)
    assert ops == [
        {"op": "test", "path": "/webhooks/0/name", "value": "w0.phalanx.io"},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": B64},
        {"op": "test", "path": "/webhooks/2/name", "value": "w2.phalanx.io"},
        {"op": "add", "path": "/webhooks/2/clientConfig/caBundle", "value": B64},
    ]
    assert webhook_count(ops) == 2


def test_nothing_to_do_when_every_bundle_matches() -> None:
    assert ca_bundle_patch(_config(B64, B64), CA) == []
    assert ca_bundle_patch({"webhooks": None}, CA) == []


def test_garbage_bundle_is_replaced() -> None:
    assert webhook_count(ca_bundle_patch(_config("%%% not base64"), CA)) == 1
