"""``kafkatool serve``: a Kafka-compatible broker on Kafka's own log layout (one node, or a
ZooKeeper-mode cluster)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import typer

from kafkatool.broker.log_lines import setup_logging
from kafkatool.commands.common import CommandError, err_console, handle_errors

HELP = """Run a broker that unmodified Kafka clients produce to and fetch from: a single node, or one
broker of a ZooKeeper-mode cluster.

With no arguments: listens on 127.0.0.1:9092, data in ./kafkatool-data, no other
process needed (cluster metadata lives in the log dir).  --config reads a Kafka
server.properties (listeners, advertised.listeners, broker.id/node.id, log.dirs,
num.partitions, auto.create.topics.enable, log.segment.bytes, log.retention.*,
log.cleanup.policy, log.cleaner.*, message.max.bytes, socket.request.max.bytes,
...) with Kafka's defaults; --override key=value sets one (repeatable, wins over
the file).  Topic configs are set through the admin APIs.  A property that is
not supported (misspelt, removed from Kafka like port, or a feature this
broker lacks like the KRaft quorum settings) gives a warning at start-up, as
Kafka logs unknown configs; --strict makes it an error (exit 2).

Cluster mode: with zookeeper.connect (host:port[,host:port][/chroot]) and a
broker.id, several `kafkatool serve` processes form a Kafka 3.x ZooKeeper-mode
cluster with Kafka's znode layout: /cluster/id (a log dir of another cluster is
refused), /brokers/ids/N (ephemeral, JSON v5, its czxid the broker epoch), one
controller elected through /controller and /controller_epoch (zkVersion
fencing) that places topics with Kafka's rack-aware algorithm, elects leaders
(first live in-ISR replica; unclean only with unclean.leader.election.enable)
and sends LeaderAndIsr, UpdateMetadata and StopReplica.  Followers fetch from
leaders (replica_id; num.replica.fetchers, replica.fetch.*); the high watermark
is the ISR's minimum log end offset; the ISR shrinks after
replica.lag.time.max.ms and expands through AlterPartition; acks=all waits for
the ISR, min.insync.replicas answers NOT_ENOUGH_REPLICAS(_AFTER_APPEND);
leader epochs and OffsetForLeaderEpoch truncate a returning replica to the
divergence point.  SIGTERM does a controlled shutdown (controlled.shutdown.*).
CreateTopics/DeleteTopics/CreatePartitions/ElectLeaders and partition
reassignment (/admin/reassign_partitions, AlterPartitionReassignments, with
the replication throttles honoured as Kafka's ReplicationQuotaManager: the
broker's own leader/follower.replication.throttled.rate over
replication.quota.window.num x replication.quota.window.size.seconds, the
topics' *.replication.throttled.replicas) go through the controller; topic
and broker configs live in /config with change notifications, and govern the
logs from their load (/config/topics/T, /config/brokers/<default> and
/config/brokers/N, read before the logs open; ZooKeeper is the one store of
dynamic broker configs, a kafkatool-dynamic-broker-configs.json left in the
log dir is ignored with a warning).  The group and
transaction coordinators live on the leaders of their __consumer_offsets /
__transaction_state partitions (replication factor capped by the live brokers
at first creation) and move with them; transaction markers go to the
partition leaders with WriteTxnMarkers; producer ids come in blocks from
/latest_producer_id_block.  Brokers talk to each other on the inter-broker
listener with its TLS/SASL (sasl.mechanism.inter.broker.protocol, the
username/password of listener.name.<l>.<mechanism>.sasl.jaas.config); ACLs live
in /kafka-acl(-extended) and SCRAM credentials in /config/users, as Kafka keeps
them (a user principal under its sanitized name, /config/users/alice%40EXAMPLE.COM); auto.leader.rebalance.enable brings preferred leaders back.  zookeeper.session.timeout.ms (18000),
zookeeper.connection.timeout.ms, and the zookeeper.ssl.* / zookeeper.set.acl
settings with a JAAS Client section (KAFKA_OPTS) secure the broker's own
session.  Without zookeeper.connect nothing of this runs.

Pointed at a log dir written by Apache Kafka, it runs Kafka's start-up recovery
and serves every partition in it; --read-only serves without ever writing (no
lock, no recovery writes, produce and admin changes refused) for forensic
replay of backups.  Under --read-only, consumer groups work in memory (joins,
assignments and offset commits are accepted and served back until shutdown,
never written); produce is refused with POLICY_VIOLATION and an error message
that says read-only, and a producer's auto-creation of an unknown topic fails
at once (TOPIC_AUTHORIZATION_FAILED); each refusal is logged.  SIGTERM/SIGINT shut down cleanly (flush, checkpoints,
clean-shutdown marker); kill -QUIT prints every thread's stack to stderr (the
log), as a JVM's thread dump does, and the broker goes on.

Listeners follow Kafka's rules: listeners=NAME://host:port,... with
listener.security.protocol.map (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
advertised.listeners by name
(Metadata answers with the listener the client came in on), and
inter.broker.listener.name / security.inter.broker.protocol.  SSL listeners
take Kafka's ssl.* settings (ssl.keystore.type PEM or PKCS12, inline
ssl.keystore.certificate.chain/ssl.keystore.key or ssl.keystore.location,
ssl.truststore.*, ssl.client.auth none/requested/required,
ssl.principal.mapping.rules, ssl.enabled.protocols, ssl.cipher.suites with
IANA names), each also as listener.name.<name>.ssl.*; JKS stores are refused
(convert to PKCS12).  A failed TLS handshake is logged once as "Failed
authentication with /ip".  Fetch responses use sendfile on plaintext and
buffered writes under TLS.  SASL listeners serve sasl.enabled.mechanisms PLAIN
(users from listener.name.<name>.plain.sasl.jaas.config, PlainLoginModule
user_<name>="password"), SCRAM-SHA-256 and SCRAM-SHA-512 (credentials stored as
Kafka stores them, in the cluster metadata, managed with
AlterUserScramCredentials), SaslHandshake v0-1, SaslAuthenticate v0-2,
connections.max.reauth.ms (KIP-368) and connection.failed.authentication.delay.ms.
Connection limits as Kafka's: max.connections.per.ip (and
max.connections.per.ip.overrides) refuses at once, max.connections (also per
listener) makes new connections wait for a slot; connections.max.idle.ms and
socket.request.max.bytes apply.  ACLs: authorizer.class.name (Kafka's
AclAuthorizer rules).  Not yet served: request quotas (client quotas,
connection.creation.rate) - left for later.

Every core: kafkatool.processes=N (kafkatool's own property, default 1; a standalone
broker that writes) runs N processes on the same log dirs.  Clients see N brokers
of one cluster (node ids node.id, node.id+1, ...), every partition served by one of
them with replication factor 1 (the internal topics and the group and transaction
coordinators by the first), so request handling uses N cores.  Process k listens on
the listeners' hosts at each port + k x kafkatool.processes.port.step (default 1:
9092, 9093, ...) and advertises each advertised.listeners port + k x step, so
firewalls and NAT can be set up in advance; a listener on port 0 gets an ephemeral
port in every process.  A step that gives a process a port another process uses, or
one above 65535, is refused at start-up (exit 2).  Every log line of process k
carries process=k.  The first process holds the lock and writes the checkpoints and
the metadata; the others forward the requests they do not serve to it.  If one of
the others dies it is restarted (a warning line with its exit status): while it is
down its partitions have no leader and clients retry, as with a crashed Kafka
broker; it recovers them as after an unclean shutdown and comes back on the same
ports.  More than kafkatool.processes.restarts.max (3) deaths within
kafkatool.processes.restarts.window.ms (300000) stop the broker (exit 1), and every
partition recovers at the next start.

Appends off the event loop: kafkatool.append.writer (kafkatool's own property: auto,
true or false; default auto) has client produce appends written to the page cache by
a thread of their own that runs without the GIL, so the copy of each batch runs on
another core while the event loop handles the next requests; an answer (acks=1 or
all) leaves only once its bytes are written, a failed write answers
KAFKA_STORAGE_ERROR and takes its log dir offline as any I/O error does, and a stop
writes everything queued before the logs close.  It pays where a core is spare:
auto turns it on when the broker may run on at least 4 cores for each of
kafkatool.processes; several brokers on one machine, or clients on the broker's
cores, may want false whatever the count (auto counts only this broker's
processes).  The start's log line "append writer kind=native" (or "kind=off")
says which.  A value other than auto, true or false is refused at
start-up (exit 2).

Metrics: kafkatool.metrics.prometheus.listener=http://127.0.0.1:9404 (kafkatool's own
property, off by default) answers GET /metrics in Prometheus text format with Kafka
3.7's broker MBeans as the Prometheus JMX exporter's stock Kafka rules
(kafka-2_0_0.yml) name them, so Kafka dashboards and alerts work unchanged:
BrokerTopicMetrics (kafka_server_brokertopicmetrics_messagesin_total, bytesin, bytesout,
bytesrejected, failed/total produce and fetch requests, per topic and broker-wide;
replicationbytesin/out), ReplicaManager (partitioncount, leadercount,
underreplicatedpartitions, underminisrpartitioncount, atminisrpartitioncount,
offlinereplicacount, isrshrinks_total, isrexpands_total), KafkaController
(activecontrollercount, offlinepartitionscount, globaltopiccount,
globalpartitioncount), RequestMetrics (kafka_network_requestmetrics_requests_total by
request and version; totaltimems quantiles 0.50-0.999 over the last 1024 requests and
totaltimems_count), Log (kafka_log_log_size, logendoffset, logstartoffset,
numlogsegments per partition), GroupMetadataManager (numgroups, numoffsets, and
numgroups by state: numgroupsstable, numgroupsempty, ...), LogCleaner
(max_clean_time_secs, cleaner_recopy_percent: the last round) and LogCleanerManager
(max_dirty_percent: the last pass),
KafkaServer BrokerState and socket-server-metrics connection-count.  With
kafkatool.processes > 1 process k serves its own endpoint at port + k x
kafkatool.processes.port.step, one per node as each Kafka broker has its exporter.  A
value that is not http://host:port refuses the start (exit 2).

A log dir whose disk fails (an I/O error of any log operation, a full disk's ENOSPC
included) goes offline as in Kafka: one ERROR line, its partitions answer
KAFKA_STORAGE_ERROR until the next start, the other dirs are served, nothing more is
written to it (no clean-shutdown marker: the last line is then "shutdown complete
clean=false marked=... offline=..."); a dir that cannot be read at start-up starts
offline.  With kafkatool.processes > 1 a dir one process finds failed (at its start or
restart too) is failed for every process, and the broker halts as a whole.  When every
log dir (standalone: or the first, which holds the metadata) has failed, the broker
halts with Kafka's fatal line "Shutdown broker because all log dirs in ... have failed"
(its last line, exit 1).  A topic deleted while a partition of it is on an offline dir
stays deleted: when the dir is back, the next start renames that partition's dir to
<topic>-<p>.<uuid>-stray and keeps it unserved, as Kafka's KRaft broker does; so it
does with a log whose topic id is not the metadata's for its topic (a topic deleted
and made again while the log was away).  A stray that cannot be renamed takes its dir
offline.

A configuration or start-up error (no usable log dir included) exits 2; a clean
shutdown exits 0; a broker whose process died or whose log dirs all failed exits 1.
A kafkatool-cluster.json (the embedded metadata) whose cluster id, node id, producer
ids, topics, deleted topic ids or ACLs are damaged refuses the start (exit 2, one line:
the file, the key and what was expected); a SCRAM credential, delegation token or group
config entry that cannot be taken is left out (its logins fail, the group runs on the
defaults), logged once, and dropped at the next save.

Supported properties: {SUPPORTED}."""


def _help() -> str:
    from kafkatool.broker.config import BROKER_CONFIGS

    return HELP.replace("{SUPPORTED}", ", ".join(sorted(BROKER_CONFIGS)))


def register(app: typer.Typer) -> None:
    app.command("serve", help=_help(), short_help="Run a Kafka-compatible broker on a Kafka log dir.")(serve)


def _log_hot_path(log: logging.Logger) -> None:
    """One line: whether the compiled hot path runs (kafkatool/accel.py), and if not all of it,
    which modules run their .py and why; a warning when a build is there but not used."""
    from kafkatool import accel

    hot = accel.status()
    line = f"compiled hot path state={hot.state} compiled={hot.compiled} modules={len(hot.reasons)}"
    if hot.compiled:
        line += f" cython={json.dumps(hot.cython)}"
    reasons = set(hot.fallbacks().values())
    if hot.compiled == 0 and len(reasons) == 1:
        line += f" reason={json.dumps(reasons.pop())}"
    elif reasons:
        line += f" fallback={json.dumps(hot.fallbacks())}"
    if hot.degraded:
        log.warning("%s rebuild=%s", line, json.dumps(accel.BUILD_COMMAND))
    else:
        log.info("%s", line)


def _banner(broker, report, read_only: bool) -> None:
    from rich.panel import Panel
    from rich.table import Table

    from kafkatool import __version__

    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold cyan")
    t.add_column()
    listen = ", ".join(f"{h}:{p}" for h, p in broker.bound)
    adv = ", ".join(f"{h}:{p}" for h, p in broker.advertised)
    t.add_row("listening", listen)
    if adv != listen:
        t.add_row("advertised", adv)
    t.add_row("node id", str(broker.node_id))
    t.add_row("cluster id", broker.metadata.cluster_id)
    t.add_row("log dirs", ", ".join(report.log_dirs))
    t.add_row("topics", f"{report.topics} ({report.partitions} partitions)")
    old = {d: c for d, c in report.had_clean_shutdown.items() if d not in report.new_dirs}
    if not old:
        t.add_row("last shutdown", "new log dir")
    elif all(old.values()):
        t.add_row("last shutdown", "clean")
    else:
        t.add_row("last shutdown", "[yellow]unclean: recovery ran[/yellow]")
    if report.recovered_segments:
        t.add_row("recovered", f"{report.recovered_segments} segment(s)")
    t.add_row(
        "mode",
        "[bold yellow]read-only[/bold yellow] (groups in memory; produce refused)"
        if read_only
        else "read-write",
    )
    t.add_row("started in", f"{report.seconds:.2f} s")
    from kafkatool import accel

    hot = accel.status()
    t.add_row(
        "hot path",
        f"compiled, {hot.compiled} of {len(hot.reasons)} modules" if hot.compiled else "pure Python",
    )
    err_console.print(Panel(t, title=f"kafkatool {__version__} broker", expand=False, border_style="cyan"))


@handle_errors
def serve(
    config: Path | None = typer.Option(None, "--config", "-c", help="A Kafka server.properties file."),
    override: list[str] = typer.Option(
        [], "--override", "-o", help="key=value, Kafka's property names (repeatable)."
    ),
    read_only: bool = typer.Option(
        False, "--read-only", help="Serve the log dir without ever writing to it."
    ),
    log_format: str = typer.Option(
        "text", "--log-format", help="text (key=value) or json (one object per line)."
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
    no_banner: bool = typer.Option(False, "--no-banner", help="Do not print the start-up banner."),
    strict: bool = typer.Option(
        False, "--strict", help="Refuse to start (exit 2) when a property is unknown or not supported."
    ),
) -> None:
    import asyncio
    import faulthandler
    import signal

    from kafkatool.broker.config import BrokerConfig, ConfigError
    from kafkatool.broker.processes import PROCESSES_CONFIG
    from kafkatool.broker.server import Broker

    if log_format not in ("text", "json"):
        raise CommandError(f"--log-format must be text or json, not {log_format!r}")
    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise CommandError(f"--log-level must be debug, info, warning or error, not {log_level!r}")
    setup_logging(log_format, log_level)
    # the other processes of a broker of several (kafkatool.processes) log the same way
    os.environ["KAFKATOOL_LOG_FORMAT"], os.environ["KAFKATOOL_LOG_LEVEL"] = log_format, log_level
    # kill -QUIT prints every thread's stack to stderr, as it does for Kafka's JVM
    faulthandler.register(signal.SIGQUIT, all_threads=True, chain=False)
    log = logging.getLogger("kafkatool.broker")
    try:
        cfg = BrokerConfig.load(config, override)
    except ConfigError as exc:
        raise CommandError(f"configuration: {exc}") from None
    if cfg.int(PROCESSES_CONFIG) > 1:
        # a broker of several processes: the first one's lines name it too (process=0)
        setup_logging(log_format, log_level, process=0)
    unknown = cfg.unknown()
    if unknown and strict:
        raise CommandError("configuration (--strict): " + "; ".join(msg for _n, msg in unknown))
    for name, msg in unknown:
        log.warning("ignoring config name=%s detail=%s", name, json.dumps(msg))
    broker = Broker(cfg, read_only=read_only)
    from kafkatool.broker.cluster.membership import ClusterError

    try:
        report = broker.open_storage()
    except OSError as exc:
        if broker.manager is not None:
            broker.close_storage()
        raise CommandError(f"cannot open the log dirs: {exc}") from None
    except ClusterError as exc:
        if broker.manager is not None:
            broker.close_storage()
        raise CommandError(f"cannot join the cluster: {exc}") from None
    for note in report.notes:
        log.info("startup note=%s", json.dumps(note))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        try:
            await broker.start()
        except OSError as exc:
            raise CommandError(f"cannot listen: {exc}") from None
        except ConfigError as exc:
            raise CommandError(f"configuration: {exc}") from None
        except ClusterError as exc:
            raise CommandError(f"cannot join the cluster: {exc}") from None
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, broker.request_stop)
        if not no_banner:
            _banner(broker, report, read_only)
        _log_hot_path(log)
        log.info(
            "broker started listeners=%s cluster_id=%s partitions=%d read_only=%s",
            ",".join(f"{h}:{p}" for h, p in broker.bound),
            broker.metadata.cluster_id,
            report.partitions,
            str(read_only).lower(),
        )
        if read_only:
            log.info(
                "read-only: nothing is written to the log dirs; consumer groups and committed offsets "
                "live in memory only; produce, topic creation and config changes are refused"
            )
        await broker.serve_until_stopped()
        log.info("shutting down")
        await broker.stop()
        if broker.failed:
            log.error("shutdown complete clean=false: a process of this broker failed")
            raise typer.Exit(1)
        marked, offline = broker.closed_dirs or ([], [])
        if offline or not read_only and len(marked) < len(broker.log_dirs()):
            # Kafka writes no marker into an offline dir: its logs are recovered at the next start
            log.warning(
                "shutdown complete clean=false marked=%s offline=%s",
                ",".join(map(str, marked)),
                ",".join(map(str, offline)),
            )
        else:
            log.info("shutdown complete clean=true")

    try:
        asyncio.run(main())
    except BaseException:
        if broker.manager is not None:
            try:
                broker.close_storage()
            except Exception:
                log.exception("close failed")
        raise
