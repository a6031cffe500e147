"""What Kafka's loader does with the leftovers of interrupted operations (LogLoader steps 1-2).

One planner for both the engine's loader (which carries the plan out) and
``kafkatool recover`` (which reports it): ``.deleted`` files are removed
(``*.checkpoint.deleted`` excepted), ``.cleaned`` files are removed, a ``.swap``
at or above the smallest ``.cleaned`` offset belongs to an incomplete split
and is removed, and every non-swap file whose offset lies in the range the
remaining ``.log.swap`` files cover is replaced by them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.log.config import LogConfig
from kafkatool.log.file_records import LOG_SUFFIX, offset_from_file_name
from kafkatool.log.segment import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX, Segment

MARKED_FOR_DELETION = "marked for deletion"
INCOMPLETE_SPLIT = "swap file of an incomplete split"
CLEANER_OUTPUT = "leftover cleaner output"
REPLACED_BY_SWAP = "replaced by an interrupted swap"


@dataclass
class LeftoverPlan:
    deletes: list[tuple[str, str]] = field(default_factory=list)  # (file name, reason), in the loader's order
    swaps: list[str] = field(default_factory=list)  # .swap files to complete (strip the suffix)


def plan_leftovers(part_dir: Path, names: Iterable[str], config: LogConfig | None = None) -> LeftoverPlan:
    """The loader's actions for the regular files ``names`` of ``part_dir``."""
    plan = LeftoverPlan()
    remaining = set(names)
    swaps, cleaned, min_cleaned = [], [], None
    for n in sorted(remaining):
        if n.endswith(DELETED_SUFFIX) and not n.endswith(".checkpoint.deleted"):
            plan.deletes.append((n, MARKED_FOR_DELETION))
        elif n.endswith(CLEANED_SUFFIX):
            off = offset_from_file_name(n)
            if off is not None:
                min_cleaned = off if min_cleaned is None else min(min_cleaned, off)
            cleaned.append(n)
        elif n.endswith(SWAP_SUFFIX):
            swaps.append(n)
    for n in swaps:
        off = offset_from_file_name(n)
        if min_cleaned is not None and off is not None and off >= min_cleaned:
            plan.deletes.append((n, INCOMPLETE_SPLIT))
        else:
            plan.swaps.append(n)
    plan.deletes += [(n, CLEANER_OUTPUT) for n in cleaned]
    remaining -= {n for n, _ in plan.deletes}
    lo = hi = None
    for n in plan.swaps:
        if not n.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        base = offset_from_file_name(n)
        seg = Segment(part_dir, base, config or LogConfig(), writable=False, suffix=SWAP_SUFFIX)
        try:
            nxt = seg.read_next_offset()
        finally:
            seg.close()
        lo = base if lo is None else min(lo, base)
        hi = nxt if hi is None else max(hi, nxt)
    if lo is not None:
        for n in sorted(remaining):
            off = offset_from_file_name(n)
            if not n.endswith(SWAP_SUFFIX) and off is not None and lo <= off < hi:
                plan.deletes.append((n, REPLACED_BY_SWAP))
    return plan
