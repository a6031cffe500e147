"""Java's ``new String(bytes, UTF_8)``: the one rule for the text Kafka makes of bytes.

Kafka never refuses malformed UTF-8 where it makes a String of bytes (a record header's key,
``Utils.utf8``; a protocol string, ``readString``; DumpLogSegments' ``StringDecoder``): the JDK
decoder replaces each malformed sequence with one U+FFFD.  Python's ``"replace"`` handler agrees
on what is valid (well-formed UTF-8: no overlongs, no surrogates, nothing above U+10FFFF) but not
on how many bytes one U+FFFD stands for: an encoded surrogate (``ED A0 80``) is one U+FFFD in
Java and three in Python, a valid start cut short by the end of the bytes (``ED A0``) one in
Java and two in Python.  :data:`ERRORS` is a codec error handler giving Java's lengths
(sun.nio.cs.UTF_8.Decoder's ``malformedN`` and its end-of-input cases, which
``String.decodeUTF8_UTF16`` shares), so ``str(data, "utf-8", ERRORS)`` costs nothing more than a
strict decode on valid bytes and reads the rest as Java does.
"""

from __future__ import annotations

import codecs

#: codec error handler name: ``bytes.decode("utf-8", ERRORS)`` decodes as Java's String(bytes, UTF_8)
ERRORS = "kafkatool-java-utf8"
REPLACEMENT = "\ufffd"


def _continuation(b: int) -> bool:
    return (b & 0xC0) == 0x80


def malformed_length(data: bytes, i: int) -> int:
    """How many bytes, from ``data[i]`` (where a well-formed sequence does not start), Java's
    UTF-8 decoder replaces with one U+FFFD."""
    b1 = data[i]
    left = len(data) - i
    if 0xC2 <= b1 <= 0xDF:
        # a 2-byte lead: malformed only if its second byte is missing (end) or no continuation
        return 1 if left >= 2 else left
    if 0xE0 <= b1 <= 0xEF:
        if left >= 2:
            b2 = data[i + 1]
            if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _continuation(b2):
                return 1
        if left < 3:
            return left  # a valid start cut short by the end of the bytes: one U+FFFD for it
        if not _continuation(data[i + 2]):
            return 2
        return 3  # an encoded surrogate (ED A0..BF xx)
    if 0xF0 <= b1 <= 0xF7:
        if b1 > 0xF4:
            return 1
        if left >= 2:
            b2 = data[i + 1]
            if (
                (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
                or (b1 == 0xF4 and (b2 & 0xF0) != 0x80)
                or not _continuation(b2)
            ):
                return 1
        if left >= 3 and not _continuation(data[i + 2]):
            return 2
        if left < 4:
            return left
        return 3  # the fourth byte is no continuation
    return 1  # a continuation byte, C0, C1 or F8..FF where a sequence should start


def _java_replace(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return REPLACEMENT, exc.start + malformed_length(exc.object, exc.start)


codecs.register_error(ERRORS, _java_replace)


def decode(data) -> str:
    """The String Java's ``new String(data, UTF_8)`` makes of ``data`` (never raises)."""
    return str(data, "utf-8", ERRORS)


def encode(text: str) -> bytes:
    """Java's ``String.getBytes(UTF_8)``: an unpaired surrogate is written as ``?``."""
    return text.encode("utf-8", "replace")


def java_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units (a character beyond the BMP counts two)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2
