"""A kazoo client wrapper that speaks Kafka's ZooKeeper layout.

``KafkaZk`` gives the generic node operations (get, children, walk, create,
set, delete, transactions) with kazoo's exceptions mapped to ``ZkError`` types,
plus typed reads of every Kafka structure and the few writes the reassignment
tools and config changes need, done the way Kafka's AdminZkClient does them.

Paths passed to it are relative to the chroot of the connect string
(``host:port/kafka`` -> ``/brokers`` means ``/kafka/brokers``), like Kafka.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kafkatool.errors import KafkatoolError
from kafkatool.zk import codecs, paths

log = logging.getLogger("kafkatool.zk")
#: AdminZkClient.changeEntityConfig's quota entity types: a znode left empty is deleted
_QUOTA_ENTITY_TYPES = ("users", "clients", "ips")


class ZkError(KafkatoolError):
    """A ZooKeeper operation that failed; commands report it as one line (exit 2)."""


class ZkConnectionError(ZkError):
    pass


class ZkNoNodeError(ZkError):
    def __init__(self, path: str):
        super().__init__(f"{path}: no such znode")
        self.path = path


class ZkNodeExistsError(ZkError):
    def __init__(self, path: str):
        super().__init__(f"{path}: znode already exists")
        self.path = path


class ZkBadVersionError(ZkError):
    def __init__(self, path: str):
        super().__init__(f"{path}: znode changed concurrently (version mismatch)")
        self.path = path


class ZkNotEmptyError(ZkError):
    def __init__(self, path: str):
        super().__init__(f"{path}: znode has children")
        self.path = path


def silence_kazoo_logging() -> None:
    """kazoo logs a warning per failed connection attempt; a CLI reports one line instead."""
    warnings.filterwarnings("ignore", message="No chroot path exists", module="kazoo")
    log = logging.getLogger("kazoo")
    log.setLevel(logging.CRITICAL + 1)
    log.propagate = False
    if not log.handlers:
        log.addHandler(logging.NullHandler())


@dataclass(frozen=True)
class ZNodeStat:
    czxid: int
    mzxid: int
    pzxid: int
    ctime_ms: int
    mtime_ms: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int

    @property
    def ephemeral(self) -> bool:
        return self.ephemeral_owner != 0

    @classmethod
    def from_kazoo(cls, s: Any) -> ZNodeStat:
        return cls(
            czxid=s.czxid,
            mzxid=s.mzxid,
            pzxid=s.pzxid,
            ctime_ms=s.ctime,
            mtime_ms=s.mtime,
            version=s.version,
            cversion=s.cversion,
            aversion=s.aversion,
            ephemeral_owner=s.ephemeralOwner,
            data_length=s.dataLength,
            num_children=s.numChildren,
        )

    def to_json(self) -> dict:
        return {
            "czxid": self.czxid,
            "mzxid": self.mzxid,
            "pzxid": self.pzxid,
            "ctime_ms": self.ctime_ms,
            "mtime_ms": self.mtime_ms,
            "version": self.version,
            "cversion": self.cversion,
            "aversion": self.aversion,
            "ephemeral_owner": f"0x{self.ephemeral_owner:x}",
            "ephemeral": self.ephemeral,
            "data_length": self.data_length,
            "num_children": self.num_children,
        }


@dataclass
class ZNode:
    path: str  # chroot-relative
    data: bytes
    stat: ZNodeStat


@dataclass
class Typed:
    """A decoded Kafka znode: ``value`` (None when undecodable, then ``error`` says why) and its stat."""

    path: str
    value: Any
    stat: ZNodeStat
    raw: bytes = b""
    error: str | None = None


@dataclass
class AclResource:
    pattern_type: str  # LITERAL, PREFIXED
    resource_type: str
    name: str
    path: str
    acls: codecs.AclSet | None
    error: str | None = None


@dataclass
class ConfigEntity:
    """A ``/config`` entity by its real name: a user principal or client id desanitized
    (``path`` is the znode, ``alice%40EXAMPLE.COM``); ``client``: the client id of a
    ``users/<user>/clients/<client>`` pair. A user or client znode whose name does not
    desanitize keeps it as ``name``, with ``error`` saying so and no config."""

    entity_type: str
    name: str
    path: str
    config: codecs.EntityConfig | None
    stat: ZNodeStat
    error: str | None = None
    client: str | None = None

    @property
    def entity_path(self) -> str:
        """The path a config change notification names (AdminZkClient's, names sanitized)."""
        return self.path[len(paths.CONFIG) + 1 :]

    @property
    def label(self) -> str:
        """``users/alice@EXAMPLE.COM/clients/app``: the real names, for display."""
        text = f"{self.entity_type}/{self.name}"
        return text if self.client is None else f"{text}/clients/{self.client}"


@dataclass
class TopicState:
    """A topic's assignment znode with its partitions' state znodes."""

    name: str
    assignment: Typed | None
    states: dict[int, Typed] = field(default_factory=dict)  # partition -> state node
    partition_dirs: list[int] = field(default_factory=list)  # children of .../partitions


class KafkaZk:
    """A connection to one Kafka cluster's ZooKeeper root (``hosts[/chroot]``).

    Use as a context manager or call ``start()``/``close()``.
    """

    def __init__(
        self,
        connect: str,
        *,
        timeout: float = 5.0,
        read_only: bool = False,
        security=None,
        session_timeout: float | None = None,
    ):
        self.connect = connect
        #: the session timeout asked of ZooKeeper (a broker's zookeeper.session.timeout.ms);
        #: None: the connection timeout, at least 4 s (tools)
        self.session_timeout = session_timeout
        self.hosts, self.chroot = paths.split_connect(connect)
        if not self.hosts:
            raise ZkError(f"{connect!r}: no ZooKeeper host in connect string")
        self.timeout = timeout
        self.read_only = read_only
        #: TLS/SASL and secure ACLs (broker/security/zk.ZkSecurity: ``kazoo_options()``,
        #: ``acls_for(path)``); None: plaintext, open ACLs
        self.security = security
        self._client = None
        self._tmp: str | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> KafkaZk:
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError
        from kazoo.retry import KazooRetry

        extra: dict = {}
        if self.security is not None:
            extra, self._tmp = self.security.kazoo_options()
            acl = self.security.acls_for("/")
            if acl is not None:
                extra["default_acl"] = acl
        secured = " over TLS" if extra.get("use_ssl") else ""
        secured += " with SASL" if extra.get("sasl_options") else ""
        try:
            client = KazooClient(
                hosts=self.hosts + self.chroot,
                timeout=self.session_timeout or max(self.timeout, 4.0),
                connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
                command_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=1.0, deadline=self.timeout),
                **extra,
            )
        except (ValueError, TypeError) as exc:
            self._drop_tmp()
            raise ZkError(f"{self.connect!r}: bad connect string ({exc})") from None
        try:
            client.start(timeout=self.timeout)
        except KazooTimeoutError:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()
            self._drop_tmp()
            hint = "" if not secured else " (a TLS or SASL failure looks like this too: check the settings)"
            raise ZkConnectionError(
                f"{self.hosts}: no ZooKeeper answered{secured} within {self.timeout:g} s{hint}"
            ) from None
        except Exception as exc:  # kazoo raises a variety of socket/handler/auth errors here
            with contextlib.suppress(Exception):
                client.stop()
                client.close()
            self._drop_tmp()
            raise ZkConnectionError(
                f"{self.hosts}: cannot connect{secured} ({type(exc).__name__}: {exc})"
            ) from None
        self._client = client
        return self

    def _drop_tmp(self) -> None:
        if self._tmp is not None:
            import shutil

            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.stop()
                self._client.close()
            self._client = None
        self._drop_tmp()

    def __enter__(self) -> KafkaZk:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def kazoo(self):
        """The underlying KazooClient (for watches and recipes)."""
        if self._client is None:
            raise ZkError("not connected")
        return self._client

    @property
    def session_id(self) -> int:
        return self.kazoo.client_id[0]

    @contextlib.contextmanager
    def _mapped(self, path: str) -> Iterator[None]:
        from kazoo import exceptions as ke
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            yield
        except ke.NoNodeError:
            raise ZkNoNodeError(self.display(path)) from None
        except ke.NodeExistsError:
            raise ZkNodeExistsError(self.display(path)) from None
        except ke.BadVersionError:
            raise ZkBadVersionError(self.display(path)) from None
        except ke.NotEmptyError:
            raise ZkNotEmptyError(self.display(path)) from None
        except ke.NoAuthError:
            raise ZkError(f"{self.display(path)}: not authorized (znode ACL)") from None
        except (
            ke.ConnectionLoss,
            ke.SessionExpiredError,
            ke.ConnectionClosedError,
            KazooTimeoutError,
        ) as exc:
            raise ZkConnectionError(f"{self.hosts}: connection lost ({type(exc).__name__})") from None
        except ke.KazooException as exc:
            raise ZkError(f"{self.display(path)}: {type(exc).__name__} {exc}".rstrip()) from None

    def _writable(self) -> None:
        if self.read_only:
            raise ZkError(f"{self.connect}: connection opened read-only; refusing to write")

    def display(self, path: str) -> str:
        """The absolute path in the ensemble, for messages."""
        return paths.join(self.chroot, path) if self.chroot else paths.normalize(path)

    # ------------------------------------------------------------ generic nodes

    def exists(self, path: str) -> ZNodeStat | None:
        with self._mapped(path):
            s = self.kazoo.exists(paths.normalize(path))
        return ZNodeStat.from_kazoo(s) if s is not None else None

    def get(self, path: str) -> ZNode:
        path = paths.normalize(path)
        with self._mapped(path):
            data, s = self.kazoo.get(path)
        return ZNode(path, data or b"", ZNodeStat.from_kazoo(s))

    def get_or_none(self, path: str) -> ZNode | None:
        try:
            return self.get(path)
        except ZkNoNodeError:
            return None

    def get_many(self, node_paths: list[str], *, window: int = 512) -> dict[str, ZNode | None]:
        """Read many znodes pipelined (``window`` requests in flight); None for missing ones.

        Over a WAN link this turns thousands of round trips into a few.
        """
        from kazoo import exceptions as ke

        out: dict[str, ZNode | None] = {}
        norm = [paths.normalize(p) for p in node_paths]
        for i in range(0, len(norm), window):
            chunk = norm[i : i + window]
            with self._mapped(chunk[0] if chunk else "/"):
                pending = [(p, self.kazoo.get_async(p)) for p in chunk]
                for p, res in pending:
                    try:
                        data, s = res.get(timeout=self.timeout + 10)
                    except ke.NoNodeError:
                        out[p] = None
                        continue
                    out[p] = ZNode(p, data or b"", ZNodeStat.from_kazoo(s))
        return out

    def children_many(self, node_paths: list[str], *, window: int = 512) -> dict[str, list[str] | None]:
        """Children of many znodes pipelined (sorted); None for missing ones."""
        from kazoo import exceptions as ke

        out: dict[str, list[str] | None] = {}
        norm = [paths.normalize(p) for p in node_paths]
        for i in range(0, len(norm), window):
            chunk = norm[i : i + window]
            with self._mapped(chunk[0] if chunk else "/"):
                pending = [(p, self.kazoo.get_children_async(p)) for p in chunk]
                for p, res in pending:
                    try:
                        out[p] = sorted(res.get(timeout=self.timeout + 10))
                    except ke.NoNodeError:
                        out[p] = None
        return out

    def children(self, path: str) -> list[str]:
        path = paths.normalize(path)
        with self._mapped(path):
            return sorted(self.kazoo.get_children(path))

    def children_or_empty(self, path: str) -> list[str]:
        try:
            return self.children(path)
        except ZkNoNodeError:
            return []

    def walk(
        self, path: str = "/", *, max_depth: int | None = None, skip: tuple[str, ...] = ()
    ) -> Iterator[ZNode]:
        """Every node of a subtree in pre-order (parents first, children sorted).

        Reads level by level, pipelined; nodes deleted meanwhile are left out.
        """
        level = [paths.normalize(path)]
        found: list[ZNode] = []
        depth = 0
        while level:
            nodes = self.get_many([p for p in level if p not in skip])
            present = [n for n in nodes.values() if n is not None]
            found += present
            if max_depth is not None and depth >= max_depth:
                break
            parents = [n.path for n in present if n.stat.num_children]
            kids = self.children_many(parents)
            level = [paths.join(p, c) for p in parents for c in kids[p] or []]
            depth += 1
        found.sort(key=lambda n: n.path.split("/"))
        return iter(found)

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create a znode (open ACL, as Kafka without zookeeper.set.acl; Kafka's secure ACLs with
        it); returns the created path."""
        self._writable()
        acl = self.security.acls_for(paths.normalize(path)) if self.security is not None else None
        with self._mapped(path):
            return self.kazoo.create(
                paths.normalize(path),
                data,
                acl=acl,
                ephemeral=ephemeral,
                sequence=sequence,
                makepath=makepath,
            )

    def ensure_path(self, path: str) -> None:
        self._writable()
        with self._mapped(path):
            self.kazoo.ensure_path(paths.normalize(path))

    def set(self, path: str, data: bytes, *, version: int = -1) -> ZNodeStat:
        self._writable()
        with self._mapped(path):
            return ZNodeStat.from_kazoo(self.kazoo.set(paths.normalize(path), data, version=version))

    def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        self._writable()
        with self._mapped(path):
            self.kazoo.delete(paths.normalize(path), version=version, recursive=recursive)

    def commit(self, ops: list[tuple]) -> list:
        """Apply ops atomically in one ZooKeeper multi and return kazoo's per-op results.

        Ops: ``("create", path, data[, sequence])``, ``("set", path, data[, version])``,
        ``("delete", path[, version])``, ``("check", path, version)``; version -1 (the default)
        matches any.  The first failing op raises its ``ZkError`` (nothing was applied).
        """
        from kazoo import exceptions as ke

        self._writable()
        if not ops:
            return []
        tx = self.kazoo.transaction()
        for op in ops:
            kind, path = op[0], paths.normalize(op[1])
            if kind == "create":
                tx.create(path, op[2], sequence=bool(op[3]) if len(op) > 3 else False)
            elif kind == "set":
                tx.set_data(path, op[2], version=op[3] if len(op) > 3 else -1)
            elif kind == "delete":
                tx.delete(path, version=op[2] if len(op) > 2 else -1)
            elif kind == "check":
                tx.check(path, op[2])
            else:
                raise ValueError(f"unknown transaction op {kind!r}")
        with self._mapped("/"):
            results = tx.commit()
        for op, result in zip(ops, results, strict=False):
            if isinstance(result, Exception) and not isinstance(result, ke.RolledBackError):
                with self._mapped(op[1]):
                    raise result
        return results

    # ------------------------------------------------------------ Kafka: typed reads

    def _typed(self, path: str, decode, node: ZNode | None | bool = False) -> Typed | None:
        if node is False:
            node = self.get_or_none(path)
        if node is None:
            return None
        try:
            return Typed(path, decode(node.data), node.stat, node.data)
        except codecs.ZkPayloadError as exc:
            return Typed(path, None, node.stat, node.data, str(exc))

    def is_kafka_root(self) -> bool:
        return self.exists(paths.BROKER_IDS) is not None and self.exists(paths.BROKER_TOPICS) is not None

    def cluster_id(self) -> Typed | None:
        return self._typed(paths.CLUSTER_ID, codecs.decode_cluster_id)

    def controller(self) -> Typed | None:
        return self._typed(paths.CONTROLLER, codecs.decode_controller)

    def controller_epoch(self) -> Typed | None:
        return self._typed(paths.CONTROLLER_EPOCH, codecs.decode_controller_epoch)

    def migration(self) -> Typed | None:
        """/migration (ZK->KRaft migration state, 3.4+), None outside a migration."""
        return self._typed(paths.MIGRATION, codecs.decode_migration)

    def broker_ids(self) -> list[int]:
        out = []
        for name in self.children_or_empty(paths.BROKER_IDS):
            with contextlib.suppress(ValueError):
                out.append(int(name))
        return sorted(out)

    def broker(self, broker_id: int) -> Typed | None:
        return self._typed(paths.broker(broker_id), lambda d: codecs.decode_broker(d, broker_id))

    def brokers(self) -> dict[int, Typed]:
        ids = self.broker_ids()
        nodes = self.get_many([paths.broker(b) for b in ids])
        out = {}
        for b in ids:
            p = paths.broker(b)
            t = self._typed(p, lambda d, b=b: codecs.decode_broker(d, b), nodes[p])
            if t is not None:
                out[b] = t
        return out

    def sessions(self) -> dict[int, int]:
        """ZooKeeper session id -> broker id, from the broker registrations' ephemeral owners."""
        out = {}
        for b in self.broker_ids():
            s = self.exists(paths.broker(b))
            if s is not None and s.ephemeral:
                out[s.ephemeral_owner] = b
        return out

    def topics(self) -> list[str]:
        return self.children_or_empty(paths.BROKER_TOPICS)

    def topic_assignment(self, topic: str) -> Typed | None:
        return self._typed(paths.topic(topic), lambda d: codecs.decode_topic(d, topic))

    def topic_state(self, topic: str) -> TopicState:
        return self.topic_states([topic])[topic]

    def topic_states(self, topics: list[str] | None = None) -> dict[str, TopicState]:
        """Assignments and partition states of ``topics`` (default all), read pipelined."""
        topics = self.topics() if topics is None else list(topics)
        assignments = self.get_many([paths.topic(t) for t in topics])
        kids = self.children_many([paths.topic_partitions(t) for t in topics])
        out: dict[str, TopicState] = {}
        state_paths = []
        for t in topics:
            ts = out[t] = TopicState(
                t,
                self._typed(
                    paths.topic(t), lambda d, t=t: codecs.decode_topic(d, t), assignments[paths.topic(t)]
                ),
            )
            pids = []
            for name in kids[paths.topic_partitions(t)] or []:
                with contextlib.suppress(ValueError):
                    pids.append(int(name))
            ts.partition_dirs = sorted(pids)
            state_paths += [paths.partition_state(t, p) for p in ts.partition_dirs]
        states = self.get_many(state_paths)
        for t, ts in out.items():
            for pid in ts.partition_dirs:
                path = paths.partition_state(t, pid)
                typed = self._typed(path, lambda d, p=path: codecs.decode_partition_state(d, p), states[path])
                if typed is not None:
                    ts.states[pid] = typed
        return out

    def reassign_partitions(self) -> Typed | None:
        return self._typed(paths.REASSIGN_PARTITIONS, codecs.decode_reassign_partitions)

    def preferred_replica_election(self) -> Typed | None:
        return self._typed(
            paths.PREFERRED_REPLICA_ELECTION,
            lambda d: codecs.decode_partition_list(d, paths.PREFERRED_REPLICA_ELECTION),
        )

    def entity_config(self, entity_type: str, name: str, client: str | None = None) -> ConfigEntity | None:
        """``/config/<type>/<name>`` by the entity's real name (a user principal or client id is
        read at its sanitized znode, paths.entity_path); ``client``: a user's client id."""
        path = paths.config_entity(entity_type, name, client)
        t = self._typed(path, lambda d: codecs.decode_entity_config(d, path))
        if t is None:
            return None
        return ConfigEntity(entity_type, name, path, t.value, t.stat, t.error, client)

    def entity_configs(self, entity_type: str) -> list[ConfigEntity]:
        """All entities of a type by their real names (AdminZkClient.fetchAllEntityConfigs); for
        users also the ``<user>/clients/<client>`` pairs (fetchAllChildEntityConfigs)."""
        root = f"{paths.CONFIG}/{entity_type}"
        segments = [(u, None) for u in self.children_or_empty(root)]
        if entity_type == "users":
            clients = self.children_many([f"{root}/{u}/clients" for u, _ in segments])
            segments = [
                pair
                for u, _ in segments
                for pair in [(u, None), *((u, c) for c in clients[f"{root}/{u}/clients"] or [])]
            ]
        node_paths = [f"{root}/{u}" if c is None else f"{root}/{u}/clients/{c}" for u, c in segments]
        nodes = self.get_many(node_paths)
        out = []
        for (segment, client_segment), path in zip(segments, node_paths, strict=True):
            try:
                name = paths.entity_name(entity_type, segment)
                client = None if client_segment is None else paths.entity_name("clients", client_segment)
            except ValueError as exc:
                node = nodes[path]
                if node is not None:
                    error = f"{self.display(path)}: not a sanitized name (Sanitizer.desanitize: {exc})"
                    out.append(
                        ConfigEntity(entity_type, segment, path, None, node.stat, error, client_segment)
                    )
                continue
            t = self._typed(path, lambda d, p=path: codecs.decode_entity_config(d, p), nodes[path])
            if t is not None:
                out.append(ConfigEntity(entity_type, name, path, t.value, t.stat, t.error, client))
        return out

    def acl_resources(self) -> list[AclResource]:
        out = []
        stores = [("LITERAL", paths.KAFKA_ACL)]
        stores += [
            (pt.upper(), f"{paths.KAFKA_ACL_EXTENDED}/{pt}")
            for pt in self.children_or_empty(paths.KAFKA_ACL_EXTENDED)
        ]
        for pattern_type, root in stores:
            for rtype in self.children_or_empty(root):
                for name in self.children_or_empty(f"{root}/{rtype}"):
                    path = f"{root}/{rtype}/{name}"
                    t = self._typed(path, lambda d, p=path: codecs.decode_acls(d, p))
                    if t is not None:
                        out.append(AclResource(pattern_type, rtype, name, path, t.value, t.error))
        return out

    # ------------------------------------------------------------ Kafka: writes

    def _clean_quota_node(self, path: str, client: str | None) -> bool:
        """AdminZkClient.tryCleanQuotaNodes: an entity znode left without configs and children is
        deleted (so are a user/client pair's ``clients`` node once it has no other client, and
        the user's node once it has neither configs nor other children); False: it has children."""
        if self.children_or_empty(path):
            return False
        target = path
        if client is not None:
            clients_path = paths.parent(path)
            user_path = paths.parent(clients_path)
            if self.children_or_empty(clients_path) == [paths.basename(path)]:
                target = clients_path
                user = self.get_or_none(user_path)
                user_config = codecs.decode_entity_config(user.data if user else None, user_path).config
                if not user_config and self.children_or_empty(user_path) == ["clients"]:
                    target = user_path
        log.info("Deleting zk node %s since the node of %s is empty.", target, path)
        with contextlib.suppress(ZkNoNodeError):
            self.delete(target, recursive=True)
        return True

    def create_reassignment(self, assignment) -> str:
        """Start a legacy ZK-mode reassignment: create /admin/reassign_partitions (persistent).

        ``assignment`` is ``{(topic, partition) | TopicPartition: replicas}`` or an iterable of
        ``(topic, partition, replicas)`` / ``PartitionReassignment``.  Raises ``ZkNodeExistsError``
        when a reassignment is already in progress: as in Kafka's tool, the controller only
        reacts to the creation of the znode, so rewriting it would do nothing.
        """
        if self.read_only:
            raise ZkError("connection is read-only")
        return self.create(
            paths.REASSIGN_PARTITIONS, codecs.encode_reassign_partitions(assignment), makepath=True
        )

    def delete_reassignment(self) -> bool:
        """Delete /admin/reassign_partitions; False if it was not there."""
        try:
            self.delete(paths.REASSIGN_PARTITIONS)
        except ZkNoNodeError:
            return False
        return True

    def resign_controller(self) -> bool:
        """Delete /controller so that a new controller is elected (the pre-KIP-455 'abort')."""
        try:
            self.delete(paths.CONTROLLER)
        except ZkNoNodeError:
            return False
        return True

    def change_entity_config(
        self,
        entity_type: str,
        name: str,
        *,
        client: str | None = None,
        set_keys: dict[str, str] | None = None,
        delete_keys: tuple[str, ...] | list[str] = (),
        notify: bool = True,
    ) -> dict[str, str]:
        """Alter an entity's config as AdminZkClient.changeConfigs does and return the new config;
        ``name`` (and a user's ``client``) are the real names, sanitized into the znode path and
        the notification (paths.entity_path).

        Read-modify-write with the znode's version (retried on a concurrent change), then a
        ``/config/changes/config_change_`` sequential node ``{"version":2,"entity_path":...}``
        so that brokers reload the entity.  A topic's or broker's config that becomes empty is
        written as ``{}`` (Kafka keeps the znode); a user's, client's or ip's znode is deleted
        instead when it has no children (AdminZkClient.tryCleanQuotaNodes).
        """
        if self.read_only:
            raise ZkError("connection is read-only")
        entity_path = paths.entity_path(entity_type, name, client)
        path = f"{paths.CONFIG}/{entity_path}"
        for _ in range(10):
            node = self.get_or_none(path)
            current = codecs.decode_entity_config(node.data if node else None, path).config
            new = {k: v for k, v in current.items() if k not in set(delete_keys)}
            new.update({k: str(v) for k, v in (set_keys or {}).items()})
            data = codecs.encode_entity_config(new)
            if not new and entity_type in _QUOTA_ENTITY_TYPES and self._clean_quota_node(path, client):
                break
            try:
                if node is None:
                    self.create(path, data, makepath=True)
                else:
                    self.set(path, data, version=node.stat.version)
            except (ZkBadVersionError, ZkNodeExistsError):
                continue
            break
        else:
            raise ZkError(f"{self.display(path)}: kept changing under us; giving up")
        if notify:
            self.create(
                f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
                codecs.encode_config_change(entity_path),
                sequence=True,
                makepath=True,
            )
        return new
