"""Kafka's Acceptor socket options: socket.receive.buffer.bytes on the listening socket,
socket.send.buffer.bytes, TCP_NODELAY and SO_KEEPALIVE on accepted connections, -1 (our
default) the OS's own buffers."""

from __future__ import annotations

import asyncio
import socket

from kafkatool.broker.config import BrokerConfig
from kafkatool.broker.server import Broker


def _options(tmp_path, *settings: str) -> dict:
    broker = Broker(
        BrokerConfig.load(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0", *settings])
    )
    broker.open_storage()

    async def run() -> dict:
        await broker.start()
        try:
            listener = broker._servers[0].sockets[0]
            host, port = broker.bound[0]
            reader, writer = await asyncio.open_connection(host, port)
            for _ in range(500):  # the accept callback registers the connection
                if broker._connections:
                    break
                await asyncio.sleep(0.01)
            conn = next(iter(broker._connections))
            sock = conn._sock
            got = {
                "listen_rcvbuf": listener.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                "rcvbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
                "sndbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                "nodelay": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY),
                "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            }
            writer.close()
            return got
        finally:
            broker.request_stop()
            await broker.stop()

    return asyncio.run(run())


def test_kafkas_sample_sizes_set_both_buffers_and_connections_get_nodelay_and_keepalive(tmp_path):
    """Kafka's sample server.properties sets 102400 for both."""
    got = _options(tmp_path, "socket.send.buffer.bytes=102400", "socket.receive.buffer.bytes=102400")
    # Linux doubles what is set (the kernel's bookkeeping share): 102400 reads back 204800
    assert got["listen_rcvbuf"] == 2 * 102400
    assert got["rcvbuf"] == 2 * 102400  # inherited from the listening socket
    assert got["sndbuf"] == 2 * 102400
    assert got["nodelay"] and got["keepalive"]


def test_unset_or_minus_one_leaves_the_os_its_own_buffers(tmp_path):
    """Our default is -1 (Kafka's 102400 halved produce on loopback): nothing is sized."""
    for k, settings in enumerate([(), ("socket.send.buffer.bytes=-1", "socket.receive.buffer.bytes=-1")]):
        got = _options(tmp_path / str(k), *settings)
        # the OS sizes (and autotunes) an unsized socket
        assert got["sndbuf"] != 2 * 102400
        with socket.socket() as plain:
            plain.bind(("127.0.0.1", 0))
            plain.listen()
            assert got["listen_rcvbuf"] == plain.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        assert got["nodelay"] and got["keepalive"]


def test_other_sizes_are_applied(tmp_path):
    got = _options(tmp_path, "socket.send.buffer.bytes=262144", "socket.receive.buffer.bytes=524288")
    assert got["sndbuf"] == 2 * 262144
    assert got["rcvbuf"] == 2 * 524288
