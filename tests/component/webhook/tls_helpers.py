"""Serving certificates for tests, made by Phalanx's own issuer and file writer (certs/)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from certs.bundle import TLS_CRT, TLS_KEY, CertBundle, new_bundle
from certs.files import write_files


def serving_bundle() -> CertBundle:
    """A fresh CA and a serving certificate for localhost and 127.0.0.1 signed by it."""
    return new_bundle(["localhost"], ["127.0.0.1"], datetime.now(UTC))


def write_pair(directory: Path, bundle: CertBundle) -> None:
    """Replace tls.crt and tls.key atomically, as a rotated Secret volume does."""
    write_files(directory, {TLS_CRT: bundle.tls_crt, TLS_KEY: bundle.tls_key})


def der(cert_pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(cert_pem).public_bytes(serialization.Encoding.DER)
