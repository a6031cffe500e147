"""Working state shared by the planners: who holds what, which moves keep the rack rule,
and leader balancing by reordering replicas (which moves no data)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafkatool.assign.errors import AssignError
from kafkatool.assign.kafka_placement import replication_factor_error
from kafkatool.assign.model import Broker, TopicPartition, check_racks


def _negated(load: Any) -> Any:
    """-load for a number or a tuple of numbers (loads compare as tuples)."""
    return tuple(-v for v in load) if isinstance(load, tuple) else -load


class ClusterState:
    """A mutable assignment over a set of target brokers.

    Rack rule (when rack-aware): a partition with RF replicas should span
    ``min(RF, racks)`` racks, as Kafka's rack-aware placement guarantees.  A move
    is allowed when the destination is a target broker not already holding the
    partition and the partition spans no fewer racks than required (or, if it
    already violated the rule, no fewer than before).
    """

    def __init__(
        self,
        assignment: Mapping[TopicPartition, Sequence[int]],
        brokers: Sequence[Broker],
        *,
        rack_aware: bool = True,
        other_racks: Mapping[int, str | None] | None = None,
        sizes: Mapping[TopicPartition, int] | None = None,
        factor: int | None = None,
    ):
        """``factor``: every partition is to get this many replicas (``drop``/``add`` get them
        there), so a partition may hold more replicas than there are target brokers, and the
        factor itself must fit them (Kafka's placement rule and words)."""
        if not brokers:
            raise AssignError("no target brokers")
        if factor is not None:
            message = replication_factor_error(factor, len(brokers))
            if message is not None:
                raise AssignError(message)
        self.rack_aware = check_racks(brokers, rack_aware=rack_aware)
        self.targets = [b.id for b in brokers]
        self.target_set = set(self.targets)
        self.rack_of: dict[int, str | None] = dict(other_racks or {})
        self.rack_of.update({b.id: b.rack for b in brokers})
        self._rack_keys: dict[int, object] = {}
        self.racks = sorted({b.rack for b in brokers if b.rack is not None}) if self.rack_aware else []
        self.sizes = dict(sizes or {})
        self.parts: dict[TopicPartition, list[int]] = {tp: list(r) for tp, r in sorted(assignment.items())}
        self.original = {tp: list(r) for tp, r in self.parts.items()}
        for tp, replicas in self.parts.items():
            if len(set(replicas)) != len(replicas):
                raise AssignError(f"partition {tp[0]}-{tp[1]} lists a broker twice: {replicas}")
            if factor is None and len(replicas) > len(self.targets):
                raise AssignError(
                    f"partition {tp[0]}-{tp[1]} has replication factor {len(replicas)}, more than the "
                    f"{len(self.targets)} target brokers"
                )
        self.on_broker: dict[int, set[TopicPartition]] = {b: set() for b in self.targets}
        self.count: dict[int, int] = dict.fromkeys(self.targets, 0)
        self.leaders: dict[int, int] = dict.fromkeys(self.targets, 0)
        self.bytes: dict[int, int] = dict.fromkeys(self.targets, 0)
        self.topic_count: dict[tuple[str, int], int] = {}
        for tp, replicas in self.parts.items():
            for i, b in enumerate(replicas):
                self._add(tp, b, leader=i == 0)
        self.moves = 0

    # -- bookkeeping -------------------------------------------------------------------------------

    def _add(self, tp: TopicPartition, b: int, *, leader: bool) -> None:
        self.on_broker.setdefault(b, set()).add(tp)
        self.count[b] = self.count.get(b, 0) + 1
        self.bytes[b] = self.bytes.get(b, 0) + self.sizes.get(tp, 0)
        if leader:
            self.leaders[b] = self.leaders.get(b, 0) + 1
        key = (tp[0], b)
        self.topic_count[key] = self.topic_count.get(key, 0) + 1

    def _remove(self, tp: TopicPartition, b: int, *, leader: bool) -> None:
        self.on_broker[b].discard(tp)
        self.count[b] -= 1
        self.bytes[b] -= self.sizes.get(tp, 0)
        if leader:
            self.leaders[b] -= 1
        self.topic_count[(tp[0], b)] -= 1

    def size(self, tp: TopicPartition) -> int:
        return self.sizes.get(tp, 0)

    # -- the rack rule -----------------------------------------------------------------------------

    def rack_key(self, b: int) -> object:
        key = self._rack_keys.get(b)
        if key is None:
            rack = self.rack_of.get(b)
            key = self._rack_keys[b] = rack if rack is not None else ("broker", b)
        return key

    def required_racks(self, tp: TopicPartition) -> int:
        return min(len(self.parts[tp]), len(self.racks)) if self.rack_aware else 0

    def distinct_racks(self, replicas: Sequence[int]) -> int:
        return len({self.rack_key(b) for b in replicas})

    def rack_ok(self, tp: TopicPartition) -> bool:
        return not self.rack_aware or self.distinct_racks(self.parts[tp]) >= self.required_racks(tp)

    def can_move(self, tp: TopicPartition, src: int, dst: int) -> bool:
        replicas = self.parts[tp]
        if dst not in self.target_set or dst in replicas or src not in replicas:
            return False
        if not self.rack_aware:
            return True
        src_rack, dst_rack = self.rack_key(src), self.rack_key(dst)
        if src_rack == dst_rack:
            return True
        keys = [self.rack_key(b) for b in replicas]
        before = len(set(keys))
        after = before - (keys.count(src_rack) == 1) + (dst_rack not in keys)
        return after >= min(min(len(replicas), len(self.racks)), before)

    def copy_cost(self, tp: TopicPartition, src: int, dst: int) -> int:
        """Replicas the move src -> dst adds to those the plan copies (-1, 0 or 1): a broker that
        held the partition at the start holds its data."""
        orig = self.original[tp]
        return (dst not in orig) - (src not in orig)

    def free_move(self, tp: TopicPartition, src: int, dst: int) -> bool:
        """A move that copies nothing beyond what the plan already copies (a replica the plan
        added moves on, or a partition keeps a broker that held it instead of another that holds
        it) and keeps the preferred leader: the only moves a replication-factor change balances
        with."""
        return self.parts[tp][0] != src and self.copy_cost(tp, src, dst) <= 0 and self.can_move(tp, src, dst)

    # -- changes -----------------------------------------------------------------------------------

    def move(self, tp: TopicPartition, src: int, dst: int) -> None:
        """Replace ``src`` by ``dst`` in place: a moved leader hands leadership to ``dst``."""
        replicas = self.parts[tp]
        i = replicas.index(src)
        self._remove(tp, src, leader=i == 0)
        replicas[i] = dst
        self._add(tp, dst, leader=i == 0)
        self.moves += 1

    def drop(self, tp: TopicPartition, b: int) -> None:
        """Remove the replica on ``b`` (no data moves; the next replica leads if ``b`` led)."""
        replicas = self.parts[tp]
        i = replicas.index(b)
        self._remove(tp, b, leader=i == 0)
        del replicas[i]
        if i == 0 and replicas:
            self.leaders[replicas[0]] = self.leaders.get(replicas[0], 0) + 1

    def add(self, tp: TopicPartition, b: int) -> None:
        """Append a new replica on ``b`` (a copy of the partition's data)."""
        replicas = self.parts[tp]
        replicas.append(b)
        self._add(tp, b, leader=len(replicas) == 1)
        self.moves += 1

    def set_leader(self, tp: TopicPartition, b: int) -> None:
        replicas = self.parts[tp]
        old = replicas[0]
        if old == b:
            return
        replicas.remove(b)
        replicas.insert(0, b)
        self.leaders[old] -= 1
        self.leaders[b] = self.leaders.get(b, 0) + 1

    def assignment(self) -> dict[TopicPartition, list[int]]:
        return {tp: list(r) for tp, r in self.parts.items()}

    def changed(self) -> dict[TopicPartition, list[int]]:
        return {tp: list(r) for tp, r in self.parts.items() if r != self.original[tp]}

    # -- rack repair -------------------------------------------------------------------------------

    def fix_racks(self, load: Callable[[int], Any] | None = None) -> None:
        """Move replicas of partitions that span too few racks (least loaded destination first;
        ``load(broker)`` is read live, after every move)."""
        if not self.rack_aware:
            return
        load = load or (lambda b: self.count.get(b, 0))
        for tp in list(self.parts):
            while not self.rack_ok(tp):
                replicas = self.parts[tp]
                per_rack: dict[object, list[int]] = {}
                for b in replicas:
                    per_rack.setdefault(self.rack_key(b), []).append(b)
                crowded = [b for bs in per_rack.values() if len(bs) > 1 for b in bs]
                present = set(per_rack)
                # Prefer moving a replica the plan copies anyway (not one that holds the data),
                # then a follower, off the most loaded broker of a crowded rack.
                orig = self.original[tp]
                crowded.sort(key=lambda b: (b in orig, b == replicas[0], _negated(load(b)), b))
                dsts = sorted(
                    (d for d in self.targets if self.rack_key(d) not in present),
                    key=lambda d: (load(d), d),
                )
                if not crowded or not dsts:
                    raise AssignError(f"cannot spread {tp[0]}-{tp[1]} over {self.required_racks(tp)} racks")
                self.move(tp, crowded[0], dsts[0])

    def evacuate(self, load: Callable[[int], Any] | None = None) -> None:
        """Move every replica off brokers that are not targets: partitions with the fewest valid
        destinations first, each to the least loaded one (``load(broker)`` is read live), and among
        equally loaded ones to the one the other pending replicas need least."""
        load = load or (lambda b: self.count.get(b, 0))
        pending = {(tp, b) for b in set(self.on_broker) - self.target_set for tp in self.on_broker[b]}
        options: dict[tuple[TopicPartition, int], set[int]] = {}
        demand: dict[int, int] = dict.fromkeys(self.targets, 0)

        def refresh(item: tuple[TopicPartition, int]) -> None:
            for d in options.get(item, ()):
                demand[d] -= 1
            options[item] = {d for d in self.targets if self.can_move(item[0], item[1], d)}
            for d in options[item]:
                demand[d] += 1

        for item in sorted(pending):
            refresh(item)
        while pending:
            item = min(pending, key=lambda it: (len(options[it]), it))
            pending.discard(item)
            for d in options[item]:
                demand[d] -= 1
            tp, b = item
            if not options[item]:
                raise AssignError(f"no broker can take the replica of {tp[0]}-{tp[1]} on broker {b}")
            self.move(tp, b, min(options[item], key=lambda d: (load(d), demand[d], d)))
            del options[item]
            for other in [it for it in pending if it[0] == tp]:
                refresh(other)

    # -- leaders -----------------------------------------------------------------------------------

    def leader_bounds(self) -> tuple[int, int]:
        n = len(self.targets)
        p = len(self.parts)
        return p // n, -(-p // n)

    def balance_leaders(self) -> int:
        """Even out preferred leaders (within floor/ceil of partitions/brokers) by reordering
        replicas along shortest chains; returns the number of leadership changes."""
        lo, hi = self.leader_bounds()
        changes = 0
        for over, under in ((lambda c: c > hi, lambda c: c < hi), (lambda c: c > lo, lambda c: c < lo)):
            while True:
                if not any(under(self.leaders[b]) for b in self.targets):
                    break
                sources = [b for b in self.targets if over(self.leaders[b])]
                path = self._leader_path(sources, under)
                if path is None:
                    break
                for tp, new_leader in path:
                    self.set_leader(tp, new_leader)
                changes += len(path)
        return changes

    def _leader_path(self, sources: list[int], is_sink) -> list[tuple[TopicPartition, int]] | None:
        led: dict[int, list[TopicPartition]] = {b: [] for b in self.targets}
        for tp, replicas in self.parts.items():
            if replicas[0] in led:
                led[replicas[0]].append(tp)
        prev: dict[int, tuple[int, TopicPartition] | None] = dict.fromkeys(sources)
        queue = deque(sorted(sources, key=lambda b: (-self.leaders[b], b)))
        while queue:
            a = queue.popleft()
            for tp in led[a]:
                for c in self.parts[tp][1:]:
                    if c in prev or c not in self.target_set:
                        continue
                    prev[c] = (a, tp)
                    if is_sink(self.leaders[c]):
                        path = []
                        node = c
                        while prev[node] is not None:
                            a2, tp2 = prev[node]
                            path.append((tp2, node))
                            node = a2
                        return path[::-1]
                    queue.append(c)
        return None
