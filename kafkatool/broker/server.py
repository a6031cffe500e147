"""The single-node broker: storage, cluster metadata, listeners, background work.

Start-up opens every log dir with :class:`~kafkatool.log.manager.LogManager`
(lock, clean-shutdown marker, checkpoints, Kafka's recovery), reads the
embedded cluster metadata (or derives it from the partition dirs of a log dir
written by Kafka), then listens.  Shutdown (SIGTERM/SIGINT) stops accepting,
closes connections, flushes every log and writes the checkpoints and the
clean-shutdown marker.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.broker.config import BrokerConfig, ConfigError
from kafkatool.broker.metadata import MetadataStore, TopicMeta
from kafkatool.broker.network import Connection, SendfileThreads
from kafkatool.broker.router import Router
from kafkatool.broker.tasks import stop_tasks
from kafkatool.formats import properties as props
from kafkatool.formats.errors import CorruptRecordError, FormatError
from kafkatool.formats.uuid import Uuid
from kafkatool.log.config import LogConfig
from kafkatool.log.log import Log
from kafkatool.log.manager import LogManager, log_error_message
from kafkatool.protocol.errors import ErrorCode

log = logging.getLogger("kafkatool.broker")


#: auto turns the append writer on with this many cores or more for each process
APPEND_WRITER_CORES_PER_PROCESS = 4


def append_writer_wanted(config) -> bool:
    """kafkatool.append.writer: true, false, or auto: on when the process may run on
    APPEND_WRITER_CORES_PER_PROCESS cores for each of the broker's processes (its event loop,
    its writer, and room for the rest of the machine).  The writer moves the page-cache copy to
    another core; with no core to spare it only adds hand-overs.  Measured on 2 cores, writer
    on against off: one process with a light load generator beside it +16..28% (16 KiB
    batches), but with a librdkafka producer on the same cores -12% (1 KiB records, its CPU per
    GB +8..17%), three brokers of a replication-factor-3 cluster +16..35% CPU per GB, one
    process on 1 core -11..15%, two processes on 2 cores -11..22%."""
    value = config.append_writer
    if value != "auto":
        return value == "true"
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return append_writer_auto(cores, config.int("kafkatool.processes"))


def append_writer_auto(cores: int, processes: int) -> bool:
    """auto's rule: ``cores`` the process may run on, ``processes`` of the broker."""
    return cores >= APPEND_WRITER_CORES_PER_PROCESS * max(1, processes)


PRODUCER_ID_BLOCK = 1000


@dataclass
class StartupReport:
    log_dirs: list[str]
    partitions: int
    topics: int
    had_clean_shutdown: dict[str, bool]
    recovered_segments: int
    notes: list[str]
    seconds: float
    new_dirs: list[str] = field(default_factory=list)


def _cap_to_valid_data(lg: Log) -> list[str]:
    """Read-only serving: no recovery runs, so bound each segment to its complete entries
    (a torn or zero-filled tail, or garbage, is never sent to a client)."""
    notes = []
    for seg in lg.segments:
        end = 0
        try:
            for entry in seg.headers():
                end = entry.position + entry.size
        except CorruptRecordError:
            pass
        if end < seg.size:
            notes.append(f"{seg.log_path}: serving the first {end} of {seg.size} bytes (invalid data after)")
            seg.size = end
    return notes


def _foreign_partitions(dirs: list[Path], loaded) -> list[tuple[Path, str, int, Uuid | None, int | None]]:
    """The partition dirs of the log dirs that ``loaded`` (this process's logs) does not hold,
    with the topic id of their partition.metadata and the latest epoch of their
    leader-epoch-checkpoint (None when unreadable)."""
    from kafkatool.formats import checkpoint as ck
    from kafkatool.log.leader_epoch import LeaderEpochCache
    from kafkatool.log.log import read_topic_id
    from kafkatool.log.manager import partition_dirs

    out = []
    for d in dirs:
        for path, (topic, part) in partition_dirs(d):
            if (topic, part) in loaded or path.name != f"{topic}-{part}":
                continue
            try:
                topic_id = read_topic_id(path)
            except (OSError, ValueError, FormatError):
                topic_id = None
            try:
                epoch = LeaderEpochCache(path / ck.LEADER_EPOCH_CHECKPOINT, writable=False).latest_epoch
            except (OSError, ValueError, FormatError):
                epoch = None
            out.append((path, topic, part, topic_id, epoch))
    return out


def load_meta_properties(dirs: list[Path]) -> tuple[dict[Path, object], dict[str, str]]:
    """Every log dir's meta.properties, read once (Kafka's MetaPropertiesEnsemble.Loader):
    (the dirs that have one readable -> its MetaProperties, the dirs whose file cannot be read
    -> why: an I/O error or bytes that are not a properties file; Kafka puts those in
    errorLogDirs and the broker starts with them offline).  A missing file is a new dir."""

    metas: dict[Path, object] = {}
    unreadable: dict[str, str] = {}
    for d in dirs:
        path = d / props.META_PROPERTIES_FILE
        try:
            metas[d] = props.decode_meta_properties(path.read_bytes())
        except (FileNotFoundError, NotADirectoryError):
            continue
        except (OSError, ValueError, FormatError) as exc:
            unreadable[str(d)] = f"Error while reading meta.properties file {path}: {exc}"
    return metas, unreadable


def stored_node_id(metas: dict[Path, object], configured: int | None = None) -> int | None:
    """node.id / broker.id from the log dirs' meta.properties (``load_meta_properties``; None
    when there is none), checked as Kafka checks them at start-up (MetaPropertiesEnsemble.verify
    with the configured id): every dir's stored id is ``configured`` or, none configured, the
    first dir's; OSError otherwise."""

    found: tuple[int, Path] | None = None
    for d, meta in metas.items():
        if meta.node_id is None:
            continue
        path = d / props.META_PROPERTIES_FILE
        if configured is not None and meta.node_id != configured:
            raise OSError(
                f"configured node id {configured} does not match the id {meta.node_id} stored in "
                f"{path} (Kafka refuses this too)"
            )
        if found is not None and meta.node_id != found[0]:
            raise OSError(
                f"stored node id {meta.node_id} in {path} does not match node id {found[0]} in "
                f"{found[1]} (Kafka refuses this too)"
            )
        found = found or (meta.node_id, path)
    return found[0] if found is not None else None


class Broker:
    def __init__(self, config: BrokerConfig, *, read_only: bool = False, member: bool = False):
        self.config = config
        self.read_only = read_only
        #: a member process of a broker of several (kafkatool.processes; processes.main): it
        #: takes the primary's dynamic broker configs, never the log dir's file (the primary
        #: read it, and says what it left out, once); known before the handlers register
        self.member_process = member
        self.node_id = config.node_id
        self.max_request_bytes = config.int("socket.request.max.bytes")
        self.router = Router(self)
        self.manager: LogManager | None = None
        self.metadata: MetadataStore | None = None
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = {}
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: set[Connection] = set()
        self._conn_tasks: set[asyncio.Task] = set()
        self._background: list[asyncio.Task] = []
        self._stopping: asyncio.Event | None = None
        self.bound: list[tuple[str, int]] = []
        self.next_producer_id = 0
        self.startup: StartupReport | None = None
        #: the event loop serving requests (a failed log dir is handled on it)
        self._loop: asyncio.AbstractEventLoop | None = None
        from kafkatool.broker.fetch_session import CACHE_SLOTS_CONFIG, FetchManager
        from kafkatool.broker.quotas import QuotaManagers

        #: client quotas (broker/quotas.py): this process's own accounting, as each Kafka
        #: broker counts its own; ``quotas.enabled`` is the one flag a request checks
        self.quotas = QuotaManagers(config.int("quota.window.num"), config.int("quota.window.size.seconds"))
        #: this process's incremental fetch sessions (KIP-227)
        self.fetch_sessions = FetchManager(config.int(CACHE_SLOTS_CONFIG))
        from kafkatool.broker.background import Workers

        #: background threads and the cleaner's worker process (never the event loop)
        self.workers = Workers()
        self.workers.on_io_error = self.report_io_error
        #: Kafka's network threads' share of fetch responses: the rest of a large sendfile
        #: that did not fit the socket (broker/network.SendfileThreads)
        self.network_threads = SendfileThreads(self.config.int("num.network.threads"))
        #: client produce appends are written by this (log/append_writer.py: a thread without
        #: the GIL when built, else synchronous); made by start, drained and stopped before the
        #: logs close
        self.append_writer = None
        from kafkatool.broker.handlers import register_all

        register_all(self.router)
        from kafkatool.broker.security import acl_api, sasl, tokens, users

        sasl.register(self.router)
        users.register(self.router)
        acl_api.register(self.router)
        if not read_only:
            tokens.register(self.router)
        #: delegation tokens (security/tokens.TokenManager), made at first use
        self._token_manager = None
        #: the ACL authorizer (authorizer.class.name), set once the metadata store is open
        self.authorizer = None
        #: ZooKeeper cluster mode (zookeeper.connect): membership, controller, replication
        self.cluster = None
        self.replicas = None
        #: a broker of several processes (kafkatool.processes > 1): broker/processes.py's
        #: Primary in the process serve started, Member in the others
        self.processes = None
        self._clean_shutdown: dict[str, bool] | None = None
        #: cluster mode: the /config/topics overrides of topics whose logs this broker holds but
        #: the controller has not named yet (LogManager's topicConfigOverrides of its load); the
        #: topic's first LeaderAndIsr moves it into the metadata
        self.unnamed_topic_configs: dict[str, dict[str, str]] = {}
        #: set when the broker stops because a process of it failed
        self.failed = False
        #: the dirs offline from the start, handled as failed dirs by :meth:`start`
        self._offline_at_start: list[Path] = []
        #: (a member) dirs another process of this broker found failed before this one's
        #: storage opened: they open offline (str(dir) -> why)
        self._told_offline: dict[str, str] = {}
        #: after close_storage: (the dirs that got the clean-shutdown marker, the offline dirs)
        self.closed_dirs: tuple[list[Path], list[Path]] | None = None
        if not read_only:
            from kafkatool.broker.cluster.txn_markers import handle_write_txn_markers

            # every writable broker serves WriteTxnMarkers, as Kafka's does: a cluster's and a
            # broker of several processes' transaction coordinator sends each partition's
            # leader its markers, and an admin aborts a hanging transaction with it
            # (Admin.abortTransaction, `kafkatool transactions abort`)
            self.router.register(27, 0, 1, handle_write_txn_markers)
        if config.get("zookeeper.connect") and not read_only:
            from kafkatool.broker.cluster import handlers as cluster_handlers

            cluster_handlers.register(self.router)
        from kafkatool.broker.metrics import broker_metrics
        from kafkatool.protocol.apis import API_BY_KEY

        #: what the broker counts as it serves (broker/metrics.py: Kafka's MBeans through the
        #: Prometheus JMX exporter's rules); the endpoint (kafkatool.metrics.prometheus.listener)
        #: starts with the listeners, and without it nothing is counted (no one else reads it)
        self.metrics = broker_metrics(config, {k: (a.name, a.max_version) for k, a in API_BY_KEY.items()})
        self._metrics_endpoint = None

    def join_group(
        self, group, *, clean_shutdown: dict[str, bool], offline: dict[str, str] | None = None
    ) -> None:
        """This process is member ``group.index`` of a broker of several processes: it serves
        the partitions it owns and forwards every other request to the primary.  ``offline``:
        the dirs the broker has found failed (they are not opened)."""
        self.processes = group
        self.node_id = group.node_id
        self._clean_shutdown = clean_shutdown
        self._told_offline.update(offline or {})
        self.router.forward = group.forward

    @property
    def is_member(self) -> bool:
        return self.processes is not None and not self.processes.is_primary

    @property
    def scram_store(self):
        """Where SCRAM credentials live: ZooKeeper's /config/users in cluster mode, else the
        embedded metadata (both a ``user_scram`` dict and ``save()``)."""
        if self.cluster is not None:
            return self.cluster.scram
        return self.metadata

    @property
    def quota_store(self):
        """Where client quotas live: ZooKeeper's /config/users and /config/clients in cluster
        mode, else the embedded metadata (broker/quotas.py)."""
        from kafkatool.broker import quotas

        if self.cluster is not None:
            return quotas.ZkQuotaStore(self.cluster.zk)
        return quotas.EmbeddedQuotaStore(self.metadata)

    def reload_quotas(self) -> None:
        """Take every quota entity of the store (start, a member's metadata push, an alter)."""
        from kafkatool.zk.client import ZkError

        try:
            entries = self.quota_store.entries()
        except ZkError as exc:
            log.warning("client quotas not reloaded: %s", exc)
            return
        self.quotas.load(entries)

    @property
    def token_manager(self):
        """Delegation tokens: ZooKeeper's /delegation_token in cluster mode, else the embedded
        metadata (security/tokens.py)."""
        if self._token_manager is None:
            from kafkatool.broker.security import tokens

            store = (
                self.cluster.tokens if self.cluster is not None else tokens.EmbeddedTokenStore(self.metadata)
            )
            self._token_manager = tokens.TokenManager(self.config, store, node_id=self.node_id)
        return self._token_manager

    def token_credential(self, token_id: str, mechanism: str):
        """A delegation token's SCRAM credential, owner name and expiry (None: no such token)."""
        if self.metadata is None and self.cluster is None:
            return None
        return self.token_manager.credential(token_id, mechanism)

    def _install_authorizer(self) -> None:
        """ACLs (authorizer.class.name): every handler is wrapped with its rule once."""
        from kafkatool.broker.security import acl, acl_rules

        try:
            on = acl.enabled(self.config)
        except acl.AclError as exc:
            raise ConfigError(str(exc)) from None
        if not on or self.authorizer is not None:
            return
        store = self.metadata
        if self.cluster is not None:
            # ZooKeeper mode: the ACLs are the cluster's, in /kafka-acl (every broker reloads them)
            from kafkatool.broker.cluster.acl_store import ZkAclStore

            store = ZkAclStore(self.cluster.zk)
            store.watch()
        self.authorizer = acl.Authorizer(
            store,
            super_users=self.config.get("super.users"),
            allow_if_no_acl=self.config.bool("allow.everyone.if.no.acl.found"),
        )
        acl_rules.install(self.router)
        log.info(
            "ACL authorizer enabled: %d ACLs, super.users=%s, allow.everyone.if.no.acl.found=%s",
            len(self.authorizer.acls),
            self.config.get("super.users") or "",
            self.config.bool("allow.everyone.if.no.acl.found"),
        )

    # ------------------------------------------------------------------ storage
    def open_storage(self) -> StartupReport:
        t0 = time.monotonic()
        dirs = self.config.log_dirs
        writable = not self.read_only
        if self.read_only:
            missing = [str(d) for d in dirs if not d.is_dir()]
            if missing:
                raise OSError(f"log dir {missing[0]} does not exist (--read-only never creates one)")
        offline = dict(self._told_offline)  # dirs another process of this broker found failed
        metas, unreadable = load_meta_properties(dirs)
        for d, why in (unreadable if writable else {}).items():
            offline.setdefault(d, why)
        new_dirs = []
        for d in dirs:
            try:
                if not d.exists() or not any(d.iterdir()):
                    new_dirs.append(str(d))
            except OSError as exc:
                if not writable:
                    raise
                offline.setdefault(str(d), f"Error while listing log dir {d}: {exc}")
        explicit = self.config.explicit_node_id
        stored = stored_node_id(metas, explicit) if not self.is_member else None
        if stored is not None and explicit is None:
            self.node_id = stored  # serving a copied log dir: keep its broker's id
        from kafkatool.broker import processes

        count = self.config.int(processes.PROCESSES_CONFIG)
        if count > 1 and self.processes is None:
            if self.config.get("zookeeper.connect") or not writable:
                raise ConfigError(
                    f"{processes.PROCESSES_CONFIG}={count} is for a standalone broker that writes "
                    "(not with zookeeper.connect or --read-only)"
                )
            processes.check_ports(self.config, count)
            self.processes = processes.Primary(self, count)
        self.metadata = MetadataStore(
            dirs,
            self.node_id,
            writable=writable and not self.is_member,
            cluster_id=self.config.get("cluster.id"),
        )
        if self.config.get("zookeeper.connect") and writable:
            from kafkatool.broker.cluster.membership import Cluster

            # topics are ZooKeeper's: the controller's LeaderAndIsr/UpdateMetadata bring them
            self.metadata.topics.clear()
            self.metadata.persist_topics = False
            self.cluster = Cluster(self)
            self.replicas = self.cluster.replicas
            self.cluster.connect()
        self._install_authorizer()
        self.reload_quotas()
        kraft: list = []
        notes: list[str] = []
        if self.cluster is None and not self.is_member:  # a member takes the primary's
            kraft, notes = self._take_kraft_configs(dirs)
        log_config = self._log_config_memo()
        in_file = set(self.metadata.topics)

        def stored_log_config(name: str, configs: dict[str, str]) -> LogConfig:
            try:
                return log_config(configs)
            except ConfigError as exc:
                raise self._stored_config_refused(name, exc, kraft if name not in in_file else []) from None

        topic_configs = {n: stored_log_config(n, t.configs) for n, t in self.metadata.topics.items()}
        # every topic the dirs' KRaft metadata holds, a local log or not, before any log loads
        # (Kafka's LogManager.startup takes the topics' configs from the metadata image first:
        # a refusal leaves every dir, and its clean-shutdown marker, as it was); reconcile
        # takes a topic's configs from the first layer that holds it, and so does this
        for name in sorted({t for la in kraft for t in la.topics if t is not None} - in_file):
            layer = next(la for la in kraft if la.holds(name))
            topic_configs[name] = stored_log_config(name, layer.get(name))
        if self.cluster is not None:
            topic_configs.update(self._zk_topic_configs(dirs, log_config))
        clean = (
            {str(d): (d / ".kafka_cleanshutdown").exists() for d in dirs}
            if self.processes is not None
            else None
        )
        # standalone (KRaft): a log the metadata does not hold is a stray (the first process
        # of several sets aside the others' too, before they start)
        stray = self._stray_reason if self.cluster is None and not self.is_member else None
        self.manager = LogManager(
            dirs,
            self.config.log_config(),
            topic_configs=topic_configs,
            writable=writable,
            recovery_threads=self.config.int("num.recovery.threads.per.data.dir"),
            owns=self.processes.owns if self.processes is not None else None,
            member=self.is_member,
            clean_shutdown=self._clean_shutdown,
            offline=offline,
            stray=stray,
        )
        self.manager.on_offline_dir = self._on_offline_dir
        foreign, foreign_epochs = self._foreign_logs(dirs)
        on_disk: dict[str, dict[int, Uuid | None]] = {}
        for (topic, part), lg in self.manager.logs.items():
            on_disk.setdefault(topic, {})[part] = lg.topic_id
        for _path, topic, part, topic_id in foreign:
            on_disk.setdefault(topic, {})[part] = topic_id
        compacted = {tp[0] for st in self.manager.dirs.values() for tp in st.cleaner_offsets}
        if self.cluster is None and not self.is_member:  # a member takes the primary's metadata
            notes += self.metadata.reconcile(on_disk, compacted=compacted, kraft=kraft)
            if stray is not None:
                # a topic adopted from logs of different topic ids has one: the others are
                # strays now (as they would be at every later start)
                paths = {(topic, part): path for path, topic, part, _id in foreign}
                for name in sorted(set(on_disk) - in_file):
                    for part, topic_id in sorted(on_disk[name].items()):
                        why = self._stray_reason((name, part), topic_id)
                        if why is None:
                            continue
                        if (name, part) in paths:
                            if paths[(name, part)].parent in self.manager.offline_dirs:
                                continue  # out of reach: the start the dir is back sets it aside
                            self.manager.move_aside_or_fail(paths[(name, part)], (name, part), why)
                        else:
                            self.manager.set_aside_loaded((name, part), why)
        for d, why in self.manager.offline_dirs.items():
            if str(d) in self._told_offline:
                # the process that found it wrote the ERROR line
                log.warning(
                    "log dir %s is offline: another process of this broker found it failed: %s", d, why
                )
            else:
                log.error("%s; log dir %s is offline", why, d)
            self.metadata.offline_dirs.add(d)
        # handled as any failure once the broker starts (LogManager puts them in the
        # LogDirFailureChannel; ReplicaManager's LogDirFailureHandler takes them)
        self._offline_at_start = list(self.manager.offline_dirs)
        if self.metadata.path.parent in self.manager.offline_dirs and self.metadata.writable:
            if self.cluster is None:
                raise OSError(
                    f"the log dir {self.metadata.path.parent} that holds the cluster metadata "
                    "is offline (Kafka does not start without its metadata log dir either)"
                )
            self.metadata.writable = False
        if self.is_member:
            self.manager.checkpoint_sink = self.processes.send_checkpoint
        elif writable:
            # the event loop takes checkpoint snapshots; the scheduler thread writes the files
            self.manager.checkpoint_writer = self.workers.checkpoint_writer(self.manager)
        for (topic, part), path, target, why in self.manager.moved_aside:
            log.info("Found stray log dir %s: %s", path, why)
            if target != path:
                log.warning(
                    "Log for partition %s-%d is marked as stray and renamed to %s", topic, part, target
                )
            else:
                notes.append(f"{path}: a stray log ({why}), not served (--read-only renames nothing)")
        if stray is not None and writable and not self.manager.offline_dirs:
            self.metadata.deleted_topic_ids.clear()  # every dir was read: none is left
        for (name, p), epoch in foreign_epochs.items():
            # Metadata names the epoch the owner's log has (a dir written by Kafka has some)
            t = self.metadata.topics.get(name)
            if t is not None and epoch > t.leader_epoch(p):
                t.leader_epochs[p] = epoch
        owns = self.processes.owns if self.processes is not None else None
        for name, t in self.metadata.topics.items():
            cfg = stored_log_config(name, t.configs)
            self.manager.topic_configs[name] = cfg
            for p in range(t.partitions):
                if owns is not None and not owns((name, p)):
                    continue  # another process of this broker serves it
                lg = self.manager.get_log(name, p)
                if lg is not None:
                    # a topic found on disk was loaded before its configs were known (reconcile)
                    lg.config = cfg
                if lg is None:
                    if not writable:
                        notes.append(f"topic {name}: partition {p} has no dir (reported unavailable)")
                        continue
                    if self.manager.offline_dirs:
                        # its log may be on an offline dir (LogManager.getOrCreateLog, not isNew)
                        self.manager.offline_partitions.add((name, p))
                        continue
                    lg = self.manager.create_log(name, p, topic_id=t.topic_id)
                elif lg.topic_id is None and writable:
                    lg.assign_topic_id(t.topic_id)
                latest = lg.leader_epoch_cache.latest_epoch
                if latest is not None and latest > t.leader_epoch(p):
                    t.leader_epochs[p] = latest
                self._attach(lg)
        if self.read_only:
            for lg in self.manager.logs.values():
                notes.extend(_cap_to_valid_data(lg))
        max_pid = -1
        for lg in self.manager.logs.values():
            if lg.producer_state.producers:
                max_pid = max(max_pid, max(lg.producer_state.producers))
        reserved = self.metadata.producer_ids_reserved
        self.next_producer_id = max(reserved, max_pid + 1)
        self.metadata.producer_ids_reserved = self.next_producer_id
        self.metadata.write_meta_properties()
        self.metadata.save()
        if self.is_member:
            self._remember_metadata()
        elif self.processes is not None:
            # the members load their partitions while this process starts listening
            self.processes.spawn(clean)
        recovered = sum(len(lg.load_result.recovered) for lg in self.manager.logs.values())
        for state in self.manager.dirs.values():
            notes.extend(state.warnings)
        self.startup = StartupReport(
            [str(d) for d in dirs],
            len(self.manager.logs),
            len(self.metadata.topics),
            {str(d): s.had_clean_shutdown for d, s in self.manager.dirs.items()},
            recovered,
            notes,
            time.monotonic() - t0,
            new_dirs,
        )
        return self.startup

    def _foreign_logs(self, dirs: list[Path]) -> tuple[list, dict]:
        """The first process of several: the other processes' partitions on disk ((dir, topic,
        partition, topic id) and the latest epoch of each), their strays set aside first (the
        rule of :meth:`_stray_reason`; a rename that fails takes the dir offline:
        LogManager.move_aside_or_fail)."""
        found: list[tuple[Path, str, int, Uuid | None]] = []
        epochs: dict[tuple[str, int], int] = {}
        if self.processes is None or self.is_member:
            return found, epochs
        for path, topic, part, topic_id, epoch in _foreign_partitions(dirs, self.manager.logs):
            why = (
                None
                if path.parent in self.manager.offline_dirs
                else self._stray_reason((topic, part), topic_id)
            )
            if why is not None:
                self.manager.move_aside_or_fail(path, (topic, part), why)
                continue  # never the topic's log: not adopted
            found.append((path, topic, part, topic_id))
            if epoch is not None:
                epochs[(topic, part)] = epoch
        return found, epochs

    def _stray_reason(self, tp: tuple[str, int], topic_id: Uuid | None) -> str | None:
        """Why a partition's log found at start-up is not the metadata's (None: it may be).
        Kafka's KRaft broker calls a log whose topic id is not in its metadata image a stray
        (LogManager.findStrayReplicas: image.getPartition(topicId, p) is None): a log whose
        topic id differs from the metadata's id for its topic's name (the topic was deleted and
        made again while the log was away), or is the id of a topic deleted while its log dir
        was offline (MetadataStore.deleted_topic_ids).  Here the embedded metadata adopts a
        topic it does not hold that is found on disk (a Kafka log dir), so such a log is no
        stray.  A log without partition.metadata (an adopted dir of a Kafka before 2.8) is
        given the metadata's id of its name (LogManager.getOrCreateLog: "we may get a log that
        does not have a topic ID. Assign it here"), unless the name is of a topic deleted while
        its dir was offline and not made again (3.7.0 has no rule for a log with no id in KRaft
        mode: findStrayReplicas throws, a fatal start-up fault)."""
        deleted = self.metadata.deleted_topic_ids
        if topic_id is not None:
            t = self.metadata.topics.get(tp[0])
            if str(topic_id) in deleted or (t is not None and t.topic_id != topic_id):
                return f"the topicId {topic_id} does not exist in the metadata image"
            return None
        if tp[0] in deleted.values() and tp[0] not in self.metadata.topics:
            return f"the topic {tp[0]} was deleted while its log dir was offline and the log has no topic id"
        return None

    def _stored_config_refused(self, name: str, exc: ConfigError, kraft: list) -> ConfigError:
        """Start-up's refusal of a topic's stored configs (Kafka does not start: LogManager's
        topic LogConfig.fromProps), naming the topic, the value and where it is stored, as the
        fleet scan's topic_config_refused finding does (topic_settings.stored_refusals): the
        first of ``kraft`` (the dirs' KRaft layers) that holds the topic, which reconcile took its
        configs from, else the embedded metadata."""
        from kafkatool.log import topic_settings as ts

        layer = next((la for la in kraft if la.holds(name)), None)
        if layer is None:
            t = self.metadata.topics[name]
            layer = ts.ConfigLayer(ts.SOURCE_EMBEDDED, {name: t.configs}, kept_in=str(self.metadata.path))
        refused = ts.stored_refusals(layer, name)
        if not refused:  # no one value: the values together (LogConfig's rules between them)
            return ConfigError(
                f"topic {name}: stored configs refused: {exc} (in {layer.label}: {layer.kept_in})"
            )
        return ConfigError("; ".join(map(str, refused)))

    def _zk_topic_configs(self, dirs: list[Path], log_config) -> dict[str, LogConfig]:
        """Cluster mode: the LogConfig of each topic with a log here and overrides in
        /config/topics/T, read before the logs load (KafkaServer.startup hands the LogManager the
        topic config overrides from ZooKeeper: a compacted topic's log is never loaded,
        recovered or retention-checked as a deleted one). The overrides of every topic of the
        cluster are read and checked, a local log or not, as Kafka's are: an override the log
        engine refuses refuses the start, naming its znode (LogManager.startup's
        LogConfig.fromProps), and so, after those, does a stored remote.storage.enable=true
        (ZkConfigManager.startup applies every /config/topics entry:
        topic_settings.stored_topic_config_error)."""
        from kafkatool.broker.cluster.membership import ClusterError
        from kafkatool.log import topic_settings as ts
        from kafkatool.log.manager import partition_dirs

        local = {tp[0] for d in dirs if d.is_dir() for _path, tp in partition_dirs(d)}
        t0 = time.monotonic()
        overrides = self.cluster.topic_config_overrides(local)
        parsed = {}
        for name, configs in overrides.items():
            try:
                parsed[name] = log_config(configs)
            except ConfigError as exc:
                raise ClusterError(f"/config/topics/{name}: {exc}") from None
        for name, configs in overrides.items():
            err = ts.stored_topic_config_error(configs)
            if err is not None:
                raise ClusterError(f"/config/topics/{name}: {err}")
        self.unnamed_topic_configs = {name: c for name, c in overrides.items() if name in local}
        log.info(
            "topic config overrides read from ZooKeeper in %.3f s: %d topics have some, %d of the %d with a local log",
            time.monotonic() - t0,
            len(overrides),
            len(self.unnamed_topic_configs),
            len(local),
        )
        return {name: parsed[name] for name in self.unnamed_topic_configs}

    def set_unnamed_topic_configs(
        self, name: str, configs: dict[str, str], logs=None, log_config=None
    ) -> int:
        """Cluster mode: new /config/topics overrides of a topic the controller has not named
        yet reach its loaded logs (LogManager.updateTopicConfig; ``logs``: the topic's, when
        the caller has them). Returns how many logs took them."""
        if logs is None:
            logs = [lg for (t, _p), lg in self.manager.logs.items() if t == name]
        if not logs:
            return 0
        if configs:
            self.unnamed_topic_configs[name] = dict(configs)
        else:
            self.unnamed_topic_configs.pop(name, None)
        self._swap_log_config(name, (log_config or self.config.log_config)(configs), logs)
        return len(logs)

    def _take_kraft_configs(self, dirs: list[Path]) -> tuple[list, list[str]]:
        """The dynamic broker configs of a Kafka KRaft dir's ``__cluster_metadata`` log
        (kafka-configs --entity-default / --entity-name: ConfigRecords of the broker resource),
        taken before the logs open, as a KRaft broker publishes them before its LogManager
        loads; through the one rule (BrokerConfig.take_dynamic: an invalid value is logged and
        left out, the rest applies). The first dir's log wins, and serve's own file (changes made
        since, through this broker) over it. Returns the dirs' KRaft layers (reconcile reads
        their topic configs) and startup notes."""
        from kafkatool.log import topic_settings as ts

        # this broker's own configs are those of the id it runs as (the configured one, which
        # open_storage checked against every dir's meta.properties), as Kafka's
        found_in = [(d, la) for d in dirs if (la := ts.read_kraft(d, self.node_id)) is not None]
        if not found_in:
            return [], []
        where = ", ".join(str(d / ts.CLUSTER_METADATA_DIR) for d, _ in found_in)
        stored = {}
        found = {}
        for per_broker, what in ((False, "cluster default"), (True, f"broker {self.node_id}")):
            own = self.config.dynamic if per_broker else self.config.dynamic_default
            stored[per_broker] = {
                k: v
                for _, la in reversed(found_in)
                for k, v in (la.broker_node if per_broker else la.broker_default).items()
            }
            found[per_broker] = (f"{where} ({what})", {**stored[per_broker], **own})
        _took, warnings = self.config.take_dynamic(found)
        for warning in warnings:
            log.warning("%s", warning)
        notes = []
        for per_broker, configs in stored.items():
            layer = self.config.dynamic if per_broker else self.config.dynamic_default
            what = "this broker" if per_broker else "cluster default"
            notes += [
                f"dynamic broker config ({what}) from __cluster_metadata: {k}={v}"
                for k, v in configs.items()
                if layer.get(k) == v
            ]
        return [la for _, la in found_in], notes

    def adopt_metadata(self, deleted: dict[str, Uuid] | None = None) -> None:
        """A member's logs follow the metadata the primary sent: new topics' and partitions'
        logs are made, configs applied, and the logs of a topic deleted since the last metadata
        this process saw are deleted (never a log whose topic it never knew); ``deleted``: the
        topics (name: id) the primary deleted since a dead process of this member last
        acknowledged the metadata (its logs of them go too). A partition whose leader epoch
        grew since the last metadata is led by this process from the new epoch on."""
        owns = self.processes.owns
        self.manager.config = self.config.log_config()  # the primary's dynamic broker configs
        log_config = self._log_config_memo()
        seen = {**self._seen_topics, **(deleted or {})}
        doomed = []
        for name, p in list(self.manager.logs):
            t = self.metadata.topics.get(name)
            old_id = seen.get(name)
            gone = t is None or (old_id is not None and t.topic_id != old_id)
            if gone and name in seen:
                target = self.manager.delete_log(name, p)
                if target is not None:
                    doomed.append(target)
                self.wake((name, p))
        for name, t in self.metadata.topics.items():
            cfg = log_config(t.configs)
            self.manager.topic_configs[name] = cfg
            for p in range(t.partitions):
                if not owns((name, p)):
                    continue
                lg = self.manager.get_log(name, p)
                if lg is None:
                    if (name, p) in self.manager.offline_partitions:
                        continue  # its dir failed: offline until the next start, not made again
                    lg = self.manager.create_log(name, p, topic_id=t.topic_id)
                    self._attach(lg)
                lg.config = cfg
                epoch = t.leader_epoch(p)
                latest = lg.leader_epoch_cache.latest_epoch
                if latest is not None and latest > epoch:
                    t.leader_epochs[p] = latest
                elif epoch > self._seen_epochs.get((name, p, t.topic_id), epoch):
                    # the primary made this process the partition's leader again at a new epoch
                    # (its return after a death, as Kafka's controller elects a returning broker)
                    lg.become_leader(epoch)
        for name in set(seen) - set(self.metadata.topics):
            self.manager.topic_configs.pop(name, None)
            self.metrics.topics.remove(name)  # BrokerTopicStats.removeMetrics
        self._remember_metadata()
        if doomed:
            self.manager.remove_deleted(doomed)

    def _remember_metadata(self) -> None:
        """A member: the topics (ids) and its partitions' leader epochs of the metadata it has
        applied, which the next metadata from the primary is compared with."""
        self._seen_topics = {n: t.topic_id for n, t in self.metadata.topics.items()}
        self._seen_epochs = {
            (n, p, t.topic_id): t.leader_epoch(p)
            for n, t in self.metadata.topics.items()
            for p in range(t.partitions)
            if self.processes.owns((n, p))
        }

    def _log_config_memo(self):
        """``config.log_config`` for start-up's loops: topics with the same overrides (most have
        none) share one LogConfig (frozen), computed once."""
        memo: dict[tuple, object] = {}

        def log_config(configs: dict[str, str]):
            key = tuple(sorted(configs.items()))
            cfg = memo.get(key)
            if cfg is None:
                cfg = memo[key] = self.config.log_config(configs)
            return cfg

        return log_config

    def _attach(self, lg: Log) -> None:
        if self.cluster is None:
            # single node: the ISR is this broker, so the high watermark is the log end offset
            lg.update_high_watermark(lg.log_end_offset)
        if lg.writable and self._on_append not in lg.listeners:
            lg.add_append_listener(self._on_append)
        if lg.writable:
            # segments leave the map at once but close file.delete.delay.ms later (in-flight
            # fetches keep their file); a roll's fsync runs on the scheduler thread
            lg.defer_deletes = True
            lg.flush_scheduler = self.workers.schedule_flush

    def _on_append(self, lg: Log, log_end_offset: int) -> None:
        if self.replicas is not None:
            # a leader's high watermark waits for the ISR (followers set theirs from the leader)
            self.replicas.on_leader_append(lg)
        else:
            lg.update_high_watermark(log_end_offset)
        self.wake(lg.topic_partition)

    def on_leadership_change(self, leaders: list[tuple[str, int]], followers: list[tuple[str, int]]) -> None:
        """Cluster mode: the coordinators follow the leadership of their internal topics
        (RequestHandlerHelper.onLeadershipChange)."""
        from kafkatool.broker.group.coordinator import group_coordinator
        from kafkatool.broker.group.persistence import OFFSETS_TOPIC
        from kafkatool.broker.txn.state_log import TRANSACTION_STATE_TOPIC

        led = [p for t, p in leaders if t == OFFSETS_TOPIC]
        lost = [p for t, p in followers if t == OFFSETS_TOPIC]
        if led or lost:
            group_coordinator(self).on_leadership_change(led, lost)
        led = [p for t, p in leaders if t == TRANSACTION_STATE_TOPIC]
        lost = [p for t, p in followers if t == TRANSACTION_STATE_TOPIC]
        if led or lost:
            from kafkatool.broker.txn.coordinator import txn_coordinator

            txn_coordinator(self).on_leadership_change(led, lost)

    def leader_error(self, topic: str, partition: int) -> int | None:
        """None when this broker may serve the partition as its leader; else the error code
        (NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION). A single node leads everything it
        has; a process of a broker of several, the partitions it owns."""
        if self.replicas is not None:
            return self.replicas.leader_error(topic, partition)
        if self.processes is not None:
            return self.processes.leader_error(topic, partition)
        return None

    def partition_log(self, t: TopicMeta | None, partition: int) -> tuple[Log | None, int]:
        """A partition of topic ``t`` (None: not in the metadata) as a request handler finds it:
        (its log, NONE), or (None, the error code to answer) when the topic is unknown (a log
        whose topic is being deleted is not served) or this process has no log of it:
        NOT_LEADER_OR_FOLLOWER when another process of this broker serves it or (cluster mode)
        the controller's metadata names the partition, else
        UNKNOWN_TOPIC_OR_PARTITION; KAFKA_STORAGE_ERROR when its log dir is offline."""
        if t is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        lg = self.get_log(t.name, partition)
        if lg is not None:
            return lg, ErrorCode.NONE
        if (t.name, partition) in self.manager.offline_partitions:
            return None, ErrorCode.KAFKA_STORAGE_ERROR  # HostedPartition.Offline: its dir failed
        # cluster mode: ReplicaManager.getPartitionOrError's NOT_LEADER_OR_FOLLOWER for a partition
        # the metadata cache holds (another broker's, or one whose log could not be made here)
        routes = self.replicas if self.replicas is not None else self.processes
        elsewhere = routes.leader_error(t.name, partition) if routes is not None else None
        return None, elsewhere or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def partition_leader(self, topic: str, partition: int) -> int:
        """Standalone: the node id clients are told leads a partition (-1: none yet)."""
        if self.processes is not None:
            return self.processes.leader_node(topic, partition)
        return self.node_id if self.get_log(topic, partition) is not None else -1

    # ------------------------------------------------------------------ failed log dirs
    def report_io_error(self, where, msg: str, exc: BaseException) -> None:
        """An I/O error of a log operation (any thread): the log dir of ``where`` (a dir, a
        partition dir or a file in one) goes offline, once (Kafka's
        LogDirFailureChannel.maybeAddOfflineLogDir; ``msg`` is Kafka's "Error while ... in dir
        ..." line).  The caller answers its own request as it did (KAFKA_STORAGE_ERROR)."""
        manager = self.manager
        if manager is not None and manager.report_io_error(where, msg, exc):
            return
        d = manager.dir_of_path(where) if manager is not None else None
        if d is not None and manager.dirs[d].offline is not None:
            log.debug("%s: %s", msg, exc)  # the dir's one ERROR line was written already
        else:
            log.error("%s: %s", msg, exc)  # not a dir failure: read-only, or out of descriptors

    def report_log_error(self, lg, action: str, exc: BaseException) -> None:
        """:meth:`report_io_error` of an operation on ``lg`` ("appending records to", ...), a
        Log or one of its segments (log_error_message: the partition dir names both)."""
        self.report_io_error(lg.dir, log_error_message(lg, action), exc)

    def _on_write_failure(self, segment, exc: OSError) -> None:
        """The append writer's report of a failed queued write (a produce's append, collected on
        the event loop): the segment's log dir goes offline, as a synchronous append's failure
        takes it (the answers of the produces whose writes failed say KAFKA_STORAGE_ERROR)."""
        if segment is None:  # closed and gone before the failure was collected (deleted)
            log.error("a queued append of a segment closed since failed: %s", exc)
            return
        self.report_log_error(segment, "appending records to", exc)

    def _on_offline_dir(self, d: Path, msg: str, exc: BaseException) -> None:
        """LogManager.on_offline_dir: the one ERROR line of a failed dir, then its handling on
        the event loop (Kafka's LogDirFailureHandler thread takes it off the queue)."""
        log.error("%s: %s; log dir %s is offline", msg, exc, d)
        loop = self._loop
        if loop is None or loop.is_closed():
            self.handle_log_dir_failure(d)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self.handle_log_dir_failure(d)
        else:
            loop.call_soon_threadsafe(self.handle_log_dir_failure, d)

    def handle_log_dir_failure(self, d: Path, origin: int | None = None) -> None:
        """ReplicaManager.handleLogDirFailure + LogManager.handleLogDirFailure: the dir's
        partitions stop being served (KAFKA_STORAGE_ERROR from now on), parked fetches and
        acks=all produces on them are answered, the controller is told (cluster mode), and a
        broker left with no live dir, or (standalone) without the dir of its embedded metadata,
        halts with exit status 1.  A broker of several processes shares its dirs: the other
        processes are told (``origin``: the process that told this one, not told back), and
        the primary, which learns every failure, is the one that halts (all of them)."""
        manager = self.manager
        if manager is None:
            return
        all_dirs = ", ".join(str(x) for x in manager.dirs)
        log.warning("Stopping serving replicas in dir %s", d)
        gone = manager.take_offline(d)
        if self.processes is not None:
            self.processes.tell_dir_failed(d, manager.dirs[d].offline, gone, origin)
        if not manager.live_dirs:
            if self.is_member and not self.processes.channel.closed.is_set():
                # the primary learns every dir failure of the broker: it halts every process
                log.warning("all log dirs in %s have failed; the primary process halts the broker", all_dirs)
                return
            self.halt(f"Shutdown broker because all log dirs in {all_dirs} have failed")
            return
        if d == self.metadata.path.parent and self.metadata.writable:
            if self.cluster is None:
                # the embedded metadata is this broker's metadata log: Kafka halts when the
                # metadata log dir fails (ReplicaManager.handleLogDirFailure)
                self.halt(f"Shutdown broker because the metadata log dir {d} has failed")
                return
            self.metadata.writable = False  # cluster mode keeps the topics in ZooKeeper
        for tp in gone:
            self.wake(tp)
        if self.replicas is not None:
            self.replicas.on_log_dir_failure(d, gone)
        log.warning(
            "Logs for partitions %s are offline due to failure on log directory %s",
            ",".join(f"{t}-{p}" for t, p in gone),
            d,
        )

    def dir_failed_elsewhere(self, d: str, why: str, gone: list, origin: int) -> None:
        """Another process of this broker (``origin``) found log dir ``d`` failed (on the event
        loop): it is failed for this process too (once), and ``gone``, the partitions that
        process took offline with it, are offline for the broker."""
        manager = self.manager
        if manager is None:  # before this process's storage opened: it opens offline
            self._told_offline.setdefault(d, why)
            return
        self.processes.partitions_offline(origin, gone)
        if manager.mark_offline(d, why):
            log.warning(
                "log dir %s is offline: process %d of this broker found it failed: %s", d, origin, why
            )
            self.handle_log_dir_failure(Path(d), origin)

    def halt(self, line: str) -> None:
        """Kafka's fatal line and Exit.halt(1): no shutdown, no marker, no checkpoint (the next
        start recovers every dir).  Exit status 1 (serve's "the broker failed"); the primary
        of a broker of several processes kills the others first (one broker halts)."""
        log.critical(line)
        if self.processes is not None and self.processes.is_primary:
            self.processes.kill()
        for h in logging.getLogger().handlers + log.handlers:
            try:
                h.flush()
            except Exception:
                pass
        os._exit(1)

    # ------------------------------------------------------------------ long polls
    def waiter(self, tps) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        for tp in tps:
            self._waiters.setdefault(tp, set()).add(fut)
        return fut

    def drop_waiter(self, fut: asyncio.Future, tps) -> None:
        for tp in tps:
            s = self._waiters.get(tp)
            if s is not None:
                s.discard(fut)
                if not s:
                    del self._waiters[tp]

    def wake(self, tp) -> None:
        futs = self._waiters.pop(tp, None)
        if futs:
            for f in futs:
                if not f.done():
                    f.set_result(None)

    # ------------------------------------------------------------------ topics
    def topic(self, name: str) -> TopicMeta | None:
        return self.metadata.topics.get(name)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.manager.logs.get((topic, partition))

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str],
        *,
        replication_factor: int | None = None,
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicMeta:
        if self.cluster is not None:
            # ZooKeeper mode: written to ZooKeeper; the controller places and elects
            rf = replication_factor or self.config.int("default.replication.factor")
            return self.cluster.create_topic(name, partitions, rf, configs, assignment)
        t = self.metadata.create_topic(name, partitions, configs)
        self.manager.topic_configs[name] = self.config.log_config(configs)
        for p in range(partitions):
            if self.processes is None or self.processes.owns((name, p)):
                self._attach(self.manager.create_log(name, p, topic_id=t.topic_id))
        self.metadata.save()
        log.info(
            "topic created topic=%s partitions=%d topic_id=%s configs=%s",
            name,
            partitions,
            t.topic_id,
            json.dumps(configs, sort_keys=True),
        )
        return t

    def add_partitions(self, name: str, count: int) -> None:
        if self.cluster is not None:
            self.cluster.add_partitions(name, count)
            return
        t = self.metadata.topics[name]
        for p in range(t.partitions, count):
            if self.processes is None or self.processes.owns((name, p)):
                self._attach(self.manager.create_log(name, p, topic_id=t.topic_id))
        t.partitions = count
        self.metadata.save()
        log.info("partitions added topic=%s partitions=%d", name, count)

    def delete_topic(self, name: str) -> None:
        if self.cluster is not None:
            self.cluster.delete_topic(name)  # /admin/delete_topics: the controller deletes
            return
        t = self.metadata.topics.pop(name)
        self.metrics.topics.remove(name)  # BrokerTopicStats.removeMetrics
        if self.manager.offline_dirs:
            # a partition there is out of reach: its log, found again once the dir is back,
            # is a stray (Kafka: its topic id is gone from the metadata image)
            self.metadata.deleted_topic_ids[str(t.topic_id)] = name
        doomed = []
        for p in range(t.partitions):
            tp = (name, p)
            target = self.manager.delete_log(name, p)
            if target is None:
                continue
            doomed.append(target)
            self.wake(tp)
        self.manager.topic_configs.pop(name, None)
        self.metadata.save()
        self.manager.remove_deleted(doomed)
        log.info("topic deleted topic=%s topic_id=%s", name, t.topic_id)
        if getattr(self, "group_coordinator", None) is not None:
            self.group_coordinator.handle_deleted_topic(name)

    def alter_topic_configs(
        self, name: str, configs: dict[str, str], *, from_zookeeper: bool = False
    ) -> None:
        if self.cluster is not None and not from_zookeeper:
            # ZooKeeper mode: /config/topics/T and a change notification; every broker applies it
            self.cluster.write_topic_configs(name, configs)
        t = self.metadata.topics.get(name)
        if t is None:
            return
        cfg = self.config.log_config(configs)
        t.configs = dict(configs)
        self._set_log_config(t, cfg)
        self.metadata.save()

    def _set_log_config(self, t: TopicMeta, cfg: LogConfig) -> None:
        """A topic's logs take a new LogConfig (:meth:`_swap_log_config`)."""
        logs = [self.get_log(t.name, p) for p in range(t.partitions)]
        self._swap_log_config(t.name, cfg, [lg for lg in logs if lg is not None])

    def _swap_log_config(self, name: str, cfg: LogConfig, logs) -> None:
        """``logs`` of topic ``name`` take a new LogConfig (frozen: swapped whole, as Kafka's
        UnifiedLog.updateConfig), and so do the logs made for the topic later."""
        self.manager.topic_configs[name] = cfg
        for lg in logs:
            lg.config = cfg

    def reconfigure_logs(self) -> None:
        """The broker's topic defaults changed (a dynamic broker config: Kafka's
        DynamicLogConfig.reconfigure): the default of new logs (LogManager
        .reconfigureDefaultLogConfig) and every log whose topic does not override a changed
        config follow at once; a topic's own override still wins (updateLogsConfig)."""
        if self.manager is None:
            return
        self.manager.config = self.config.log_config()
        log_config = self._log_config_memo()
        for t in self.metadata.topics.values():
            try:
                cfg = log_config(t.configs)
            except ConfigError:
                if self.cluster is None:
                    raise
                continue  # stored overrides the engine refuses: no log of it (ReplicaManager._log_config)
            self._set_log_config(t, cfg)
        if self.cluster is not None:  # and the logs the controller has not named yet
            unnamed: dict[str, list[Log]] = {}
            for (name, _p), lg in self.manager.logs.items():
                if name not in self.metadata.topics:
                    unnamed.setdefault(name, []).append(lg)
            for name, logs in unnamed.items():
                configs = self.unnamed_topic_configs.get(name, {})
                self.set_unnamed_topic_configs(name, configs, logs, log_config)

    def allocate_producer_id(self) -> int:
        if self.cluster is not None:
            # ZooKeeper mode: blocks of /latest_producer_id_block keep ids unique in the cluster
            return self.cluster.allocate_producer_id()
        pid = self.next_producer_id
        self.next_producer_id += 1
        if self.next_producer_id > self.metadata.producer_ids_reserved:
            self.metadata.producer_ids_reserved = pid + PRODUCER_ID_BLOCK
            self.metadata.save()
        return pid

    # ------------------------------------------------------------------ serving
    @property
    def advertised(self) -> list[tuple[str, int]]:
        return [self._endpoint(lst) for lst in self.config.advertised_listeners]

    def _endpoint(self, lst) -> tuple[str, int]:
        port = lst.port
        if port == 0:
            for bound_lst, addr in zip(self.config.listeners, self.bound, strict=False):
                if bound_lst.name == lst.name:
                    port = addr[1]
        host = lst.host or "127.0.0.1"
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        return host, port

    def advertised_for(self, conn) -> tuple[str, int]:
        """The endpoint a client connected on ``conn`` is told about: the advertised listener with
        the same name as the one it came in on (Kafka answers per listener)."""
        name = getattr(getattr(conn, "listener", None), "name", None)
        for lst in self.config.advertised_listeners:
            if lst.name == name:
                return self._endpoint(lst)
        return self.advertised[0]

    async def start(self) -> None:
        import functools

        from kafkatool.broker.security import tls

        self._stopping = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._loop.set_exception_handler(self._loop_exception)
        if not self.read_only and self.append_writer is None:
            if append_writer_wanted(self.config):
                from kafkatool.log.append_writer import AppendWriter

                self.append_writer = AppendWriter()
                self.append_writer.on_failure = self._on_write_failure
                self.append_writer.attach(self._loop)
                log.info("append writer kind=%s", self.append_writer.kind)
            else:
                log.info("append writer kind=off")
        self._send_buffer = self.config.int("socket.send.buffer.bytes")
        self._receive_buffer = self.config.int("socket.receive.buffer.bytes")
        for lst in self.config.listeners:
            ctx = None
            if lst.tls:
                ctx = tls.listener_server_context(self.config, lst)
                mapper = tls.SslPrincipalMapper(
                    self.config.listener_setting(lst, "ssl.principal.mapping.rules")
                )
            else:
                mapper = None
            sasl_settings = None
            if lst.sasl:
                from kafkatool.broker.security.sasl import ListenerSasl

                sasl_settings = ListenerSasl(self.config, lst, self.scram_credential, self.token_credential)
            server = await asyncio.start_server(
                functools.partial(self._accept, lst, ctx, mapper, sasl_settings),
                lst.host or None,
                lst.port,
                reuse_address=True,
                backlog=self.config.int("socket.listen.backlog.size"),
                limit=1 << 20,
                # a broker of several processes takes clients once all of them serve
                start_serving=self.processes is None or not self.processes.is_primary,
            )
            # Kafka's Acceptor: socket.receive.buffer.bytes is the listening socket's SO_RCVBUF
            # (accepted connections inherit it; -1: the OS's own, autotuned)
            if self._receive_buffer != -1:
                for s in server.sockets:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
            self._servers.append(server)
            sock = server.sockets[0].getsockname()
            self.bound.append((sock[0], sock[1]))
        await self._start_metrics_endpoint()
        from kafkatool.broker.background import start_background

        for d in self._offline_at_start:
            # the LogDirFailureHandler's first items, before the broker registers (KafkaServer
            # starts the ReplicaManager first): in cluster mode the controller is told
            self.handle_log_dir_failure(d)
        self._offline_at_start = []
        if self.cluster is not None:
            self.cluster.start()
        if self.processes is not None and self.processes.is_primary:
            try:
                await self.processes.start()
            except BaseException:
                self.processes.kill()
                raise
            for server in self._servers:
                await server.start_serving()
        self._background = start_background(self)
        if getattr(self, "group_coordinator", None) is not None:
            self.group_coordinator.start()
        if self.metadata is not None and self.topic("__transaction_state") is not None and not self.is_member:
            from kafkatool.broker.txn.coordinator import txn_coordinator

            txn_coordinator(self)  # reload transactions, finish Prepare*, start the timeout checks

    async def _start_metrics_endpoint(self) -> None:
        """The Prometheus endpoint (kafkatool.metrics.prometheus.listener), if configured: each
        process of a broker of several on its own port (the config a member gets has it moved,
        processes.member_config), as each node of a Kafka cluster has its own exporter."""
        from kafkatool.broker.metrics import LISTENER_CONFIG, Endpoint, parse_listener

        value = self.config.get(LISTENER_CONFIG)
        if not value:
            return
        host, port = parse_listener(value)
        self._metrics_endpoint = Endpoint(self, host, port)
        await self._metrics_endpoint.start()

    @property
    def metrics_bound(self) -> tuple[str, int] | None:
        """(host, port) the Prometheus endpoint listens on (None: off)."""
        return self._metrics_endpoint.bound if self._metrics_endpoint is not None else None

    @property
    def stopping(self) -> bool:
        return self._stopping is not None and self._stopping.is_set()

    def connection_counts(self) -> list[tuple[str, int]]:
        """Open connections per listener (socket-server-metrics' connection-count)."""
        per = getattr(self, "_per_listener", None) or {}
        return [(lst.name, per.get(lst.name, 0)) for lst in self.config.listeners]

    # ------------------------------------------------------------------ connection limits
    def _limits(self):
        if getattr(self, "_conn_limits", None) is None:
            overrides = {}
            text = self.config.get("max.connections.per.ip.overrides") or ""
            try:
                pairs = props.parse_csv_map(text)  # KafkaConfig.getMap
            except ValueError as exc:
                log.warning("max.connections.per.ip.overrides: cannot use %r: %s", text, exc)
                pairs = []
            for host, count in pairs:
                try:
                    overrides[socket.gethostbyname(host)] = int(count)
                except (OSError, ValueError):
                    log.warning("max.connections.per.ip.overrides: cannot use %r", f"{host}:{count}")
            self._conn_limits = (self.config.int("max.connections.per.ip"), overrides)
            self._per_ip: dict[str, int] = {}
            self._per_listener: dict[str, int] = {}
            self._total_open = 0
            self._slot_freed = asyncio.Condition()
        return self._conn_limits

    async def _admit(self, lst, ip: str, writer) -> bool:
        """Kafka's ConnectionQuotas: max.connections.per.ip (+ overrides) refuses at once with one
        log line; max.connections (broker-wide and per listener) makes the acceptor wait for a slot."""
        per_ip, overrides = self._limits()
        limit = overrides.get(ip, per_ip)
        if self._per_ip.get(ip, 0) >= limit:
            log.info(
                "Rejected connection from /%s, address already has the configured maximum of %d connections.",
                ip,
                limit,
            )
            writer.transport.abort()
            return False
        total = self.config.int("max.connections")
        mine = int(self.config.listener_setting(lst, "max.connections") or total)
        async with self._slot_freed:
            await self._slot_freed.wait_for(
                lambda: self._total_open < total and self._per_listener.get(lst.name, 0) < mine
            )
            self._total_open += 1
            self._per_listener[lst.name] = self._per_listener.get(lst.name, 0) + 1
            self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        return True

    def _release(self, lst, ip: str) -> None:
        self._total_open -= 1
        self._per_listener[lst.name] -= 1
        self._per_ip[ip] -= 1
        if not self._per_ip[ip]:
            del self._per_ip[ip]

        async def notify():
            async with self._slot_freed:
                self._slot_freed.notify_all()

        asyncio.ensure_future(notify())

    def scram_credential(self, user: str, mechanism: str):
        """The stored SCRAM credential of ``user`` for ``mechanism`` (None: no such user/mechanism)."""
        from kafkatool.broker.security.scram import ScramCredential

        store = self.scram_store
        text = store.user_scram.get(user, {}).get(mechanism) if store is not None else None
        return None if text is None else ScramCredential.from_text(text)

    async def _accept(
        self, lst, ssl_ctx, mapper, sasl_settings, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # Kafka's Acceptor.configureAcceptedSocketChannel: no delay, keep-alive, and
            # socket.send.buffer.bytes as SO_SNDBUF unless -1
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                if self._send_buffer != -1:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer)
            except OSError:
                pass
        task = asyncio.current_task()
        self._conn_tasks.add(task)
        peer = writer.get_extra_info("peername")
        ip = peer[0] if isinstance(peer, tuple) else str(peer)
        if not await self._admit(lst, ip, writer):
            self._conn_tasks.discard(task)
            return
        try:
            principal = "User:ANONYMOUS"
            if ssl_ctx is not None:
                principal = await self._tls_handshake(lst, ssl_ctx, mapper, writer)
                if principal is None:
                    return
            conn = Connection(self, reader, writer, lst, principal)
            if sasl_settings is not None:
                from kafkatool.broker.security.sasl import SaslSession

                conn.sasl = SaslSession(sasl_settings, conn)
            self._connections.add(conn)
            try:
                await conn.run()
            finally:
                self._connections.discard(conn)
        except asyncio.CancelledError:
            # only stop() cancels a connection task: end it normally, or asyncio's
            # stream callback logs one traceback per open connection at shutdown
            pass
        finally:
            self._conn_tasks.discard(task)
            self._release(lst, ip)

    async def _tls_handshake(self, lst, ssl_ctx, mapper, writer: asyncio.StreamWriter) -> str | None:
        """TLS on an accepted socket; the principal, or None after one log line (Kafka's
        "Failed authentication with /ip (SSL handshake failed)") when it fails."""
        from kafkatool.broker.security import tls

        peer = writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        reason = None
        try:
            await tls.accept_tls(writer, ssl_ctx, handshake_timeout=10.0)
            return tls.principal_of(writer.get_extra_info("ssl_object"), mapper)
        except PermissionError as exc:  # no principal mapping rule matched
            reason = str(exc)
        except (ssl.SSLError, ConnectionError, OSError, TimeoutError) as exc:
            reason = f"SSL handshake failed: {getattr(exc, 'reason', None) or exc or type(exc).__name__}"
        log.info("Failed authentication with /%s listener=%s (%s)", host, lst.name, reason)
        writer.transport.abort()
        return None

    _EMFILE_EVERY_S = 10.0

    def _loop_exception(self, loop, context: dict) -> None:
        """Out of descriptors (EMFILE/ENFILE) while accepting: one log line per 10 s, not a
        traceback per attempt (asyncio pauses the listener a moment and retries by itself);
        anything else goes to asyncio's own handler."""
        import errno

        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            now = time.monotonic()
            self._emfile_count = getattr(self, "_emfile_count", 0) + 1
            if now - getattr(self, "_emfile_logged", -1e9) >= self._EMFILE_EVERY_S:
                log.warning(
                    "out of file descriptors (%s) accepting connections: new connections wait; raise "
                    "the open-files limit (ulimit -n, see the README) events=%d",
                    errno.errorcode.get(exc.errno, exc.errno),
                    self._emfile_count,
                )
                self._emfile_logged = now
                self._emfile_count = 0
            return
        loop.default_exception_handler(context)

    async def serve_until_stopped(self) -> None:
        await self._stopping.wait()

    def request_stop(self, *, failed: bool = False) -> None:
        self.failed = self.failed or failed
        if self._stopping is not None:
            self._stopping.set()

    async def stop(self) -> None:
        if self.cluster is not None:
            # controlled shutdown first: leadership moves while clients can still be answered
            await self.cluster.shutdown()
        for s in self._servers:
            s.close()
        if self._metrics_endpoint is not None:
            self._metrics_endpoint.close()
        await stop_tasks(self._background, "background")
        if self._connections:
            log.info("closing client connections count=%d", len(self._connections))
        for conn in list(self._connections):
            conn.abort()
        await stop_tasks(list(self._conn_tasks), "connection")
        for s in self._servers:
            try:
                await asyncio.wait_for(s.wait_closed(), 2)
            except (TimeoutError, Exception):
                pass
        if getattr(self, "group_coordinator", None) is not None:
            await self.group_coordinator.stop()
        if getattr(self, "txn_coordinator", None) is not None:
            await self.txn_coordinator.stop()
        if self.processes is not None and self.processes.is_primary:
            await self.processes.stop()  # their last checkpoint entries come here first
        self.close_storage()

    def close_storage(self) -> None:
        # every queued write in its file before anything closes a segment or writes a marker
        # (a segment's close would wait for its own writes; this ends the thread too; a failed
        # write is raised by its segment's flush or close)
        if self.append_writer is not None:
            self.append_writer.stop()
        # background jobs finish (or give up) before the logs they work on close
        self.workers.shutdown()
        self.network_threads.shutdown()
        if self.manager is not None:
            before = set(self.manager.offline_dirs)
            try:
                self.manager.shutdown()
            finally:
                for d, why in self.manager.offline_dirs.items():
                    if d not in before:
                        log.error("%s; log dir %s is offline (no clean-shutdown marker)", why, d)
                self.closed_dirs = (list(self.manager.marked), list(self.manager.offline_dirs))
            self.manager = None
        if self.metadata is not None:
            self.metadata.save()

    def log_dirs(self) -> list[Path]:
        return self.config.log_dirs
