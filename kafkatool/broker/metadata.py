"""The embedded cluster metadata of a single-node broker.

What KRaft keeps in ``__cluster_metadata`` is kept here in one small JSON file,
``kafkatool-cluster.json`` in the first log dir, written atomically: the
cluster id, and per topic its id, partition count, leader epoch and
configuration overrides.  Each partition dir also carries Kafka's own
``partition.metadata`` (the topic id) and every log dir a ``meta.properties``,
so a Kafka broker could take the dirs over, and a log dir written by Kafka
(which has no JSON file) is understood from its partition dirs alone.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kafkatool.formats import properties as props
from kafkatool.formats.errors import FormatError
from kafkatool.formats.uuid import Uuid, random_uuid
from kafkatool.log import embedded_metadata, fileops, topic_settings
from kafkatool.log.embedded_metadata import EmbeddedMetadataError

METADATA_FILE = embedded_metadata.FILE
FORMAT_VERSION = embedded_metadata.FORMAT_VERSION
INTERNAL_TOPICS = frozenset(topic_settings.INTERNAL_TOPIC_CONFIGS)
log = logging.getLogger("kafkatool.broker")


def new_cluster_id() -> str:
    """Kafka's format: a random Uuid, URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(random_uuid(os.urandom).raw).decode().rstrip("=")


@dataclass
class TopicMeta:
    name: str
    topic_id: Uuid
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    #: leader epoch per partition (single node: bumped only when a partition is (re)loaded from a foreign dir)
    leader_epochs: dict[int, int] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def leader_epoch(self, partition: int) -> int:
        return self.leader_epochs.get(partition, 0)

    def to_json(self) -> dict:
        return {
            "id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": self.configs,
            "leader_epochs": {str(p): e for p, e in sorted(self.leader_epochs.items())},
        }

    @classmethod
    def from_json(cls, name: str, d: dict) -> TopicMeta:
        return cls(
            name,
            Uuid.from_string(d["id"]),
            int(d["partitions"]),
            {str(k): str(v) for k, v in d.get("configs", {}).items()},
            {int(p): int(e) for p, e in d.get("leader_epochs", {}).items()},
        )


class MetadataStore:
    """Topics of the cluster; ``save()`` persists them (no-op when read-only)."""

    def __init__(
        self, log_dirs: list[Path], node_id: int, *, writable: bool = True, cluster_id: str | None = None
    ):
        self.log_dirs = log_dirs
        self.path = log_dirs[0] / METADATA_FILE
        self.node_id = node_id
        self.writable = writable
        self.topics: dict[str, TopicMeta] = {}
        self._by_id: dict[Uuid, TopicMeta] = {}
        self.cluster_id = cluster_id
        self.found_file = False
        #: producer ids below this may have been handed out (allocated in blocks)
        self.producer_ids_reserved = 0
        #: SCRAM credentials: user -> mechanism -> Kafka's credential text (scram.ScramCredential.to_text)
        self.user_scram: dict[str, dict[str, str]] = {}
        #: delegation tokens (security/tokens.py): token id -> the JSON object Kafka keeps in
        #: /delegation_token/tokens/<tokenId> (zk/codecs.delegation_token_json); never the HMAC
        self.delegation_tokens: dict[str, dict] = {}
        #: ACL bindings (security/acl.AclBinding), sorted
        self.acls: list = []
        #: dynamic group configs (IncrementalAlterConfigs on GROUP resources): group -> name -> value
        self.group_configs: dict[str, dict[str, str]] = {}
        #: client quotas (broker/quotas.py): entity (user, client-id) -> quota configs
        self.client_quotas: dict[tuple, dict[str, str]] = {}
        #: ZooKeeper cluster mode: topics live in ZooKeeper and reach this store through the
        #: controller's UpdateMetadata; the file keeps only what is the broker's own
        self.persist_topics = True
        #: called with the saved contents (to_json) after every save (a broker of several
        #: processes tells the others)
        self.on_save: list = []
        #: log dirs that are offline (nothing is written there)
        self.offline_dirs: set[Path] = set()
        #: topics deleted while a log dir was offline (topic id -> name): a log of one found
        #: later is a stray (Kafka's metadata image lacks the id; reconcile would adopt it)
        self.deleted_topic_ids: dict[str, str] = {}
        self._load()

    # ------------------------------------------------------------------ load/save
    def _load(self) -> None:
        """The file's contents, checked by log/embedded_metadata (EmbeddedMetadataError, an
        OSError: serve refuses to start, exit 2)."""
        checked = embedded_metadata.read(self.path)
        if checked is not None:
            self.found_file = True
            self.apply_json(checked.data)
            for note in checked.skipped:
                log.error("%s", note)
        if self.cluster_id is None:
            self.cluster_id = self._cluster_id_from_meta_properties()
        if self.cluster_id is None:
            self.cluster_id = new_cluster_id()

    def apply_json(self, data: dict) -> None:
        """Take the contents of a metadata file (as :meth:`to_json` gives them), checked as
        log/embedded_metadata.check leaves them."""
        self.cluster_id = data.get("cluster_id") or self.cluster_id
        self.producer_ids_reserved = int(data.get("producer_ids_reserved", 0))
        self.user_scram = {
            str(u): {str(m): str(c) for m, c in creds.items()}
            for u, creds in data.get("user_scram_credentials", {}).items()
        }
        self.group_configs = {
            str(g): {str(k): str(v) for k, v in cfg.items()}
            for g, cfg in data.get("group_configs", {}).items()
        }
        self.delegation_tokens = {str(t): obj for t, obj in data.get("delegation_tokens", {}).items()}
        if data.get("client_quotas"):
            from kafkatool.broker.quotas import entity_from_json

            self.client_quotas = {
                entity_from_json(q["entity"]): {str(k): str(v) for k, v in q["configs"].items()}
                for q in data["client_quotas"]
            }
        else:
            self.client_quotas = {}
        self.topics = {name: TopicMeta.from_json(name, t) for name, t in data.get("topics", {}).items()}
        self.deleted_topic_ids = {str(i): str(n) for i, n in data.get("deleted_topic_ids", {}).items()}
        self.acls = []
        if data.get("acls"):
            self.acls = sorted(self._acl(i, a) for i, a in enumerate(data["acls"]))

    def _acl(self, i: int, obj: dict):
        """A stored ACL binding (its fields strings: embedded_metadata.check); EmbeddedMetadataError
        for names Kafka's AclAuthorizer would not load (it does not start on an ACL znode it
        cannot parse)."""
        from kafkatool.broker.security.acl import AclBinding, AclError

        try:
            binding = AclBinding.from_json(obj)
            binding.validate()
        except KeyError as exc:
            why = f"a name Kafka does not know: {exc.args[0]}"
        except AclError as exc:
            why = str(exc)
        else:
            return binding
        where = embedded_metadata.key_path("acls", i)
        raise EmbeddedMetadataError(f"{self.path}: {where}: expected an ACL binding Kafka loads, found {why}")

    def _cluster_id_from_meta_properties(self) -> str | None:
        for d in self.log_dirs:
            try:
                meta = props.decode_meta_properties((d / props.META_PROPERTIES_FILE).read_bytes())
            except (OSError, ValueError, FormatError):
                continue
            if meta.cluster_id:
                return meta.cluster_id
        return None

    def save(self) -> None:
        if not self.writable:
            return
        data = self.to_json()
        fileops.atomic_write(self.path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
        for callback in self.on_save:
            callback(data)

    def to_json(self) -> dict:
        data = {
            "format": FORMAT_VERSION,
            "cluster_id": self.cluster_id,
            "node_id": self.node_id,
            "producer_ids_reserved": self.producer_ids_reserved,
            "topics": {n: t.to_json() for n, t in sorted(self.topics.items())} if self.persist_topics else {},
        }
        if self.deleted_topic_ids and self.persist_topics:
            data["deleted_topic_ids"] = dict(sorted(self.deleted_topic_ids.items()))
        if self.user_scram:
            data["user_scram_credentials"] = self.user_scram
        if self.acls:
            data["acls"] = [a.to_json() for a in self.acls]
        if self.group_configs:
            data["group_configs"] = self.group_configs
        if self.delegation_tokens:
            data["delegation_tokens"] = dict(sorted(self.delegation_tokens.items()))
        if self.client_quotas:
            from kafkatool.broker.quotas import entity_to_json

            data["client_quotas"] = sorted(
                (
                    {"entity": entity_to_json(e), "configs": dict(sorted(c.items()))}
                    for e, c in self.client_quotas.items()
                ),
                key=lambda q: json.dumps(q["entity"], sort_keys=True),
            )
        return data

    def write_meta_properties(self) -> None:
        """meta.properties in every log dir (KRaft v1 layout), unless one is there already."""
        if not self.writable:
            return
        for d in self.log_dirs:
            if d in self.offline_dirs:
                continue
            path = d / props.META_PROPERTIES_FILE
            if path.exists():
                continue
            meta = props.MetaProperties(
                1, node_id=self.node_id, cluster_id=self.cluster_id, directory_id=random_uuid(os.urandom)
            )
            fileops.atomic_write(path, props.encode_meta_properties(meta, datetime.now(UTC)))

    # ------------------------------------------------------------------ reconciliation with the log dirs
    def reconcile(
        self,
        partitions_on_disk: dict[str, dict[int, Uuid | None]],
        *,
        compacted: set[str] | None = None,
        kraft: list[topic_settings.ConfigLayer] | None = None,
    ) -> list[str]:
        """Add topics found on disk but not in the file (a Kafka log dir); return notes.

        Their configs come from where the dir keeps them: a KRaft ``__cluster_metadata``
        log, Kafka's definition of the internal topics (compacted), and for a ZooKeeper-mode
        dir (configs in ZooKeeper) the cleaner-offset-checkpoint: ``compacted`` names the
        topics it lists, served as cleanup.policy=compact so that retention never deletes
        what Kafka's cleaner keeps.  ``kraft``: the dirs' KRaft layers when read already (the
        broker takes their dynamic broker configs before the logs open).

        Then every topic's stored configs go through Kafka's check of configs taken from the
        store (``topic_settings.stored_topic_config_error``), as a KRaft broker's first
        metadata publishing does: a topic with remote.storage.enable=true is logged as an
        error and served as a local log with its configs."""
        notes = []
        sources = {name: str(self.path) for name in self.topics}
        if kraft is None:
            kraft = [
                la
                for la in topic_settings.dir_layers(self.log_dirs)
                if la.label == topic_settings.SOURCE_KRAFT
            ]
        notes += [n for la in kraft for n in la.notes]
        for name, parts in sorted(partitions_on_disk.items()):
            ids = [u for _p, u in sorted(parts.items()) if u is not None]
            count = max(parts) + 1
            t = self.topics.get(name)
            if t is None:
                # the id most of its logs carry (a tie: the lowest partition's); a log of
                # another id is a stray (a KRaft image has one id per topic)
                topic_id = max(ids, key=lambda u: (ids.count(u), -ids.index(u))) if ids else None
                if topic_id is None:
                    topic_id = random_uuid(os.urandom)
                if len(set(ids)) > 1:
                    notes.append(
                        f"topic {name}: partitions carry different topic ids; took {topic_id}, "
                        "the logs of the others are strays"
                    )
                configs, source = {}, None
                evidence = topic_settings.ConfigLayer(
                    topic_settings.SOURCE_CLEANER_CHECKPOINT,
                    {t: {"cleanup.policy": "compact"} for t in compacted or ()},
                )
                for layer in [*kraft, topic_settings.internal_layer(), evidence]:
                    if layer.holds(name):
                        configs, source = layer.get(name), layer.label
                        break
                self.topics[name] = TopicMeta(name, topic_id, count, configs)
                sources[name] = source
                notes.append(
                    f"topic {name}: found {len(parts)} partition dir(s) on disk, serving {count} partitions"
                    + (f"; configs from {source}: {configs}" if source else "")
                )
            elif count > t.partitions:
                notes.append(f"topic {name}: {count} partitions on disk, metadata said {t.partitions}")
                t.partitions = count
        for name, t in sorted(self.topics.items()):
            error = topic_settings.stored_topic_config_error(t.configs)
            if error is not None:
                # DynamicConfigPublisher's metadata publishing fault: logged, not fatal
                log.error(
                    "error updating topic=%s with its stored configuration source=%s configs=%s: %s",
                    name,
                    sources.get(name),
                    json.dumps(t.configs, sort_keys=True),
                    error,
                )
        return notes

    # ------------------------------------------------------------------ topics
    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        t = TopicMeta(name, random_uuid(os.urandom), partitions, dict(configs))
        self.topics[name] = t
        return t

    def topic_by_id(self, topic_id: Uuid) -> TopicMeta | None:
        """The topic with this id (Fetch v13+ asks for every topic by id: an index, checked
        against ``topics`` on every hit and rebuilt on a miss, so no writer has to keep it)."""
        t = self._by_id.get(topic_id)
        if t is not None and t.topic_id == topic_id and self.topics.get(t.name) is t:
            return t
        self._by_id = {t.topic_id: t for t in self.topics.values()}
        return self._by_id.get(topic_id)
