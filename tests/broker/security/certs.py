"""A throw-away CA and certificates for the TLS tests (the ``cryptography`` package)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkatool"),
    ]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class Issued:
    cert_pem: bytes
    key_pem: bytes
    cert_path: Path
    key_path: Path
    p12_path: Path
    p12_password: str


class CA:
    def __init__(self, out: Path, name: str = "kafkatool test CA"):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.pem = _pem(self.cert)
        self.path = self.out / f"{name.replace(' ', '_')}.pem"
        self.path.write_bytes(self.pem)

    def issue(self, cn: str, *, ou: str | None = None, server: bool = True, expired: bool = False) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=10), now - datetime.timedelta(days=1))
            if expired
            else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))
        )
        b = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, ou))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if server:
            b = b.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
        cert = b.sign(self.key, hashes.SHA256())
        base = self.out / cn.replace(" ", "_")
        cert_path, key_path, p12_path = (
            base.with_suffix(".crt"),
            base.with_suffix(".key"),
            base.with_suffix(".p12"),
        )
        cert_path.write_bytes(_pem(cert) + self.pem)
        key_path.write_bytes(_pem_key(key))
        password = "p12-secret"
        p12_path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                cn.encode(), key, cert, [self.cert], serialization.BestAvailableEncryption(password.encode())
            )
        )
        return Issued(_pem(cert) + self.pem, _pem_key(key), cert_path, key_path, p12_path, password)

    def truststore_p12(self, password: str = "trust-secret") -> Path:
        path = self.out / "truststore.p12"
        path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                b"ca", None, None, [self.cert], serialization.BestAvailableEncryption(password.encode())
            )
        )
        return path
