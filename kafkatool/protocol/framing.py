"""Size-prefixed frames, request headers and response headers (sans-I/O).

A connection handler feeds received bytes to a :class:`FrameReader`, which
returns complete frames; :func:`parse_request` turns a frame into a
:class:`RequestHeader` plus the decoded body.  Header parsing never needs the
body schema: api_key, api_version and correlation_id are read first, so even a
request for an unknown API or version yields enough to answer it (see
:func:`api_versions_unsupported_response`) or to close the connection the way
the Java broker does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kafkatool.formats.schema import Message, SchemaDecodeError, r_nstr, r_tag_count, r_tag_header
from kafkatool.protocol.apis import (
    API_BY_KEY,
    API_VERSIONS_KEY,
    request_header_version,
    response_header_version,
)
from kafkatool.protocol.errors import ErrorCode, FrameTooLargeError
from kafkatool.protocol.generated import ApiVersionsResponse
from kafkatool.protocol.generated.api_versions_response import ApiVersion

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "FrameReader",
    "RequestHeader",
    "UnsupportedRequestError",
    "api_versions_unsupported_response",
    "encode_request",
    "encode_response",
    "parse_request",
    "parse_request_header",
    "parse_response",
]

#: socket.request.max.bytes default (100 MiB)
DEFAULT_MAX_FRAME_SIZE = 104857600

_SIZE = struct.Struct(">i")
_HHI = struct.Struct(">hhi")
_I32 = struct.Struct(">i")


class FrameReader:
    """Incremental splitter of ``int32 size`` + payload frames."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._consumed = 0  # stream position of _buf[0], for error positions

    def feed(self, data) -> list[bytes]:
        """Add received bytes; return every frame (payload without the size) now complete."""
        buf = self._buf
        buf += data
        frames = []
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0:
                raise SchemaDecodeError(f"negative frame size {size}", self._consumed + pos)
            if size > self.max_frame_size:
                raise FrameTooLargeError(
                    f"frame of {size} bytes exceeds the maximum of {self.max_frame_size} (socket.request.max.bytes)",
                    self._consumed + pos,
                )
            if n - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
            self._consumed += pos
        return frames

    @property
    def pending(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)


@dataclass
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    #: offset of the body inside the frame
    body_offset: int
    unknown_tags: list = field(default_factory=list)

    @property
    def api_known(self) -> bool:
        return self.api_key in API_BY_KEY

    @property
    def version_supported(self) -> bool:
        info = API_BY_KEY.get(self.api_key)
        return info is not None and info.supports(self.api_version)


class UnsupportedRequestError(SchemaDecodeError):
    """An unknown API key or version; ``header`` holds what is needed to answer."""

    kind = "unsupported"

    def __init__(self, message: str, header: RequestHeader):
        super().__init__(message, 0)
        self.header = header


def _view(frame) -> memoryview:
    mv = frame if isinstance(frame, memoryview) else memoryview(frame)
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


def parse_request_header(frame) -> RequestHeader:
    """Parse the header of a request frame (size prefix already removed)."""
    buf = _view(frame)
    return _read_header(buf, len(buf))


def _read_header(buf: memoryview, end: int) -> RequestHeader:
    if end < 8:
        raise SchemaDecodeError(
            f"request frame of {end} bytes is shorter than a request header", 0, kind="truncated"
        )
    api_key, api_version, correlation_id = _HHI.unpack_from(buf, 0)
    hv = request_header_version(api_key, api_version)
    pos = 8
    client_id = None
    tags: list = []
    if hv >= 1:
        client_id, pos = r_nstr(buf, pos, end)
    if hv >= 2:
        n, pos = r_tag_count(buf, pos, end)
        for _ in range(n):
            tag, start, stop = r_tag_header(buf, pos, end)
            tags.append((tag, bytes(buf[start:stop])))
            pos = stop
    return RequestHeader(api_key, api_version, correlation_id, client_id, hv, pos, tags)


def parse_request(frame) -> tuple[RequestHeader, Message]:
    """Header and decoded body of a request frame.

    Raises :class:`UnsupportedRequestError` (carrying the header) for an unknown
    API key or version, and ``SchemaDecodeError`` for malformed bytes.
    """
    buf = _view(frame)
    end = len(buf)
    try:
        header = _read_header(buf, end)
    except SchemaDecodeError:
        if end >= 8:
            api_key, api_version, correlation_id = _HHI.unpack_from(buf, 0)
            info = API_BY_KEY.get(api_key)
            if info is None or not info.supports(api_version):
                # a header we could not parse for an API we do not know: still answerable by id
                raise UnsupportedRequestError(
                    f"unsupported request api_key={api_key} api_version={api_version}",
                    RequestHeader(api_key, api_version, correlation_id, None, 1, 8),
                ) from None
        raise
    info = API_BY_KEY.get(header.api_key)
    if info is None:
        raise UnsupportedRequestError(f"unknown api_key {header.api_key}", header)
    if not info.supports(header.api_version):
        raise UnsupportedRequestError(
            f"{info.name} v{header.api_version} is not supported "
            f"(versions {info.min_version}-{info.max_version})",
            header,
        )
    # the version is in the API's range, which is its request class's VALID_VERSIONS (one
    # schema): that version's decoder at once (Message.decode_from would check the range again)
    body, _pos = info.request._DECODERS[header.api_version](buf, header.body_offset, end)
    return header, body


def _with_size(out: bytearray) -> bytes:
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Message
) -> bytes:
    """A complete request frame, size prefix included."""
    out = bytearray(4)
    out += _HHI.pack(api_key, api_version, correlation_id)
    hv = request_header_version(api_key, api_version)
    if hv >= 1:
        if client_id is None:
            out += b"\xff\xff"
        else:
            raw = client_id.encode("utf-8")
            out += struct.pack(">h", len(raw)) + raw
    if hv >= 2:
        out.append(0)
    body.encode_into(out, api_version)
    return _with_size(out)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Message) -> bytes:
    """A complete response frame: size, response header (v0/v1, ApiVersions always v0), body."""
    out = bytearray(4)
    out += _I32.pack(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        out.append(0)
    body.encode_into(out, api_version)
    return _with_size(out)


def parse_response(frame, api_key: int, api_version: int) -> tuple[int, Message]:
    """(correlation_id, body) of a response frame (for clients and tests)."""
    buf = _view(frame)
    end = len(buf)
    if end < 4:
        raise SchemaDecodeError("response frame shorter than its correlation id", 0, kind="truncated")
    (correlation_id,) = _I32.unpack_from(buf, 0)
    pos = 4
    if response_header_version(api_key, api_version) >= 1:
        n, pos = r_tag_count(buf, pos, end)
        for _ in range(n):
            _tag, _start, pos = r_tag_header(buf, pos, end)
    info = API_BY_KEY[api_key]
    body, pos = info.response.decode_from(buf, pos, end, api_version)
    if pos != end:
        raise SchemaDecodeError(
            f"{end - pos} unexpected bytes after {info.response.NAME} v{api_version}", pos
        )
    return correlation_id, body


def api_versions_unsupported_response(
    correlation_id: int, min_version: int = 0, max_version: int = 4
) -> bytes:
    """Answer to an ApiVersions request at a version we do not serve (KIP-511).

    A v0 body (readable by every client) with UNSUPPORTED_VERSION and only the
    ApiVersions entry, so the client retries at a version both sides know.
    """
    body = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersion(api_key=API_VERSIONS_KEY, min_version=min_version, max_version=max_version)],
    )
    return encode_response(API_VERSIONS_KEY, 0, correlation_id, body)
