"""Key pairs: fingerprints and generated keys, as upstream's ``nova/crypto.py`` makes them.

* An ssh public key must load as one (RSA, ECDSA, Ed25519...); its
  fingerprint is the MD5 of the base64 field, in colon-separated hex.
* An x509 public key is a PEM certificate; its fingerprint is the SHA-1 of
  the certificate, in colon-separated hex.
* A generated ssh key is a 2048-bit RSA key: the private key in
  traditional OpenSSL PEM ("BEGIN RSA PRIVATE KEY"), the public key
  ``ssh-rsa <base64> Generated-by-Nova``.
* A generated x509 key is a self-signed certificate for ``CN=<user id>``
  valid 3650 days, for client authentication, with the user principal
  name ``<user id>@localhost``; the private key is the base64 of a PKCS#12
  bundle of key and certificate that opens with an empty password.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

from corral.core import errors

SSH = "ssh"
X509 = "x509"

# Microsoft's user principal name, as upstream's openssl configuration names it.
_UPN = ObjectIdentifier("1.3.6.1.4.1.311.20.2.3")
_KEY_BITS = 2048


class InvalidKeypair(errors.BadRequest):
    def __init__(self, reason: str) -> None:
        super().__init__(f"Keypair data is invalid: {reason}")


@dataclass(frozen=True)
class GeneratedKey:
    private_key: str
    public_key: str
    fingerprint: str


def _colons(hex_digest: str) -> str:
    return ":".join(a + b for a, b in zip(hex_digest[::2], hex_digest[1::2]))


def ssh_fingerprint(public_key: str) -> str:
    try:
        serialization.load_ssh_public_key(public_key.encode("utf-8"))
        data = base64.b64decode(public_key.split(" ")[1])
        return _colons(hashlib.md5(data, usedforsecurity=False).hexdigest())
    except Exception:  # noqa: BLE001 - upstream turns any failure into the same refusal
        raise InvalidKeypair("failed to generate fingerprint") from None


def x509_fingerprint(pem: str) -> str:
    try:
        certificate = x509.load_pem_x509_certificate(pem.encode("utf-8"))
        return _colons(binascii.hexlify(certificate.fingerprint(hashes.SHA1())).decode("ascii"))
    except (ValueError, TypeError, binascii.Error) as error:
        raise InvalidKeypair(f"failed to generate X509 fingerprint. Error message: {error}") from None


def fingerprint(public_key: str, key_type: str) -> str:
    return ssh_fingerprint(public_key) if key_type == SSH else x509_fingerprint(public_key)


def generate(key_type: str, user_id: str) -> GeneratedKey:
    return generate_ssh() if key_type == SSH else generate_x509(user_id)


def generate_ssh() -> GeneratedKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=_KEY_BITS)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode("ascii")
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    public_key = f"{public.decode('ascii')} Generated-by-Nova"
    return GeneratedKey(private, public_key, ssh_fingerprint(public_key))


def _utf8_string(text: str) -> bytes:
    """DER of an ASN.1 UTF8String (the value of the UPN otherName)."""
    data = text.encode("utf-8")
    if len(data) < 0x80:
        length = bytes([len(data)])
    else:
        size = len(data).to_bytes((len(data).bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(size)]) + size
    return b"\x0c" + length + data


# X.520's upper bound on a common name (upstream's openssl refuses longer ones too).
_MAX_COMMON_NAME = 64


def generate_x509(user_id: str) -> GeneratedKey:
    if not 0 < len(user_id) <= _MAX_COMMON_NAME:
        raise InvalidKeypair(
            f"a certificate's common name holds 1 to {_MAX_COMMON_NAME} characters; user id {user_id!r} does not fit"
        )
    key = rsa.generate_private_key(public_exponent=65537, key_size=_KEY_BITS)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user_id)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.OtherName(_UPN, _utf8_string(f"{user_id}@localhost"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    pem = certificate.public_bytes(serialization.Encoding.PEM).decode("ascii")
    bundle = pkcs12.serialize_key_and_certificates(None, key, certificate, None, serialization.NoEncryption())
    return GeneratedKey(base64.b64encode(bundle).decode("ascii"), pem, x509_fingerprint(pem))
