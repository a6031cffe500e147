"""The fleet inventory: which log dirs to scan, and what is known of their brokers.

``FLEET.json``::

    {
      "brokers": {
        "1": {"host": "kafka1.example", "rack": "r1", "log_dirs": ["/mnt/kafka1/data"]},
        "2": {"host": "kafka2.example", "rack": "r2", "log_dirs": ["/mnt/kafka2/a", "/mnt/kafka2/b"]}
      },
      "assignment": {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}
    }

``brokers`` may also be a list of objects with an ``id``.  A broker's id from
the inventory overrides the ``broker.id``/``node.id`` of its log dirs'
``meta.properties``.  ``assignment`` (optional; the JSON of
``kafka-reassign-partitions --generate`` "current assignment" or of
``kafkatool reassign``) lets the scan tell orphaned replicas: partition dirs on
a broker that is not in the partition's replica set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats.errors import FormatError


class InventoryError(FormatError):
    pass


@dataclass(frozen=True)
class LogDirSpec:
    path: str
    broker: int | None = None  # None: read meta.properties
    host: str | None = None
    rack: str | None = None


@dataclass
class Inventory:
    log_dirs: list[LogDirSpec]
    assignment: dict[tuple[str, int], list[int]] | None = None
    hosts: dict[int, tuple[str | None, str | None]] = field(default_factory=dict)  # broker -> (host, rack)


def from_paths(paths: list[str]) -> Inventory:
    return Inventory([LogDirSpec(str(p)) for p in paths])


def _int(v, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | str):
        raise InventoryError(f"{where}: expected an integer broker id, got {v!r}")
    try:
        return int(v)
    except ValueError:
        raise InventoryError(f"{where}: expected an integer broker id, got {v!r}") from None


def parse_inventory(text: str, source: str = "inventory") -> Inventory:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InventoryError(f"{source}: not valid JSON at line {exc.lineno}: {exc.msg}", exc.pos) from None
    if not isinstance(doc, dict) or "brokers" not in doc:
        raise InventoryError(f'{source}: expected an object with "brokers"', 0)
    brokers = doc["brokers"]
    if isinstance(brokers, dict):
        items = [(_int(k, f"{source}: brokers key {k!r}"), v) for k, v in brokers.items()]
    elif isinstance(brokers, list):
        items = []
        for i, v in enumerate(brokers):
            if not isinstance(v, dict) or "id" not in v:
                raise InventoryError(f'{source}: brokers[{i}]: expected an object with "id"')
            items.append((_int(v["id"], f"{source}: brokers[{i}].id"), v))
    else:
        raise InventoryError(f'{source}: "brokers" must be an object or a list')
    inv = Inventory([])
    seen: dict[str, int] = {}
    for bid, entry in items:
        where = f"{source}: broker {bid}"
        if not isinstance(entry, dict):
            raise InventoryError(f"{where}: expected an object")
        dirs = entry.get("log_dirs", entry.get("log.dirs"))
        if isinstance(dirs, str):
            dirs = [d for d in dirs.split(",") if d]
        if not isinstance(dirs, list) or not dirs or not all(isinstance(d, str) and d for d in dirs):
            raise InventoryError(f'{where}: "log_dirs" must be a non-empty list of paths')
        host, rack = entry.get("host"), entry.get("rack")
        for name, v in (("host", host), ("rack", rack)):
            if v is not None and not isinstance(v, str):
                raise InventoryError(f"{where}: {name} must be a string")
        inv.hosts[bid] = (host, rack)
        for d in dirs:
            if d in seen:
                raise InventoryError(f"{where}: log dir {d} is also listed for broker {seen[d]}")
            seen[d] = bid
            inv.log_dirs.append(LogDirSpec(d, bid, host, rack))
    if doc.get("assignment") is not None:
        inv.assignment = parse_assignment(doc["assignment"], f"{source}: assignment")
    return inv


def parse_assignment(doc, where: str) -> dict[tuple[str, int], list[int]]:
    parts = doc.get("partitions") if isinstance(doc, dict) else doc
    if not isinstance(parts, list):
        raise InventoryError(f'{where}: expected {{"partitions": [...]}}')
    out: dict[tuple[str, int], list[int]] = {}
    for i, p in enumerate(parts):
        w = f"{where}: partitions[{i}]"
        if not isinstance(p, dict):
            raise InventoryError(f"{w}: expected an object")
        topic, part, replicas = p.get("topic"), p.get("partition"), p.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise InventoryError(f"{w}: topic must be a non-empty string")
        if isinstance(part, bool) or not isinstance(part, int) or part < 0:
            raise InventoryError(f"{w}: partition must be an integer >= 0")
        if not isinstance(replicas, list):
            raise InventoryError(f"{w}: replicas must be a list of broker ids")
        out[(topic, part)] = [_int(r, f"{w}.replicas") for r in replicas]
    return out


def load_inventory(path: str | Path) -> Inventory:
    p = Path(path)
    return parse_inventory(p.read_text(encoding="utf-8", errors="replace"), str(p))
