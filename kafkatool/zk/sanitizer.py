"""Kafka's org.apache.kafka.common.utils.Sanitizer: the one rule of the names Kafka keeps user
principals and client ids under in ZooKeeper (``/config/users/alice%40EXAMPLE.COM``, the config
change notification's ``entity_path``, a delegation token's owner and renewers).

Pure text, no I/O: the zk client's paths (zk/paths.entity_path) and the token codec use it.
"""

from __future__ import annotations

from kafkatool.formats import java_utf8

#: URLEncoder's characters that stay as they are (letters, digits and ``.-*_``); Sanitizer then
#: writes ``*`` as ``%2A`` (a JMX pattern character)
_KEPT = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
_HEX = "0123456789ABCDEF"


def sanitize(name: str) -> str:
    """Sanitizer.sanitize: URLEncoder.encode(name, UTF-8) (an unpaired surrogate is Java's
    ``?``), then ``*`` as ``%2A`` and ``+`` (a space) as ``%20``: letters, digits and ``._-``
    stay, every other byte of the UTF-8 form is ``%XY`` in upper-case hex."""
    out = []
    for b in java_utf8.encode(name):
        if b in _KEPT:
            out.append(chr(b))
        else:
            out.append("%" + _HEX[b >> 4] + _HEX[b & 15])
    return "".join(out)


def desanitize(name: str) -> str:
    """Sanitizer.desanitize, URLDecoder.decode(name, UTF-8): ``+`` is a space, a run of ``%XY``
    escapes is decoded as UTF-8 bytes (Java's U+FFFD for each malformed sequence), anything else
    is kept. ValueError with URLDecoder's message for a broken escape (IllegalArgumentException)."""
    out: list[str] = []
    i, n = 0, len(name)
    while i < n:
        c = name[i]
        if c == "+":
            out.append(" ")
            i += 1
        elif c == "%":
            raw = bytearray()
            while i + 2 < n and name[i] == "%":
                raw.append(_java_parse_hex(name[i + 1 : i + 3]))
                i += 3
            if i < n and name[i] == "%":
                raise ValueError("URLDecoder: Incomplete trailing escape (%) pattern")
            out.append(java_utf8.decode(bytes(raw)))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _java_parse_hex(pair: str) -> int:
    """Integer.parseInt(pair, 16) as URLDecoder takes it: a sign is allowed (``%+F`` is 15), a
    negative value refused."""
    digits = pair[1:] if pair[:1] in "+-" else pair
    if not digits or any(ch not in "0123456789abcdefABCDEF" for ch in digits):
        raise ValueError(
            f'URLDecoder: Illegal hex characters in escape (%) pattern - For input string: "{pair}"'
        )
    value = int(pair, 16)
    if value < 0:
        raise ValueError("URLDecoder: Illegal hex characters in escape (%) pattern - negative value")
    return value
