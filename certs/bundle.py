"""The webhook's TLS bundle -- a private CA and a serving certificate signed by it: PEM in and out,
making them, and judging whether they can still serve. Pure apart from key generation: ``now`` is a
parameter, nothing reads the clock or touches disk."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Named as in the cert directory and in the Secret.
CA_CRT = "ca.crt"
CA_KEY = "ca.key"
TLS_CRT = "tls.crt"
TLS_KEY = "tls.key"
# Private keys are written 0600; certificates are public.
PRIVATE = frozenset({CA_KEY, TLS_KEY})

CA_DAYS = 3650
SERVING_DAYS = 365
# Backdate notBefore so a replica or API server whose clock runs a little behind accepts the cert.
BACKDATE = timedelta(hours=1)
# Renew when less than a third of the lifetime is left, or less than 30 days -- but the 30-day
# floor never exceeds half the lifetime, or a short-lived (test) cert would be renewed on every check.
RENEW_FRACTION = 3
RENEW_FLOOR = timedelta(days=30)

# The key types Phalanx can sign with (it makes EC keys; RSA is accepted from elsewhere).
SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class CertBundle:
    """``ca_crt`` may hold several CA certificates (old + new during a CA rotation); the first one
    signs ``tls_crt``. ``ca_key`` is None where the CA key is not kept (e.g. cert-manager's Secret)."""

    ca_crt: bytes
    tls_crt: bytes
    tls_key: bytes
    ca_key: bytes | None = None

    def as_mapping(self, *, with_ca_key: bool = True) -> dict[str, bytes]:
        data = {CA_CRT: self.ca_crt, TLS_CRT: self.tls_crt, TLS_KEY: self.tls_key}
        if with_ca_key and self.ca_key is not None:
            data[CA_KEY] = self.ca_key
        return data

    @classmethod
    def from_mapping(cls, data: Mapping[str, bytes]) -> CertBundle | None:
        """None when a required entry is missing or empty."""
        if not all(data.get(key) for key in (CA_CRT, TLS_CRT, TLS_KEY)):
            return None
        return cls(
            ca_crt=data[CA_CRT], tls_crt=data[TLS_CRT], tls_key=data[TLS_KEY], ca_key=data.get(CA_KEY) or None
        )


# ---- PEM in and out -----------------------------------------------------------------------------


def load_certs(pem: bytes) -> list[x509.Certificate]:
    """Every certificate in ``pem``; raises ValueError when there is none or one is malformed."""
    certs = x509.load_pem_x509_certificates(pem)
    if not certs:
        raise ValueError("no certificate in PEM data")
    return certs


def load_cert(pem: bytes) -> x509.Certificate:
    """The first certificate in ``pem``."""
    return load_certs(pem)[0]


def load_key(pem: bytes) -> SigningKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError(f"unsupported private key type {type(key).__name__}")
    return key


def dump_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def dump_key(key: SigningKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_key_der(key_or_cert: SigningKey | x509.Certificate) -> bytes:
    """The SubjectPublicKeyInfo, to compare a certificate with a private key."""
    public = key_or_cert.public_key()
    return public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


# ---- can it still serve? ------------------------------------------------------------------------


def require_aware(now: datetime) -> datetime:
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    return now


def renewal_threshold(not_before: datetime, not_after: datetime) -> timedelta:
    """How long before ``not_after`` a certificate with this validity is renewed by default."""
    lifetime = not_after - not_before
    return max(lifetime / RENEW_FRACTION, min(RENEW_FLOOR, lifetime / 2))


def needs_renewal(cert_pem: bytes, now: datetime, renew_before: timedelta | None = None) -> bool:
    """True when the first certificate in ``cert_pem`` is not valid at ``now`` or expires within
    ``renew_before`` (default: ``renewal_threshold``)."""
    cert = load_cert(cert_pem)
    not_before, not_after = cert.not_valid_before_utc, cert.not_valid_after_utc
    now = require_aware(now)
    if now < not_before or now >= not_after:
        return True
    threshold = renew_before if renew_before is not None else renewal_threshold(not_before, not_after)
    return not_after - now < threshold


def ca_problem(bundle: CertBundle, now: datetime) -> str | None:
    """Why the bundle's CA cannot sign another serving certificate, or None when it can."""
    if bundle.ca_key is None:
        return "no CA key"
    try:
        ca = load_cert(bundle.ca_crt)
        key = load_key(bundle.ca_key)
    except ValueError as exc:
        return f"unreadable CA: {exc}"
    if public_key_der(ca) != public_key_der(key):
        return "CA key does not match CA certificate"
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    if not constraints.ca:
        return "CA certificate is not a CA"
    if needs_renewal(bundle.ca_crt, now):
        return "CA certificate expires soon"
    return None


def problem_with(
    bundle: CertBundle, dns_names: Sequence[str], ips: Sequence[str], now: datetime
) -> str | None:
    """Why ``bundle`` must be replaced before it can serve ``dns_names``/``ips``, or None if it is fine."""
    try:
        ca = load_cert(bundle.ca_crt)
        cert = load_cert(bundle.tls_crt)
        key = load_key(bundle.tls_key)
    except ValueError as exc:
        return f"unreadable PEM: {exc}"
    if public_key_der(cert) != public_key_der(key):
        return "tls.key does not match tls.crt"
    try:
        cert.verify_directly_issued_by(ca)
    except Exception as exc:  # ValueError, TypeError or InvalidSignature, depending on what differs
        return f"tls.crt is not signed by ca.crt ({type(exc).__name__})"
    missing = _missing_names(cert, dns_names, ips)
    if missing:
        return f"certificate lacks SANs {', '.join(missing)}"
    if not _has_server_auth(cert):
        return "certificate lacks the serverAuth extended key usage"
    if needs_renewal(bundle.ca_crt, now):
        return "CA certificate expires soon"
    if needs_renewal(bundle.tls_crt, now):
        return "serving certificate expires soon"
    return None


def _missing_names(cert: x509.Certificate, dns_names: Sequence[str], ips: Sequence[str]) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [*dns_names, *ips]
    have_dns = set(san.get_values_for_type(x509.DNSName))
    have_ips = set(san.get_values_for_type(x509.IPAddress))
    missing = [name for name in dns_names if name not in have_dns]
    missing += [ip for ip in ips if ipaddress.ip_address(ip) not in have_ips]
    return missing


def _has_server_auth(cert: x509.Certificate) -> bool:
    try:
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return False
    return ExtendedKeyUsageOID.SERVER_AUTH in usage


# ---- making them --------------------------------------------------------------------------------


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
    return dump_cert(cert), dump_key(key)


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
    ca, signer = load_cert(ca_crt), load_key(ca_key)
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
    return dump_cert(cert), dump_key(key)


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
        ca_crt = _without_expired(old.ca_crt, now)
        return CertBundle(ca_crt=ca_crt, tls_crt=tls_crt, tls_key=tls_key, ca_key=old.ca_key)
    fresh = new_bundle(dns_names, ips, now, days=days, ca_days=ca_days)
    previous_ca = _signing_ca_if_valid(old.ca_crt, now) if old is not None else b""
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


def _without_expired(ca_crt: bytes, now: datetime) -> bytes:
    """``ca_crt`` without the certificates that have expired (the first one is kept regardless)."""
    cas = load_certs(ca_crt)
    kept = [cas[0], *(ca for ca in cas[1:] if ca.not_valid_after_utc > now)]
    if len(kept) == len(cas):
        return ca_crt  # unchanged bytes: no needless caBundle patch
    return b"".join(dump_cert(ca) for ca in kept)


def _signing_ca_if_valid(ca_crt: bytes, now: datetime) -> bytes:
    """The CA that signed the old serving certificate, while it is still valid (empty otherwise)."""
    try:
        first = load_cert(ca_crt)
    except ValueError:
        return b""
    return dump_cert(first) if first.not_valid_after_utc > now else b""
