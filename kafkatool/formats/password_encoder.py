"""Kafka's PasswordEncoder (kafka.utils.EncryptingPasswordEncoder, 3.x): how a dynamic password
config of a broker is kept in ZooKeeper (/config/brokers/<id>), encrypted with a key derived from
``password.encoder.secret``.

The stored value is a CSV map, ``key:value`` pairs joined by ``,`` (CoreUtils.parseCsvMap reads
it; base64 holds neither separator): keyFactoryAlgorithm, cipherAlgorithm, keyLength (bits),
salt (256 random bytes, base64), iterations, encryptedPassword (base64), passwordLength (the
password's length in UTF-16 code units, String.length: decode's sanity check), then the cipher's
parameters: initializationVector (base64), and for AES/GCM also authenticationTagLength (bits).
The key is PBKDF2 (PBEKeySpec: the secret's characters as UTF-8, the salt, the iterations and
the key length) with the keyFactoryAlgorithm's HMAC; the password's UTF-8 bytes (Java's: an
unpaired surrogate is ``?``; decoded as Java's String, formats/java_utf8) are encrypted
with the cipherAlgorithm (AES/CBC/PKCS5Padding by default: a random 16-byte IV; AES/GCM/NoPadding:
a random 12-byte IV and a 128-bit tag after the ciphertext, as the JDK makes them).  Kafka
writes the pairs in its HashMap's order; any order reads the same, and the salt and IV make
every encoding different anyway.

Pure: the caller gives the random salt (SALT_BYTES) and IV (``iv_size``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from kafkatool.formats import java_utf8
from kafkatool.formats.errors import FormatError
from kafkatool.formats.properties import parse_csv_map

#: SecretKeyFactory algorithms (PBKDF2 with these HMACs) and hashlib's names for them
KEY_FACTORIES = {
    "PBKDF2WithHmacSHA512": "sha512",
    "PBKDF2WithHmacSHA384": "sha384",
    "PBKDF2WithHmacSHA256": "sha256",
    "PBKDF2WithHmacSHA224": "sha224",
    "PBKDF2WithHmacSHA1": "sha1",
}
#: KafkaConfig's defaults (password.encoder.*): the key factory when none is configured
#: (PBKDF2WithHmacSHA512, which every JDK 8+ has), cipher, key length and iterations
DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"
DEFAULT_CIPHER = "AES/CBC/PKCS5Padding"
DEFAULT_KEY_LENGTH = 128
DEFAULT_ITERATIONS = 4096
#: the cipher algorithms this module encrypts and decrypts with (the JDK has more)
CIPHERS = ("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding")
SALT_BYTES = 256
_GCM_TAG_BITS = 128


class PasswordEncoderError(FormatError):
    """A stored password that does not decode, or encoder settings this module cannot use."""


def iv_size(cipher: str = DEFAULT_CIPHER) -> int:
    """The size of the random IV the JDK makes for ``cipher`` (GCM 12 bytes, CBC 16)."""
    return 12 if _is_gcm(cipher) else 16


def _is_gcm(cipher: str) -> bool:
    return cipher.startswith("AES/GCM/")


def _key(secret: str, key_factory: str, cipher: str, key_length: int, salt: bytes, iterations: int) -> bytes:
    digest = KEY_FACTORIES.get(key_factory)
    if digest is None:
        raise PasswordEncoderError(
            f"key factory algorithm {key_factory} is not supported here ({', '.join(KEY_FACTORIES)})"
        )
    if cipher not in CIPHERS:
        raise PasswordEncoderError(f"cipher algorithm {cipher} is not supported here ({', '.join(CIPHERS)})")
    if key_length not in (128, 192, 256):
        raise PasswordEncoderError(f"key length {key_length} is not an AES key length (128, 192 or 256 bits)")
    if iterations < 1:
        raise PasswordEncoderError(f"iterations {iterations} must be at least 1")
    return hashlib.pbkdf2_hmac(digest, java_utf8.encode(secret), salt, iterations, key_length // 8)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def encode(
    password: str,
    secret: str,
    *,
    salt: bytes,
    iv: bytes,
    key_factory: str | None = None,
    cipher: str = DEFAULT_CIPHER,
    key_length: int = DEFAULT_KEY_LENGTH,
    iterations: int = DEFAULT_ITERATIONS,
) -> str:
    """EncryptingPasswordEncoder.encode: ``password`` encrypted under ``secret``, as stored."""
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    factory = key_factory or DEFAULT_KEY_FACTORY
    key = _key(secret, factory, cipher, key_length, salt, iterations)
    data = java_utf8.encode(password)
    if _is_gcm(cipher):
        encrypted = AESGCM(key).encrypt(iv, data, None)
        params = [("initializationVector", _b64(iv)), ("authenticationTagLength", str(_GCM_TAG_BITS))]
    else:
        padder = padding.PKCS7(128).padder()
        enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        encrypted = enc.update(padder.update(data) + padder.finalize()) + enc.finalize()
        params = [("initializationVector", _b64(iv))]
    pairs = [
        ("keyFactoryAlgorithm", factory),
        ("cipherAlgorithm", cipher),
        ("keyLength", str(key_length)),
        ("salt", _b64(salt)),
        ("iterations", str(iterations)),
        ("encryptedPassword", _b64(encrypted)),
        ("passwordLength", str(java_utf8.java_length(password))),
        *params,
    ]
    return ",".join(f"{k}:{v}" for k, v in pairs)


def parse(stored: str) -> dict[str, str]:
    """The stored value's pairs, as EncryptingPasswordEncoder.decode reads them
    (CoreUtils.parseCsvMap: formats/properties.parse_csv_map)."""
    try:
        return dict(parse_csv_map(stored))
    except ValueError as exc:
        raise PasswordEncoderError(f"not an encoded password: {exc}") from None


def decode(stored: str, secret: str) -> str:
    """EncryptingPasswordEncoder.decode: the password ``stored`` holds, with the parameters it
    names; PasswordEncoderError with Kafka's words when ``secret`` (or the value) is wrong."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    p = parse(stored)
    try:
        cipher = p["cipherAlgorithm"]
        key = _key(
            secret,
            p["keyFactoryAlgorithm"],
            cipher,
            int(p["keyLength"]),
            base64.b64decode(p["salt"], validate=True),
            int(p["iterations"]),
        )
        encrypted = base64.b64decode(p["encryptedPassword"], validate=True)
        iv = base64.b64decode(p["initializationVector"], validate=True)
        length = int(p["passwordLength"])
        tag_bits = int(p["authenticationTagLength"]) if _is_gcm(cipher) else 0
    except KeyError as exc:
        raise PasswordEncoderError(f"not an encoded password: no {exc.args[0]}") from None
    except (ValueError, binascii.Error) as exc:
        raise PasswordEncoderError(f"not an encoded password: {exc}") from None
    try:
        if _is_gcm(cipher):
            if tag_bits != _GCM_TAG_BITS:
                raise ValueError(f"authenticationTagLength {tag_bits}")
            data = AESGCM(key).decrypt(iv, encrypted, None)
        else:
            dec = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
            unpadder = padding.PKCS7(128).unpadder()
            data = unpadder.update(dec.update(encrypted) + dec.finalize()) + unpadder.finalize()
    except (ValueError, InvalidTag):
        raise PasswordEncoderError("Password could not be decoded") from None
    password = java_utf8.decode(data)
    if java_utf8.java_length(password) != length:
        raise PasswordEncoderError("Password could not be decoded, sanity check of length failed")
    return password
