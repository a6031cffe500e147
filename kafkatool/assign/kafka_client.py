"""A small blocking admin client on the project's own protocol codec.

Enough of Java's AdminClient for reassignments: bootstrap over a list of
``host:port``, ApiVersions on every connection (KIP-511 downgrade), the
highest version both sides serve for each request, Metadata for brokers,
controller and partitions, one connection per node, correlation ids checked,
and a deadline on every socket operation.  Errors are :class:`KafkaAdminError`
with Kafka's error code names, one line each.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

from kafkatool.errors import KafkatoolError
from kafkatool.formats.schema import Message, SchemaDecodeError
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.framing import encode_request, parse_response

API_VERSIONS, METADATA = 18, 3
DEFAULT_TIMEOUT = 10.0
#: an unreachable broker is given up on sooner than a slow answer
CONNECT_TIMEOUT = 5.0
CLIENT_ID = "kafkatool-reassign"
_SIZE = struct.Struct(">i")
#: versions this client fills correctly (request fields it sets exist in all of them)
CLIENT_MAX = {
    METADATA: 12,
    32: 4,  # DescribeConfigs
    44: 1,  # IncrementalAlterConfigs
    45: 0,  # AlterPartitionReassignments
    46: 0,  # ListPartitionReassignments
    34: 2,  # AlterReplicaLogDirs
    35: 4,  # DescribeLogDirs
    # consumer groups (broker/group/live.py)
    8: 8,  # OffsetCommit
    9: 7,  # OffsetFetch (v8+ batches groups)
    10: 4,  # FindCoordinator
    2: 7,  # ListOffsets
    # consume (assign/consume.py): v13+ names topics by id only
    1: 12,  # Fetch
    # a classic consumer group member (assign/group_consumer.py), as Kafka 3.7's consumer
    11: 9,  # JoinGroup
    14: 5,  # SyncGroup
    12: 4,  # Heartbeat
    13: 5,  # LeaveGroup
    15: 5,  # DescribeGroups
    16: 5,  # ListGroups
    42: 2,  # DeleteGroups
    47: 0,  # OffsetDelete
    69: 0,  # ConsumerGroupDescribe
    # ACLs (broker/security/acl_admin.py)
    29: 3,  # DescribeAcls
    30: 3,  # CreateAcls
    31: 3,  # DeleteAcls
    # the producer (assign/producer.py): Produce as Kafka 3.7's producer sends it (v3+: v2 batches)
    0: 9,  # Produce
    22: 4,  # InitProducerId
    # its transactions as Kafka 3.7's client sends them (AddPartitionsToTxn v4+ is KIP-890's
    # broker-to-broker form; EndTxn v4 is 3.8's)
    24: 3,  # AddPartitionsToTxn
    26: 3,  # EndTxn
}


#: retry.backoff.ms and retry.backoff.max.ms, the clients' defaults (KIP-580)
RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS = 100, 1000


def backoff_s(
    attempts: int, backoff_ms: float = RETRY_BACKOFF_MS, max_ms: float = RETRY_BACKOFF_MAX_MS
) -> float:
    """Kafka's clients' ExponentialBackoff(retry.backoff.ms, 2, retry.backoff.max.ms) without its
    jitter, in seconds: the wait before try ``attempts + 1`` (0: the first retry), the one rule of
    the producer's retries, the consumer's metadata refreshes and the admin calls' retries."""
    if backoff_ms >= max_ms:
        return backoff_ms / 1000
    return min(backoff_ms * 2 ** min(attempts, 40), max_ms) / 1000


class KafkaAdminError(KafkatoolError):
    """A failed admin operation; ``code`` is Kafka's error code when the broker sent one."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class RequestTimeout(KafkaAdminError):
    """No answer within the client's request timeout (Kafka's NetworkClient: request.timeout.ms,
    after which the connection is closed and the request failed)."""


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


def describe_error(code: int, message: str | None = None) -> str:
    text = error_name(code)
    return f"{text}: {message}" if message else text


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise KafkaAdminError(f"--bootstrap-server: {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise KafkaAdminError("--bootstrap-server: no host:port given")
    return out


#: TLS/SASL for every connection this process opens (Kafka's client properties, set once from
#: a command's --command-config: broker/security/client.ClientSecurity); None: PLAINTEXT
_client_security = None


def use_client_security(security) -> None:
    global _client_security
    _client_security = security


def client_security():
    """The security set by use_client_security (None: PLAINTEXT)."""
    return _client_security


@dataclass
class AdminTimeouts:
    """How long and how often Kafka's admin client asks again for a call that failed with a
    retriable error or a lost connection (KafkaAdminClient.Call.fail): until
    default.api.timeout.ms after the call was made, retry.backoff.ms doubling up to
    retry.backoff.max.ms apart (:func:`backoff_s`)."""

    api_timeout_ms: int = 60000
    backoff_ms: int = RETRY_BACKOFF_MS
    backoff_max_ms: int = RETRY_BACKOFF_MAX_MS

    def backoff(self, attempts: int) -> float:
        return backoff_s(attempts, self.backoff_ms, self.backoff_max_ms)

    def attempts(self):
        """A call's tries as Kafka's admin client makes them (KafkaAdminClient.Call): yields
        0, 1, 2, ..., the first at once and each next after :meth:`backoff`, until
        default.api.timeout.ms after the first (a try due after that is not made: the loop
        ends at the deadline). The caller breaks out on an answer it keeps."""
        import time

        deadline = time.monotonic() + self.api_timeout_ms / 1000
        attempt = 0
        while True:
            yield attempt
            if self.wait(attempt, deadline):
                return
            attempt += 1

    def wait(self, attempts: int, deadline: float) -> bool:
        """The pause after failed try ``attempts + 1`` of a call due by ``deadline``
        (time.monotonic()); True when the call timed out instead: a next try would come after the
        deadline, so it waits until then and gives up (a call times out at its deadline)."""
        import time

        pause = self.backoff(attempts)
        left = deadline - time.monotonic()
        if pause >= left:
            time.sleep(max(0.0, left))
            return True
        time.sleep(pause)
        return False


def command_config_number(name: str, kind: str, default: str) -> int:
    """A number of --command-config (INT or LONG; ``default`` where it is not set), parsed as
    the client's ConfigDef parses it (Range.atLeast(0)), refused in ConfigException's words."""
    from kafkatool.assign.client_config import parse_value

    props = _client_security.props if _client_security is not None else {}
    return parse_value(name, props.get(name, default), kind, 0)


def admin_timeouts() -> AdminTimeouts:
    """The admin client's default.api.timeout.ms, retry.backoff.ms and retry.backoff.max.ms from
    --command-config (AdminClientConfig's defaults where not set), parsed as its ConfigDef parses
    them; a default.api.timeout.ms set below request.timeout.ms is refused in Kafka's words
    (KafkaAdminClient.configureDefaultApiTimeoutMs), one not set is raised to it."""
    props = _client_security.props if _client_security is not None else {}
    get = command_config_number

    request_timeout = get("request.timeout.ms", "INT", "30000")
    api_timeout = get("default.api.timeout.ms", "INT", "60000")
    if api_timeout < request_timeout:
        if "default.api.timeout.ms" in props:
            raise KafkaAdminError(
                "The specified value of default.api.timeout.ms must be no smaller than the value of "
                "request.timeout.ms."
            )
        api_timeout = request_timeout
    return AdminTimeouts(
        api_timeout,
        get("retry.backoff.ms", "LONG", str(RETRY_BACKOFF_MS)),
        get("retry.backoff.max.ms", "LONG", str(RETRY_BACKOFF_MAX_MS)),
    )


def _connect(host: str, port: int, timeout: float, send_buffer: int, receive_buffer: int) -> socket.socket:
    """socket.create_connection, with SO_SNDBUF / SO_RCVBUF set before the connect as Kafka's
    Selector sets send.buffer.bytes / receive.buffer.bytes (-1: the OS's own, autotuned)."""
    if send_buffer < 0 and receive_buffer < 0:
        return socket.create_connection((host, port), timeout=timeout)
    last: OSError | None = None
    for family, kind, proto, _name, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            if send_buffer >= 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
            if receive_buffer >= 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last if last is not None else OSError(f"no address for {host}")


class Connection:
    """One socket to one broker, with the API versions it advertised."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float,
        client_id: str = CLIENT_ID,
        security=None,
        buffers: tuple[int, int] = (-1, -1),
    ):
        self.address = f"{host}:{port}"
        self.timeout = timeout
        self.client_id = client_id
        self._correlation = 0
        connect_timeout = min(timeout, CONNECT_TIMEOUT)
        try:
            self.sock = _connect(host, port, connect_timeout, *buffers)
        except TimeoutError:
            raise KafkaAdminError(f"{self.address}: no connection within {connect_timeout:g}s") from None
        except OSError as exc:
            raise KafkaAdminError(f"{self.address}: cannot connect: {exc.strerror or exc}") from None
        # the channel's set-up gets at least CONNECT_TIMEOUT, as Kafka's clients bound it by
        # socket.connection.setup.timeout.ms, not by a short request.timeout.ms: the TLS
        # handshake and, on a SASL connection, the authenticator's exchange (which sends the
        # ApiVersions request itself: SaslClientAuthenticator); without SASL, ApiVersions is
        # the channel's first request once it is ready, bounded by ``timeout`` as any other
        # (NetworkClient)
        security = security if security is not None else _client_security
        sasl = security is not None and security.mechanism is not None
        setup = max(timeout, CONNECT_TIMEOUT)
        self.timeout = setup
        self.sock.settimeout(setup)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.versions: dict[int, tuple[int, int]] = {}
        try:
            if security is not None:
                self.sock = security.wrap(self.sock, host)
            if not sasl:
                self.timeout = timeout
                self.sock.settimeout(timeout)
            self._negotiate()
            if security is not None:
                security.authenticate(self._roundtrip)
            self.timeout = timeout
            self.sock.settimeout(timeout)
        except KafkaAdminError:
            self.close()
            raise
        except Exception as exc:  # TLS handshake or SASL failure, as the security layer words it
            self.close()
            raise KafkaAdminError(f"{self.address}: {exc}") from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- framing ----------------------------------------------------------------------------------

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except TimeoutError:
                raise RequestTimeout(f"{self.address}: no response within {self.timeout:g}s") from None
            except OSError as exc:
                raise KafkaAdminError(f"{self.address}: connection lost: {exc.strerror or exc}") from None
            if not chunk:
                raise KafkaAdminError(f"{self.address}: the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def _send(self, api_key: int, version: int, body: Message) -> int:
        """Write one request; its correlation id."""
        self._correlation += 1
        frame = encode_request(api_key, version, self._correlation, self.client_id, body)
        try:
            self.sock.sendall(frame)
        except OSError as exc:
            raise KafkaAdminError(f"{self.address}: cannot send: {exc.strerror or exc}") from None
        return self._correlation

    def _roundtrip(self, api_key: int, version: int, body: Message, timeout: float | None = None) -> Message:
        if timeout is not None and timeout != self.timeout:
            # a request the broker may hold longer (JoinGroup: up to the rebalance timeout)
            self.sock.settimeout(timeout)
            saved, self.timeout = self.timeout, timeout
            try:
                return self._roundtrip(api_key, version, body)
            finally:
                self.timeout = saved
                try:
                    self.sock.settimeout(saved)
                except OSError:
                    pass
        return self._receive(api_key, version, self._send(api_key, version, body))

    def _receive(self, api_key: int, version: int, corr: int) -> Message:
        """The next response on the connection, which must answer request ``corr`` (a broker
        answers a connection's requests in order)."""
        (size,) = _SIZE.unpack(self._recv_exact(4))
        if size < 4:
            raise KafkaAdminError(f"{self.address}: response frame of {size} bytes")
        payload = self._recv_exact(size)
        name = API_BY_KEY[api_key].name
        try:
            try:
                got, resp = parse_response(payload, api_key, version)
            except SchemaDecodeError:
                if api_key != API_VERSIONS or version == 0:
                    raise
                # an UNSUPPORTED_VERSION answer is a v0 body whatever we asked (KIP-511), as Java reads it
                got, resp = parse_response(payload, api_key, 0)
        except SchemaDecodeError as exc:
            raise KafkaAdminError(f"{self.address}: undecodable {name} v{version} response: {exc}") from None
        if got != corr:
            raise KafkaAdminError(
                f"{self.address}: {name} response has correlation id {got}, expected {corr}"
            )
        return resp

    # -- versions ---------------------------------------------------------------------------------

    def _negotiate(self) -> None:
        """ApiVersions at our newest version; on UNSUPPORTED_VERSION retry at the broker's max (or v0)."""
        info = API_BY_KEY[API_VERSIONS]
        version = info.max_version  # the newest we know (v4, as Java 3.9+); KIP-511 downgrades
        for _ in range(3):
            req = info.request(client_software_name="kafkatool", client_software_version="1.0")
            resp = self._roundtrip(API_VERSIONS, version, req)
            if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
                entry = next((k for k in resp.api_keys or [] if k.api_key == API_VERSIONS), None)
                version = min(version - 1, entry.max_version) if entry is not None else 0
                if version < 0:
                    break
                continue
            if resp.error_code:
                raise KafkaAdminError(
                    f"{self.address}: ApiVersions failed: {describe_error(resp.error_code)}",
                    resp.error_code,
                )
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            return
        raise KafkaAdminError(f"{self.address}: no ApiVersions version in common with the broker")

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` both sides serve."""
        info = API_BY_KEY[api_key]
        ours = (info.min_version, min(info.max_version, CLIENT_MAX.get(api_key, info.max_version)))
        theirs = self.versions.get(api_key)
        if theirs is None:
            raise KafkaAdminError(
                f"{self.address}: the broker does not support {info.name} (API key {api_key})",
                ErrorCode.UNSUPPORTED_VERSION,
            )
        lo, hi = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        if lo > hi:
            raise KafkaAdminError(
                f"{self.address}: no common {info.name} version (broker {theirs[0]}-{theirs[1]}, "
                f"client {ours[0]}-{ours[1]})",
                ErrorCode.UNSUPPORTED_VERSION,
            )
        return hi

    def request(
        self, api_key: int, body: Message, version: int | None = None, timeout: float | None = None
    ) -> Message:
        """One request and its answer; ``timeout`` (seconds) replaces the connection's for it."""
        return self._roundtrip(
            api_key, self.version_for(api_key) if version is None else version, body, timeout
        )

    def send_only(self, api_key: int, body: Message, version: int | None = None) -> None:
        """A request the broker does not answer (Produce with acks=0)."""
        self._send(api_key, self.version_for(api_key) if version is None else version, body)

    def send_request(self, api_key: int, body: Message) -> tuple[int, int, int]:
        """Write a request without waiting for its answer (several in flight on the connection,
        the producer's max.in.flight.requests.per.connection); :meth:`receive` reads the answers
        in the order the requests were written."""
        version = self.version_for(api_key)
        return api_key, version, self._send(api_key, version, body)

    def receive(self, pending: tuple[int, int, int]) -> Message:
        return self._receive(*pending)


@dataclass
class PartitionInfo:
    leader: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error: int = 0


@dataclass
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, tuple[str, int, str | None]]  # id -> (host, port, rack)
    topics: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)
    #: topic -> (topic id as text or None, is_internal) where the Metadata version carries them
    topic_info: dict[str, tuple[str | None, bool]] = field(default_factory=dict)

    def assignment(self) -> dict[tuple[str, int], list[int]]:
        return {(t, p): list(i.replicas) for t, parts in self.topics.items() for p, i in parts.items()}


class KafkaAdmin:
    """Bootstrap + one connection per node id; use as a context manager."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        client_id: str = CLIENT_ID,
        buffers: tuple[int, int] = (-1, -1),
    ):
        """``timeout``: the wait for an answer (seconds); ``buffers``: every connection's
        (send.buffer.bytes, receive.buffer.bytes), -1 the OS's."""
        self.servers = parse_bootstrap(bootstrap)
        self.timeout = timeout
        self.client_id = client_id
        self.buffers = buffers
        self._bootstrap: Connection | None = None
        self._nodes: dict[int, Connection] = {}
        self._meta: ClusterMetadata | None = None

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for c in {id(c): c for c in [self._bootstrap, *self._nodes.values()] if c is not None}.values():
            c.close()
        self._nodes.clear()
        self._bootstrap = None

    def _any(self) -> Connection:
        if self._bootstrap is not None:
            return self._bootstrap
        errors = []
        for host, port in self.servers:
            try:
                self._bootstrap = Connection(
                    host, port, timeout=self.timeout, client_id=self.client_id, buffers=self.buffers
                )
                return self._bootstrap
            except KafkaAdminError as exc:
                errors.append(str(exc))
        raise KafkaAdminError("no bootstrap server reachable: " + "; ".join(errors))

    def node(self, node_id: int) -> Connection:
        conn = self._nodes.get(node_id)
        if conn is not None:
            return conn
        meta = self.metadata_cached()
        if node_id not in meta.brokers:
            raise KafkaAdminError(f"broker {node_id} is not in the cluster metadata")
        host, port, _rack = meta.brokers[node_id]
        boot = self._any()
        if boot.address == f"{host}:{port}":
            conn = boot
        else:
            conn = Connection(
                host, port, timeout=self.timeout, client_id=self.client_id, buffers=self.buffers
            )
        self._nodes[node_id] = conn
        return conn

    def forget(self, node_id: int | None) -> None:
        """Close and drop the connection to ``node_id`` (None: the bootstrap connection) after it
        failed; the next request connects again."""
        conn = self._bootstrap if node_id is None else self._nodes.pop(node_id, None)
        if conn is None:
            return
        if conn is self._bootstrap:
            self._bootstrap = None
        for n, c in list(self._nodes.items()):
            if c is conn:
                del self._nodes[n]
        conn.close()

    def controller(self) -> Connection:
        """The node Java's admin sends controller requests to (Metadata's controller_id)."""
        meta = self.metadata_cached()
        if meta.controller_id < 0:
            raise KafkaAdminError(
                "the cluster reports no controller (controller_id -1)", ErrorCode.NOT_CONTROLLER
            )
        return self.node(meta.controller_id)

    def request(
        self, api_key: int, body: Message, node_id: int | None = None, timeout: float | None = None
    ) -> Message:
        conn = self._any() if node_id is None else self.node(node_id)
        return conn.request(api_key, body, timeout=timeout)

    def request_until(
        self, api_key: int, body: Message, node_id: int, deadline: float, timeouts: AdminTimeouts
    ) -> Message:
        """A request to one node (Kafka's ConstantNodeIdProvider) asked again, as the admin client
        asks, while the node cannot be reached (a broker just killed that the metadata still
        names) or is not in the metadata (refreshed before each try), until ``deadline``
        (time.monotonic(): the call's default.api.timeout.ms) with ``timeouts``' backoff; then
        one line naming the call, its tries and the last failure. An answer with an error code
        is the caller's."""
        name = API_BY_KEY[api_key].name
        tries = 0
        while True:
            tries += 1
            try:
                return self.request(api_key, body, node_id)
            except KafkaAdminError as exc:
                if exc.code is not None:
                    raise
                last = exc
            self.forget(node_id)
            if timeouts.wait(tries - 1, deadline):
                raise KafkaAdminError(
                    f"{name} at broker {node_id}: timed out after {tries} attempt(s) "
                    f"(default.api.timeout.ms {timeouts.api_timeout_ms}): {last}"
                )
            try:
                self.metadata(topics=[], keep=True)
            except KafkaAdminError:
                self.forget(None)  # the bootstrap connection failed too: another server next time

    # -- Metadata ---------------------------------------------------------------------------------

    def metadata_cached(self) -> ClusterMetadata:
        return self._meta if self._meta is not None else self.metadata()

    def metadata(
        self, topics: list[str] | None = None, *, keep: bool = False, auto_create: bool = False
    ) -> ClusterMetadata:
        """Brokers, controller and (all or the named) topics; auto-creates only with
        ``auto_create`` (a producer's request, allow.auto.create.topics). The answer for all
        topics, or with ``keep`` for the named ones, becomes metadata_cached()'s."""
        conn = self._any()
        version = conn.version_for(METADATA)
        info = API_BY_KEY[METADATA]
        from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic

        if topics is None:
            wanted = [] if version == 0 else None
        else:
            wanted = [MetadataRequestTopic(name=t) for t in topics]
        req = info.request(topics=wanted, allow_auto_topic_creation=auto_create)
        resp = conn.request(METADATA, req, version)
        meta = ClusterMetadata(
            cluster_id=resp.cluster_id,
            controller_id=resp.controller_id if version >= 1 else -1,
            brokers={b.node_id: (b.host, b.port, b.rack) for b in resp.brokers},
        )
        if version == 0 and meta.brokers:
            meta.controller_id = min(meta.brokers)  # v0 has no controller id: any broker forwards
        for t in resp.topics:
            if t.error_code:
                meta.topic_errors[t.name] = t.error_code
                continue
            tid = getattr(t, "topic_id", None)
            if tid is not None and version >= 10 and any(tid.bytes):
                from kafkatool.formats.uuid import Uuid

                tid = str(Uuid(tid.bytes))  # Kafka's base64 form
            else:
                tid = None
            meta.topic_info[t.name] = (
                tid,
                bool(getattr(t, "is_internal", False)) if version >= 1 else t.name.startswith("__"),
            )
            meta.topics[t.name] = {
                p.partition_index: PartitionInfo(
                    p.leader_id,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    list(p.offline_replicas or []),
                    p.error_code,
                )
                for p in t.partitions
            }
        if topics is None or keep:
            self._meta = meta
        elif self._meta is None:
            self._meta = meta
        return meta


#: DescribeConfigs config_source codes that mean "set for this topic" / "set on a broker"
CONFIG_SOURCE_TOPIC = 1
CONFIG_SOURCES_BROKER = (2, 3, 4)
CONFIG_SOURCE_DEFAULT = 5


#: v0's reading of a value not at its default, by resource type (Kafka's client: a broker's is
#: STATIC_BROKER_CONFIG, a topic's TOPIC_CONFIG, any other UNKNOWN)
_V0_SET_SOURCE = {4: 4, 2: CONFIG_SOURCE_TOPIC}


def config_source(entry, version: int, resource_type: int) -> int:
    """A DescribeConfigs entry's config_source. v0 has none, only is_default; it is derived as
    Kafka's client derives it (DescribeConfigsResponse's v0 constructor): DEFAULT_CONFIG (5) if
    is_default, else by ``resource_type`` (the result's): broker 4, topic 1, other 0."""
    if version >= 1:
        return entry.config_source
    return CONFIG_SOURCE_DEFAULT if entry.is_default else _V0_SET_SOURCE.get(resource_type, 0)


def describe_topic_configs(admin: KafkaAdmin, topics: list[str]) -> dict[str, dict[str, tuple[str, int]]]:
    """``{topic: {config: (value, config_source)}}`` for the values not at Kafka's default.

    A topic the cluster does not know is left out; any other error raises KafkaAdminError.
    """
    from kafkatool.protocol.generated.describe_configs_request import DescribeConfigsResource

    if not topics:
        return {}
    conn = admin._any()
    version = conn.version_for(32)
    req = API_BY_KEY[32].request(
        resources=[
            DescribeConfigsResource(resource_type=2, resource_name=t, configuration_keys=None) for t in topics
        ]
    )
    resp = conn.request(32, req, version)
    out: dict[str, dict[str, tuple[str, int]]] = {}
    for res in resp.results:
        if res.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            continue
        if res.error_code:
            raise KafkaAdminError(
                f"DescribeConfigs topic {res.resource_name}: {describe_error(res.error_code, res.error_message)}",
                res.error_code,
            )
        configs = {}
        for c in res.configs:
            source = config_source(c, version, res.resource_type)
            if c.value is not None and (source == CONFIG_SOURCE_TOPIC or source in CONFIG_SOURCES_BROKER):
                configs[c.name] = (c.value, source)
        out[res.resource_name] = configs
    return out


def describe_configs(admin: KafkaAdmin, resource_type: int, names) -> dict[str, dict[str, tuple[str, int]]]:
    """DescribeConfigs of resources of one type (2 topic, 4 broker): {name: {key: (value, source)}}
    with every value the broker reports (defaults included); an error raises KafkaAdminError."""
    from kafkatool.protocol.generated.describe_configs_request import DescribeConfigsResource

    names = list(names)
    out = {}
    # a broker answers for itself only (ConfigHelper): each broker id goes to that broker, as
    # Kafka's AdminClient sends it; topics (and the cluster default "") to any broker
    groups: dict[int | None, list[str]] = {}
    for n in names:
        groups.setdefault(config_node(resource_type, n), []).append(n)
    for node, group in groups.items():
        req = API_BY_KEY[32].request(
            resources=[
                DescribeConfigsResource(resource_type=resource_type, resource_name=n, configuration_keys=None)
                for n in group
            ]
        )
        conn = admin._any() if node is None else admin.node(node)
        version = conn.version_for(32)
        resp = conn.request(32, req, version)
        for r in resp.results:
            if r.error_code:
                raise KafkaAdminError(
                    f"DescribeConfigs {r.resource_name}: {describe_error(r.error_code, r.error_message)}",
                    r.error_code,
                )
            out[r.resource_name] = {
                c.name: (c.value, config_source(c, version, r.resource_type))
                for c in r.configs
                if c.value is not None
            }
    return out


def config_node(resource_type: int, name: str) -> int | None:
    """The broker a config request about a resource must reach (KafkaAdminClient's node
    provider): a BROKER (4) or BROKER_LOGGER (8) resource named by an id, that broker; else any."""
    if resource_type in (4, 8) and name.strip().isdigit():
        return int(name)
    return None
