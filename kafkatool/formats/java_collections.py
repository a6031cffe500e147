"""Java's hash codes and the iteration order of ``java.util.HashMap`` (and ``HashSet``, a
HashMap inside): what Kafka's tools print in when they print a map or a set.

A HashMap walks its power-of-two table bucket by bucket (bucket: the spread hash
``h ^ (h >>> 16)`` masked by the capacity) and each bucket in insertion order (a resize
splits a bucket keeping that order).  So the order is fixed by the capacity the map ends
with, which :func:`hash_map_order` finds by replaying the map's growth as OpenJDK 21's
HashMap grows (the JDK of Kafka 3.7's images): the constructor's capacity, a doubling past
3/4 load, and a doubling instead of a tree for a bucket of a ninth key while the table is
below 64.  A bucket of nine keys in a table of 64 or more becomes a tree, whose order
Java itself ties by identity hash codes; such a bucket is kept in insertion order here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

_LOAD_FACTOR = 0.75
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64
_MAXIMUM_CAPACITY = 1 << 30


def signed32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x & 0x80000000 else x


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, wrapping at 32 bits (signed result)."""
    h = 0
    b = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(b), 2):
        h = (31 * h + ((b[i] << 8) | b[i + 1])) & 0xFFFFFFFF
    return signed32(h)


def java_int_hash(i: int) -> int:
    """``Integer.hashCode``: the value."""
    return signed32(i)


def java_long_hash(v: int) -> int:
    """``Long.hashCode``: (int) (value ^ (value >>> 32))."""
    u = v & 0xFFFFFFFFFFFFFFFF
    return signed32(u ^ (u >> 32))


def topic_partition_hash(tp: tuple[str, int]) -> int:
    """``TopicPartition.hashCode``: 31 * (31 + partition) + topic.hashCode (signed int32)."""
    return signed32(31 * (31 + tp[1]) + java_string_hash(tp[0]))


def table_size_for(cap: int) -> int:
    """``HashMap.tableSizeFor``: the power of two at or above ``cap`` (1 for 0)."""
    if cap <= 1:
        return 1
    return min(1 << (cap - 1).bit_length(), _MAXIMUM_CAPACITY)


def copy_capacity(size: int) -> int | None:
    """The initial capacity ``new HashMap<>(Map)`` pre-sizes for a map of ``size`` entries
    (JDK 19+: ``ceil(size / 0.75)``); None (a default map) for an empty one."""
    return math.ceil(size / _LOAD_FACTOR) if size > 0 else None


def set_copy_capacity(size: int) -> int:
    """The initial capacity of ``new HashSet<>(Collection)`` (JDK 19+:
    ``HashMap.newHashMap(max(size, 12))``)."""
    return math.ceil(max(size, 12) / _LOAD_FACTOR)


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def _grow(cap: int, thr: int) -> tuple[int, int]:
    """``HashMap.resize``'s new (capacity, threshold)."""
    new_thr = 0
    if cap > 0:
        new_cap = cap << 1
        if new_cap < _MAXIMUM_CAPACITY and cap >= 16:
            new_thr = thr << 1
    elif thr > 0:
        new_cap = thr
    else:
        return 16, 12
    if new_thr == 0:
        new_thr = int(new_cap * _LOAD_FACTOR)
    return new_cap, new_thr


def hash_map_order(keys: Iterable[K], hash_of: Callable[[K], int], capacity: int | None = None) -> list[K]:
    """The iteration order of ``new HashMap<>(capacity)`` (None: ``new HashMap<>()``) after
    ``put`` of ``keys`` in this order (a key put again keeps its place)."""
    cap, thr = 0, (0 if capacity is None else table_size_for(capacity))
    spread: dict[K, int] = {}
    bins: dict[int, int] = {}

    def grow() -> None:
        nonlocal cap, thr, bins
        cap, thr = _grow(cap, thr)
        bins = {}
        for h in spread.values():
            bins[h & (cap - 1)] = bins.get(h & (cap - 1), 0) + 1

    for k in keys:
        if k in spread:
            continue
        if cap == 0:
            grow()
        h = spread[k] = _spread(hash_of(k))
        in_bin = bins.get(h & (cap - 1), 0)
        bins[h & (cap - 1)] = in_bin + 1
        if in_bin >= _TREEIFY_THRESHOLD and cap < _MIN_TREEIFY_CAPACITY:
            grow()  # treeifyBin: a small table doubles instead
        if len(spread) > thr:
            grow()
    index = {k: i for i, k in enumerate(spread)}
    return sorted(spread, key=lambda k: (spread[k] & (cap - 1), index[k]))


def java_map(pairs: Iterable[tuple[str, object]], capacity: int | None = None) -> dict[str, object]:
    """A dict in the order a ``HashMap<String, ?>`` made with ``capacity`` iterates after the
    ``put``s of ``pairs`` (what Jackson writes for it)."""
    d = dict(pairs)
    return {k: d[k] for k in hash_map_order(d, java_string_hash, capacity)}


def java_collection_str(items: Iterable[object]) -> str:
    """Java's AbstractCollection.toString (a List, a Set in its iteration order) and
    Arrays.toString: ``[a, b]``, ``[]`` when empty; each element as ``str`` gives it."""
    return "[" + ", ".join(str(x) for x in items) + "]"
