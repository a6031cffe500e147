"""Exception types of the byte codecs.

Positions are relative to the buffer handed to the decoder; callers that know
where that buffer sits in a file add their base (see ``FormatError.shifted``) and name the
file (``FormatError.in_file``).
"""

from __future__ import annotations

from kafkatool.errors import KafkatoolError


class FormatError(KafkatoolError):
    """Bytes that do not decode as the format they claim to be."""

    kind = "corrupt"
    #: the file ``position`` is a byte of, set by the reader that took the bytes from it
    #: (``in_file``); None: a buffer's position, or no file known
    path = None

    def __init__(self, message: str, position: int | None = None, *, kind: str | None = None):
        super().__init__(message)
        self.message = message
        self.position = position
        if kind is not None:
            self.kind = kind

    def shifted(self, base: int) -> FormatError:
        """The same error with its position moved by ``base`` bytes."""
        if self.position is not None:
            self.position += base
        return self

    def in_file(self, path) -> FormatError:
        """The same error, its position a byte of the file ``path``."""
        self.path = path
        return self

    def __str__(self) -> str:
        where = "" if self.path is None else f" in {self.path}"
        at = "" if self.position is None else f" (at byte {self.position})"
        return f"{self.message}{where}{at}"


class TruncatedError(FormatError):
    """The buffer ends before the structure does."""

    kind = "truncated"


class CorruptRecordError(FormatError):
    """A batch or message whose checksum, length or fields are invalid."""

    kind = "corrupt_record"


class CompressionError(FormatError):
    """A compressed payload that cannot be decompressed (or a codec not allowed here)."""

    kind = "compression"


class InvalidRecordError(FormatError):
    """Kafka's InvalidRecordException (org.apache.kafka.common): records that break a rule of
    the format or of LogValidator rather than being damaged bytes; a produce answers
    INVALID_RECORD, without a message (hasCustomErrorMessage false)."""

    kind = "invalid_record"


class IllegalArgumentError(FormatError):
    """Input on which Kafka throws IllegalArgumentException, no ApiException: a produce answers
    UNKNOWN_SERVER_ERROR without a message (ReplicaManager.appendToLocalLog's catch-all,
    hasCustomErrorMessage = false).  A record timestamp below -1 in an append that LogValidator
    rebuilds (MemoryRecordsBuilder.appendWithOffset); compression bits that name no codec
    (CompressionType.forId: "Unknown compression type id: N")."""

    kind = "illegal_argument"


class StreamError(CompressionError):
    """A compressed record stream its codec cannot read: Kafka wraps the stream's IOException in
    a KafkaException, no ApiException, so a produce answers UNKNOWN_SERVER_ERROR without a
    message; verify calls it a compression finding.  A legacy wrapper's inner message set
    (AbstractLegacyRecordBatch.DeepRecordsIterator) and a v2 batch's record area
    (DefaultRecordBatch: compressedIterator's wrapForInput, StreamRecordIterator.readNext
    "Failed to decompress record stream") alike; a stream that decompresses but holds too few
    or too many records is InvalidRecordException there (InvalidRecordError)."""


class LegacyFieldError(CorruptRecordError):
    """A legacy message (magic 0/1, or an inner message of another magic, read with the v1
    layout) whose key or value length does not fit it: Kafka's LegacyRecord.keySize(), key()
    and value() read them with ByteBuffer.getInt and Utils.sizeDelimited, which throw
    IndexOutOfBoundsException (a length field past the message) or IllegalArgumentException
    (a key or value running past it), no ApiException: a produce answers UNKNOWN_SERVER_ERROR
    without a message.  A negative length is a null key or value, bytes after the value are
    ignored.  ``has_key``: what LegacyRecord.hasKey() answers (keySize() >= 0), None where
    keySize() itself throws.  Still a corrupt record for the readers (verify, dump)."""

    def __init__(self, message: str, position: int | None = None, *, has_key: bool | None = None):
        super().__init__(message, position)
        self.has_key = has_key


#: Kafka's exceptions that are no ApiException (a produce's UNKNOWN_SERVER_ERROR, no message)
UNCHECKED_ERRORS = (IllegalArgumentError, StreamError, LegacyFieldError)
