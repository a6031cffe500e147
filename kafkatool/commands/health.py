"""``kafkatool health``: one command that checks a cluster (through the admin API, ZooKeeper, or
both) like Yelp's kafka-check and the scripts operators keep for the morning round; each finding
names the partition, broker, topic or group and the command that fixes it."""

from __future__ import annotations

import re
import shlex

import typer

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    JSON_HELP,
    CommandError,
    command_config_option,
    console,
    emit_json,
    fail_on_option,
    failing,
    handle_errors,
    zookeeper_option,
    zookeeper_timeout_option,
)

HELP = (
    "Check a cluster: offline, under-replicated, under/at min ISR partitions, replicas on brokers that are "
    "not live, leaders off their preferred replica, unreachable brokers, a missing controller, replication "
    "factors, partition size skew, consumer lag, reassignments in progress, throttles left behind, "
    "hanging transactions and last stable offsets stuck behind the high watermark (--bootstrap-server); "
    "through --bootstrap-server, --zookeeper, or both."
)

#: kinds the health rules report themselves (zk check's findings of these kinds are not repeated)
_OWN = {
    "offline_partition",
    "leader_not_live",
    "under_replicated",
    "leftover_throttle",
    "no_controller",
}


@handle_errors
def health(
    bootstrap_server: str | None = typer.Option(
        None,
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="The cluster to ask (metadata, configs, log dirs, groups).",
    ),
    command_config: str | None = command_config_option(),
    zookeeper: str | None = zookeeper_option(
        "Read the cluster's ZooKeeper too (or only): registrations, partition states, configs, and "
        "zk check's invariants."
    ),
    timeout: float = zookeeper_timeout_option(),
    min_replication_factor: int | None = typer.Option(
        None,
        "--min-replication-factor",
        metavar="N",
        help="Report topics below this replication factor (default: report topics that differ from the "
        "cluster's default.replication.factor).",
    ),  # fmt: skip
    max_lag: int = typer.Option(
        10_000, "--max-lag", metavar="RECORDS", help="Report consumer groups behind by more."
    ),
    imbalance_percent: float = typer.Option(
        10.0,
        "--imbalance-percent",
        metavar="PCT",
        help="Report a broker not leading more than this share of the partitions it is the preferred leader of "
        "(Kafka's leader.imbalance.per.broker.percentage).",
    ),  # fmt: skip
    skew_ratio: float = typer.Option(
        2.0, "--skew-ratio", metavar="X", help="Report partitions this many times their topic's median size."
    ),
    skew_min_bytes: int = typer.Option(
        64 * 1024 * 1024, "--skew-min-bytes", metavar="BYTES", help="...and at least this large."
    ),
    no_lag: bool = typer.Option(
        False, "--no-lag", help="Skip consumer groups (each group costs a few requests)."
    ),
    max_transaction_timeout: int = typer.Option(
        15,
        "--max-transaction-timeout",
        metavar="MIN",
        help="Minutes after which an open transaction is reported (--bootstrap-server): as hanging, an error, by "
        "Kafka's find-hanging rule and default (its producer last wrote longer ago than this and its coordinator "
        "does not hold it on that partition, so no marker will end it; fix: transactions abort); or, when its "
        "coordinator still holds it, as a last stable offset stuck behind the high watermark, a warning.",
    ),  # fmt: skip
    no_transactions: bool = typer.Option(
        False,
        "--no-transactions",
        help="Skip transactions (they cost DescribeProducers and two ListOffsets per leader, ListTransactions per "
        "broker, DescribeTransactions per coordinator).",
    ),
    topic: str | None = typer.Option(
        None,
        "--topic",
        metavar="TOPIC",
        help="Check only these topics' partitions and topics, as kafka-topics.sh's --topic takes them (a name or "
        "a regex; ',' separates several); brokers, consumer groups and the cluster are checked whole.",
    ),
    fail_on: str = fail_on_option(),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Check a cluster and exit 1 with one finding per problem (none on a healthy cluster)."""
    from kafkatool.assign import health as H

    severities = failing(fail_on)
    if bootstrap_server is None and zookeeper is None:
        raise CommandError("give --bootstrap-server, --zookeeper, or both")
    if max_transaction_timeout < 0:
        raise typer.BadParameter("must be 0 or more", param_hint="--max-transaction-timeout")
    topics = None
    if topic is not None:
        from kafkatool.assign.topics import topic_regex

        topics = topic_regex(topic)
    thresholds = H.Thresholds(
        imbalance_percent=imbalance_percent,
        min_replication_factor=min_replication_factor,
        skew_ratio=skew_ratio,
        skew_min_bytes=skew_min_bytes,
        max_lag=max_lag,
        max_transaction_timeout_ms=max_transaction_timeout * 60_000,
        topics=topics,
    )
    snap = None
    if zookeeper is not None:
        from kafkatool.commands.zk import connect
        from kafkatool.zk.check import load_snapshot

        with connect(zookeeper, timeout, writable=False) as zk:
            snap = load_snapshot(zk)
    if bootstrap_server is not None:
        from kafkatool.assign.kafka_client import KafkaAdmin

        with KafkaAdmin(bootstrap_server, client_id="kafkatool-health") as admin:
            view = H.load_from_api(
                admin,
                with_lag=not no_lag,
                max_transaction_timeout_ms=None if no_transactions else thresholds.max_transaction_timeout_ms,
                topics=topics,
            )
        view.connect = " ".join(
            shlex.quote(x)
            for x in ["--bootstrap-server", bootstrap_server]
            + (["--command-config", command_config] if command_config else [])
        )
        if snap is not None:
            # registered in ZooKeeper but absent from the cluster's view: registered, not serving
            for b in sorted(set(snap.brokers) - view.brokers):
                view.unreachable.setdefault(b, "registered in ZooKeeper but not in the cluster's metadata")
    else:
        view = H.load_from_zk(snap)
    findings = H.check(view, thresholds)
    if snap is not None:
        from kafkatool.zk.check import run_checks

        for z in run_checks(snap):
            if z.kind not in _OWN and (topics is None or not _zk_topic_excluded(z.path, topics)):
                findings.append(H.Finding(z.kind, z.severity, z.path, z.message, "kafkatool zk check"))
    bad = [f for f in findings if f.severity in severities]
    checked_topics = {p.topic for p in view.partitions if topics is None or topics.fullmatch(p.topic)}
    summary = {
        "type": "summary",
        "source": view.source + (" and ZooKeeper" if snap is not None and bootstrap_server else ""),
        "brokers": len(view.brokers),
        "topics": len(checked_topics),
        "partitions": sum(p.topic in checked_topics for p in view.partitions),
        "groups": None if view.group_lag is None else len(view.group_lag),
        "findings": len(findings),
        "errors": sum(f.severity == "error" for f in findings),
        "warnings": sum(f.severity == "warning" for f in findings),
        "notes": sum(f.severity == "info" for f in findings),
    }
    if json_out:
        for f in findings:
            emit_json(f.to_json())
        emit_json(summary)
    else:
        for f in findings:
            console.print(f"{f.severity.upper():7} {f.kind:32} {f.subject}: {f.message}")
            if f.fix:
                console.print(f"{'':7} {'':32} fix: {f.fix}")
        checked = (
            f"{summary['brokers']} brokers, {summary['topics']} topics, {summary['partitions']} partitions"
            + (f", {summary['groups']} consumer groups" if summary["groups"] is not None else "")
        )
        if summary["errors"] or summary["warnings"]:
            console.print(f"{summary['errors']} errors, {summary['warnings']} warnings in {checked}")
        elif findings:
            console.print(f"healthy: {checked} checked, nothing found (notes above)")
        else:
            console.print(f"healthy: {checked} checked, nothing found")
    raise typer.Exit(EXIT_FINDINGS if bad else EXIT_OK)


def _zk_topic_excluded(path: str, topics: re.Pattern) -> bool:
    """A zk check finding about a topic --topic does not take (its path names the topic)."""
    from kafkatool.zk import paths

    for prefix in (paths.BROKER_TOPICS + "/", paths.CONFIG + "/topics/", paths.DELETE_TOPICS + "/"):
        if path.startswith(prefix):
            return not topics.fullmatch(path[len(prefix) :].split("/")[0])
    return False


def register(app: typer.Typer) -> None:
    app.command("health", help=HELP)(health)
