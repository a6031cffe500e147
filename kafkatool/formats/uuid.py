"""Kafka's Uuid (org.apache.kafka.common.Uuid): 16 bytes, printed as URL-safe
base64 without padding (22 characters).

Topic ids, directory ids and incarnation ids all use it.  Two values are
reserved and never handed out by ``randomUuid``: ZERO (null / unknown) and ONE
(the KRaft ``__cluster_metadata`` topic id).  No randomness lives here: callers
supply the random bytes.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

from kafkatool.formats.errors import FormatError

_TWO_LONGS = struct.Struct(">qq")
# java.util.Base64 URL alphabet; '=' only as padding at the very end.
_URL_B64 = re.compile(r"[A-Za-z0-9_-]*")


class UuidError(FormatError):
    kind = "bad_uuid"


@dataclass(frozen=True, slots=True, order=True)
class Uuid:
    """A Kafka Uuid; ordering is Kafka's (unsigned, most significant half first)."""

    raw: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.raw, bytes) or len(self.raw) != 16:
            raise ValueError("a Uuid is exactly 16 bytes")

    @classmethod
    def from_bits(cls, most_significant: int, least_significant: int) -> Uuid:
        """From the two Java longs (signed or unsigned 64-bit values accepted)."""
        mask = 0xFFFFFFFFFFFFFFFF
        return cls(((most_significant & mask) << 64 | (least_significant & mask)).to_bytes(16, "big"))

    @classmethod
    def from_string(cls, text: str) -> Uuid:
        return cls(uuid_bytes_from_string(text))

    @property
    def most_significant_bits(self) -> int:
        return _TWO_LONGS.unpack(self.raw)[0]

    @property
    def least_significant_bits(self) -> int:
        return _TWO_LONGS.unpack(self.raw)[1]

    @property
    def is_reserved(self) -> bool:
        return self in RESERVED

    def __str__(self) -> str:
        return uuid_bytes_to_string(self.raw)

    def __repr__(self) -> str:
        return f"Uuid('{self}')"


ZERO_UUID = Uuid(bytes(16))
ONE_UUID = Uuid(bytes(15) + b"\x01")
METADATA_TOPIC_ID = ONE_UUID
RESERVED = frozenset((ZERO_UUID, ONE_UUID))


def uuid_bytes_to_string(raw: bytes) -> str:
    if len(raw) != 16:
        raise ValueError("a Uuid is exactly 16 bytes")
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode("ascii")


def uuid_bytes_from_string(text: str) -> bytes:
    """Decode like ``Uuid.fromString``: java.util.Base64 URL decoder, 16 bytes.

    Accepted: the 22-character unpadded form, or 24 characters ending in
    ``==``.  Like Java, unused low bits of the last character are ignored.
    """
    if len(text) > 24:
        raise UuidError(f"input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID")
    body = text
    if body.endswith("=="):
        body = body[:-2]
        if len(body) % 4 != 2:
            raise UuidError(f"input string `{text}` is not valid base64: misplaced padding")
    if not _URL_B64.fullmatch(body):
        raise UuidError(f"input string `{text}` is not valid URL-safe base64")
    if len(body) % 4 == 1:
        raise UuidError(f"input string `{text}` is not valid base64: dangling final character")
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except binascii.Error as exc:  # pragma: no cover - the checks above make this unreachable
        raise UuidError(f"input string `{text}` is not valid base64: {exc}") from None
    if len(raw) != 16:
        raise UuidError(
            f"input string `{text}` decoded as {len(raw)} bytes, which is not equal to the "
            "expected 16 bytes of a base64-encoded UUID"
        )
    return raw


def _type4(raw: bytes) -> Uuid:
    # java.util.UUID.randomUUID: version 4, IETF variant.
    b = bytearray(raw)
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return Uuid(bytes(b))


def _acceptable(uuid: Uuid) -> bool:
    return uuid not in RESERVED and not str(uuid).startswith("-")


def random_uuid(rand_bytes: Callable[[int], bytes] | bytes) -> Uuid:
    """``Uuid.randomUuid`` with the randomness supplied by the caller.

    ``rand_bytes`` is either a function like ``os.urandom`` (called for 16
    bytes until the result is acceptable, as Kafka loops) or 16 bytes already
    drawn, in which case an unacceptable draw raises ValueError so the caller
    can draw again.  The version-4/variant bits are set as java.util.UUID
    does; ids equal to a reserved value or whose string starts with ``-`` (it
    would read as a command-line option) are never returned.
    """
    if callable(rand_bytes):
        while True:
            candidate = _type4(_sixteen(rand_bytes(16)))
            if _acceptable(candidate):
                return candidate
    candidate = _type4(_sixteen(rand_bytes))
    if not _acceptable(candidate):
        raise ValueError(f"random bytes give the unusable id {candidate}; draw again")
    return candidate


def _sixteen(raw) -> bytes:
    raw = bytes(raw)
    if len(raw) != 16:
        raise ValueError(f"need 16 random bytes, got {len(raw)}")
    return raw
