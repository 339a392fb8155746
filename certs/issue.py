"""Make a private CA and serving certificates signed by it. Pure apart from key generation:
``now`` is a parameter, nothing reads the clock or touches disk."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs import pem
from certs.bundle import CertBundle
from certs.check import ca_problem, require_aware

CA_DAYS = 3650
SERVING_DAYS = 365
# Backdate notBefore so a replica or API server whose clock runs a little behind accepts the cert.
BACKDATE = timedelta(hours=1)


def new_key() -> ec.EllipticCurvePrivateKey:
    # P-256: accepted by Go's TLS stack (the API server) and fast to generate.
    return ec.generate_private_key(ec.SECP256R1())


def new_ca(now: datetime, days: int = CA_DAYS) -> tuple[bytes, bytes]:
    """A self-signed CA that may sign leaf certificates only. Returns (cert PEM, key PEM)."""
    now = require_aware(now)
    key = new_key()
    # A timestamp in the CN tells CAs apart during a rotation (as Kubernetes' own self-signed CAs do).
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"phalanx-webhook-ca@{int(now.timestamp())}")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return pem.dump_cert(cert), pem.dump_key(key)


def new_serving_cert(
    ca_crt: bytes,
    ca_key: bytes,
    dns_names: Sequence[str],
    ips: Sequence[str],
    now: datetime,
    *,
    days: int = SERVING_DAYS,
) -> tuple[bytes, bytes]:
    """A serverAuth certificate for ``dns_names`` and ``ips`` signed by the (first) CA in ``ca_crt``,
    never outliving it. Returns (cert PEM, key PEM)."""
    now = require_aware(now)
    if not dns_names and not ips:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    ca, signer = pem.load_cert(ca_crt), pem.load_key(ca_key)
    key = new_key()
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    common_name = dns_names[0] if dns_names else ips[0]
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + timedelta(days=days), ca.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(signer, hashes.SHA256())
    )
    return pem.dump_cert(cert), pem.dump_key(key)


def new_bundle(
    dns_names: Sequence[str],
    ips: Sequence[str],
    now: datetime,
    *,
    days: int = SERVING_DAYS,
    ca_days: int = CA_DAYS,
) -> CertBundle:
    """A fresh CA and a serving certificate signed by it."""
    ca_crt, ca_key = new_ca(now, max(ca_days, days))
    tls_crt, tls_key = new_serving_cert(ca_crt, ca_key, dns_names, ips, now, days=days)
    return CertBundle(ca_crt=ca_crt, tls_crt=tls_crt, tls_key=tls_key, ca_key=ca_key)


def reissue(
    old: CertBundle | None,
    dns_names: Sequence[str],
    ips: Sequence[str],
    now: datetime,
    *,
    days: int = SERVING_DAYS,
    ca_days: int = CA_DAYS,
) -> CertBundle:
    """Replace ``old``: keep its CA when it can still sign (so caBundle need not change), else make a
    new CA and keep the old one in ``ca_crt`` while it is valid, so replicas still serving a cert
    from the old CA are trusted until they load the new one."""
    if old is not None and old.ca_key is not None and ca_problem(old, now) is None:
        tls_crt, tls_key = new_serving_cert(old.ca_crt, old.ca_key, dns_names, ips, now, days=days)
        ca_crt = _still_valid(old.ca_crt, now)
        return CertBundle(ca_crt=ca_crt, tls_crt=tls_crt, tls_key=tls_key, ca_key=old.ca_key)
    fresh = new_bundle(dns_names, ips, now, days=days, ca_days=ca_days)
    previous_ca = _first_still_valid(old.ca_crt, now) if old is not None else b""
    return CertBundle(
        ca_crt=fresh.ca_crt + previous_ca, tls_crt=fresh.tls_crt, tls_key=fresh.tls_key, ca_key=fresh.ca_key
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _still_valid(ca_crt: bytes, now: datetime) -> bytes:
    """``ca_crt`` without the certificates that have expired (the first one is kept regardless)."""
    certs = pem.load_certs(ca_crt)
    kept = [certs[0], *(c for c in certs[1:] if c.not_valid_after_utc > now)]
    if len(kept) == len(certs):
        return ca_crt  # unchanged bytes: no needless caBundle patch
    return b"".join(pem.dump_cert(c) for c in kept)


def _first_still_valid(ca_crt: bytes, now: datetime) -> bytes:
    try:
        first = pem.load_cert(ca_crt)
    except ValueError:
        return b""
    return pem.dump_cert(first) if first.not_valid_after_utc > now else b""
