"""PEM in and out."""

from __future__ import annotations

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

# The key types Phalanx can sign with (it makes EC keys; RSA is accepted from elsewhere).
SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


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
