"""The two checksums Kafka uses.

CRC-32C (Castagnoli) covers v2 record batches and producer snapshots;
CRC-32 (IEEE, java.util.zip.CRC32) covers legacy v0/v1 messages.  Both come
from C implementations (the ``crc32c`` package uses SSE4.2 where present).
"""

from __future__ import annotations

import zlib

import crc32c as _crc32c

#: crc32c(data, value=0) -> int: the package's own function (a wrapper would add a Python
#: frame to every batch the produce path checks)
crc32c = _crc32c.crc32c


def crc32(data, value: int = 0) -> int:
    return zlib.crc32(data, value) & 0xFFFFFFFF
