"""The server-side assignors of KIP-848 consumer groups (``group.consumer.assignors``).

Kafka's ``org.apache.kafka.coordinator.group.assignor``:

* ``uniform`` (the default): sticky and balanced.  For a homogeneous group
  (every member subscribed to the same topics) this is
  ``UniformHomogeneousAssignmentBuilder``: every member keeps up to its quota
  (``total // members``, the first ``total % members`` members one more) of
  what it was assigned, the rest is revoked, and the partitions nobody holds go
  to the members under quota in order.  A heterogeneous group is assigned
  topic by topic (fewest subscribers first) among the members subscribed to it,
  keeping a member's partitions up to its balanced share of the topic, then
  giving each remaining partition to the least-loaded subscriber.
* ``range``: ``RangeAssignor`` (Kafka 3.9+; 3.7-3.8's was sticky): for each
  topic, its subscribers sorted by instance id (static members first) then
  member id get consecutive ranges, the first ``partitions % subscribers`` one
  partition more (co-partitioned topics line up): :func:`range_ranges`, the
  client's RangeAssignor too (``consume --group``'s leader).

An assignment is ``{topic id: frozenset(partitions)}``; members and topics are
walked in sorted order so that an assignment is a pure function of its inputs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["ASSIGNORS", "MemberSpec", "assign"]

Assignment = dict[uuid.UUID, frozenset[int]]
T = TypeVar("T")


@dataclass(frozen=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    #: the topic ids this member is subscribed to that exist
    topics: frozenset[uuid.UUID]
    #: the member's current target assignment
    current: Assignment


def _freeze(a: dict[uuid.UUID, set[int]]) -> Assignment:
    return {t: frozenset(ps) for t, ps in a.items() if ps}


def uniform(members: list[MemberSpec], partitions: dict[uuid.UUID, int]) -> dict[str, Assignment]:
    if not members:
        return {}
    first = members[0].topics
    if all(m.topics == first for m in members):
        return _uniform_homogeneous(members, partitions, first)
    return _uniform_heterogeneous(members, partitions)


def _uniform_homogeneous(members, partitions, topics) -> dict[str, Assignment]:
    if not topics:
        return {m.member_id: {} for m in members}
    held = {(t, p) for m in members for t, ps in m.current.items() if t in topics for p in ps}
    unassigned = [(t, p) for t in sorted(topics) for p in range(partitions[t]) if (t, p) not in held]
    total = sum(partitions[t] for t in topics)
    quota_min, extra = divmod(total, len(members))
    out: dict[str, dict[uuid.UUID, set[int]]] = {}
    unfilled: list[tuple[str, int]] = []
    for m in members:
        quota = quota_min
        if extra > 0:
            quota += 1
            extra -= 1
        new: dict[uuid.UUID, set[int]] = {}
        for t in sorted(m.current):
            ps = m.current[t]
            if t not in topics:
                continue
            keep = sorted(p for p in ps if p < partitions[t])
            for p in keep:
                if quota > 0:
                    new.setdefault(t, set()).add(p)
                    quota -= 1
                else:
                    unassigned.append((t, p))
        if quota > 0:
            unfilled.append((m.member_id, quota))
        out[m.member_id] = new
    i = 0
    for mid, quota in unfilled:
        while quota > 0 and i < len(unassigned):
            t, p = unassigned[i]
            out[mid].setdefault(t, set()).add(p)
            i += 1
            quota -= 1
    return {mid: _freeze(a) for mid, a in out.items()}


def _uniform_heterogeneous(members, partitions) -> dict[str, Assignment]:
    out: dict[str, dict[uuid.UUID, set[int]]] = {m.member_id: {} for m in members}
    load = {m.member_id: 0 for m in members}
    subscribed = {t for m in members for t in m.topics}
    # topics with fewer subscribers first (they constrain the balance most), as Kafka's
    # UniformHeterogeneousAssignmentBuilder orders them
    for t in sorted(subscribed, key=lambda t: (sum(t in m.topics for m in members), t)):
        subs = [m for m in members if t in m.topics]
        n = partitions[t]
        quota_min, extra = divmod(n, len(subs))
        taken: set[int] = set()
        # sticky: a subscriber keeps its partitions of this topic up to its balanced share
        for m in subs:
            keep = sorted(p for p in m.current.get(t, ()) if p < n and p not in taken)
            share = quota_min
            if len(keep) > quota_min and extra > 0:
                share += 1
                extra -= 1
            keep = keep[:share]
            if keep:
                out[m.member_id].setdefault(t, set()).update(keep)
                taken.update(keep)
                load[m.member_id] += len(keep)
        for p in range(n):
            if p in taken:
                continue
            # the least-loaded subscriber overall, then by member id
            m = min(subs, key=lambda s: (load[s.member_id], s.member_id))
            out[m.member_id].setdefault(t, set()).add(p)
            load[m.member_id] += 1
    return {mid: _freeze(a) for mid, a in out.items()}


def range_ranges(
    subscriptions: dict[str, tuple[Iterable[T], str | None]], partitions: dict[T, int]
) -> dict[str, dict[T, range]]:
    """The range rule, one for both sides that run it: Kafka 3.9+'s server-side RangeAssignor
    (KIP-848 groups) and the client's RangeAssignor of a classic group (without rack awareness),
    which give the same answer: for each topic, its subscribers sorted as ``sortMemberIds`` /
    ``MemberInfo`` sort them (static members first, by group.instance.id, then the others by
    member id) each take the next consecutive range, the first ``partitions % subscribers`` of
    them one partition more. ``subscriptions``: member id -> (topics, group.instance.id); a topic
    absent from ``partitions`` (no metadata) is skipped. Every member is in the answer."""

    def order(member: str):
        instance = subscriptions[member][1]
        return (0, instance, "") if instance is not None else (1, "", member)

    subscribers: dict[T, list[str]] = {}
    for member in sorted(subscriptions, key=order):
        for t in subscriptions[member][0]:
            if t in partitions:
                subscribers.setdefault(t, []).append(member)
    out: dict[str, dict[T, range]] = {m: {} for m in subscriptions}
    for t, members in subscribers.items():
        each, extra = divmod(partitions[t], len(members))
        for i, member in enumerate(members):
            start = each * i + min(i, extra)
            length = each + (1 if i < extra else 0)
            if length > 0:
                out[member][t] = range(start, start + length)
    return out


def range_(members: list[MemberSpec], partitions: dict[uuid.UUID, int]) -> dict[str, Assignment]:
    got = range_ranges({m.member_id: (m.topics, m.instance_id) for m in members}, partitions)
    return {mid: {t: frozenset(r) for t, r in a.items()} for mid, a in got.items()}


ASSIGNORS = {"uniform": uniform, "range": range_}


def assign(name: str, members: list[MemberSpec], partitions: dict[uuid.UUID, int]) -> dict[str, Assignment]:
    """The target assignment of every member (members in member-id order for determinism)."""
    return ASSIGNORS[name](sorted(members, key=lambda m: m.member_id), partitions)
