"""What ``kafkatool streams-reset`` needs of a cluster beyond a consumer group's reset: Kafka
3.7's StreamsResetter (kafka-streams-application-reset.sh) rules on the one admin client.

* Which topics are a Streams application's internal ones (matchesInternalTopicFormat and
  isInferredInternalTopic): ``<application.id>-`` names ending with ``-changelog`` or
  ``-repartition``, and the KTable foreign-key join's subscription topics, never a topic given
  as an input or intermediate one (KAFKA-7930).
* The orders the tool prints in: the topics as listTopics().names() holds them (a HashMap of
  the Metadata answer's non-internal topics), the input and intermediate partitions as the
  HashSets the tool fills, the clamping lines as the HashMap it checks the range of.
* The refusal while the group has members, in the tool's words, members printed as Java's
  MemberDescription.

The offsets themselves are the group's reset (broker/group/live.plan_reset, the one rule of
the reset scenarios, and live.commit_offsets, the admin's commit without a member); members
are removed by live.remove_members (Admin.removeMembersFromConsumerGroup); topics deleted by
assign/topics.delete.
"""

from __future__ import annotations

import re

from kafkatool.assign.kafka_client import KafkaAdmin
from kafkatool.errors import KafkatoolError
from kafkatool.formats.java_collections import (
    hash_map_order,
    java_collection_str,
    java_string_hash,
    set_copy_capacity,
    topic_partition_hash,
)

TopicPartition = tuple[str, int]

_FK_JOIN = re.compile(r".+-KTABLE-FK-JOIN-SUBSCRIPTION-(?:REGISTRATION|RESPONSE)-[0-9]+-topic", re.DOTALL)
_SUFFIXES = ("-changelog", "-repartition", "-subscription-registration-topic", "-subscription-response-topic")


class ActiveMembersError(KafkatoolError):
    """The group still has members and --force was not given (the tool's IllegalStateException)."""


def matches_internal_topic_format(name: str) -> bool:
    """StreamsResetter.matchesInternalTopicFormat."""
    return name.endswith(_SUFFIXES) or _FK_JOIN.fullmatch(name) is not None


def is_inferred_internal_topic(
    name: str, application_id: str, inputs: list[str], intermediates: list[str]
) -> bool:
    """StreamsResetterOptions.isInferredInternalTopic: an input or intermediate topic named like
    an internal one is not one (KAFKA-7930)."""
    return (
        name not in inputs
        and name not in intermediates
        and name.startswith(application_id + "-")
        and matches_internal_topic_format(name)
    )


def list_topics(admin: KafkaAdmin) -> list[str]:
    """Admin.listTopics().names() as the tool walks it: the cluster's topics but the internal
    ones, in the order of the HashMap the admin fills from the Metadata answer."""
    meta = admin.metadata()
    names = [t for t in meta.topics if not meta.topic_info.get(t, (None, t.startswith("__")))[1]]
    return hash_map_order(names, java_string_hash)


def subscribed_partitions(
    admin: KafkaAdmin, inputs: list[str], intermediates: list[str], all_topics: list[str]
) -> tuple[list[TopicPartition], list[TopicPartition]]:
    """The input and the intermediate partitions of the topics the cluster has, in the order
    the tool's HashSets hold them: topicsToSubscribe (a HashSet sized for both options' lists),
    each topic's partitions from the consumer's partitionsFor, split into two default HashSets
    (a topic given as both is an input topic)."""
    found = [t for t in [*inputs, *intermediates] if t in all_topics]
    topics = hash_map_order(found, java_string_hash, capacity=len(inputs) + len(intermediates))
    meta = admin.metadata(topics) if topics else None
    parts = [(t, p) for t in topics if t in meta.topics for p in sorted(meta.topics[t])] if meta else []
    ins = [tp for tp in parts if tp[0] in inputs]
    mids = [tp for tp in parts if tp[0] not in inputs]
    return hash_map_order(ins, topic_partition_hash), hash_map_order(mids, topic_partition_hash)


def note_order(
    kind: str, inputs: list[TopicPartition], plan: dict[TopicPartition, int] | None
) -> list[TopicPartition]:
    """The order the tool prints its clamping and fallback lines in for reset scenario ``kind``:
    checkOffsetRange walks a HashMap sized for the input partitions (to-offset, shift-by) or
    the default one parseResetPlan filled in the file's order (from-file); resetToDatetime walks
    the input partitions' HashSet."""
    if kind in ("to-offset", "shift-by"):
        return hash_map_order(inputs, topic_partition_hash, capacity=len(inputs))
    if kind == "from-file":
        return hash_map_order(list(plan or {}), topic_partition_hash)
    return list(inputs)


def member_description(m) -> str:
    """Java's MemberDescription.toString (a views.MemberRow), its assignment the HashSet
    DescribeConsumerGroupsHandler copies the partitions into."""
    parts = hash_map_order(m.partitions, topic_partition_hash, capacity=set_copy_capacity(len(m.partitions)))
    return (
        f"(memberId={m.member_id}, groupInstanceId={m.instance_id if m.instance_id is not None else 'null'}, "
        f"clientId={m.client_id}, host={m.host}, "
        f"assignment=(topicPartitions={','.join(f'{t}-{p}' for t, p in parts)}))"
    )


def active_members_message(group: str, members: list) -> str:
    """StreamsResetter.maybeDeleteActiveConsumers' refusal."""
    return (
        f"Consumer group '{group}' is still active and has following members: "
        f"{java_collection_str(member_description(m) for m in members)}. "
        "Make sure to stop all running application instances before running the reset tool. "
        "You can use option '--force' to remove active members from the group."
    )


def invalid_internal_topics_message() -> str:
    """maybeDeleteInternalTopics' refusal of an --internal-topics not all inferred internal."""
    return (
        "Invalid topic specified in the --internal-topics option. Ensure that the topics specified "
        "are all internal topics. Do a dry run without the --internal-topics option to see the list "
        "of all internal topics that can be deleted."
    )


def note_line(note) -> str:
    """The tool's line for a live.ResetNote (checkOffsetRange says so of an offset at a bound
    too; resetToDatetime of a partition without an offset for the time)."""
    from kafkatool.broker.group import live

    if note.kind in (live.ABOVE_LATEST, live.AT_LATEST):
        return (
            f"New offset ({note.requested}) is higher than latest offset. Value will be set to {note.value}"
        )
    if note.kind in (live.BELOW_EARLIEST, live.AT_EARLIEST):
        return (
            f"New offset ({note.requested}) is lower than earliest offset. Value will be set to {note.value}"
        )
    t, p = note.tp
    return f"Partition {p} from topic {t} is empty, without a committed record. Falling back to latest known offset."
