"""One broker of several processes (``kafkatool.processes`` = N > 1; issue 16, every core).

Request handling is one asyncio thread holding the GIL, so one process uses one core. With
``kafkatool.processes`` = N a standalone ``serve`` runs N processes on the same log dirs, and
clients see them as N brokers of one cluster with replication factor 1 (the only way Kafka's
protocol lets a client reach a partition's owner directly):

* the **primary** (the process ``serve`` started; node id ``node.id``) holds the dirs' locks
  and clean-shutdown markers, the embedded metadata (the one writer of
  ``kafkatool-cluster.json``), the group and transaction coordinators, every internal topic
  and its share of the other partitions, and writes the offset checkpoint files, folding in
  the other processes' entries (``LogManager.merge_entries``);
* each **member** k (node id ``node.id + k``; on the listeners' hosts at each port + k x
  ``kafkatool.processes.port.step``, advertised the same way, a port of 0 staying ephemeral;
  every line it logs carries ``process=k``) owns the
  partitions :func:`owner_index` gives it: it loads (and after a crash recovers) them, serves
  Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers,
  DescribeLogDirs and AlterReplicaLogDirs for them, runs their retention, cleaner and
  checkpoints (handed to the primary), and forwards every other request, with the client's
  principal, to the primary (Kafka's KIP-590 forwarding, over the processes' channel).

The channel is a socket pair per member carrying length-prefixed pickles: the metadata
(every save of the primary's store, with a sequence number the member acknowledges once it
has created or deleted its logs), the process table (each process's endpoints), checkpoint
entries, and calls in both directions: a Kafka request frame in, its response frame out
(forwarded requests; WriteTxnMarkers from the transaction coordinator to the owner of a
partition; AddPartitionsToTxn VerifyOnly from a partition's owner to the coordinator, KIP-890).
A partition shows a leader in Metadata only once its owner has acknowledged the metadata
that made it.

A member that dies is restarted (one warning line with its exit status): while it is down its
node leaves Metadata and its partitions have no leader (a dead broker's with replication
factor 1: clients retry) and get a new leader epoch; the new process recovers them as after an unclean shutdown, deletes
the logs of topics deleted meanwhile, hands its recovered checkpoint entries over (they
replace the dead process's last ones, which are older than its logs and never ahead of them)
and shows again once it listens with the current metadata, leading its partitions at another
new leader epoch (Kafka's controller bumps the epoch when a partition's leader goes offline
and again when it elects the returning broker), which their logs record from their log end
offset as a leader of a cluster does (``Log.become_leader``). More deaths than
``kafkatool.processes.restarts.max`` within ``kafkatool.processes.restarts.window.ms`` stop
the broker (exit 1, no clean-shutdown marker; every process's partitions recover at the next
start). The marker is written only when every member's current process stopped cleanly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field

from kafkatool.broker import loggers
from kafkatool.broker.metadata import INTERNAL_TOPICS
from kafkatool.broker.metrics import LISTENER_CONFIG as METRICS_LISTENER_CONFIG
from kafkatool.broker.metrics import parse_listener, process_listener
from kafkatool.broker.security.acl import PROCESS_PRINCIPAL
from kafkatool.errors import KafkatoolError

log = logging.getLogger("kafkatool.broker")

PROCESSES_CONFIG = "kafkatool.processes"
#: process k listens on (and advertises) each port + k x step
PORT_STEP_CONFIG = "kafkatool.processes.port.step"
RESTARTS_MAX_CONFIG = "kafkatool.processes.restarts.max"
RESTARTS_WINDOW_CONFIG = "kafkatool.processes.restarts.window.ms"
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})
#: what a member answers itself; every other API is forwarded to the primary
LOCAL_APIS = frozenset(
    {
        0,  # Produce
        1,  # Fetch
        2,  # ListOffsets
        17,  # SaslHandshake
        18,  # ApiVersions
        21,  # DeleteRecords
        23,  # OffsetForLeaderEpoch
        27,  # WriteTxnMarkers (from the coordinator, the primary)
        34,  # AlterReplicaLogDirs
        35,  # DescribeLogDirs
        36,  # SaslAuthenticate
        61,  # DescribeProducers
    }
)
_LEN = struct.Struct(">I")
#: how long the primary waits for its members to load their partitions and listen
START_TIMEOUT_S = 600.0
#: how long a member may take to stop (flush, close, hand over its last checkpoints)
STOP_TIMEOUT_S = 120.0
#: how long an answer to a change of the metadata waits for every process to apply it
APPLIED_TIMEOUT_S = 10.0


def owner_index(topic: str, partition: int, count: int) -> int:
    """Which process of ``count`` owns a partition: the primary (0) every internal topic
    (the coordinators' logs), the others spread by topic and partition (a stable rule: the
    same dirs give the same owners at every start with the same count)."""
    if count <= 1 or topic in INTERNAL_TOPICS:
        return 0
    return (zlib.crc32(topic.encode()) + partition) % count


def once_applied(broker, answer):
    """``answer``, to a request that changed the broker's metadata (ACLs, SCRAM credentials):
    on the primary of a broker of several processes, once every process has applied the
    change (bounded by APPLIED_TIMEOUT_S; the change is made either way), so that it holds on
    every process, as on a broker of one, when the client learns it is made; else at once."""
    group = broker.processes
    if group is None or not group.is_primary:
        return answer

    async def applied():
        await group.settled(APPLIED_TIMEOUT_S)
        return answer

    return applied()


def process_listeners(listeners: list, index: int, step: int) -> list:
    """Process ``index``'s listeners (or advertised listeners): each port + index x step; a port
    of 0 stays 0 (an ephemeral port, advertised as bound)."""
    return [dataclasses.replace(lst, port=lst.port + index * step if lst.port else 0) for lst in listeners]


def check_ports(config, count: int) -> None:
    """Refuse (ConfigError) a port rule that gives a process a port outside 1-65535 or one
    another process listens on or advertises (a wildcard host meets every host)."""
    from kafkatool.broker.config import ConfigError

    step = config.int(PORT_STEP_CONFIG)
    if step < 1:
        raise ConfigError(f"{PORT_STEP_CONFIG}={step}: must be at least 1")
    for what, lsts in (
        ("listeners", config.listeners),
        ("advertised.listeners", config.advertised_listeners),
    ):
        taken: list[tuple[str, int, int, str]] = []
        for k in range(count):
            for lst in process_listeners(lsts, k, step):
                if not lst.port:
                    continue
                rule = f"{lst.port - k * step} + {k} x {PORT_STEP_CONFIG} {step}"
                if lst.port > 65535:
                    raise ConfigError(
                        f"{what}: process {k}'s {lst.name} port would be {lst.port} ({rule}), above 65535"
                    )
                for host, port, j, name in taken:
                    if j != k and port == lst.port and (host == lst.host or {host, lst.host} & _WILDCARDS):
                        raise ConfigError(
                            f"{what}: process {k}'s {lst.name} port {lst.port} ({rule}) is process {j}'s "
                            f"{name} port too (with {PROCESSES_CONFIG}={count}, choose a step that keeps "
                            "the processes' ports apart)"
                        )
                taken.append((lst.host, lst.port, k, lst.name))
        if what == "listeners" and config.get(METRICS_LISTENER_CONFIG):
            # the Prometheus endpoints move by the same step and may meet no listener's port
            host, port = parse_listener(config.get(METRICS_LISTENER_CONFIG))
            for k in range(count):
                if not port:
                    break
                p = port + k * step
                if p > 65535:
                    raise ConfigError(
                        f"{METRICS_LISTENER_CONFIG}: process {k}'s port would be {p}, above 65535"
                    )
                for lhost, lport, j, name in taken:
                    if lport == p and (lhost == host or {lhost, host} & _WILDCARDS):
                        raise ConfigError(
                            f"{METRICS_LISTENER_CONFIG}: process {k}'s port {p} is process {j}'s {name} port too"
                        )


class ChannelClosed(KafkatoolError, ConnectionError):
    """The other process of the broker is gone."""


class Channel:
    """Messages (tuples) between two processes of one broker; ``call`` sends a Kafka request
    frame and waits for the answer; incoming messages go to ``on_message`` and incoming calls
    to ``on_call`` (a coroutine giving (kind, payload))."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, on_message, on_call):
        self.reader, self.writer = reader, writer
        self.on_message, self.on_call = on_message, on_call
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._tasks: set[asyncio.Task] = set()
        self.closed = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()

    def send(self, *msg) -> None:
        """Send a message (from any thread: another one's go through the event loop, in order)."""
        if self.closed.is_set():
            raise ChannelClosed("the other process is gone")
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        if threading.get_ident() == self._thread:
            self.writer.write(_LEN.pack(len(data)) + data)
        else:
            self._loop.call_soon_threadsafe(self._write_if_open, _LEN.pack(len(data)) + data)

    def _write_if_open(self, data: bytes) -> None:
        if not self.closed.is_set():
            self.writer.write(data)

    async def call(self, frame: bytes, who: dict, timeout: float | None = None):
        """(kind, payload) of the other process's answer to a request frame: ("bytes", frame),
        ("none", None) or ("close", reason)."""
        cid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = fut
        try:
            self.send("call", cid, bytes(frame), who)
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(cid, None)

    async def run(self) -> None:
        try:
            while True:
                head = await self.reader.readexactly(_LEN.size)
                msg = pickle.loads(await self.reader.readexactly(_LEN.unpack(head)[0]))
                kind = msg[0]
                if kind == "reply":
                    fut = self._pending.get(msg[1])
                    if fut is not None and not fut.done():
                        fut.set_result((msg[2], msg[3]))
                elif kind == "call":
                    task = asyncio.ensure_future(self._answer(msg[1], msg[2], msg[3]))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                else:
                    try:
                        self.on_message(msg)
                    except Exception:
                        # e.g. a checkpoint the disk refused: logged, and the next one tries
                        # again, as in a broker of one process; the channel goes on
                        log.exception(
                            "handling a %r message from another process of this broker failed", kind
                        )
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self.closed.set()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ChannelClosed("the other process is gone"))

    async def _answer(self, cid: int, frame: bytes, who: dict) -> None:
        try:
            kind, payload = await self.on_call(frame, who)
        except Exception as exc:  # the handler's own failure was logged where it happened
            kind, payload = "close", f"internal error: {exc}"
        try:
            self.send("reply", cid, kind, payload)
        except ChannelClosed:
            pass

    async def drain(self) -> None:
        await self.writer.drain()

    def close(self) -> None:
        self.writer.close()


class _Caller:
    """The connection a call from another process is handled on: the client's principal,
    listener and address (forwarded requests) or the processes' own principal."""

    sasl = None
    produce_appended = None
    tls = False

    def __init__(self, broker, who: dict):
        self.principal = who.get("principal") or PROCESS_PRINCIPAL
        self.token_authenticated = bool(who.get("token_authenticated"))
        name = who.get("listener")
        self.listener = next((lst for lst in broker.config.listeners if lst.name == name), None)
        self.peer = who.get("peer") or "127.0.0.1:0"
        self.client_id = who.get("client_id")
        self.last_active = 0.0


async def answer_call(broker, frame: bytes, who: dict):
    """Handle a request frame from another process of this broker: (kind, payload)."""
    from kafkatool.broker.network import AfterWrite, CloseConnection, Parts

    conn = _Caller(broker, who)
    try:
        result = broker.router.dispatch(conn, bytearray(frame))
        if type(result) is AfterWrite:  # a produce answer held until written
            result = result.answer()
        if asyncio.isfuture(result) or asyncio.iscoroutine(result):
            result = await result
    except CloseConnection as exc:
        return "close", str(exc)
    if result is None:
        return "none", None
    if type(result) is Parts:
        data = b"".join(
            p if isinstance(p, bytes | bytearray | memoryview) else p.read_bytes() for p in result
        )
        result.close()
        return "bytes", data
    return "bytes", bytes(result)


def who_of(conn) -> dict:
    lst = getattr(conn, "listener", None)
    return {
        "principal": getattr(conn, "principal", None),
        "token_authenticated": getattr(conn, "token_authenticated", False),
        "listener": getattr(lst, "name", None),
        "peer": getattr(conn, "peer", None),
        "client_id": getattr(conn, "client_id", None),
    }


class _Links:
    """ReplicaManager's ``marker_links``/``verify_links`` for processes of one broker: a
    Kafka request to a node, over the channel to that process."""

    def __init__(self, group):
        self.group = group

    async def request(self, node: int, _endpoint, api_key: int, version: int, req, timeout: float = 30.0):
        from kafkatool.broker.cluster.client import BrokerLinkError
        from kafkatool.protocol.framing import encode_request, parse_response

        channel = self.group.channel_to(node)
        if channel is None:
            raise BrokerLinkError(f"no process of this broker is node {node}")
        frame = bytes(encode_request(api_key, version, 1, f"broker-{self.group.node_id}", req))[4:]
        try:
            kind, payload = await channel.call(frame, {"principal": PROCESS_PRINCIPAL}, timeout)
        except (ChannelClosed, TimeoutError) as exc:
            raise BrokerLinkError(f"node {node}: {exc or type(exc).__name__}") from None
        if kind != "bytes":
            raise BrokerLinkError(f"node {node} answered {kind}: {payload}")
        return parse_response(memoryview(payload)[4:], api_key, version)[1]  # after the size


@dataclass
class _Member:
    index: int
    proc: subprocess.Popen | None = None
    channel: Channel | None = None
    endpoints: dict[str, tuple[str, int]] | None = None
    acked: int = 0
    stopped_clean: bool = False
    #: listening with the metadata sent so far (cleared while it is dead and restarting)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None
    #: the primary's end of the socket pair, until the channel is made on the event loop
    sock: socket.socket | None = None
    #: a restart is connecting its channel (stop waits for it)
    connecting: asyncio.Future | None = None
    #: restarted: its partitions have no leader until it has applied the metadata of its
    #: election (``elected``: held, once it listened with the metadata sent so far)
    returning: bool = False
    elected: bool = False


class ProcessGroup:
    """The processes of one broker as either side sees them: ownership, the node ids and
    endpoints clients are told, the questions ReplicaManager answers in cluster mode
    (``leader_of``, ``is_leader``, ``endpoint``, ``marker_links``/``verify_links``)."""

    def __init__(self, broker, count: int, index: int, base_node: int):
        self.broker = broker
        self.count = count
        self.index = index
        self.base_node = base_node
        self.node_id = base_node + index
        #: process index -> {listener name: (host, port)}
        self.table: dict[int, dict[str, tuple[str, int]]] = {}
        self.marker_links = self.verify_links = _Links(self)

    @property
    def is_primary(self) -> bool:
        return self.index == 0

    def owns(self, tp: tuple[str, int]) -> bool:
        return owner_index(tp[0], tp[1], self.count) == self.index

    def owner_node(self, topic: str, partition: int) -> int:
        return self.base_node + owner_index(topic, partition, self.count)

    def nodes(self) -> list[int]:
        return [self.base_node + k for k in range(self.count)]

    def endpoint(self, node: int, listener: str | None) -> tuple[str, int] | None:
        eps = self.table.get(node - self.base_node)
        if not eps:
            return None
        name = listener or next(iter(eps))
        return eps.get(name)

    # ReplicaManager's questions (transaction markers and verification use them)
    def leader_of(self, topic: str, partition: int) -> tuple[int, int]:
        t = self.broker.topic(topic)
        if t is None:
            return -1, -1
        return self.leader_node(topic, partition), t.leader_epoch(partition)

    def is_leader(self, topic: str, partition: int) -> bool:
        return self.owns((topic, partition)) and self.broker.get_log(topic, partition) is not None

    async def await_log_end(self, _tp, _timeout_ms: int) -> bool:
        return True  # replication factor 1: the append is the log end

    def leader_error(self, topic: str, partition: int) -> int | None:
        from kafkatool.protocol.errors import ErrorCode

        if self.owns((topic, partition)):
            return None
        t = self.broker.topic(topic)
        if t is None or partition >= t.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NOT_LEADER_OR_FOLLOWER

    def leader_node(self, topic: str, partition: int) -> int:
        raise NotImplementedError

    def channel_to(self, node: int) -> Channel | None:
        raise NotImplementedError

    # failed log dirs: the processes share the dirs, so a dir one finds failed is failed for all
    def tell_dir_failed(self, log_dir, why: str, gone: list, origin: int | None) -> None:
        """This process took ``log_dir`` offline (``gone``: its partitions there; ``origin``:
        the process that told it, None when it found the failure): tell the others."""
        raise NotImplementedError

    def partitions_offline(self, origin: int, gone: list) -> None:
        """Process ``origin``'s partitions ``gone`` are on a failed dir."""


class Primary(ProcessGroup):
    """The process ``serve`` started: spawns the members, tells them the metadata, writes
    their checkpoint entries, answers their forwarded requests, restarts a member that dies."""

    def __init__(self, broker, count: int):
        super().__init__(broker, count, 0, broker.node_id)
        self.members = {k: _Member(k) for k in range(1, count)}
        self.seq = 0
        #: topic -> the metadata sequence number its current form (id, partitions) first had
        self.topic_seq: dict[str, int] = {}
        self._last_form: dict[str, tuple] = {}
        #: (sequence number, topic, topic id) of every topic deleted (or made again under its
        #: name) since the sequence number some member acknowledged last: a member restarted
        #: after it died deletes its logs of them
        self._deleted: list[tuple[int, str, str]] = []
        self.failed: str | None = None
        self._stopping = False
        self._started = False
        #: the members' partitions on failed dirs: no leader in Metadata (HostedPartition.Offline)
        self.offline: set[tuple[str, int]] = set()
        cfg = broker.config
        self.restarts_max = cfg.int(RESTARTS_MAX_CONFIG)
        self.restarts_window_s = cfg.int(RESTARTS_WINDOW_CONFIG) / 1000
        if self.restarts_max < 0 or self.restarts_window_s <= 0:
            from kafkatool.broker.config import ConfigError

            raise ConfigError(
                f"{RESTARTS_MAX_CONFIG} must be at least 0 and {RESTARTS_WINDOW_CONFIG} at least 1 "
                f"(given {self.restarts_max} and {cfg.get(RESTARTS_WINDOW_CONFIG)})"
            )
        #: monotonic times of the members' deaths within the window
        self._deaths: list[float] = []

    def leader_node(self, topic: str, partition: int) -> int:
        k = owner_index(topic, partition, self.count)
        if k == 0:
            return self.node_id if self.broker.get_log(topic, partition) is not None else -1
        m = self.members[k]
        if m.endpoints is None or m.returning or m.acked < self.topic_seq.get(topic, 0) or self.failed:
            return -1
        if (topic, partition) in self.offline:
            return -1
        return self.base_node + k

    def tell_dir_failed(self, log_dir, why: str, gone: list, origin: int | None) -> None:
        """Every member but ``origin`` takes the dir offline too."""
        for m in self.members.values():
            if m.index != origin and m.channel is not None and not m.channel.closed.is_set():
                m.channel.send("dir_failed", str(log_dir), why, [])

    def partitions_offline(self, origin: int, gone: list) -> None:
        self.offline.update((t, p) for t, p in gone)

    def channel_to(self, node: int) -> Channel | None:
        m = self.members.get(node - self.base_node)
        return None if m is None else m.channel

    # ------------------------------------------------------------------ start
    def spawn(self, clean_shutdown: dict[str, bool]) -> None:
        """Start the members, once this process's storage is open (they load their partitions
        while this process starts listening)."""
        for m in self.members.values():
            self._spawn(m, clean_shutdown, {})

    def _spawn(
        self, m: _Member, clean_shutdown: dict[str, bool], deleted: dict[str, str], restart: bool = False
    ) -> None:
        ours, theirs = socket.socketpair()
        args = {
            "index": m.index,
            "count": self.count,
            "base_node": self.base_node,
            "fd": theirs.fileno(),
            "config": {
                "explicit": self.broker.config.explicit,
                "dynamic": self.broker.config.dynamic,
                "dynamic_default": self.broker.config.dynamic_default,
            },
            "clean_shutdown": clean_shutdown,
            "deleted": deleted,
            "restart": restart,
            # the dirs this broker found failed: the member does not open them
            "offline": {str(d): why for d, why in self.broker.manager.offline_dirs.items()},
        }
        try:
            m.proc = subprocess.Popen(
                [sys.executable, "-m", "kafkatool.broker.processes", json.dumps(args)],
                pass_fds=(theirs.fileno(),),
                # a terminal's Ctrl-C reaches the primary only, which stops the members in order
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        m.sock = ours

    async def start(self) -> None:
        """Once this process listens: connect the channels, send the metadata, wait until
        every member has loaded, listens and has the metadata."""
        for m in self.members.values():
            await self._connect(m)
            m.task = asyncio.ensure_future(self._watch(m))
        self.table[0] = self._own_endpoints()
        self.broker.metadata.on_save.append(self.push_metadata)
        self.push_metadata()
        waits = [asyncio.ensure_future(m.ready.wait()) for m in self.members.values()]
        done, pending = await asyncio.wait(waits, timeout=START_TIMEOUT_S)
        for w in pending:
            w.cancel()
        if self.failed or pending:
            raise OSError(self.failed or "a process of this broker did not start in time")
        self._started = True
        self._push_table()

    async def _connect(self, m: _Member) -> None:
        reader, writer = await asyncio.open_unix_connection(sock=m.sock)
        m.sock = None
        m.channel = Channel(
            reader,
            writer,
            lambda msg, m=m: self._on_message(m, msg),
            lambda frame, who: answer_call(self.broker, frame, who),
        )
        for d, why in self.broker.manager.offline_dirs.items():
            m.channel.send("dir_failed", str(d), why, [])  # one that failed since the spawn

    def _own_endpoints(self) -> dict[str, tuple[str, int]]:
        b = self.broker
        return {lst.name: b._endpoint(lst) for lst in b.config.advertised_listeners}

    async def _watch(self, m: _Member) -> None:
        """Each life of member ``m``: when it dies after the broker started, it is restarted
        (:meth:`_restart`) unless members died more than ``restarts_max`` times within the
        window; then, or when it dies while the broker starts, the broker stops (exit 1)."""
        loop = asyncio.get_running_loop()
        while True:
            await m.channel.run()
            m.channel.close()  # its end of the socket pair (a restart makes a new pair)
            code = await loop.run_in_executor(None, m.proc.wait)
            if self._stopping:
                return
            died = (
                f"process {m.index} of this broker (node {self.base_node + m.index}) exited ({_status(code)})"
            )
            now = time.monotonic()
            self._deaths = [t for t in self._deaths if now - t < self.restarts_window_s] + [now]
            if self._started and len(self._deaths) <= self.restarts_max:
                log.warning(
                    "%s; restarting it, its partitions recover restart=%d restarts_max=%d window_ms=%d",
                    died,
                    len(self._deaths),
                    self.restarts_max,
                    int(self.restarts_window_s * 1000),
                )
                try:
                    await self._restart(m)
                    continue
                except Exception as exc:  # e.g. no fork: the broker stops rather than run without it
                    died = f"{died}; restarting it failed: {exc!r}"
            elif self._started:
                died = f"{died}, {len(self._deaths)} deaths within {self.restarts_window_s * 1000:.0f} ms"
            self.failed = died
            log.error("%s; the broker stops", self.failed)
            m.ready.set()
            self.broker.request_stop(failed=True)
            return

    async def _restart(self, m: _Member) -> None:
        """Member ``m`` died: clients no longer see its node (its partitions have no leader,
        as a dead broker's with replication factor 1), and a new process takes its place. It
        recovers the partitions as after an unclean shutdown, deletes the logs of the topics
        deleted since it last acknowledged the metadata, hands its checkpoint entries over
        (replacing the dead process's last ones) and is shown again once it listens with the
        current metadata. This process's entries of its partitions meanwhile are the dead
        process's last hand-over: older than its logs, never ahead of them."""
        m.ready.clear()
        m.endpoints = None
        m.stopped_clean = False
        self.table.pop(m.index, None)
        self._push_table()
        deleted: dict[str, str] = {}
        for seq, name, topic_id in self._deleted:
            if seq > m.acked:
                deleted.setdefault(name, topic_id)  # the oldest: the one its logs may have
        m.acked = 0
        m.returning, m.elected = True, False
        # leader -1 at a new epoch, as Kafka's controller gives the partitions of a broker
        # that went offline (OfflineReplica): clients holding the old epoch refresh their metadata
        self._new_leader_epochs(m)
        unclean = dict.fromkeys((str(d) for d in self.broker.manager.dirs), False)
        self._spawn(m, unclean, deleted, restart=True)
        m.connecting = asyncio.get_running_loop().create_future()
        try:
            await self._connect(m)
        finally:
            m.connecting.set_result(None)
            m.connecting = None
        self._send_metadata(m)

    def _new_leader_epochs(self, m: _Member) -> None:
        """Leader epoch + 1 for every partition member ``m`` owns (saved: the metadata goes to
        the members)."""
        md = self.broker.metadata
        for name, t in md.topics.items():
            for p in range(t.partitions):
                if owner_index(name, p, self.count) == m.index:
                    t.leader_epochs[p] = t.leader_epoch(p) + 1
        md.save()

    # ------------------------------------------------------------------ messages
    def _on_message(self, m: _Member, msg: tuple) -> None:
        kind = msg[0]
        if kind == "hello":
            m.endpoints = msg[1]
            self.table[m.index] = m.endpoints
        elif kind == "applied":
            m.acked = max(m.acked, msg[1])
            if m.endpoints is not None and m.acked >= self.seq and not m.ready.is_set():
                if m.returning and not m.elected:
                    # it listens with the current metadata: it leads its partitions again at
                    # a new epoch (Kafka's controller elects a leader for the partitions of a
                    # broker that came back, OfflinePartition -> OnlinePartition), which its
                    # logs record from their log end offset; it shows once it has that epoch
                    m.elected = True
                    self._new_leader_epochs(m)
                    return
                m.returning = False
                m.ready.set()
                if self._started:
                    log.info(
                        "process %d of this broker (node %d) is back listeners=%s",
                        m.index,
                        self.base_node + m.index,
                        ",".join(f"{h}:{p}" for h, p in m.endpoints.values()),
                    )
                    self._push_table()
        elif kind == "checkpoint":
            _, log_dir, name, entries, now = msg
            k = m.index
            self.broker.manager.merge_entries(
                log_dir, name, entries, lambda tp: owner_index(tp[0], tp[1], self.count) == k, now=now
            )
        elif kind == "stopped":
            m.stopped_clean = bool(msg[1])
        elif kind == "dir_failed":
            _, log_dir, why, gone = msg
            self.broker.dir_failed_elsewhere(log_dir, why, gone, m.index)
        else:
            log.warning("process %d sent an unknown message %r", m.index, kind)

    def push_metadata(self, data: dict | None = None) -> None:
        """After every save of the metadata (``data``: what it saved): the members get it (and
        make or drop logs)."""
        md = self.broker.metadata
        self.seq += 1
        forms = {name: (str(t.topic_id), t.partitions) for name, t in md.topics.items()}
        for name, form in forms.items():
            if self._last_form.get(name) != form:
                self.topic_seq[name] = self.seq
        for name in set(self.topic_seq) - set(forms):
            del self.topic_seq[name]
        # a member's partition on a failed dir stays offline while its topic does (same id)
        self.offline = {
            tp
            for tp in self.offline
            if tp[0] in forms and self._last_form.get(tp[0], forms[tp[0]])[0] == forms[tp[0]][0]
        }
        for name, (topic_id, _) in self._last_form.items():
            if name not in forms or forms[name][0] != topic_id:
                self._deleted.append((self.seq, name, topic_id))
        low = min((m.acked for m in self.members.values()), default=self.seq)
        self._deleted = [d for d in self._deleted if d[0] > low]
        self._last_form = forms
        self._payload = {
            "metadata": md.to_json() if data is None else data,
            "dynamic": dict(self.broker.config.dynamic),
            "dynamic_default": dict(self.broker.config.dynamic_default),
            "loggers": loggers.overrides(),  # BROKER_LOGGER levels set at runtime
        }
        for m in self.members.values():
            self._send_metadata(m)

    def _send_metadata(self, m: _Member) -> None:
        if m.channel is not None and not m.channel.closed.is_set():
            m.channel.send("metadata", self.seq, self._payload)

    def _push_table(self) -> None:
        for m in self.members.values():
            if m.channel is not None and not m.channel.closed.is_set():
                m.channel.send("table", self.table)

    async def settled(self, timeout: float = 30.0) -> bool:
        """True once every member listens and has applied the metadata sent so far (one that
        died: once its restart, which gets the metadata as it starts, listens and leads its
        partitions again)."""
        want = self.seq
        deadline = asyncio.get_running_loop().time() + timeout
        for _ in range(int(timeout / 0.01) + 1):
            if self.failed:
                return False
            if all(
                m.acked >= want and m.endpoints is not None and not m.returning for m in self.members.values()
            ):
                return True
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.01)
        return False

    # ------------------------------------------------------------------ stop
    async def stop(self) -> None:
        """Members stop first (their last checkpoint entries come here), then this process.
        The clean-shutdown marker is written only if every member's current process stopped
        cleanly (a restarted one: after its recovery completed)."""
        self._stopping = True
        for m in self.members.values():
            if m.connecting is not None:
                await m.connecting
            if m.channel is not None and not m.channel.closed.is_set():
                try:
                    m.channel.send("stop")
                except ChannelClosed:
                    pass
        loop = asyncio.get_running_loop()
        for m in self.members.values():
            if m.proc is None:
                continue
            try:
                await asyncio.wait_for(loop.run_in_executor(None, m.proc.wait), STOP_TIMEOUT_S)
            except TimeoutError:
                log.error("process %d of this broker did not stop in %.0f s: killed", m.index, STOP_TIMEOUT_S)
                m.proc.kill()
                await loop.run_in_executor(None, m.proc.wait)
            if m.channel is not None:
                await m.channel.closed.wait()
            if m.task is not None:
                await asyncio.gather(m.task, return_exceptions=True)
        clean = all(m.stopped_clean for m in self.members.values())
        if not clean:
            self.broker.failed = True  # exit 1: a process of this broker died
            if self.broker.manager is not None:
                self.broker.manager.members_clean = False
            log.warning("a process of this broker did not stop cleanly: no clean-shutdown marker")

    def kill(self) -> None:
        """The primary is failing to start: no member outlives it, and no clean-shutdown marker
        is written over the partitions of members that did not stop cleanly."""
        self._stopping = True
        for m in self.members.values():
            if m.proc is not None and m.proc.poll() is None:
                m.proc.kill()
                m.proc.wait()
        if self.broker.manager is not None and not all(m.stopped_clean for m in self.members.values()):
            self.broker.manager.members_clean = False


def _status(code: int) -> str:
    """A process's exit status as an operator reads it: "status 1" or "signal SIGKILL"."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"status {code}"


class Member(ProcessGroup):
    """A process the primary started: owns its partitions, forwards the rest."""

    def __init__(self, broker, count: int, index: int, base_node: int, channel_sock: socket.socket):
        super().__init__(broker, count, index, base_node)
        self._sock = channel_sock
        self.channel: Channel | None = None
        self.applied = 0
        #: metadata that came before this process's storage was open
        self.pending: dict | None = None

    def leader_node(self, topic: str, partition: int) -> int:
        return self.owner_node(topic, partition)

    def channel_to(self, node: int) -> Channel | None:
        return self.channel if node == self.base_node else None

    async def connect(self) -> None:
        reader, writer = await asyncio.open_unix_connection(sock=self._sock)
        self.channel = Channel(reader, writer, self._on_message, lambda f, w: answer_call(self.broker, f, w))
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        await self.channel.run()
        if not self.broker_stopping:
            self.orphaned()
        self.broker.request_stop()

    def orphaned(self) -> None:
        """The primary died (its locks went with it). This process takes the locks before it
        closes its logs; if a new broker holds them already it must not write a byte more,
        and exits at once, as a crash would (the new owner recovers these partitions)."""
        manager = self.broker.manager
        if manager is None or not manager.adopt_locks():
            log.error("the primary process of this broker is gone and another holds its log dirs; exiting")
            os._exit(1)
        log.error("the primary process of this broker is gone; closing this process's logs and stopping")

    broker_stopping = False

    def _on_message(self, msg: tuple) -> None:
        kind = msg[0]
        if kind == "metadata":
            _, seq, payload = msg
            self.apply(payload)
            self.applied = seq
            if self.broker.manager is not None:  # after start-up (the first is acknowledged in hello)
                self.channel.send("applied", seq)
        elif kind == "table":
            self.table = {int(k): v for k, v in msg[1].items()}
        elif kind == "stop":
            self.broker_stopping = True
            self.broker.request_stop()
        elif kind == "dir_failed":
            _, log_dir, why, _gone = msg
            self.broker.dir_failed_elsewhere(log_dir, why, [], 0)

    def tell_dir_failed(self, log_dir, why: str, gone: list, origin: int | None) -> None:
        """The primary learns it (and tells the other members), with every partition of this
        process that is offline now."""
        if self.channel is not None and not self.channel.closed.is_set():
            offline = sorted(self.broker.manager.offline_partitions)
            self.channel.send("dir_failed", str(log_dir), why, offline)

    def partitions_offline(self, origin: int, gone: list) -> None:
        pass  # the primary answers Metadata

    def apply(self, payload: dict) -> None:
        """The primary's metadata: topics, configs, ACLs, SCRAM credentials, dynamic broker
        configs; then this process's logs follow it (made, reconfigured, deleted)."""
        broker = self.broker
        if broker.metadata is None:
            self.pending = payload  # before this process's storage is open: applied then
            return
        broker.metadata.apply_json(payload["metadata"])
        broker.reload_quotas()
        self.take_dynamic_configs(payload)
        loggers.apply_overrides(payload.get("loggers", {}))
        if broker.manager is not None:
            broker.adopt_metadata()

    def take_dynamic_configs(self, data: dict) -> bool:
        """The primary's dynamic broker configs (``data``: its push or this process's start
        arguments) through the rule every other source takes (BrokerConfig.take_dynamic). The
        primary took them by it already, so a member leaves one out only when it cannot apply
        what the primary did (a member restarted after an upgrade in place runs the code now on
        disk): logged once, and a set it cannot run with is not applied at all, never half.
        True when a layer changed (the logs follow in adopt_metadata)."""
        took, notes = self.broker.config.take_dynamic(
            {
                False: ("the primary's cluster-wide default", data.get("dynamic_default", {})),
                True: ("the primary's configs of this broker", data.get("dynamic", {})),
            }
        )
        for note in notes:
            log.warning("%s", note)
        return took

    def send_checkpoint(self, job, now: bool) -> None:
        if self.channel.closed.is_set():
            return  # the primary is gone: its dirs are recovered from the last checkpoints
        self.channel.send("checkpoint", str(job.state.path), job.name, dict(job.entries), now)

    async def forward(self, conn, frame: bytes):
        """A request this process does not serve: answered by the primary with the client's
        principal (bytes to send, None, or a closing answer)."""
        from kafkatool.broker.network import FinalResponse

        try:
            kind, payload = await self.channel.call(frame, who_of(conn))
        except ChannelClosed:
            return FinalResponse(b"")
        if kind == "bytes":
            return payload
        if kind == "close":
            log.info(
                "forwarded request refused, closing connection=%s: %s", getattr(conn, "peer", "?"), payload
            )
            return FinalResponse(b"")
        return None


# ---------------------------------------------------------------------- a member's main
class _CannotListen(KafkatoolError, OSError):
    """A member's listener did not bind (its port is taken): one line, exit 2."""


def member_config(config_data: dict, index: int):
    """The primary's settings with every listener's and advertised listener's port moved by
    ``index`` x kafkatool.processes.port.step (:func:`process_listeners`)."""
    from kafkatool.broker.config import BrokerConfig

    explicit = dict(config_data["explicit"])
    cfg = BrokerConfig(explicit)
    step = cfg.int(PORT_STEP_CONFIG)
    for key in ("listeners", "advertised.listeners"):
        if key == "listeners" or explicit.get(key):
            lsts = cfg.listeners if key == "listeners" else cfg.advertised_listeners
            explicit[key] = ",".join(
                f"{lst.name}://{lst.host or ''}:{lst.port}" for lst in process_listeners(lsts, index, step)
            )
    if explicit.get(METRICS_LISTENER_CONFIG):
        # each process its own Prometheus endpoint, as each node of a Kafka cluster its exporter
        explicit[METRICS_LISTENER_CONFIG] = process_listener(explicit[METRICS_LISTENER_CONFIG], index, step)
    return BrokerConfig(explicit)


def main(argv: list[str]) -> int:
    from kafkatool.broker.log_lines import setup_logging
    from kafkatool.broker.server import Broker
    from kafkatool.formats.uuid import Uuid

    args = json.loads(argv[0])
    index = int(args["index"])
    setup_logging(
        os.environ.get("KAFKATOOL_LOG_FORMAT", "text"),
        os.environ.get("KAFKATOOL_LOG_LEVEL", "info"),
        process=index,
    )
    sock = socket.socket(fileno=int(args["fd"]))
    cfg = member_config(args["config"], index)
    broker = Broker(cfg, member=True)
    group = Member(broker, int(args["count"]), index, int(args["base_node"]), sock)
    broker.join_group(group, clean_shutdown=args["clean_shutdown"], offline=args.get("offline"))
    # the primary's layers (which hold what its log dir's file holds) before the logs open
    group.take_dynamic_configs(args["config"])

    async def run() -> None:
        import signal

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: None)  # the primary says when to stop
        await group.connect()
        # on the loop's thread: the primary's messages wait in the socket meanwhile
        broker.open_storage()
        if args.get("restart"):
            # after a death: the logs of topics deleted meanwhile go, and the recovered state
            # replaces the dead process's last checkpoint entries at the primary
            deleted = {name: Uuid.from_string(tid) for name, tid in args.get("deleted", {}).items()}
            broker.adopt_metadata(deleted)
            broker.manager.checkpoint_all()
        if group.pending is not None:
            group.apply(group.pending)
        try:
            await broker.start()
        except OSError as exc:
            raise _CannotListen(str(exc)) from None
        group.channel.send("hello", {lst.name: broker._endpoint(lst) for lst in cfg.advertised_listeners})
        group.channel.send("applied", group.applied)
        log.info(
            "process %d of the broker started node_id=%d listeners=%s partitions=%d "
            "recovered_segments=%d restart=%s",
            index,
            group.node_id,
            ",".join(f"{h}:{p}" for h, p in broker.bound),
            len(broker.manager.logs),
            broker.startup.recovered_segments,
            str(bool(args.get("restart"))).lower(),
        )
        await broker.serve_until_stopped()
        await broker.stop()
        try:
            group.channel.send("stopped", True)
            await group.channel.drain()
        except (ChannelClosed, ConnectionError):
            pass
        group.channel.close()

    try:
        asyncio.run(run())
    except _CannotListen as exc:
        log.error("process %d of the broker cannot listen: %s", index, exc)
        if broker.manager is not None:
            broker.close_storage()
        return 2
    except Exception:
        log.exception("process %d of the broker failed", index)
        if broker.manager is not None:
            broker.close_storage()
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
