"""Dump a Kafka subtree to JSON and restore it, validating everything before writing.

Format (one JSON document)::

    {"format": "kafkatool-zk-dump", "version": 1, "chroot": "/kafka", "root": "/",
     "nodes": [{"path": "/brokers", "data": "", "encoding": "utf-8",
                "ephemeral": false, "stat": {...}}, ...]}

Paths are relative to the chroot the dump was taken from, so a dump restores
into any chroot.  ``data`` is UTF-8 text when the bytes decode, else base64 with
``"encoding": "base64"``.  Ephemeral nodes (broker registrations, /controller)
are recorded but never restored: only a live broker session may own them.

A restore recreates each znode's data version (``stat.version``, which Kafka's
controller writes conditionally and ``zk check`` compares with leader epochs) by
setting the same data again until the version matches the dump.  What ZooKeeper
assigns itself cannot be restored and is listed by :data:`NOT_RESTORED`: zxids,
times, child and ACL versions, session owners; ACLs are not dumped.
"""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass, field

from kafkatool.errors import KafkatoolError
from kafkatool.zk import paths
from kafkatool.zk.client import KafkaZk, ZNode, ZNodeStat

FORMAT = "kafkatool-zk-dump"
FORMAT_VERSION = 1
# One ZooKeeper multi must fit in jute.maxbuffer (1 MiB by default) with room for headers.
MAX_TX_BYTES = 900_000
MAX_TX_OPS = 1000


class DumpFormatError(KafkatoolError, ValueError):
    """A dump file that is not valid; nothing has been written."""


def encode_data(data: bytes) -> tuple[str, str]:
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def node_record(node: ZNode) -> dict:
    text, encoding = encode_data(node.data)
    return {
        "path": node.path,
        "data": text,
        "encoding": encoding,
        "ephemeral": node.stat.ephemeral,
        "stat": node.stat.to_json(),
    }


def dump_nodes(zk: KafkaZk, root: str = "/", *, kafka_only: bool = True) -> list[ZNode]:
    """Every node under ``root`` (pre-order). At the chroot's top, ``kafka_only`` keeps only
    Kafka's own top-level nodes (other clusters' chroots and /zookeeper are left out)."""
    root = paths.normalize(root)
    nodes: list[ZNode] = []
    if root == "/":
        top = zk.get("/")
        nodes.append(top)
        for name in zk.children("/"):
            if name == "zookeeper" or (kafka_only and name not in paths.KAFKA_TOP_LEVEL):
                continue
            nodes.extend(zk.walk("/" + name))
    else:
        nodes.extend(zk.walk(root))
    return nodes


def make_dump(zk: KafkaZk, root: str = "/", *, kafka_only: bool = True) -> dict:
    nodes = dump_nodes(zk, root, kafka_only=kafka_only)
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "source": zk.hosts,
        "chroot": zk.chroot or "/",
        "root": paths.normalize(root),
        "created_ms": int(time.time() * 1000),
        "nodes": [node_record(n) for n in nodes],
    }


#: what a restore cannot give back (said by ``zk restore``)
NOT_RESTORED = [
    "ephemeral znodes (broker registrations, /controller): only a live broker session may own them; "
    "brokers recreate them when they start",
    "czxid, mzxid, pzxid, ctime, mtime: ZooKeeper assigns them at write time",
    "cversion and aversion (child and ACL versions): ZooKeeper counts them itself",
    "ACLs: the dump does not record them; restored znodes get the connection's default ACL",
]


@dataclass
class DumpNode:
    path: str
    data: bytes
    ephemeral: bool
    #: the data version in the dump (None: the dump has no stat)
    version: int | None = None


def parse_dump(doc: object) -> list[DumpNode]:
    """Validate a whole dump document; raise DumpFormatError naming the first bad node."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DumpFormatError(f'not a kafkatool zk dump (expected "format": "{FORMAT}")')
    if doc.get("version") != FORMAT_VERSION:
        raise DumpFormatError(f"unsupported dump version {doc.get('version')!r}")
    raw = doc.get("nodes")
    if not isinstance(raw, list):
        raise DumpFormatError("'nodes' is not a list")
    out: list[DumpNode] = []
    seen: set[str] = set()
    for i, n in enumerate(raw):
        where = f"nodes[{i}]"
        if not isinstance(n, dict):
            raise DumpFormatError(f"{where}: not an object")
        path = n.get("path")
        if not isinstance(path, str) or not path.startswith("/") or paths.normalize(path) != path:
            raise DumpFormatError(f"{where}: bad path {path!r}")
        if path == "/zookeeper" or path.startswith("/zookeeper/"):
            raise DumpFormatError(f"{where}: {path} is ZooKeeper's own subtree")
        if path in seen:
            raise DumpFormatError(f"{where}: duplicate path {path}")
        seen.add(path)
        data, encoding = n.get("data", ""), n.get("encoding", "utf-8")
        if data is None:
            data = ""
        if not isinstance(data, str):
            raise DumpFormatError(f"{where} ({path}): 'data' is not a string")
        if encoding == "utf-8":
            payload = data.encode("utf-8")
        elif encoding == "base64":
            try:
                payload = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise DumpFormatError(f"{where} ({path}): invalid base64 data") from None
        else:
            raise DumpFormatError(f"{where} ({path}): unknown encoding {encoding!r}")
        ephemeral = n.get("ephemeral", False)
        if not isinstance(ephemeral, bool):
            raise DumpFormatError(f"{where} ({path}): 'ephemeral' is not a boolean")
        stat = n.get("stat")
        version = None
        if stat is not None:
            if not isinstance(stat, dict):
                raise DumpFormatError(f"{where} ({path}): 'stat' is not an object")
            version = stat.get("version")
            if version is not None and (
                not isinstance(version, int) or isinstance(version, bool) or version < 0
            ):
                raise DumpFormatError(f"{where} ({path}): stat.version {version!r} is not a version")
        out.append(DumpNode(path, payload, ephemeral, version))
    # Parents must be present (or be the root) so that the tree can be rebuilt in order.
    for n in out:
        p = paths.parent(n.path)
        if p != "/" and p not in seen:
            raise DumpFormatError(f"{n.path}: parent {p} is not in the dump")
    return out


@dataclass
class RestorePlan:
    creates: list[DumpNode] = field(default_factory=list)
    updates: list[DumpNode] = field(default_factory=list)
    unchanged: list[DumpNode] = field(default_factory=list)
    conflicts: list[DumpNode] = field(default_factory=list)  # exist with other data, no --force
    skipped_ephemeral: list[DumpNode] = field(default_factory=list)
    ephemeral_parents: list[DumpNode] = field(default_factory=list)  # children of ephemerals: impossible
    #: path -> extra sets of the same data that bring the written znode to the dumped version
    version_bumps: dict[str, int] = field(default_factory=dict)
    #: znodes left alone (unchanged) whose version differs from the dump: path -> (now, dumped)
    version_differs: dict[str, tuple[int, int]] = field(default_factory=dict)

    def summary(self) -> dict:
        return {
            "create": len(self.creates),
            "update": len(self.updates),
            "unchanged": len(self.unchanged),
            "conflicts": len(self.conflicts),
            "skipped_ephemeral": len(self.skipped_ephemeral),
            "versions_restored": len(self.version_bumps),
            "version_sets": sum(self.version_bumps.values()),
            "versions_differ": len(self.version_differs),
        }


def plan_restore(zk: KafkaZk, nodes: list[DumpNode], *, force: bool) -> RestorePlan:
    plan = RestorePlan()
    ephemeral_paths = {n.path for n in nodes if n.ephemeral}
    for n in sorted(nodes, key=lambda n: (n.path.count("/"), n.path)):
        if n.ephemeral:
            plan.skipped_ephemeral.append(n)
            continue
        if paths.parent(n.path) in ephemeral_paths:
            plan.ephemeral_parents.append(n)
            continue
        if n.path == "/":
            continue  # the chroot node itself; its data (usually empty) is left alone
        existing = zk.get_or_none(n.path)
        if existing is None:
            plan.creates.append(n)
            after = 0
        elif existing.data == n.data:
            plan.unchanged.append(n)
            if n.version is not None and n.version != existing.stat.version:
                plan.version_differs[n.path] = (existing.stat.version, n.version)
            continue
        elif force:
            plan.updates.append(n)
            after = existing.stat.version + 1
        else:
            plan.conflicts.append(n)
            continue
        if n.version is not None and n.version > after:
            plan.version_bumps[n.path] = n.version - after
        elif n.version is not None and n.version < after:
            plan.version_differs[n.path] = (after, n.version)
    return plan


def plan_batches(plan: RestorePlan) -> list[list[tuple]]:
    """The plan's writes as ZooKeeper multi batches (each within jute.maxbuffer)."""
    ops: list[tuple] = [("create", n.path, n.data) for n in plan.creates]
    ops += [("set", n.path, n.data) for n in plan.updates]
    # the data version: each set of the same bytes bumps it by one, as the original writes did
    data_of = {n.path: n.data for n in plan.creates + plan.updates}
    for path, count in plan.version_bumps.items():
        ops += [("set", path, data_of[path])] * count
    batches: list[list[tuple]] = []
    size = 0
    for op in ops:
        op_size = len(op[1]) + len(op[2]) + 64
        if not batches or size + op_size > MAX_TX_BYTES or len(batches[-1]) >= MAX_TX_OPS:
            batches.append([])
            size = 0
        batches[-1].append(op)
        size += op_size
    return batches


def apply_restore(zk: KafkaZk, plan: RestorePlan) -> int:
    """Write the plan in ZooKeeper multi transactions (atomic when it fits in one); returns the count."""
    batches = plan_batches(plan)
    if zk.chroot and batches:
        # kazoo resolves paths under the chroot; the chroot node itself must exist first.
        with KafkaZk(zk.hosts, timeout=zk.timeout, security=zk.security) as root:
            root.ensure_path(zk.chroot)
    done = 0
    for batch in batches:
        zk.commit(batch)
        done += len(batch)
    return done


__all__ = [
    "DumpFormatError",
    "NOT_RESTORED",
    "DumpNode",
    "RestorePlan",
    "ZNodeStat",
    "apply_restore",
    "dump_nodes",
    "make_dump",
    "parse_dump",
    "plan_batches",
    "plan_restore",
]
