"""The Kafka wire protocol, sans-I/O: generated message classes, framing, version table, error codes."""

from kafkatool.protocol.errors import ErrorCode, FrameTooLargeError, ProtocolDecodeError

__all__ = ["ErrorCode", "FrameTooLargeError", "ProtocolDecodeError"]
