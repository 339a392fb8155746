"""The certificates themselves: what is in them, that TLS clients accept them, when they must be
renewed, and why a bundle is unusable."""

from __future__ import annotations

import ipaddress
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs.bundle import (
    BACKDATE,
    CertBundle,
    load_cert,
    load_certs,
    load_key,
    needs_renewal,
    new_bundle,
    new_ca,
    new_serving_cert,
    problem_with,
    public_key_der,
    reissue,
    renewal_threshold,
)

from .conftest import DNS, IPS, NOW

DAY = timedelta(days=1)
SECOND = timedelta(seconds=1)


def test_ca_is_a_ca_that_signs_certificates() -> None:
    ca_pem, key_pem = new_ca(NOW)
    ca = load_cert(ca_pem)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign
    assert ca.subject == ca.issuer
    assert public_key_der(ca) == public_key_der(load_key(key_pem))


def test_serving_cert_has_sans_server_auth_and_is_not_a_ca() -> None:
    bundle = new_bundle(DNS, IPS, NOW)
    cert = load_cert(bundle.tls_crt)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == list(DNS)
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_serving_cert_is_signed_by_the_ca() -> None:
    bundle = new_bundle(DNS, IPS, NOW)
    load_cert(bundle.tls_crt).verify_directly_issued_by(load_cert(bundle.ca_crt))
    other_ca, _ = new_ca(NOW)
    with pytest.raises(InvalidSignature):  # same subject (same second), different key
        load_cert(bundle.tls_crt).verify_directly_issued_by(load_cert(other_ca))


@pytest.mark.parametrize("server_name", [*DNS, "127.0.0.1"])
def test_tls_client_trusting_the_ca_accepts_the_server(tmp_path: Path, server_name: str) -> None:
    now = datetime.now(UTC)  # OpenSSL checks validity against the real clock
    bundle = new_bundle(DNS, IPS, now)
    _handshake(tmp_path, bundle.ca_crt, bundle.tls_crt, bundle.tls_key, server_name)


def test_tls_client_rejects_a_name_not_in_the_sans(tmp_path: Path) -> None:
    bundle = new_bundle(DNS, IPS, datetime.now(UTC))
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tmp_path, bundle.ca_crt, bundle.tls_crt, bundle.tls_key, "evil.example.com")


def test_serving_cert_never_outlives_its_ca() -> None:
    ca_pem, ca_key = new_ca(NOW, days=10)
    cert_pem, _ = new_serving_cert(ca_pem, ca_key, DNS, (), NOW, days=365)
    assert load_cert(cert_pem).not_valid_after_utc == load_cert(ca_pem).not_valid_after_utc


def test_validity_is_backdated_for_clock_skew() -> None:
    bundle = new_bundle(DNS, (), NOW, days=30)
    cert = load_cert(bundle.tls_crt)
    assert cert.not_valid_before_utc == NOW - BACKDATE
    assert cert.not_valid_after_utc == NOW + timedelta(days=30)


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        new_ca(datetime(2026, 1, 1))


def test_a_serving_cert_needs_a_name() -> None:
    ca_pem, ca_key = new_ca(NOW)
    with pytest.raises(ValueError, match="at least one"):
        new_serving_cert(ca_pem, ca_key, (), (), NOW)


def test_reissue_keeps_a_healthy_ca() -> None:
    old = new_bundle(DNS, (), NOW)
    later = NOW + timedelta(days=300)
    new = reissue(old, DNS, (), later)
    assert new.ca_crt == old.ca_crt and new.ca_key == old.ca_key
    assert new.tls_crt != old.tls_crt
    load_cert(new.tls_crt).verify_directly_issued_by(load_cert(new.ca_crt))


def test_reissue_rotates_an_expiring_ca_and_keeps_trusting_the_old_one() -> None:
    old = new_bundle(DNS, (), NOW, days=365, ca_days=400)
    later = NOW + timedelta(days=300)  # CA has < 1/3 of its life left
    new = reissue(old, DNS, (), later)
    cas = load_certs(new.ca_crt)
    assert len(cas) == 2
    assert cas[1] == load_cert(old.ca_crt)  # old replicas' certs still verify during the switch
    load_cert(new.tls_crt).verify_directly_issued_by(cas[0])


def test_reissue_drops_an_expired_previous_ca() -> None:
    old = new_bundle(DNS, (), NOW, days=10, ca_days=10)
    new = reissue(old, DNS, (), NOW + timedelta(days=11))
    assert len(load_certs(new.ca_crt)) == 1


@pytest.mark.parametrize(
    ("lifetime", "threshold"),
    [
        (timedelta(days=365), timedelta(days=365) / 3),  # a third of the lifetime dominates
        (timedelta(days=60), timedelta(days=30)),  # the 30-day floor dominates
        (timedelta(days=90), timedelta(days=30)),  # both agree
        (timedelta(days=7), timedelta(days=3.5)),  # the floor is capped at half a short lifetime
    ],
)
def test_renewal_threshold(lifetime: timedelta, threshold: timedelta) -> None:
    assert renewal_threshold(NOW, NOW + lifetime) == threshold


def _cert(days: int) -> tuple[bytes, timedelta]:
    """A serving cert valid from NOW - BACKDATE to NOW + days, and its default threshold."""
    bundle = new_bundle(DNS, (), NOW, days=days)
    return bundle.tls_crt, renewal_threshold(NOW - BACKDATE, NOW + timedelta(days=days))


@pytest.mark.parametrize("days", [7, 60, 365])
def test_needs_renewal_boundaries(days: int) -> None:
    cert, threshold = _cert(days)
    expiry = NOW + timedelta(days=days)
    assert not needs_renewal(cert, NOW)
    assert not needs_renewal(cert, expiry - threshold)  # exactly the threshold left: still fine
    assert needs_renewal(cert, expiry - threshold + SECOND)
    assert needs_renewal(cert, expiry)  # expired
    assert needs_renewal(cert, expiry + DAY)
    assert needs_renewal(cert, NOW - BACKDATE - SECOND)  # not valid yet


def test_explicit_renew_before() -> None:
    cert, _ = _cert(365)
    expiry = NOW + timedelta(days=365)
    assert not needs_renewal(cert, expiry - 10 * DAY, renew_before=10 * DAY)
    assert needs_renewal(cert, expiry - 10 * DAY + SECOND, renew_before=10 * DAY)


def test_needs_renewal_refuses_naive_time() -> None:
    cert, _ = _cert(365)
    with pytest.raises(ValueError, match="timezone-aware"):
        needs_renewal(cert, NOW.replace(tzinfo=None))


def test_a_fresh_bundle_has_no_problem() -> None:
    assert problem_with(new_bundle(DNS, IPS, NOW), DNS, IPS, NOW) is None


def test_problems() -> None:
    good = new_bundle(DNS, IPS, NOW)
    other = new_bundle(DNS, IPS, NOW)
    cases = {
        "lacks SANs other.svc": (good, [*DNS, "other.svc"], IPS, NOW),
        "lacks SANs 10.0.0.1": (good, DNS, ["10.0.0.1"], NOW),
        "tls.key does not match": (CertBundle(good.ca_crt, good.tls_crt, other.tls_key), DNS, IPS, NOW),
        "not signed by ca.crt": (CertBundle(other.ca_crt, good.tls_crt, good.tls_key), DNS, IPS, NOW),
        "serving certificate expires soon": (good, DNS, IPS, NOW + timedelta(days=300)),
        "unreadable PEM": (CertBundle(b"junk", good.tls_crt, good.tls_key), DNS, IPS, NOW),
    }
    for expected, (bundle, dns, ips, now) in cases.items():
        problem = problem_with(bundle, dns, ips, now)
        assert problem is not None and expected in problem, (expected, problem)


def test_an_expiring_ca_is_a_problem_even_with_a_fresh_leaf() -> None:
    ca_crt, ca_key = new_ca(NOW, days=400)
    later = NOW + timedelta(days=300)
    tls_crt, tls_key = new_serving_cert(ca_crt, ca_key, DNS, (), later, days=30)
    problem = problem_with(CertBundle(ca_crt, tls_crt, tls_key, ca_key), DNS, (), later)
    assert problem == "CA certificate expires soon"


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
