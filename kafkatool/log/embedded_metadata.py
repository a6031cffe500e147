"""The shape of ``kafkatool serve``'s embedded metadata file (``kafkatool-cluster.json`` in the
first log dir, broker/metadata.MetadataStore's), checked once for every reader: the broker's
start-up, a member process's copy, ``users --log-dir`` and the offline commands' topic-config
layer (topic_settings.read_embedded).

Two classes of damage, by what Kafka would do with the same damage in its own stores:

- refused (:class:`EmbeddedMetadataError`, the broker does not start): the file is no JSON
  object, or ``format``, ``cluster_id``, ``node_id``, ``producer_ids_reserved``, ``topics``,
  ``deleted_topic_ids`` or ``acls`` is not what it must be. These say which logs are whose and
  who may do what: a KRaft broker whose metadata image cannot be loaded, or an AclAuthorizer
  whose ACL znode does not parse, does not start, and serving without the entry would adopt a
  topic's logs as a stranger's (a new id, its configs gone), hand out producer ids again, or
  drop a DENY.
- left out and logged once (:class:`Checked.skipped`): ``user_scram_credentials``,
  ``group_configs``, ``delegation_tokens`` and ``client_quotas`` (the whole key or one entry;
  a quota Kafka cannot parse is logged and not applied by its ConfigHandler). Kafka carries on
  without a credential or token it cannot load (DelegationTokenManagerZk.loadCache logs and
  skips; a user without credentials cannot log in) and a group without its dynamic configs
  runs on the broker's defaults: the broker fails closed, and the next save writes the file
  without the entry (the log line says so).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkatool.errors import KafkatoolError
from kafkatool.formats.uuid import Uuid

FILE = "kafkatool-cluster.json"
#: a stored ACL binding's fields (security/acl.AclBinding.to_json; their names are checked there)
ACL_FIELDS = ("resource_type", "name", "pattern_type", "principal", "host", "operation", "permission")
FORMAT_VERSION = 1
log = logging.getLogger("kafkatool.broker")


class EmbeddedMetadataError(KafkatoolError, OSError):
    """The embedded metadata file cannot be taken: one line naming the file, the key path and what
    was expected (an OSError: serve's start-up refuses it as it refuses a log dir it cannot open)."""


@dataclass
class Checked:
    """The file's contents with the entries left out removed; ``skipped`` says what and why."""

    data: dict
    skipped: list[str] = field(default_factory=list)


def read(path: Path) -> Checked | None:
    """The checked contents of ``path`` (None: no file)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise EmbeddedMetadataError(f"{path}: unreadable cluster metadata: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise EmbeddedMetadataError(f"{path}: unreadable cluster metadata: not JSON ({exc})") from None
    return check(data, str(path))


def key_path(key: str, name: str | int | None = None, field: str | None = None) -> str:
    """``topics["orders"].partitions``: the top-level key, an entry's name in JSON quotes (a list
    item by index), the entry's field."""
    out = key
    if name is not None:
        out += f"[{name}]" if isinstance(name, int) else f"[{json.dumps(name, ensure_ascii=False)}]"
    return out if field is None else f"{out}.{field}"


def found(value: Any) -> str:
    """What a JSON value is, for a message."""
    if value is MISSING:
        return "nothing"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


MISSING = object()


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _config_value(value: Any) -> bool:
    # written as strings; a hand-edited number is taken as its text (as before)
    return isinstance(value, str) or _int(value)


def _configs(value: Any) -> bool:
    return isinstance(value, dict) and all(_config_value(v) for v in value.values())


def check(data: Any, where: str) -> Checked:
    """Check a parsed metadata file (``where`` names it in messages)."""

    def refuse(keys: tuple, expected: str, value: Any) -> EmbeddedMetadataError:
        at = f"{key_path(*keys)}: " if keys else ""  # (key, name, field)
        return EmbeddedMetadataError(f"{where}: {at}expected {expected}, found {found(value)}")

    if not isinstance(data, dict):
        raise refuse((), "a JSON object", data)
    out = dict(data)
    for key, ok, expected in (
        ("format", lambda v: _int(v) and v >= 1, "a format version (an integer from 1)"),
        ("cluster_id", lambda v: v is None or isinstance(v, str), "a cluster id (a string)"),
        ("node_id", _int, "a node id (an integer)"),
        ("producer_ids_reserved", lambda v: _int(v) and v >= 0, "a producer id (an integer from 0)"),
        ("deleted_topic_ids", _str_map, "an object of topic id -> topic name"),
    ):
        if key in data and not ok(data[key]):
            raise refuse((key,), expected, data[key])
    topics = data.get("topics", {})
    if not isinstance(topics, dict):
        raise refuse(("topics",), "an object of topic name -> topic", topics)
    for name, t in topics.items():
        if not isinstance(t, dict):
            raise refuse(("topics", name), "a topic (an object)", t)
        tid = t.get("id", MISSING)
        if not _uuid(tid):
            raise refuse(("topics", name, "id"), "a topic id (a Uuid string)", tid)
        count = t.get("partitions", MISSING)
        if not (_int(count) and count >= 1):
            raise refuse(("topics", name, "partitions"), "a partition count (an integer from 1)", count)
        if "configs" in t and not _configs(t["configs"]):
            raise refuse(("topics", name, "configs"), "an object of config name -> string", t["configs"])
        epochs = t.get("leader_epochs", {})
        if not (
            isinstance(epochs, dict) and all(_partition(p) and _int(e) and e >= 0 for p, e in epochs.items())
        ):
            raise refuse(
                ("topics", name, "leader_epochs"), "an object of partition -> leader epoch (integers)", epochs
            )
    acls = data.get("acls", [])
    if not isinstance(acls, list):
        raise refuse(("acls",), "a list of ACL bindings", acls)
    for i, a in enumerate(acls):
        if not isinstance(a, dict):
            raise refuse(("acls", i), "an ACL binding (an object)", a)
        for name in ACL_FIELDS:
            if not isinstance(a.get(name, MISSING), str):
                raise refuse(("acls", i, name), "a string", a.get(name, MISSING))
    skipped: list[str] = []

    def leave_out(keys: tuple, expected: str, value: Any, what: str) -> None:
        skipped.append(
            f"{where}: {key_path(*keys)}: expected {expected}, found {found(value)}; {what} left out "
            "(dropped at the next save)"
        )

    for key, expected, entry_ok, entry_expected, what in (
        (
            "user_scram_credentials",
            "an object of user -> credentials",
            lambda v: isinstance(v, dict) and all(isinstance(c, str) for c in v.values()),
            "an object of SCRAM mechanism -> credential text",
            "its logins fail",
        ),
        (
            "group_configs",
            "an object of group -> configs",
            _configs,
            "an object of config name -> string",
            "the group runs on the broker's defaults",
        ),
        (
            "delegation_tokens",
            "an object of token id -> token",
            lambda v: isinstance(v, dict),
            "a token (an object)",
            "its logins fail",
        ),
    ):
        if key not in data:
            continue
        value = data[key]
        if not isinstance(value, dict):
            leave_out((key,), expected, value, f"every entry ({what})")
            out.pop(key)
            continue
        kept = {}
        for name, entry in value.items():
            if entry_ok(entry):
                kept[name] = entry
            else:
                leave_out((key, name), entry_expected, entry, f"the entry ({what})")
        out[key] = kept
    if "client_quotas" in data:
        # a quota Kafka cannot take is logged and not applied (ConfigHandler's change fails)
        value = data["client_quotas"]
        what = "the broker applies no quota of it"
        if not isinstance(value, list):
            leave_out(("client_quotas",), "a list of client quota entities", value, f"every entry ({what})")
            out.pop("client_quotas")
        else:
            kept_quotas = []
            for i, q in enumerate(value):
                if _quota_entry(q):
                    kept_quotas.append(q)
                else:
                    leave_out(
                        ("client_quotas", i),
                        'a quota entity ({"entity": {"user"/"client-id": name or null}, "configs": {...}})',
                        q,
                        f"the entry ({what})",
                    )
            out["client_quotas"] = kept_quotas
    return Checked(out, skipped)


def _quota_entry(q: Any) -> bool:
    if not isinstance(q, dict) or not isinstance(q.get("entity"), dict):
        return False
    entity = q["entity"]
    if not entity or not set(entity) <= {"user", "client-id"}:
        return False
    if not all(v is None or (isinstance(v, str) and v) for v in entity.values()):
        return False
    return isinstance(q.get("configs"), dict) and all(isinstance(v, str) for v in q["configs"].values())


def _str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _partition(text: str) -> bool:
    return text.isdigit() and text.isascii()


def _uuid(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        Uuid.from_string(value)
    except (ValueError, TypeError, KafkatoolError):
        return False
    return True
