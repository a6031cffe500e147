"""A tiny blocking Kafka client on the project's protocol codec, for raw-protocol tests."""

from __future__ import annotations

import socket
import struct

from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.framing import encode_request, parse_response


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "wire-test"):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation = 0

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body) -> int:
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation, self.client_id, body))
        return self.correlation

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def recv(self, api_key: int, version: int):
        corr, body = parse_response(self.recv_frame(), api_key, version)
        return corr, body

    def request(self, api_key: int, version: int, body):
        corr = self.send(api_key, version, body)
        got, resp = self.recv(api_key, version)
        assert got == corr, f"correlation id {got} != {corr}"
        return resp

    def api_versions(self, version: int = 3):
        req = API_BY_KEY[18].request(client_software_name="wire", client_software_version="1.0")
        return self.request(18, version, req)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closed the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return data == b""


class DispatchConn:
    """What Router.dispatch reads of a connection (an in-process broker's requests)."""

    sasl = None
    client_id = None
    produce_appended = None
    principal = "User:ANONYMOUS"
    listener = None
    tls = False
    peer = "127.0.0.1:1"
