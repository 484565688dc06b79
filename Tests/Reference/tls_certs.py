"""Certificates for the TLS tests, made at run time with pyca/cryptography (no key is committed).

    tls_certs.py DIR

writes into DIR, as PEM:
  ca.pem                       a test CA (ECDSA P-256)
  server.pem, server.key       a leaf it signed for DNS:localhost and IP:127.0.0.1, valid now, chain leaf then CA
  renewed.pem, renewed.key     the same names and CA, a new key: the server's certificate after a renewal
  expired.pem, expired.key     the same names, its validity over a day ago
  other-ca.pem                 a second CA, which signed nothing the server shows
  other.pem, other.key         a leaf the second CA signed for localhost
and prints the SHA-256 of the server leaf's SubjectPublicKeyInfo (DER), hex, as the pin a client would ship.
"""

import datetime
import hashlib
import ipaddress
import pathlib
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def name(common):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def ca(common):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(common))
        .issuer_name(name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=2))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def leaf(issuer_key, issuer, before, after):
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("localhost"))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(before)
        .not_valid_after(after)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(issuer_key, hashes.SHA256())
    )
    return key, cert


def write(directory, stem, key, chain):
    pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    (directory / f"{stem}.pem").write_bytes(pem)
    if key is not None:
        (directory / f"{stem}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )


def main():
    directory = pathlib.Path(sys.argv[1])
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, ca_cert = ca("Siblings test CA")
    write(directory, "ca", None, [ca_cert])
    server_key, server_cert = leaf(ca_key, ca_cert, now - datetime.timedelta(days=1), now + datetime.timedelta(days=7))
    write(directory, "server", server_key, [server_cert, ca_cert])
    renewed_key, renewed_cert = leaf(ca_key, ca_cert, now - datetime.timedelta(hours=1), now + datetime.timedelta(days=90))
    write(directory, "renewed", renewed_key, [renewed_cert, ca_cert])
    old_key, old_cert = leaf(ca_key, ca_cert, now - datetime.timedelta(days=10), now - datetime.timedelta(days=1))
    write(directory, "expired", old_key, [old_cert, ca_cert])
    other_ca_key, other_ca = ca("Another test CA")
    write(directory, "other-ca", None, [other_ca])
    other_key, other_cert = leaf(other_ca_key, other_ca, now - datetime.timedelta(days=1), now + datetime.timedelta(days=7))
    write(directory, "other", other_key, [other_cert, other_ca])
    spki = server_cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    print(hashlib.sha256(spki).hexdigest())


if __name__ == "__main__":
    main()
