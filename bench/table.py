"""One row format for every issue-16 bench, so ``bench/run_all.py`` prints one table.

A bench called with ``--json`` prints one JSON object per line, each a :class:`Row`: our
figure, the limit or baseline it is compared with (measured in the same run), the ratio,
the issue's target and whether it is met.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass
class Row:
    bench: str
    figure: str
    value: float
    unit: str
    #: the machine's limit or the baseline, measured in the same run (None: an absolute target)
    reference: float | None = None
    reference_name: str = ""
    #: the issue's target, as text (">= 0.70" of the ratio, "<= 5 ms" of the value)
    target: str = ""
    ok: bool | None = None
    #: what the figure started on, when it matters (bench/quiet.py: the machine's idle state)
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.reference is None:
            return None
        return self.value / self.reference if self.reference else 0.0

    def to_json(self) -> str:
        d = asdict(self)
        d["ratio"] = self.ratio
        return json.dumps(d)

    @classmethod
    def from_json(cls, line: str) -> Row:
        d = json.loads(line)
        d.pop("ratio", None)
        return cls(**d)


def ratio_row(
    bench: str, figure: str, value: float, unit: str, reference: float, name: str, target: float | None
) -> Row:
    """A figure judged by its ratio to a reference (target: ratio >= ``target``)."""
    r = Row(bench, figure, value, unit, reference, name)
    if target is not None:
        r.target = f">= {target:.2f}"
        r.ok = (r.ratio or 0.0) >= target
    return r


def limit_row(
    bench: str, figure: str, value: float, unit: str, most: float | None = None, least: float | None = None
) -> Row:
    """A figure judged on its own (target: value <= ``most`` or >= ``least``)."""
    r = Row(bench, figure, value, unit)
    if most is not None:
        r.target, r.ok = f"<= {most:g} {unit}", value <= most
    elif least is not None:
        r.target, r.ok = f">= {least:g} {unit}", value >= least
    return r


def hot_path_line() -> str:
    """Which code the brokers of a bench run: kafkatool's compiled hot path, all of it, part of
    it or none (kafkatool/accel.py).  They are started from this tree with this environment
    (KAFKATOOL_PURE_PYTHON included), so they decide as this process does."""
    from kafkatool import accel

    return accel.status().line()


def emit(rows: list[Row]) -> None:
    for r in rows:
        print(r.to_json(), flush=True)


def render(rows: list[Row]) -> list[str]:
    out = [
        f"{'bench':8} {'figure':50} {'ours':>10} {'unit':6} {'limit / baseline':>28} {'ratio':>6} {'target':>12}  "
    ]
    for r in rows:
        ref = "" if r.reference is None else f"{r.reference:.1f} {r.reference_name}"[:28]
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
        mark = "" if r.ok is None else ("ok" if r.ok else "MISSED")
        line = f"{r.bench:8} {r.figure[:50]:50} {r.value:10.2f} {r.unit:6} {ref:>28} {ratio:>6} {r.target:>12}  {mark}"
        out.append(f"{line:{len(out[0]) + 6}} {r.note}".rstrip() if r.note else line)
    return out
