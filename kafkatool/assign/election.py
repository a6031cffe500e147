"""Leader elections as ``kafka-leader-election.sh`` runs them: ElectLeaders through the
cluster's controller, or ``/admin/preferred_replica_election`` in ZooKeeper (the path
ZK-mode controllers watch, written as Kafka's PreferredReplicaLeaderElectionCommand wrote it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from kafkatool.assign.kafka_client import KafkaAdmin, KafkaAdminError, describe_error
from kafkatool.errors import KafkatoolError
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode

ELECT_LEADERS = 43
#: ElectionType as the API numbers it
ELECTION_TYPES = {"preferred": 0, "unclean": 1}


class ElectionError(KafkatoolError):
    """Bad election input (the JSON file, the options) or a refused ZooKeeper write."""


@dataclass
class Outcome:
    topic: str
    partition: int
    error_code: int
    message: str | None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def format_election_json(partitions: Iterable[tuple[str, int]]) -> str:
    """The ``--path-to-json-file`` content for ``partitions`` (what parse_election_json reads)."""
    return json.dumps(
        {"partitions": [{"topic": t, "partition": p} for t, p in sorted(set(partitions))]},
        separators=(",", ":"),
    )


def parse_election_json(text: str, source: str) -> list[tuple[str, int]]:
    """``{"partitions": [{"topic": "foo", "partition": 1}, ...]}`` (LeaderElectionCommand's
    parseReplicaElectionData): duplicates and missing fields are errors."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ElectionError(f"{source}: not JSON: {exc}") from None
    if not isinstance(data, dict) or "partitions" not in data:
        raise ElectionError(f'{source}: Replica election data is missing "partitions" field')
    out: list[tuple[str, int]] = []
    for i, entry in enumerate(data["partitions"] or []):
        try:
            topic, partition = entry["topic"], entry["partition"]
        except (TypeError, KeyError):
            raise ElectionError(f'{source}: partitions[{i}]: needs "topic" and "partition"') from None
        if not isinstance(topic, str) or not isinstance(partition, int) or isinstance(partition, bool):
            raise ElectionError(f"{source}: partitions[{i}]: topic must be a string and partition an integer")
        out.append((topic, partition))
    dupes = sorted({f"{t}-{p}" for t, p in out if out.count((t, p)) > 1})
    if dupes:
        raise ElectionError(
            f"{source}: Replica election data contains duplicate partitions: {','.join(dupes)}"
        )
    return out


def elect_live(
    admin: KafkaAdmin, election_type: str, partitions: list[tuple[str, int]] | None
) -> list[Outcome]:
    """ElectLeaders at the controller; ``partitions`` None: every partition (the API's null)."""
    from kafkatool.protocol.generated.elect_leaders_request import TopicPartitions

    conn = admin.controller()
    version = conn.version_for(ELECT_LEADERS)
    if version == 0 and election_type != "preferred":
        raise KafkaAdminError(
            "the cluster's ElectLeaders v0 elects preferred leaders only (unclean needs Kafka 2.4+)",
            ErrorCode.UNSUPPORTED_VERSION,
        )
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = [TopicPartitions(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]
    info = API_BY_KEY[ELECT_LEADERS]
    fields = {"topic_partitions": topics, "timeout_ms": 30000}
    if version >= 1:
        fields["election_type"] = ELECTION_TYPES[election_type]
    resp = conn.request(ELECT_LEADERS, info.request(**fields), version)
    if version >= 1 and resp.error_code:
        raise KafkaAdminError(f"ElectLeaders: {describe_error(resp.error_code)}", resp.error_code)
    return [
        Outcome(r.topic, p.partition_id, p.error_code, p.error_message)
        for r in resp.replica_election_results
        for p in r.partition_result
    ]


def elect_zk(zk, partitions: list[tuple[str, int]] | None) -> tuple[list[tuple[str, int]], bytes]:
    """Create ``/admin/preferred_replica_election`` for the partitions (None: every partition
    in ``/brokers/topics``); refused while one is in flight, as Kafka's tool refuses.
    Returns the partitions written and the payload."""
    from kafkatool.zk import codecs, paths
    from kafkatool.zk.client import ZkNodeExistsError

    if partitions is None:
        partitions = []
        for t, state in sorted(zk.topic_states().items()):
            if state.assignment is not None and state.assignment.value is not None:
                partitions.extend((t, p) for p in sorted(state.assignment.value.partitions))
    payload = codecs.encode_partition_list(sorted(partitions))
    try:
        zk.create(paths.PREFERRED_REPLICA_ELECTION, payload, makepath=True)
    except ZkNodeExistsError:
        current = zk.preferred_replica_election()
        pending = (
            ", ".join(f"{tp.topic}-{tp.partition}" for tp in current.value.partitions) if current else "?"
        )
        raise ElectionError(
            f"Preferred replica leader election currently in progress for {pending}. Aborting operation"
        ) from None
    return sorted(partitions), payload
