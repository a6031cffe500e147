"""What ``kafkatool transactions`` shows, whichever source answered: a cluster
(:mod:`kafkatool.broker.txn.live`) or a log dir read offline
(:mod:`kafkatool.broker.txn.offline`), and the one rule both apply to find hanging
transactions (Kafka 3.7's TransactionsCommand.FindHangingTransactionsCommand, KIP-664):

1. candidates: every producer of the searched partitions with an open transaction
   (currentTransactionStartOffset set) whose last write is older than the maximum
   transaction timeout (``now - lastTimestamp > max``);
2. each candidate's producer id is looked up among the coordinators' transactional ids
   (ListTransactions filtered by producer id): none found -> hanging;
3. else the id is described (DescribeTransactions): not found, or the partition is not
   among the transaction's partitions (those of an Ongoing transaction, and in
   PrepareCommit/PrepareAbort the ones still waiting for their marker) -> hanging: the
   coordinator will never write that partition's marker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkatool.formats.java_collections import hash_map_order, java_long_hash, topic_partition_hash

TopicPartition = tuple[str, int]

#: Kafka's TransactionState names (clients' admin TransactionState.toString); others: Unknown
STATES = (
    "Ongoing",
    "PrepareAbort",
    "PrepareCommit",
    "CompleteAbort",
    "CompleteCommit",
    "Empty",
    "PrepareEpochFence",
)


def state_name(name: str | None) -> str:
    """TransactionState.parse(name).toString(): an unknown name is ``Unknown``."""
    return name if name in STATES else "Unknown"


@dataclass(frozen=True)
class Producer:
    """One active producer of a partition (DescribeProducers' ProducerState); -1: none."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int = -1
    current_txn_start_offset: int = -1

    @property
    def open(self) -> bool:
        return self.current_txn_start_offset >= 0


def active_producers(log) -> list[Producer]:
    """A log's active producers as DescribeProducers answers them (UnifiedLog.activeProducers):
    the broker's handler and the offline read both take them from here."""
    return [
        Producer(
            e.producer_id,
            e.producer_epoch,
            e.last_sequence,
            e.last_timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        for _, e in sorted(log.producer_state.producers.items())
    ]


@dataclass
class PartitionProducers:
    """The active producers of one partition, with what an offline read also knows."""

    topic: str
    partition: int
    producers: list[Producer]
    #: offline: the partition's last stable offset (what its earliest open transaction pins)
    #: and log end offset; None from a cluster
    last_stable_offset: int | None = None
    log_end_offset: int | None = None


@dataclass
class Description:
    """A transactional id as its coordinator holds it (DescribeTransactions, or the
    coordinator's load of ``__transaction_state`` offline)."""

    transactional_id: str
    #: the coordinator's broker id, or offline the ``__transaction_state`` partition
    coordinator: int | str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int
    partitions: set[TopicPartition] = field(default_factory=set)

    def partitions_in_java_order(self) -> list[TopicPartition]:
        """The order Kafka's tool prints them in: the admin client's HashSet<TopicPartition>."""
        return hash_map_order(sorted(self.partitions), topic_partition_hash)


@dataclass
class OpenTransaction:
    topic: str
    partition: int
    producer: Producer
    #: offline: the partition's last stable offset
    last_stable_offset: int | None = None
    #: what the coordinator knows of the producer: its transactional id and that id's state
    #: (None: no transactional id holds this producer id)
    transactional_id: str | None = None
    coordinator_state: str | None = None


def candidates(
    partitions: list[PartitionProducers], now_ms: int, max_timeout_ms: int
) -> list[OpenTransaction]:
    """Step 1: open transactions whose producer last wrote more than ``max_timeout_ms`` ago,
    in the order Kafka's tool finds them (the admin's HashMap of partitions)."""
    by_tp = {(pp.topic, pp.partition): pp for pp in partitions}
    out = []
    for tp in hash_map_order(list(by_tp), topic_partition_hash, len(by_tp)):
        pp = by_tp[tp]
        for pr in pp.producers:
            if pr.open and now_ms - pr.last_timestamp > max_timeout_ms:
                out.append(OpenTransaction(pp.topic, pp.partition, pr, pp.last_stable_offset))
    return out


def by_producer(found: list[OpenTransaction]) -> dict[int, list[OpenTransaction]]:
    """groupByProducerId: a HashMap<Long, List>, iterated in Java's order."""
    groups: dict[int, list[OpenTransaction]] = {}
    for o in found:
        groups.setdefault(o.producer.producer_id, []).append(o)
    return {pid: groups[pid] for pid in hash_map_order(list(groups), java_long_hash)}


def hanging(
    groups: dict[int, list[OpenTransaction]],
    transactional_ids: dict[int, str],
    descriptions: dict[str, Description | None],
) -> list[OpenTransaction]:
    """Steps 2 and 3 (filterHangingTransactions): ``transactional_ids`` maps the producer ids
    some coordinator holds to their ids, ``descriptions`` each id's state (None: not found)."""
    out = []
    for pid, opened in groups.items():
        tid = transactional_ids.get(pid)
        desc = descriptions.get(tid) if tid is not None else None
        for o in opened:
            o.transactional_id = tid
            o.coordinator_state = desc.state if desc is not None else None
            if desc is None or (o.topic, o.partition) not in desc.partitions:
                out.append(o)
    return out


def duration_minutes(now_ms: int, since_ms: int) -> int:
    """TimeUnit.MILLISECONDS.toMinutes: truncated toward zero."""
    d = now_ms - since_ms
    return d // 60000 if d >= 0 else -((-d) // 60000)


def pretty_table(headers: list[str], rows: list[list[str]]) -> str:
    """ToolsUtils.prettyPrintTable: every column padded to its widest cell, each cell followed
    by a tab (the last one too), one line per row after the header."""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    lines = []
    for r in [headers, *rows]:
        lines.append("".join(c.ljust(w) + "\t" for c, w in zip(r, widths, strict=True)))
    return "\n".join(lines) + "\n"
