"""CA and serving certificates: what is in them, and that TLS clients accept them."""

from __future__ import annotations

import ipaddress
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs import issue, pem
from certs.names import service_dns_names

from .conftest import DNS, IPS, NOW


def test_service_dns_names_cover_every_way_to_address_the_service() -> None:
    assert service_dns_names("phalanx-webhook", "phalanx-system") == (
        "phalanx-webhook",
        "phalanx-webhook.phalanx-system",
        "phalanx-webhook.phalanx-system.svc",
        "phalanx-webhook.phalanx-system.svc.cluster.local",
    )


def test_ca_is_a_ca_that_signs_certificates() -> None:
    ca_pem, key_pem = issue.new_ca(NOW)
    ca = pem.load_cert(ca_pem)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign
    assert ca.subject == ca.issuer
    assert pem.public_key_der(ca) == pem.public_key_der(pem.load_key(key_pem))


def test_serving_cert_has_sans_server_auth_and_is_not_a_ca() -> None:
    bundle = issue.new_bundle(DNS, IPS, NOW)
    cert = pem.load_cert(bundle.tls_crt)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == list(DNS)
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_serving_cert_is_signed_by_the_ca() -> None:
    bundle = issue.new_bundle(DNS, IPS, NOW)
    pem.load_cert(bundle.tls_crt).verify_directly_issued_by(pem.load_cert(bundle.ca_crt))
    other_ca, _ = issue.new_ca(NOW)
    with pytest.raises(InvalidSignature):  # same subject (same second), different key
        pem.load_cert(bundle.tls_crt).verify_directly_issued_by(pem.load_cert(other_ca))


@pytest.mark.parametrize("server_name", [*DNS, "127.0.0.1"])
def test_tls_client_trusting_the_ca_accepts_the_server(tmp_path: Path, server_name: str) -> None:
    now = datetime.now(UTC)  # OpenSSL checks validity against the real clock
    bundle = issue.new_bundle(DNS, IPS, now)
    _handshake(tmp_path, bundle.ca_crt, bundle.tls_crt, bundle.tls_key, server_name)


def test_tls_client_rejects_a_name_not_in_the_sans(tmp_path: Path) -> None:
    bundle = issue.new_bundle(DNS, IPS, datetime.now(UTC))
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tmp_path, bundle.ca_crt, bundle.tls_crt, bundle.tls_key, "evil.example.com")


def test_serving_cert_never_outlives_its_ca() -> None:
    ca_pem, ca_key = issue.new_ca(NOW, days=10)
    cert_pem, _ = issue.new_serving_cert(ca_pem, ca_key, DNS, (), NOW, days=365)
    assert pem.load_cert(cert_pem).not_valid_after_utc == pem.load_cert(ca_pem).not_valid_after_utc


def test_validity_is_backdated_for_clock_skew() -> None:
    bundle = issue.new_bundle(DNS, (), NOW, days=30)
    cert = pem.load_cert(bundle.tls_crt)
    assert cert.not_valid_before_utc == NOW - issue.BACKDATE
    assert cert.not_valid_after_utc == NOW + timedelta(days=30)


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        issue.new_ca(datetime(2026, 1, 1))


def test_a_serving_cert_needs_a_name() -> None:
    ca_pem, ca_key = issue.new_ca(NOW)
    with pytest.raises(ValueError, match="at least one"):
        issue.new_serving_cert(ca_pem, ca_key, (), (), NOW)


def test_reissue_keeps_a_healthy_ca() -> None:
    old = issue.new_bundle(DNS, (), NOW)
    later = NOW + timedelta(days=300)
    new = issue.reissue(old, DNS, (), later)
    assert new.ca_crt == old.ca_crt and new.ca_key == old.ca_key
    assert new.tls_crt != old.tls_crt
    pem.load_cert(new.tls_crt).verify_directly_issued_by(pem.load_cert(new.ca_crt))


def test_reissue_rotates_an_expiring_ca_and_keeps_trusting_the_old_one() -> None:
    old = issue.new_bundle(DNS, (), NOW, days=365, ca_days=400)
    later = NOW + timedelta(days=300)  # CA has < 1/3 of its life left
    new = issue.reissue(old, DNS, (), later)
    cas = pem.load_certs(new.ca_crt)
    assert len(cas) == 2
    assert cas[1] == pem.load_cert(old.ca_crt)  # old replicas' certs still verify during the switch
    pem.load_cert(new.tls_crt).verify_directly_issued_by(cas[0])


def test_reissue_drops_an_expired_previous_ca() -> None:
    old = issue.new_bundle(DNS, (), NOW, days=10, ca_days=10)
    new = issue.reissue(old, DNS, (), NOW + timedelta(days=11))
    assert len(pem.load_certs(new.ca_crt)) == 1


def _handshake(tmp: Path, ca: bytes, cert: bytes, key: bytes, server_name: str) -> None:
    """A full TLS handshake in memory: OpenSSL checks chain, validity, SAN and EKU."""
    for name, data in (("ca.crt", ca), ("tls.crt", cert), ("tls.key", key)):
        (tmp / name).write_bytes(data)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
    client_ctx = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=server_name)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for side, conn in (("client", client), ("server", server)):
            if not done[side]:
                try:
                    conn.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return
    raise AssertionError("handshake did not complete")
