from __future__ import annotations

from datetime import UTC, datetime

import pytest

from certs.kube import service_dns_names

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
DNS = service_dns_names("phalanx-webhook", "phalanx-system")
IPS = ("127.0.0.1",)


@pytest.fixture
def now() -> datetime:
    return NOW
