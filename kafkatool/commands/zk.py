"""``kafkatool zk``: browse, decode, check, dump and restore Kafka's ZooKeeper data.

Read-only except ``restore``.  Paths are relative to the chroot of
``--zookeeper host:port[/chroot]``, as in Kafka's ``zookeeper.connect``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import typer

from kafkatool.commands.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    JSON_HELP,
    CommandError,
    console,
    emit_json,
    handle_errors,
    zookeeper_option,
)
from kafkatool.log import fileops

zk_app = typer.Typer(
    name="zk",
    help="Browse and check Kafka's ZooKeeper data (ZK-mode clusters): decoded views, invariants, dump/restore.\n\n"
    "Read-only except `restore`.",
    no_args_is_help=True,
)

ZOOKEEPER_HELP = "ZooKeeper connect string host:port[,host:port][/chroot]."


def _zk_option() -> Any:
    return zookeeper_option(ZOOKEEPER_HELP)


def _timeout_option() -> Any:
    return typer.Option(5.0, "--timeout", min=0.1, help="Seconds to wait for ZooKeeper before giving up.")


def _json_option() -> Any:
    return typer.Option(False, "--json", help=JSON_HELP)


def register(app: typer.Typer) -> None:
    app.add_typer(zk_app, name="zk")


# ---------------------------------------------------------------- plumbing


def zk_command(func: Callable) -> Callable:
    """handle_errors plus ZooKeeper and dump-file errors as one-line exit-2 errors."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from kafkatool.zk.client import ZkError
        from kafkatool.zk.dump import DumpFormatError

        try:
            return func(*args, **kwargs)
        except ZkError as exc:
            raise CommandError(str(exc)) from None
        except DumpFormatError as exc:
            raise CommandError(str(exc)) from None

    return handle_errors(wrapper)


def _note(message: str) -> None:
    sys.stderr.write(f"kafkatool: {message}\n")


@contextlib.contextmanager
def connect(
    zookeeper: str | None, timeout: float, *, kafka: bool = True, writable: bool = True
) -> Iterator[Any]:
    """Open the ZooKeeper connection; with ``kafka`` make sure it points at a Kafka root.

    ``writable=False`` opens it read-only (every write raises ZkError), for the views.

    Without a chroot and no Kafka layout at '/', discovery looks for Kafka roots: a single
    one is used (with a note on stderr); several are listed and the user must choose.
    """
    from kafkatool.zk.client import KafkaZk, silence_kazoo_logging
    from kafkatool.zk.discovery import find_kafka_roots

    if not zookeeper:
        raise CommandError("--zookeeper host:port[/chroot] is required (or set KAFKATOOL_ZOOKEEPER)")
    from kafkatool.broker.security import zk as zk_security

    silence_kazoo_logging()
    security = zk_security.current()  # --zk-tls-config-file, and KAFKA_OPTS's JAAS Client section
    zk = KafkaZk(zookeeper, timeout=timeout, read_only=not writable, security=security)
    zk.start()
    try:
        if kafka and not zk.is_kafka_root():
            where = zk.chroot or "/"
            if zk.chroot and zk.exists("/") is None:
                raise CommandError(f"{zookeeper}: chroot {zk.chroot} does not exist")
            roots = find_kafka_roots(zk)
            if len(roots) == 1 and not zk.chroot:
                root = roots[0]
                _note(f"no Kafka cluster at /; using the one at {root.chroot} (cluster id {root.cluster_id})")
                zk.close()
                zk = KafkaZk(
                    root.connect_string(zk.hosts), timeout=timeout, read_only=not writable, security=security
                )
                zk.start()
            elif roots:
                listed = ", ".join(f"{zk.display(r.chroot)} (cluster {r.cluster_id})" for r in roots)
                raise CommandError(
                    f"no Kafka cluster at {where}; Kafka roots below it: {listed}; add the chroot to --zookeeper"
                )
            else:
                raise CommandError(f"no Kafka cluster at {where} (no /brokers/ids and /brokers/topics)")
        yield zk
    finally:
        zk.close()


def _ts(ms: int | None) -> str:
    if ms is None or ms <= 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ids(ids: list[int] | None) -> str:
    return ",".join(map(str, ids or [])) or "-"


def _table(*columns: str, title: str | None = None):
    from rich.table import Table

    t = Table(title=title, box=None, header_style="bold", pad_edge=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    return t


def _esc(text: Any) -> str:
    from rich.markup import escape

    return escape(str(text))


def _data_fields(data: bytes) -> dict:
    from kafkatool.zk.dump import encode_data

    text, encoding = encode_data(data)
    return {"data": text, "encoding": encoding}


# ---------------------------------------------------------------- generic: ls, get, tree, stat


@zk_app.command("ls")
@zk_command
def ls_cmd(
    path: str = typer.Argument("/", help="Znode path (relative to the chroot)."),
    zookeeper: str = _zk_option(),
    timeout: float = _timeout_option(),
    as_json: bool = _json_option(),
) -> None:
    """List a znode's children with their type, size and mtime."""
    from kafkatool.zk import paths

    with connect(zookeeper, timeout, kafka=False, writable=False) as zk:
        path = paths.normalize(path)
        names = zk.children(path)
        nodes = zk.get_many([paths.join(path, n) for n in names])
        rows = [(n, nodes[paths.join(path, n)].stat) for n in names if nodes[paths.join(path, n)] is not None]
    if as_json:
        for name, s in rows:
            emit_json(
                {
                    "type": "znode",
                    "path": paths.join(path, name),
                    "name": name,
                    "ephemeral": s.ephemeral,
                    "data_length": s.data_length,
                    "num_children": s.num_children,
                    "version": s.version,
                    "mtime_ms": s.mtime_ms,
                }
            )
        return
    t = _table("name", "type", "bytes", "children", "mtime")
    for name, s in rows:
        t.add_row(
            _esc(name),
            "ephemeral" if s.ephemeral else "persistent",
            str(s.data_length),
            str(s.num_children),
            _ts(s.mtime_ms),
        )
    console.print(t)


@zk_app.command("get")
@zk_command
def get_cmd(
    path: str = typer.Argument(..., help="Znode path (relative to the chroot)."),
    raw: bool = typer.Option(False, "--raw", help="Print the payload bytes as stored, without decoding."),
    zookeeper: str = _zk_option(),
    timeout: float = _timeout_option(),
    as_json: bool = _json_option(),
) -> None:
    """Print a znode's payload, decoded by what Kafka stores at that path.

    An undecodable Kafka payload is shown raw and flagged (exit 1).
    """
    from kafkatool.zk import codecs

    with connect(zookeeper, timeout, kafka=False, writable=False) as zk:
        node = zk.get(path)
    decoded = codecs.decode_path(node.path, node.data)
    if raw:
        sys.stdout.buffer.write(node.data)
        sys.stdout.flush()
        return
    entity = _entity_of(node.path, decoded)
    if as_json:
        emit_json(
            {
                "type": "znode",
                "path": node.path,
                "kind": decoded.kind,
                **_data_fields(node.data),
                "decoded": codecs.to_jsonable(decoded.value) if decoded.ok else None,
                "error": decoded.error,
                "stat": node.stat.to_json(),
                **({"entity": entity} if entity is not None else {}),
            }
        )
    else:
        kind = decoded.kind or "unknown to Kafka"
        console.print(
            f"[bold]{_esc(node.path)}[/]  ({kind}; version {node.stat.version}; "
            f"{'ephemeral' if node.stat.ephemeral else 'persistent'}; {node.stat.data_length} bytes)"
        )
        if entity is not None:
            label = entity.get("error") or "/".join(
                [
                    entity["entity_type"],
                    entity["name"],
                    *(["clients", entity["client"]] if "client" in entity else []),
                ]
            )
            console.print(f"entity: {_esc(label)}")
        if decoded.error:
            console.print(f"[red]undecodable {decoded.kind} payload:[/] {_esc(decoded.error)}")
            console.print(_esc(_raw_text(node.data)))
        elif decoded.kind not in (None, "empty"):
            console.print(_esc(json.dumps(codecs.to_jsonable(decoded.value), indent=2, ensure_ascii=False)))
        elif node.data:
            console.print(_esc(_raw_text(node.data)))
    if decoded.error:
        raise typer.Exit(EXIT_FINDINGS)


def _entity_of(path: str, decoded) -> dict | None:
    """The entity a /config znode or a config change notification is about, by its real names
    (a user principal or client id desanitized: the path shows Kafka's sanitized one)."""
    from kafkatool.zk import paths

    if decoded.kind == "entity_config":
        entity_path = paths.normalize(path)[len(paths.CONFIG) + 1 :]
    elif decoded.kind == "config_change" and decoded.ok:
        entity_path = decoded.value.entity_path
    else:
        return None
    try:
        entity_type, name, client = paths.parse_entity_path(entity_path)
    except ValueError as exc:
        return {"error": f"not an entity path Kafka reads: {exc}"}
    out = {"entity_type": entity_type, "name": name}
    if client is not None:
        out["client"] = client
    return out


def _raw_text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        return "base64:" + base64.b64encode(data).decode()


@zk_app.command("tree")
@zk_command
def tree_cmd(
    path: str = typer.Argument("/", help="Subtree root (relative to the chroot)."),
    depth: int = typer.Option(None, "--depth", "-d", min=0, help="Stop this many levels below PATH."),
    zookeeper: str = _zk_option(),
    timeout: float = _timeout_option(),
    as_json: bool = _json_option(),
) -> None:
    """Print a subtree (ephemeral nodes marked)."""
    from rich.tree import Tree

    from kafkatool.zk import paths

    root = paths.normalize(path)
    with connect(zookeeper, timeout, kafka=False, writable=False) as zk:
        nodes = list(zk.walk(root, max_depth=depth, skip=("/zookeeper",) if root == "/" else ()))
        if not nodes:
            zk.get(root)  # raises the no-such-znode error
    base_depth = 0 if root == "/" else root.count("/")
    if as_json:
        for n in nodes:
            d = 0 if n.path == root else n.path.count("/") - base_depth
            emit_json(
                {
                    "type": "znode",
                    "path": n.path,
                    "depth": d,
                    "ephemeral": n.stat.ephemeral,
                    "data_length": n.stat.data_length,
                    "num_children": n.stat.num_children,
                }
            )
        return
    trees: dict[str, Tree] = {}
    top = None
    for n in nodes:
        label = _esc(n.path if n.path == root else paths.basename(n.path))
        if n.stat.ephemeral:
            label += f" [cyan](ephemeral 0x{n.stat.ephemeral_owner:x})[/]"
        if n.stat.data_length:
            label += f" [dim]{n.stat.data_length} B[/]"
        if top is None:
            top = trees[n.path] = Tree(label)
        else:
            parent = trees.get(paths.parent(n.path))
            if parent is not None:
                trees[n.path] = parent.add(label)
    if top is not None:
        console.print(top)


@zk_app.command("stat")
@zk_command
def stat_cmd(
    path: str = typer.Argument(..., help="Znode path (relative to the chroot)."),
    zookeeper: str = _zk_option(),
    timeout: float = _timeout_option(),
    as_json: bool = _json_option(),
) -> None:
    """Show a znode's stat: versions, zxids, times, and which broker owns an ephemeral node."""
    with connect(zookeeper, timeout, kafka=False, writable=False) as zk:
        node = zk.get(path)
        owner = None
        if node.stat.ephemeral:
            with contextlib.suppress(Exception):
                owner = zk.sessions().get(node.stat.ephemeral_owner)
    s = node.stat
    if as_json:
        emit_json({"type": "stat", "path": node.path, **s.to_json(), "owner_broker": owner})
        return
    t = _table("field", "value")
    t.add_row("path", _esc(node.path))
    t.add_row("type", "ephemeral" if s.ephemeral else "persistent")
    if s.ephemeral:
        who = (
            f" (session of broker {owner})"
            if owner is not None
            else " (no broker registration has this session)"
        )
        t.add_row("ephemeral owner", f"0x{s.ephemeral_owner:x}{who}")
    t.add_row("version", str(s.version))
    t.add_row("cversion", str(s.cversion))
    t.add_row("aversion", str(s.aversion))
    t.add_row("ctime", f"{_ts(s.ctime_ms)} ({s.ctime_ms})")
    t.add_row("mtime", f"{_ts(s.mtime_ms)} ({s.mtime_ms})")
    t.add_row("czxid", f"0x{s.czxid:x} ({s.czxid})")
    t.add_row("mzxid", f"0x{s.mzxid:x}")
    t.add_row("pzxid", f"0x{s.pzxid:x}")
    t.add_row("data length", str(s.data_length))
    t.add_row("children", str(s.num_children))
    console.print(t)


# ---------------------------------------------------------------- Kafka views


@zk_app.command("cluster-id")
@zk_command
def cluster_id_cmd(
    zookeeper: str = _zk_option(), timeout: float = _timeout_option(), as_json: bool = _json_option()
) -> None:
    """Print the cluster id from /cluster/id (exit 1 when missing or undecodable)."""
    with connect(zookeeper, timeout, writable=False) as zk:
        t = zk.cluster_id()
        chroot = zk.chroot or "/"
    if as_json:
        obj: dict[str, Any] = {
            "type": "cluster_id",
            "chroot": chroot,
            "id": None,
            "version": None,
            "error": None,
        }
        if t is None:
            obj["error"] = "no /cluster/id"
        elif t.error:
            obj.update(error=t.error, **_data_fields(t.raw))
        else:
            obj.update(id=t.value.id, version=t.value.version)
        emit_json(obj)
    elif t is None:
        console.print("no /cluster/id")
    elif t.error:
        console.print(f"[red]undecodable /cluster/id:[/] {_esc(t.error)}: {_esc(_raw_text(t.raw))}")
    else:
        console.print(t.value.id)
    if t is None or t.error:
        raise typer.Exit(EXIT_FINDINGS)


@zk_app.command("brokers")
@zk_command
def brokers_cmd(
    zookeeper: str = _zk_option(), timeout: float = _timeout_option(), as_json: bool = _json_option()
) -> None:
    """Registered brokers: endpoints, rack, registration version, session, broker epoch."""
    with connect(zookeeper, timeout, writable=False) as zk:
        brokers = zk.brokers()
        ctrl = zk.controller()
    controller = ctrl.value.broker_id if ctrl and ctrl.value else None
    bad = 0
    if as_json:
        for b, t in brokers.items():
            r = t.value
            obj = {
                "type": "broker",
                "id": b,
                "controller": b == controller,
                "session": f"0x{t.stat.ephemeral_owner:x}",
                "ephemeral": t.stat.ephemeral,
                "broker_epoch": t.stat.czxid,
                "registered_ms": t.stat.ctime_ms,
            }
            if r is None:
                bad += 1
                obj.update(error=t.error, **_data_fields(t.raw))
            else:
                obj.update(
                    version=r.version,
                    endpoints=[e.connection_string for e in r.endpoints],
                    security_protocols={e.listener: e.security_protocol for e in r.endpoints},
                    host=r.host,
                    port=r.port,
                    rack=r.rack,
                    jmx_port=r.jmx_port,
                    timestamp_ms=r.timestamp,
                    features=r.features,
                )
            emit_json(obj)
    else:
        t_ = _table("id", "endpoints", "rack", "ver", "session", "broker epoch", "registered")
        for b, t in brokers.items():
            mark = f"{b} [bold](controller)[/]" if b == controller else str(b)
            if t.value is None:
                bad += 1
                t_.add_row(
                    mark,
                    f"[red]undecodable:[/] {_esc(t.error)}",
                    "",
                    "",
                    f"0x{t.stat.ephemeral_owner:x}",
                    "",
                    "",
                )
                continue
            r = t.value
            eps = " ".join(
                e.connection_string
                if e.listener == e.security_protocol
                else f"{e.connection_string} ({e.security_protocol})"
                for e in r.endpoints
            )
            session = f"0x{t.stat.ephemeral_owner:x}" if t.stat.ephemeral else "[red]persistent![/]"
            t_.add_row(
                mark,
                _esc(eps),
                _esc(r.rack or "-"),
                str(r.version),
                session,
                str(t.stat.czxid),
                _ts(t.stat.ctime_ms),
            )
        console.print(t_)
        if not brokers:
            console.print("no brokers registered")
    if bad:
        raise typer.Exit(EXIT_FINDINGS)


def _partition_row(topic: str, pid: int, a, st) -> dict:
    replicas = a.partitions.get(pid, [])
    row: dict[str, Any] = {
        "type": "partition",
        "topic": topic,
        "partition": pid,
        "replicas": replicas,
        "adding_replicas": a.adding_replicas.get(pid, []),
        "removing_replicas": a.removing_replicas.get(pid, []),
    }
    if st is None:
        row.update(state=None, error="no state znode")
        return row
    if st.value is None:
        row.update(state=None, error=st.error, **_data_fields(st.raw))
        return row
    s = st.value
    adding = set(row["adding_replicas"])
    row.update(
        leader=s.leader,
        isr=s.isr,
        leader_epoch=s.leader_epoch,
        controller_epoch=s.controller_epoch,
        partition_epoch=st.stat.version,
        leader_recovery_state=s.leader_recovery_state,
        offline=s.leader < 0,
        # As the brokers' UnderReplicatedPartitions metric: offline partitions are counted apart.
        under_replicated=s.leader >= 0 and any(r not in s.isr for r in replicas if r not in adding),
        preferred_leader=bool(replicas) and s.leader == replicas[0],
    )
    return row


def _topic_summary(ts, marked: set[str], overrides: dict[str, int]) -> dict:
    obj: dict[str, Any] = {"type": "topic", "topic": ts.name}
    if ts.assignment is None or ts.assignment.value is None:
        obj["error"] = ts.assignment.error if ts.assignment else "no assignment znode"
        return obj
    a = ts.assignment.value
    rows = [_partition_row(ts.name, p, a, ts.states.get(p)) for p in a.partitions]
    rfs = sorted({len(r) for r in a.partitions.values()})
    obj.update(
        topic_id=a.topic_id,
        version=a.version,
        partitions=len(a.partitions),
        replication_factor=rfs[0] if len(rfs) == 1 else rfs,
        under_replicated=sum(1 for r in rows if r.get("under_replicated")),
        offline=sum(1 for r in rows if r.get("offline")),
        missing_state=sum(1 for r in rows if r.get("state", 0) is None),
        reassigning=a.reassigning,
        marked_for_deletion=ts.name in marked,
        config_overrides=overrides.get(ts.name, 0),
    )
    return obj


@zk_app.command("topics")
@zk_command
def topics_cmd(
    zookeeper: str = _zk_option(), timeout: float = _timeout_option(), as_json: bool = _json_option()
) -> None:
    """All topics with partition count, RF, under-replicated and offline partitions."""
    from kafkatool.zk import paths

    with connect(zookeeper, timeout, writable=False) as zk:
        states = list(zk.topic_states().values())
        marked = set(zk.children_or_empty(paths.DELETE_TOPICS))
        overrides = {e.name: len(e.config.config) for e in zk.entity_configs("topics") if e.config}
    rows = [_topic_summary(ts, marked, overrides) for ts in states]
    if as_json:
        for r in rows:
            emit_json(r)
    else:
        t = _table("topic", "id", "partitions", "rf", "under-replicated", "offline", "notes")
        for r in rows:
            if "error" in r:
                t.add_row(_esc(r["topic"]), "", "", "", "", "", f"[red]{_esc(r['error'])}[/]")
                continue
            notes = []
            if r["reassigning"]:
                notes.append("reassigning")
            if r["marked_for_deletion"]:
                notes.append("marked for deletion")
            if r["missing_state"]:
                notes.append(f"[red]{r['missing_state']} without state[/]")
            if r["config_overrides"]:
                notes.append(f"{r['config_overrides']} config overrides")
            urp = str(r["under_replicated"])
            off = str(r["offline"])
            t.add_row(
                _esc(r["topic"]),
                _esc(r["topic_id"] or "-"),
                str(r["partitions"]),
                str(r["replication_factor"]),
                f"[yellow]{urp}[/]" if r["under_replicated"] else urp,
                f"[red]{off}[/]" if r["offline"] else off,
                ", ".join(notes),
            )
        console.print(t)
    if any("error" in r for r in rows):
        raise typer.Exit(EXIT_FINDINGS)


@zk_app.command("describe")
@zk_command
def describe_cmd(
    topic: str = typer.Argument(..., help="Topic name."),
    zookeeper: str = _zk_option(),
    timeout: float = _timeout_option(),
    as_json: bool = _json_option(),
) -> None:
    """One topic: assignment, leader, ISR, epochs, adding/removing replicas, per partition.

    Exit 1 when a partition is offline, under-replicated or has no (decodable) state.
    """
    from kafkatool.zk import paths

    with connect(zookeeper, timeout, writable=False) as zk:
        ts = zk.topic_state(topic)
        if ts.assignment is None:
            raise CommandError(
                f"topic {topic!r} does not exist ({zk.display(paths.topic(topic))}: no such znode)"
            )
        marked = zk.exists(paths.delete_topic(topic)) is not None
        cfg = zk.entity_config("topics", topic)
        live = set(zk.broker_ids())
    summary = _topic_summary(ts, {topic} if marked else set(), {})
    summary["config"] = cfg.config.config if cfg and cfg.config else {}
    if ts.assignment.value is None:
        if as_json:
            emit_json(summary | _data_fields(ts.assignment.raw))
        else:
            console.print(
                f"[red]undecodable assignment[/] {_esc(ts.assignment.error)}: {_esc(_raw_text(ts.assignment.raw))}"
            )
        raise typer.Exit(EXIT_FINDINGS)
    a = ts.assignment.value
    rows = [_partition_row(topic, p, a, ts.states.get(p)) for p in a.partitions]
    if as_json:
        emit_json(summary)
        for r in rows:
            emit_json(r)
    else:
        console.print(
            f"[bold]{_esc(topic)}[/]  id {_esc(a.topic_id or '-')}  assignment v{a.version}  "
            f"partitions {len(a.partitions)}  rf {summary['replication_factor']}"
            + ("  [red]marked for deletion[/]" if marked else "")
        )
        if summary["config"]:
            console.print(
                "config: " + _esc(", ".join(f"{k}={v}" for k, v in sorted(summary["config"].items())))
            )
        t = _table(
            "partition",
            "leader",
            "replicas",
            "isr",
            "leader epoch",
            "ctrl epoch",
            "part. epoch",
            "adding",
            "removing",
            "status",
        )
        for r in rows:
            if r.get("state", 0) is None:
                t.add_row(
                    str(r["partition"]),
                    "",
                    _ids(r["replicas"]),
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    f"[red]{_esc(r['error'])}[/]",
                )
                continue
            status = []
            if r["offline"]:
                status.append("[red]offline[/]")
            elif r["leader"] not in live:
                status.append("[red]leader not registered[/]")
            if r["under_replicated"]:
                status.append("[yellow]under-replicated[/]")
            if not r["offline"] and not r["preferred_leader"]:
                status.append("not preferred leader")
            if r["leader_recovery_state"]:
                status.append("leader recovering")
            t.add_row(
                str(r["partition"]),
                str(r["leader"]),
                _ids(r["replicas"]),
                _ids(r["isr"]),
                str(r["leader_epoch"]),
                str(r["controller_epoch"]),
                str(r["partition_epoch"]),
                _ids(r["adding_replicas"]) if r["adding_replicas"] else "",
                _ids(r["removing_replicas"]) if r["removing_replicas"] else "",
                ", ".join(status),
            )
        console.print(t)
    if any(r.get("state", 0) is None or r.get("offline") or r.get("under_replicated") for r in rows):
        raise typer.Exit(EXIT_FINDINGS)


@zk_app.command("controller")
@zk_command
def controller_cmd(
    zookeeper: str = _zk_option(), timeout: float = _timeout_option(), as_json: bool = _json_option()
) -> None:
    """The active controller, its epoch and session (exit 1 when there is none)."""
    from kafkatool.zk import codecs

    with connect(zookeeper, timeout, writable=False) as zk:
        c = zk.controller()
        e = zk.controller_epoch()
        brokers = zk.brokers()
        migration = zk.migration()
    obj: dict[str, Any] = {"type": "controller", "broker_id": None}
    if migration is not None:
        obj["migration"] = (
            codecs.to_jsonable(migration.value) if migration.value else {"error": migration.error}
        )
    if e is not None:
        obj.update(epoch=e.value, epoch_zk_version=e.stat.version)
        if e.error:
            obj["epoch_error"] = e.error
    if c is not None:
        obj.update(
            session=f"0x{c.stat.ephemeral_owner:x}", ephemeral=c.stat.ephemeral, elected_ms=c.stat.ctime_ms
        )
        if c.value is None:
            obj.update(error=c.error, **_data_fields(c.raw))
        else:
            v = c.value
            reg = brokers.get(v.broker_id)
            obj.update(
                broker_id=v.broker_id,
                version=v.version,
                timestamp_ms=v.timestamp,
                kraft_controller_epoch=v.kraft_controller_epoch,
                kraft=v.is_kraft,
                broker_registered=reg is not None,
                same_session_as_broker=reg is not None and reg.stat.ephemeral_owner == c.stat.ephemeral_owner,
            )
    if as_json:
        emit_json(obj)
    elif c is None:
        console.print(
            "no controller (/controller is absent)" + (f"; controller epoch {e.value}" if e else "")
        )
    elif c.value is None:
        console.print(f"[red]undecodable /controller:[/] {_esc(c.error)}: {_esc(_raw_text(c.raw))}")
    else:
        t = _table("field", "value")
        t.add_row(
            "broker",
            str(obj["broker_id"])
            + ("" if obj["broker_registered"] or obj["kraft"] else " [red](not registered)[/]"),
        )
        t.add_row("epoch", f"{obj.get('epoch', '-')} (zkVersion {obj.get('epoch_zk_version', '-')})")
        if obj["kraft"]:
            t.add_row(
                "mode",
                f"KRaft controller during migration (kraftControllerEpoch {obj['kraft_controller_epoch']})",
            )
        t.add_row(
            "session",
            obj["session"]
            + (
                "" if obj["same_session_as_broker"] or obj["kraft"] else " [red](not the broker's session)[/]"
            ),
        )
        t.add_row("elected", _ts(obj["elected_ms"]))
        t.add_row("znode version", f"v{obj['version']}")
        if "migration" in obj:
            t.add_row("ZK->KRaft migration", _esc(json.dumps(obj["migration"])))
        console.print(t)
    if c is None or c.value is None:
        raise typer.Exit(EXIT_FINDINGS)


@zk_app.command("reassignments")
@zk_command
def reassignments_cmd(
    zookeeper: str = _zk_option(), timeout: float = _timeout_option(), as_json: bool = _json_option()
) -> None:
    """Partition reassignments in flight: /admin/reassign_partitions and adding/removing replicas."""
    with connect(zookeeper, timeout, writable=False) as zk:
        legacy = zk.reassign_partitions()
        topics = {t: zk.topic_assignment(t) for t in zk.topics()}
    rows: dict[tuple[str, int], dict] = {}
    for name, t in sorted(topics.items()):
        if t is None or t.value is None or not t.value.reassigning:
            continue
        a = t.value
        for pid in sorted(set(a.adding_replicas) | set(a.removing_replicas)):
            replicas = a.partitions.get(pid, [])
            removing = a.removing_replicas.get(pid, [])
            rows[(name, pid)] = {
                "type": "reassignment",
                "topic": name,
                "partition": pid,
                "replicas": replicas,
                "target": [r for r in replicas if r not in removing],
                "adding_replicas": a.adding_replicas.get(pid, []),
                "removing_replicas": removing,
                "source": ["controller"],
            }
    if legacy is not None and legacy.value is not None:
        for p in legacy.value.partitions:
            t = topics.get(p.topic)
            current = t.value.partitions.get(p.partition) if t and t.value else None
            row = rows.setdefault(
                (p.topic, p.partition),
                {
                    "type": "reassignment",
                    "topic": p.topic,
                    "partition": p.partition,
                    "replicas": current,
                    "adding_replicas": [],
                    "removing_replicas": [],
                    "source": [],
                },
            )
            row["target"] = p.replicas
            row["source"].append("admin_znode")
    ordered = [rows[k] for k in sorted(rows)]
    if as_json:
        for r in ordered:
            emit_json(r)
        summary = {"type": "summary", "partitions": len(ordered), "admin_znode": legacy is not None}
        if legacy is not None:
            summary["admin_znode_mtime_ms"] = legacy.stat.mtime_ms
            if legacy.error:
                summary["admin_znode_error"] = legacy.error
        emit_json(summary)
    else:
        if legacy is not None:
            state = (
                f"[red]undecodable: {_esc(legacy.error)}[/]"
                if legacy.error
                else f"{len(legacy.value.partitions)} partitions"
            )
            console.print(f"/admin/reassign_partitions: {state}, written {_ts(legacy.stat.mtime_ms)}")
        if not ordered:
            console.print("no reassignments in progress")
        else:
            t = _table("partition", "replicas", "target", "adding", "removing", "source")
            for r in ordered:
                t.add_row(
                    _esc(f"{r['topic']}-{r['partition']}"),
                    _ids(r["replicas"]) if r["replicas"] is not None else "[red]no such partition[/]",
                    _ids(r["target"]),
                    _ids(r["adding_replicas"]),
                    _ids(r["removing_replicas"]),
                    ", ".join(r["source"]),
                )
            console.print(t)
    if legacy is not None and legacy.error:
        raise typer.Exit(EXIT_FINDINGS)


@zk_app.command("configs")
@zk_command
def configs_cmd(
    entity_type: list[str] = typer.Option(
        None, "--type", "-t", help="Entity type(s): topics, brokers, users, clients, ips (default all)."
    ),
    zookeeper: str = _zk_option(),
    timeout: float = _timeout_option(),
    as_json: bool = _json_option(),
) -> None:
    """Dynamic config overrides under /config, flagging replication throttles and leftover ones.

    Users and client ids are shown by their real names (Kafka keeps them sanitized: the path,
    /config/users/alice%40EXAMPLE.COM, is the znode's; --json adds "client" for a user's client).

    Exit 1 when a leftover throttle (no reassignment moving that topic, or none at all for
    broker rates) or an undecodable config is found.
    """
    from kafkatool.zk import paths
    from kafkatool.zk.check import load_snapshot, reassigning_topics

    types = entity_type or list(paths.CONFIG_ENTITY_TYPES)
    for t in types:
        if t not in paths.CONFIG_ENTITY_TYPES:
            raise CommandError(f"--type {t!r}: expected one of {', '.join(paths.CONFIG_ENTITY_TYPES)}")
    with connect(zookeeper, timeout, writable=False) as zk:
        moving = reassigning_topics(load_snapshot(zk))
        entities = [e for t in types for e in zk.entity_configs(t)]
    findings = 0
    rows = []
    for e in entities:
        # the real names (a user principal or client id desanitized) and the znode's raw path
        row: dict[str, Any] = {"type": "config", "entity_type": e.entity_type, "name": e.name, "path": e.path}
        if e.client is not None:
            row["client"] = e.client
        if e.error:
            findings += 1
            row.update(error=e.error)
            rows.append(row)
            continue
        cfg = e.config.config
        keys = paths.TOPIC_THROTTLE_KEYS if e.entity_type == "topics" else paths.BROKER_THROTTLE_KEYS
        throttles = {k: cfg[k] for k in keys if cfg.get(k)}
        leftover = False
        if throttles and e.entity_type == "topics":
            leftover = e.name not in moving
        elif throttles and e.entity_type == "brokers":
            leftover = not moving
        findings += leftover
        row.update(config=cfg, throttles=throttles, leftover_throttle=leftover, version=e.config.version)
        rows.append(row)
    if as_json:
        for r in rows:
            emit_json(r)
    else:
        t = _table("entity", "config")
        for r in rows:
            name = _esc(
                f"{r['entity_type']}/{r['name']}" + (f"/clients/{r['client']}" if "client" in r else "")
            )
            if "error" in r:
                t.add_row(name, f"[red]undecodable: {_esc(r['error'])}[/]")
                continue
            parts = []
            for k, v in sorted(r["config"].items()):
                item = _esc(f"{k}={v}")
                if k in r["throttles"]:
                    item = (
                        f"[red]{item} (leftover throttle)[/]"
                        if r["leftover_throttle"]
                        else f"[yellow]{item}[/]"
                    )
                parts.append(item)
            t.add_row(name, ", ".join(parts) or "[dim](no overrides)[/]")
        console.print(t)
    if findings:
        raise typer.Exit(EXIT_FINDINGS)


@zk_app.command("acls")
@zk_command
def acls_cmd(
    zookeeper: str = _zk_option(), timeout: float = _timeout_option(), as_json: bool = _json_option()
) -> None:
    """ACLs stored by the ZK authorizer (/kafka-acl literal, /kafka-acl-extended prefixed)."""
    with connect(zookeeper, timeout, writable=False) as zk:
        resources = zk.acl_resources()
    bad = [r for r in resources if r.error]
    if as_json:
        for r in resources:
            base = {
                "pattern_type": r.pattern_type,
                "resource_type": r.resource_type,
                "resource": r.name,
                "path": r.path,
            }
            if r.error:
                emit_json({"type": "acl_error", **base, "error": r.error})
                continue
            for a in r.acls.acls:
                emit_json(
                    {
                        "type": "acl",
                        **base,
                        "principal": a.principal,
                        "permission": a.permission_type,
                        "operation": a.operation,
                        "host": a.host,
                    }
                )
    else:
        t = _table("resource", "pattern", "principal", "permission", "operation", "host")
        for r in resources:
            res = _esc(f"{r.resource_type}:{r.name}")
            if r.error:
                t.add_row(res, r.pattern_type, f"[red]undecodable: {_esc(r.error)}[/]", "", "", "")
                continue
            for a in r.acls.acls:
                t.add_row(
                    res, r.pattern_type, _esc(a.principal), a.permission_type, a.operation, _esc(a.host)
                )
        console.print(t)
        if not resources:
            console.print("no ACLs")
    if bad:
        raise typer.Exit(EXIT_FINDINGS)


# ---------------------------------------------------------------- discovery


@zk_app.command("roots")
@zk_command
def roots_cmd(
    max_depth: int = typer.Option(4, "--max-depth", min=0, help="How deep below the start to search."),
    zookeeper: str = _zk_option(),
    timeout: float = _timeout_option(),
    as_json: bool = _json_option(),
) -> None:
    """Find the Kafka clusters (chroots) in the ensemble, below the chroot given if any."""
    from kafkatool.zk.discovery import find_kafka_roots

    with connect(zookeeper, timeout, kafka=False, writable=False) as zk:
        roots = find_kafka_roots(zk, max_depth=max_depth)
        hosts, chroot = zk.hosts, zk.chroot
    if as_json:
        for r in roots:
            full = (chroot + r.chroot).rstrip("/") if chroot and r.chroot != "/" else (chroot or r.chroot)
            emit_json(
                {
                    "type": "kafka_root",
                    "chroot": full or "/",
                    "connect": hosts + ("" if full in ("", "/") else full),
                    "cluster_id": r.cluster_id,
                    "brokers": r.brokers,
                    "controller": r.controller,
                    "controller_epoch": r.controller_epoch,
                    "topics": r.topics,
                    "warnings": r.warnings,
                }
            )
        emit_json({"type": "summary", "roots": len(roots)})
    else:
        if not roots:
            console.print("no Kafka roots found")
        else:
            t = _table("chroot", "cluster id", "brokers", "controller", "topics", "warnings")
            for r in roots:
                full = (chroot + r.chroot).rstrip("/") if chroot and r.chroot != "/" else (chroot or r.chroot)
                t.add_row(
                    _esc(full or "/"),
                    _esc(r.cluster_id or "[missing]"),
                    _ids(r.brokers),
                    str(r.controller) if r.controller is not None else "-",
                    str(r.topics),
                    _esc("; ".join(r.warnings)),
                )
            console.print(t)
    if not roots:
        raise typer.Exit(EXIT_FINDINGS)


# ---------------------------------------------------------------- check


@zk_app.command("check")
@zk_command
def check_cmd(
    stale_after: float = typer.Option(
        300.0,
        "--stale-after",
        min=0,
        help="Seconds after which an unconsumed /admin or notification znode is stuck.",
    ),
    zookeeper: str = _zk_option(),
    timeout: float = _timeout_option(),
    as_json: bool = _json_option(),
) -> None:
    """Check invariants: ISR within replicas, live leaders, epochs, stuck /admin nodes, leftover
    throttles, missing partition state, duplicate broker registrations. Exit 1 on findings."""
    from kafkatool.zk.check import load_snapshot, run_checks

    with connect(zookeeper, timeout, writable=False) as zk:
        snap = load_snapshot(zk)
    findings = run_checks(snap, stale_after_s=stale_after)
    by_kind = Counter(f.kind for f in findings)
    partitions = sum(
        len(ts.assignment.value.partitions)
        for ts in snap.topics.values()
        if ts.assignment and ts.assignment.value
    )
    if as_json:
        for f in findings:
            emit_json(f.to_json())
        emit_json(
            {
                "type": "summary",
                "findings": len(findings),
                "by_kind": dict(sorted(by_kind.items())),
                "brokers": len(snap.brokers),
                "topics": len(snap.topics),
                "partitions": partitions,
            }
        )
    else:
        for f in findings:
            color = "red" if f.severity == "error" else "yellow"
            console.print(f"[{color}]{f.severity}[/] {f.kind}: {_esc(f.path)}: {_esc(f.message)}")
        console.print(
            f"checked {len(snap.brokers)} brokers, {len(snap.topics)} topics, {partitions} partitions: "
            + (f"{len(findings)} finding{'s' if len(findings) != 1 else ''}" if findings else "no findings")
        )
    if findings:
        raise typer.Exit(EXIT_FINDINGS)


# ---------------------------------------------------------------- dump / restore


@zk_app.command("dump")
@zk_command
def dump_cmd(
    path: str = typer.Argument("/", help="Subtree to dump (relative to the chroot); default the Kafka root."),
    output: str = typer.Option(..., "--output", "-o", help="JSON file to write ('-' for stdout)."),
    all_nodes: bool = typer.Option(
        False, "--all", help="At the root, include non-Kafka top-level nodes too (never /zookeeper)."
    ),
    zookeeper: str = _zk_option(),
    timeout: float = _timeout_option(),
    as_json: bool = _json_option(),
) -> None:
    """Dump a subtree (data as UTF-8 text, else base64; ephemeral flag; stat) to a JSON file."""
    from kafkatool.zk.dump import make_dump

    with connect(zookeeper, timeout, kafka=False, writable=False) as zk:
        zk.get(path)  # no such znode -> one-line error
        doc = make_dump(zk, path, kafka_only=not all_nodes)
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if output == "-":
        sys.stdout.write(text)
        return
    fileops.atomic_write(output, text.encode(), mode=0o600)
    nodes = doc["nodes"]
    summary = {
        "type": "summary",
        "output": output,
        "nodes": len(nodes),
        "ephemeral": sum(1 for n in nodes if n["ephemeral"]),
        "base64": sum(1 for n in nodes if n["encoding"] == "base64"),
        "bytes": len(text.encode()),
    }
    if as_json:
        emit_json(summary)
    else:
        console.print(
            f"dumped {summary['nodes']} znodes ({summary['ephemeral']} ephemeral, {summary['base64']} binary) "
            f"from {_esc(doc['chroot'])} {_esc(doc['root'])} to {_esc(output)}"
        )


@zk_app.command("restore")
@zk_command
def restore_cmd(
    file: str = typer.Argument(..., help="A dump written by `kafkatool zk dump`."),
    force: bool = typer.Option(False, "--force", help="Overwrite znodes that exist with different data."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Validate and show what would be written; write nothing."
    ),
    zookeeper: str = _zk_option(),
    timeout: float = _timeout_option(),
    as_json: bool = _json_option(),
) -> None:
    """Recreate a dumped subtree under --zookeeper's chroot.

    The whole file is validated before anything is written; writes go in ZooKeeper multi
    transactions (all-or-nothing when they fit in one). Each written znode gets its dumped
    data version back (the same data is set again until the version matches), so the
    controller's conditional writes and `zk check` see the tree as it was. Not restorable,
    and said so: ephemeral znodes (broker registrations, /controller: brokers recreate them
    when they start), zxids and times, child and ACL versions, ACLs.
    """
    from kafkatool.zk.dump import (
        NOT_RESTORED,
        DumpFormatError,
        apply_restore,
        parse_dump,
        plan_batches,
        plan_restore,
    )

    try:
        with open(file, encoding="utf-8") as f:
            doc = json.load(f)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{file}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise CommandError(f"{file}: not UTF-8 (at byte {exc.start})") from None
    try:
        nodes = parse_dump(doc)
    except DumpFormatError as exc:
        raise CommandError(f"{file}: {exc}") from None
    with connect(zookeeper, timeout, kafka=False, writable=True) as zk:
        plan = plan_restore(zk, nodes, force=force)
        if plan.ephemeral_parents:
            raise CommandError(
                f"{file}: {plan.ephemeral_parents[0].path} has an ephemeral parent in the dump; cannot restore"
            )
        if plan.conflicts:
            first = ", ".join(n.path for n in plan.conflicts[:3])
            raise CommandError(
                f"{len(plan.conflicts)} znodes already exist with other data ({first}"
                + (", ..." if len(plan.conflicts) > 3 else "")
                + "); use --force to overwrite"
            )
        batches = plan_batches(plan)
        written = 0 if dry_run else apply_restore(zk, plan)
        target = zk.display("/")
    summary = {
        "type": "summary",
        "dry_run": dry_run,
        "target": target,
        **plan.summary(),
        "written": written,
        "transactions": len(batches),
    }
    if as_json:
        if dry_run:
            for n in plan.creates:
                emit_json({"type": "planned", "action": "create", "path": n.path})
            for n in plan.updates:
                emit_json({"type": "planned", "action": "update", "path": n.path})
        for n in plan.skipped_ephemeral:
            emit_json({"type": "skipped", "reason": "ephemeral", "path": n.path})
        for path, (now, dumped) in sorted(plan.version_differs.items()):
            emit_json({"type": "version_differs", "path": path, "version": now, "dumped_version": dumped})
        emit_json({**summary, "not_restored": NOT_RESTORED})
        return
    if dry_run:
        for n in plan.creates:
            console.print(f"would create {_esc(n.path)}")
        for n in plan.updates:
            console.print(f"would overwrite {_esc(n.path)}")
    for n in plan.skipped_ephemeral:
        console.print(f"skipped ephemeral {_esc(n.path)} (only a live broker session may own it)")
    verb = "would write" if dry_run else "wrote"
    console.print(
        f"{verb} {len(plan.creates)} new and {len(plan.updates)} overwritten znodes under {_esc(target)} "
        f"in {len(batches)} transaction(s); {len(plan.unchanged)} unchanged, "
        f"{len(plan.skipped_ephemeral)} ephemeral skipped"
    )
    if plan.version_bumps:
        console.print(
            f"{'would restore' if dry_run else 'restored'} the data version of {len(plan.version_bumps)} znode(s) "
            f"({sum(plan.version_bumps.values())} extra set(s) of the same data)"
        )
    for path, (now, dumped) in sorted(plan.version_differs.items()):
        console.print(
            f"[yellow]note:[/] {_esc(path)} is at version {now}, the dump had {dumped} (left as it is)"
        )
    console.print("not restored: " + "; ".join(NOT_RESTORED))
    if len(batches) > 1 and not dry_run:
        console.print(
            "[yellow]note: the restore needed several transactions, so it was not atomic as a whole[/]"
        )


__all__ = ["EXIT_OK", "register", "zk_app"]
