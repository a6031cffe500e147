"""What ``kafkatool groups`` shows of a group, whoever read it: the coordinator's state replayed
from a log dir (:mod:`.offline`) or a live cluster's answers (:mod:`.live`).

One rule for the rows, as kafka-consumer-groups.sh builds them (ConsumerGroupCommand's
collectGroupsOffsets): every partition assigned to a member, members with the most partitions
first, with its committed offset if any; then every committed partition no member holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class MemberRow:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    partitions: list[tuple[str, int]]


@dataclass
class OffsetRow:
    topic: str
    partition: int
    #: None: assigned to a member but never committed
    current_offset: int | None
    #: None when unknown (offline: the partition is not in the dirs)
    log_end_offset: int | None
    member: MemberRow | None = None
    metadata: str = ""
    commit_timestamp: int = -1

    @property
    def lag(self) -> int | None:
        if self.log_end_offset is None or self.current_offset is None:
            return None
        return max(self.log_end_offset - self.current_offset, 0)


@dataclass
class GroupView:
    group_id: str
    #: "classic" or "consumer" (KIP-848), as ListGroups v5 names them
    group_type: str
    #: Kafka's state names; "Dead" for a group that does not exist
    state: str
    protocol_type: str
    #: the classic group's chosen protocol (the assignor), or the consumer group's server assignor
    assignor: str
    members: list[MemberRow] = field(default_factory=list)
    rows: list[OffsetRow] = field(default_factory=list)
    #: offline: offsets the coordinator would have expired by the instant (not in ``rows``)
    expired: int = 0
    #: offline: the __consumer_offsets partition; live: -1
    partition: int = -1
    #: live: the coordinator "host:port (id)"
    coordinator: str = ""

    @property
    def committed(self) -> dict[tuple[str, int], int]:
        return {(r.topic, r.partition): r.current_offset for r in self.rows if r.current_offset is not None}


@dataclass
class Committed:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1


def build_rows(
    members: list[MemberRow],
    committed: dict[tuple[str, int], Committed],
    log_end: Callable[[list[tuple[str, int]]], dict[tuple[str, int], int | None]],
) -> list[OffsetRow]:
    """kafka-consumer-groups.sh's rows: assigned partitions by member (most partitions first),
    then the committed partitions no member holds; ``log_end`` answers for all of them at once."""
    rows: list[OffsetRow] = []
    assigned: set[tuple[str, int]] = set()
    for m in sorted((m for m in members if m.partitions), key=lambda m: -len(m.partitions)):
        for tp in sorted(m.partitions):
            assigned.add(tp)
            c = committed.get(tp)
            rows.append(
                OffsetRow(
                    tp[0],
                    tp[1],
                    c.offset if c else None,
                    None,
                    m,
                    c.metadata if c else "",
                    c.commit_timestamp if c else -1,
                )
            )
    for tp in sorted(committed):
        if tp not in assigned:
            c = committed[tp]
            rows.append(OffsetRow(tp[0], tp[1], c.offset, None, None, c.metadata, c.commit_timestamp))
    ends = log_end([(r.topic, r.partition) for r in rows]) if rows else {}
    for r in rows:
        r.log_end_offset = ends.get((r.topic, r.partition))
    return rows


def reset_csv(offsets: dict[str, dict[tuple[str, int], int]], *, with_group: bool) -> str:
    """kafka-consumer-groups.sh --reset-offsets --export's CSV: ``topic,partition,offset`` for
    one group, ``group,topic,partition,offset`` for several (ConsumerGroupCommand's
    exportOffsetsToCsv), which ``--from-file`` reads back."""
    lines = []
    for gid, tps in offsets.items():
        for (topic, partition), offset in sorted(tps.items()):
            row = f"{topic},{partition},{offset}"
            lines.append(f"{gid},{row}" if with_group else row)
    return "".join(line + "\n" for line in lines)


def parse_reset_csv(
    text: str, groups: list[str], *, source: str, group_column: bool = True
) -> dict[str, dict[tuple[str, int], int]]:
    """Read a reset plan back (ConsumerGroupCommand's parseResetPlan): with one ``--group`` the
    three-column form names that group's offsets; otherwise every line names its group.
    ``group_column`` False (StreamsResetter's parseResetPlan, one group): only
    TOPIC,PARTITION,OFFSET lines. Raises ValueError naming the file and line."""
    out: dict[str, dict[tuple[str, int], int]] = {}
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    single = len(groups) == 1 and bool(lines) and (not group_column or len(lines[0].split(",")) == 3)
    for n, line in enumerate(lines, 1):
        cells = line.split(",")
        try:
            if single and len(cells) == 3:
                gid, (topic, part, off) = groups[0], cells
            elif len(cells) == 4 and group_column:
                gid, topic, part, off = cells
            else:
                raise ValueError(
                    f"expected {'topic,partition,offset' if single else 'group,topic,partition,offset'}"
                )
            out.setdefault(gid, {})[(topic, int(part))] = int(off)
        except ValueError as exc:
            raise ValueError(f"{source}: line {n}: {line!r}: {exc}") from None
    return out
