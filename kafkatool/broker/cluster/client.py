"""The inter-broker client on the event loop: one connection to one broker, one request in flight.

Replica fetchers, the AlterPartition, ControlledShutdown and WriteTxnMarkers senders use it.
Versions are fixed (both ends are this broker; Kafka pins them by inter.broker.protocol.version
the same way), so no ApiVersions round trip is needed.  The inter-broker listener's TLS and
SASL (security/client.inter_broker_security) apply when the connection opens.
"""

from __future__ import annotations

import asyncio

from kafkatool.broker.network import CloseConnection, FrameProtocol
from kafkatool.errors import KafkatoolError
from kafkatool.formats.schema import Message, SchemaDecodeError
from kafkatool.protocol.framing import encode_request, parse_response

#: the largest response frame a link accepts (a fetch answers at most
#: replica.fetch.response.max.bytes of records, 10 MiB by default)
MAX_RESPONSE_BYTES = 256 << 20


class BrokerLinkError(KafkatoolError):
    """The peer is unreachable, closed the connection, refused us or answered nonsense."""


class BrokerLink:
    def __init__(self, host: str, port: int, *, client_id: str, timeout: float = 30.0, security=None):
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout = timeout
        #: security/client.ClientSecurity of the inter-broker listener (None: PLAINTEXT)
        self.security = security
        self._frames: FrameProtocol | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0
        self._lock = asyncio.Lock()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def _connect(self) -> None:
        sec = self.security
        tls = (
            {}
            if sec is None or sec.ssl_context is None
            else {"ssl": sec.ssl_context, "server_hostname": self.host}
        )
        try:
            reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, **tls), min(self.timeout, 5.0)
            )
        except (OSError, TimeoutError) as exc:
            raise BrokerLinkError(f"{self.address}: cannot connect ({exc or type(exc).__name__})") from None
        # responses arrive as the broker's requests do: recv_into their own buffers, no
        # StreamReader copies (a fetch response's records go from the socket to os.write)
        self._frames = FrameProtocol(self._writer.transport, MAX_RESPONSE_BYTES)
        self._frames.take_over(reader)
        if sec is not None and sec.mechanism is not None:
            from kafkatool.broker.security.client import AuthenticationError

            try:
                await sec.authenticate_async(self._roundtrip)
            except AuthenticationError as exc:
                self.close()
                raise BrokerLinkError(f"{self.address}: {exc}") from None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.transport.abort()
        self._frames = self._writer = None

    async def request(
        self, api_key: int, version: int, body: Message, *, timeout: float | None = None
    ) -> Message:
        async with self._lock:
            if self._writer is None:
                await self._connect()
            return await self._roundtrip(api_key, version, body, timeout=timeout)

    async def _roundtrip(
        self, api_key: int, version: int, body: Message, *, timeout: float | None = None
    ) -> Message:
        frames, writer = self._frames, self._writer  # close() may run meanwhile
        if writer is None:
            raise BrokerLinkError(f"{self.address}: not connected")
        self._correlation += 1
        corr = self._correlation
        try:
            writer.write(encode_request(api_key, version, corr, self.client_id, body))
            # asyncio.timeout, not wait_for: no task per request, and a cancellation is never
            # swallowed (Python 3.11's wait_for loses one that meets a completing read)
            async with asyncio.timeout(timeout or self.timeout):
                payload = await frames.read_frame()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, CloseConnection) as exc:
            self.close()
            raise BrokerLinkError(f"{self.address}: {type(exc).__name__} {exc}".rstrip()) from None
        try:
            got, resp = parse_response(payload, api_key, version)
        except SchemaDecodeError as exc:
            self.close()
            raise BrokerLinkError(f"{self.address}: undecodable response: {exc}") from None
        if got != corr:
            self.close()
            raise BrokerLinkError(f"{self.address}: correlation id {got}, expected {corr}")
        return resp


class LinkPool:
    """One BrokerLink per broker for one purpose (transaction markers, KIP-890 verification):
    made on first use, replaced when the broker's endpoint changes, dropped when a request on it
    fails (the error is raised; the next request reconnects)."""

    def __init__(self, make):
        #: ``make(host, port)`` -> a new BrokerLink
        self._make = make
        self._links: dict[int, BrokerLink] = {}

    async def request(
        self, broker_id: int, endpoint: tuple[str, int], api_key: int, version: int, body: Message
    ):
        link = self._links.get(broker_id)
        if link is None or (link.host, link.port) != tuple(endpoint):
            if link is not None:
                link.close()
            link = self._links[broker_id] = self._make(*endpoint)
        try:
            return await link.request(api_key, version, body)
        except BrokerLinkError:
            link.close()
            if self._links.get(broker_id) is link:
                del self._links[broker_id]
            raise

    def close(self) -> None:
        for link in self._links.values():
            link.close()
        self._links.clear()
