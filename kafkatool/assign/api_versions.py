"""kafka-broker-api-versions.sh (Kafka 3.7's BrokerApiVersionsCommand): every broker the
cluster's Metadata lists, the ApiVersions answer it gives on a connection of its own, and for
each API the version this client would use, as NodeApiVersions.toString(true) prints it.

The client's side is kafkatool's generated protocol (protocol/apis.API_BY_KEY): the versions
its message classes read and write, the role Java's ApiKeys plays for the Java tool (3.7's
ApiKeys.latestVersion() includes an unstable last version; so does this range). An API the
broker lists and the client does not know is ``UNKNOWN(key)``; an API the client knows for a
broker's listeners (zkBroker or broker in its schema, ApiKeys.clientApis) that the broker does
not list is ``UNSUPPORTED``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kafkatool.assign.kafka_client import Connection, KafkaAdmin, KafkaAdminError
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode, exception_class

#: AdminClient.DefaultRequestTimeoutMs of BrokerApiVersionsCommand (request.timeout.ms)
DEFAULT_REQUEST_TIMEOUT_MS = 5000
#: what Kafka prints for a broker it could not reach (ConsumerNetworkClient's
#: DisconnectException.INSTANCE: a refused or lost connection, a request timeout)
DISCONNECTED = "org.apache.kafka.common.errors.DisconnectException"
#: AdminClient.awaitBrokers asks again after 50 ms while Metadata lists no broker
_AWAIT_BROKERS_BACKOFF = 0.05


@dataclass
class ApiEntry:
    """One API of a broker's answer as NodeApiVersions sees it."""

    key: int
    #: Kafka's API name, None for an API this client does not know
    name: str | None
    #: the broker's range, None when it does not list the API (UNSUPPORTED)
    min_version: int | None
    max_version: int | None
    #: usable, unsupported, unknown, node_too_new, node_too_old
    status: str
    #: the highest version both sides serve (status usable), else None
    usable: int | None

    def text(self) -> str:
        """NodeApiVersions.apiVersionToText, or the UNSUPPORTED entry of toString."""
        if self.status == "unsupported":
            return f"{self.name}({self.key}): UNSUPPORTED"
        head = f"UNKNOWN({self.key}): " if self.name is None else f"{self.name}({self.key}): "
        if self.min_version == self.max_version:
            head += str(self.min_version)
        else:
            head += f"{self.min_version} to {self.max_version}"
        if self.status == "usable":
            return f"{head} [usable: {self.usable}]"
        if self.status == "node_too_new":
            return f"{head} [unusable: node too new]"
        if self.status == "node_too_old":
            return f"{head} [unusable: node too old]"
        return head

    def to_json(self) -> dict:
        return {
            "api_key": self.key,
            "name": self.name,
            "min_version": self.min_version,
            "max_version": self.max_version,
            "status": self.status,
            "usable": self.usable,
        }


def api_entries(versions: dict[int, tuple[int, int]]) -> list[ApiEntry]:
    """NodeApiVersions of a broker's ApiVersions answer (api key -> (min, max)), by api key
    (toString's TreeMap)."""
    out: dict[int, ApiEntry] = {}
    for key, (lo, hi) in versions.items():
        info = API_BY_KEY.get(key)
        if info is None:
            out[key] = ApiEntry(key, None, lo, hi, "unknown", None)
        elif info.max_version < lo:
            out[key] = ApiEntry(key, info.name, lo, hi, "node_too_new", None)
        elif hi < info.min_version:
            out[key] = ApiEntry(key, info.name, lo, hi, "node_too_old", None)
        else:
            out[key] = ApiEntry(key, info.name, lo, hi, "usable", min(info.max_version, hi))
    for key, info in API_BY_KEY.items():
        if key not in out and ("zkBroker" in info.listeners or "broker" in info.listeners):
            out[key] = ApiEntry(key, info.name, None, None, "unsupported", None)
    return [out[k] for k in sorted(out)]


@dataclass
class BrokerVersions:
    """One broker of the Metadata answer and what its ApiVersions said (or why it did not)."""

    node_id: int
    host: str
    port: int
    rack: str | None
    apis: list[ApiEntry] | None = None
    #: Kafka's text of the failure (Throwable.toString), None when the broker answered
    error: str | None = None
    #: this client's one line on the failure (which address, what the socket said)
    reason: str | None = None

    def node_text(self) -> str:
        """Node.toString."""
        rack = "null" if self.rack is None else self.rack
        return f"{self.host}:{self.port} (id: {self.node_id} rack: {rack})"

    def kafka_text(self) -> str:
        """BrokerApiVersionsCommand's output for the broker (its trailing newline included)."""
        if self.apis is None:
            return f"{self.node_text()} -> ERROR: {self.error}\n"
        body = ",\n\t".join(e.text() for e in self.apis)
        return f"{self.node_text()} -> (\n\t{body}\n)\n"

    def to_json(self) -> dict:
        return {
            "broker": self.node_id,
            "host": self.host,
            "port": self.port,
            "rack": self.rack,
            "error": self.error,
            "reason": self.reason,
            "apis": None if self.apis is None else [e.to_json() for e in self.apis],
        }


def failure_text(exc: KafkaAdminError) -> str:
    """Throwable.toString of what Kafka's tool gets for a broker it could not ask: a failed TLS
    handshake or SASL exchange (Ssl/SaslAuthenticationException with its message), an error the
    broker answered (its exception class), else DisconnectException (the connection failed, was
    lost or timed out)."""
    from kafkatool.broker.security.client import AuthenticationError

    cause = exc.__context__  # Connection words the security layer's error and drops its chain
    if isinstance(cause, AuthenticationError):
        text = str(cause)
        kind = "Ssl" if text.startswith("SSL handshake failed") else "Sasl"
        return f"org.apache.kafka.common.errors.{kind}AuthenticationException: {text}"
    if exc.code is not None and exc.code != ErrorCode.NONE:
        return exception_class(exc.code)
    return DISCONNECTED


def await_brokers(admin: KafkaAdmin, deadline: float) -> dict[int, tuple[str, int, str | None]]:
    """AdminClient.awaitBrokers: Metadata until it lists a broker (Kafka asks forever, every 50
    ms; this asks until ``deadline``, time.monotonic())."""
    while True:
        brokers = admin.metadata(topics=[]).brokers
        if brokers:
            return brokers
        if time.monotonic() >= deadline:
            raise KafkaAdminError("the cluster's Metadata lists no broker")
        time.sleep(_AWAIT_BROKERS_BACKOFF)


def broker_versions(bootstrap: str, *, timeout: float, client_id: str) -> list[BrokerVersions]:
    """Every broker of the cluster, by node id (Kafka's order is its Cluster's shuffled node
    list), each asked on a connection of its own; an unreachable bootstrap is KafkaAdminError."""
    out = []
    with KafkaAdmin(bootstrap, timeout=timeout, client_id=client_id) as admin:
        brokers = await_brokers(admin, time.monotonic() + timeout)
        for node_id in sorted(brokers):
            host, port, rack = brokers[node_id]
            b = BrokerVersions(node_id, host, port, rack)
            try:
                conn = Connection(host, port, timeout=timeout, client_id=client_id)
            except KafkaAdminError as exc:
                b.error, b.reason = failure_text(exc), str(exc)
            else:
                try:
                    b.apis = api_entries(conn.versions)
                finally:
                    conn.close()
            out.append(b)
    return out
