"""webhook/certexpiry.py reads a certificate's notAfter as an X.509 library does, and refuses what
is not a certificate with ValueError (the reloader then keeps the certificate it serves)."""

from __future__ import annotations

import base64
import contextlib
from datetime import UTC, datetime

import pytest
from cryptography import x509
from hypothesis import given
from hypothesis import strategies as st

from certs.bundle import new_bundle
from webhook.certexpiry import not_after

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def expected(pem: bytes) -> float:
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc.timestamp()


@pytest.mark.parametrize("days", [1, 90, 365 * 30])  # the last one ends after 2049: GeneralizedTime
def test_not_after_is_what_an_x509_library_reads(days: int) -> None:
    bundle = new_bundle(["phalanx-webhook.phalanx-system.svc"], ["127.0.0.1"], NOW, days=days)
    assert not_after(bundle.tls_crt) == expected(bundle.tls_crt)
    assert not_after(bundle.ca_crt) == expected(bundle.ca_crt)


def test_the_first_certificate_of_a_chain_is_the_one_read() -> None:
    short = new_bundle(["a"], [], NOW, days=10)
    assert not_after(short.tls_crt + short.ca_crt) == expected(short.tls_crt)
    assert not_after(short.tls_crt) < not_after(short.ca_crt)


@pytest.mark.parametrize(
    "pem",
    [
        b"",
        b"not a certificate",
        b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        b"-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n",  # an INTEGER, not X.509
        b"-----BEGIN CERTIFICATE-----\nMIIBIjAN\n-----END CERTIFICATE-----\n",  # cut short
    ],
)
def test_what_is_not_a_certificate_is_a_value_error(pem: bytes) -> None:
    with pytest.raises(ValueError):
        not_after(pem)


def test_a_truncated_certificate_is_a_value_error() -> None:
    pem = new_bundle(["a"], [], NOW, days=10).tls_crt.decode()
    lines = pem.strip().splitlines()
    cut = "\n".join([lines[0], *lines[1:4], lines[-1]]).encode()
    with pytest.raises(ValueError):
        not_after(cut)


@given(st.binary(max_size=400))
def test_any_bytes_in_a_pem_frame_give_a_time_or_a_value_error(body: bytes) -> None:
    pem = b"-----BEGIN CERTIFICATE-----\n" + base64.encodebytes(body) + b"-----END CERTIFICATE-----\n"
    with contextlib.suppress(ValueError):
        assert isinstance(not_after(pem), float)
