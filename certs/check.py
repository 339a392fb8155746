"""Is a certificate (or a whole bundle) still good enough to serve? Pure: ``now`` is a parameter."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs import pem
from certs.bundle import CertBundle

# Renew when less than a third of the lifetime is left, or less than 30 days -- but the 30-day
# floor never exceeds half the lifetime, or a short-lived (test) cert would be renewed on every check.
RENEW_FRACTION = 3
RENEW_FLOOR = timedelta(days=30)


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
    cert = pem.load_cert(cert_pem)
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
        ca = pem.load_cert(bundle.ca_crt)
        key = pem.load_key(bundle.ca_key)
    except ValueError as exc:
        return f"unreadable CA: {exc}"
    if pem.public_key_der(ca) != pem.public_key_der(key):
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
        ca = pem.load_cert(bundle.ca_crt)
        cert = pem.load_cert(bundle.tls_crt)
        key = pem.load_key(bundle.tls_key)
    except ValueError as exc:
        return f"unreadable PEM: {exc}"
    if pem.public_key_der(cert) != pem.public_key_der(key):
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
