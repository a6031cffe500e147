"""The answer to a request refused or failed as a whole: Kafka's
AbstractRequest.getErrorResponse, one place for the router and the authorizer's rules.

KafkaApis answers with it a request whose handling threw (KafkaApis.handle's catch ->
RequestHandlerHelper.handleError -> sendErrorOrCloseConnection) and a request its authorization
refuses as a whole (``getErrorResponse(Errors.GROUP_AUTHORIZATION_FAILED.exception)`` ...).
Most requests' getErrorResponse mirrors the request: one result per topic, partition,
resource, ACL creation or filter it names, named as the request names it, every error field
set, everything else the response schema's default (:func:`mirror` and :func:`fill_errors`).
Where Kafka builds something else (only a top-level error, placeholder values, a layout that
depends on the version, a list of names turned into results) the API has its own builder in
``_SHAPES``, read from the request class its docstring names (Kafka 3.7.1's; 3.8's for
DescribeTopicPartitions).  No error message is sent (ApiError.fromThrowable: none for
UNKNOWN_SERVER_ERROR nor for an exception carrying its error's default text) but where the
request class writes ``Errors.message()`` itself.  Produce with acks=0 has no answer
(ProduceRequest.getErrorResponse is null): CloseConnection, as RequestChannel.closeConnection.
"""

from __future__ import annotations

from kafkatool.formats.schema import ZERO_UUID, Message
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import default_message

__all__ = ["error_response", "fill_errors", "mirror", "no_coordinator"]


def error_response(header, request, code: int) -> Message:
    """``request``'s error answer with ``code`` (the API and version from ``header``); raises
    CloseConnection where Kafka has none (Produce with acks=0).  Fields the version does not
    carry are left for the router's encoder to drop (Router._encode)."""
    code = int(code)
    shape = _SHAPES.get(header.api_key)
    if shape is not None:
        return shape(request, header.api_version, code)
    resp = mirror(request, API_BY_KEY[header.api_key].response)
    fill_errors(resp, code)
    return resp


def fill_errors(msg, code: int) -> None:
    """Set every error_code in a response to ``code`` (and drop error messages), recursively."""
    for f in msg._FIELDS:
        v = getattr(msg, f.attr)
        if f.attr.endswith("error_code"):
            setattr(msg, f.attr, int(code))
        elif f.attr.endswith("error_message"):
            setattr(msg, f.attr, None)
        elif f.kind == "array" and f.cls is not None and v:
            for e in v:
                fill_errors(e, code)
        elif f.kind == "struct" and v is not None:
            fill_errors(v, code)


#: the fields by which a response names the item it answers, as the request named it (topic,
#: partition, config resource, quota entity, group, transaction, a marker's producer)
_ITEM_KEYS = frozenset(
    {
        "name",
        "topic",
        "topic_name",
        "topic_id",
        "partition_index",
        "partition",
        "partition_id",
        "index",
        "resource_type",
        "resource_name",
        "entity_type",
        "entity_name",
        "group_id",
        "transactional_id",
        "producer_id",
        "key",
    }
)
_PARTITION_KEYS = ("partition_index", "partition_id", "partition", "index")


def mirror(src, cls, _top: bool = True):
    """A ``cls`` answering ``src`` item by item: each list of results built from the request's
    list of the same name (or its only list of structs, where both have one), a list of
    partition numbers giving one result per partition; in a result only the fields naming
    its item are copied (never a top-level value: Kafka's getErrorResponse copies none), the
    rest keeps the schema's defaults."""
    out = cls()
    arrays = {f.attr: f for f in src._FIELDS if f.kind == "array"}
    structs = [f for f in arrays.values() if f.cls is not None]
    ints = [f for f in arrays.values() if f.elem == "int32"]
    results = [f for f in cls._FIELDS if f.kind == "array" and f.cls is not None]
    keys = (
        ()
        if _top
        else {f.attr for f in src._FIELDS if f.attr in _ITEM_KEYS and f.kind not in ("array", "struct")}
    )
    for f in cls._FIELDS:
        if f.kind == "array" and f.cls is not None:
            same = arrays.get(f.attr)
            if same is None and len(structs) == 1 and len(results) == 1:
                same = structs[0]
            if same is not None and same.cls is not None:
                setattr(out, f.attr, [mirror(x, f.cls, False) for x in getattr(src, same.attr) or ()])
            elif ints:
                names = {g.attr for g in f.cls._FIELDS}
                key = next((k for k in _PARTITION_KEYS if k in names), None)
                if key is not None:
                    setattr(out, f.attr, [f.cls(**{key: p}) for p in getattr(src, ints[0].attr) or ()])
        elif f.kind == "records" and f.nullable is None and getattr(out, f.attr) is None:
            setattr(out, f.attr, b"")  # a records field that may not be null: empty
        elif f.attr in keys:
            setattr(out, f.attr, getattr(src, f.attr))
    return out


# ----------------------------------------------------------------------------- own shapes
# each (request, version, code) -> response, as the request class named in its docstring


def _produce(req, version: int, code: int):
    """ProduceRequest.getErrorResponse (null for acks=0: the connection is closed)."""
    from kafkatool.broker.handlers.produce import _whole_request_error

    return _whole_request_error(req, code)


def _fetch(req, version: int, code: int):
    """FetchRequest.getErrorResponse."""
    from kafkatool.broker.handlers.fetch import _whole_request_error

    return _whole_request_error(req, code, version)


def _metadata(req, version: int, code: int):
    """MetadataRequest.getErrorResponse: each named topic (a null name as ""), its error, no
    partitions; no brokers."""
    from kafkatool.protocol.generated import metadata_response as R

    topics = [
        R.MetadataResponseTopic(
            error_code=code,
            name=t.name or "",
            topic_id=ZERO_UUID if t.topic_id is None else t.topic_id,
            is_internal=False,
            partitions=[],
        )
        for t in req.topics or ()
    ]
    return R.MetadataResponse(throttle_time_ms=0, brokers=[], topics=topics)


def _leader_and_isr(req, version: int, code: int):
    """LeaderAndIsrRequest.getErrorResponse: every partition state's error (below v5 with its
    topic's name, from v5 grouped by topic id)."""
    from kafkatool.protocol.generated import leader_and_isr_response as R

    resp = R.LeaderAndIsrResponse(error_code=code)
    if version < 2:
        resp.partition_errors = [
            R.LeaderAndIsrPartitionError(
                topic_name=p.topic_name, partition_index=p.partition_index, error_code=code
            )
            for p in req.ungrouped_partition_states
        ]
    elif version < 5:
        resp.partition_errors = [
            R.LeaderAndIsrPartitionError(
                topic_name=t.topic_name, partition_index=p.partition_index, error_code=code
            )
            for t in req.topic_states
            for p in t.partition_states
        ]
    else:
        resp.topics = [
            R.LeaderAndIsrTopicError(
                topic_id=t.topic_id,
                partition_errors=[
                    R.LeaderAndIsrPartitionError(partition_index=p.partition_index, error_code=code)
                    for p in t.partition_states
                ],
            )
            for t in req.topic_states
        ]
    return resp


def _stop_replica(req, version: int, code: int):
    """StopReplicaRequest.getErrorResponse: every partition of topicStates() (v0 ungrouped, v1-2
    names and partition lists, v3 topic states)."""
    from kafkatool.protocol.generated import stop_replica_response as R

    if version < 1:
        parts = [(p.topic_name, p.partition_index) for p in req.ungrouped_partitions]
    elif version < 3:
        parts = [(t.name, p) for t in req.topics for p in t.partition_indexes]
    else:
        parts = [(t.topic_name, p.partition_index) for t in req.topic_states for p in t.partition_states]
    return R.StopReplicaResponse(
        error_code=code,
        partition_errors=[
            R.StopReplicaPartitionError(topic_name=n, partition_index=i, error_code=code) for n, i in parts
        ],
    )


def _offset_fetch(req, version: int, code: int):
    """OffsetFetchRequest.getErrorResponse: below v2 every named partition (offset -1, no
    metadata); v2-7 the top-level error alone; from v8 each group's error, no topics."""
    from kafkatool.protocol.generated import offset_fetch_response as R

    if version >= 8:
        return R.OffsetFetchResponse(
            throttle_time_ms=0,
            groups=[
                R.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=code)
                for g in req.groups
            ],
        )
    resp = R.OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=[])
    if version < 2:
        resp.topics = [
            R.OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    R.OffsetFetchResponsePartition(
                        partition_index=p,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=code,
                    )
                    for p in t.partition_indexes
                ],
            )
            for t in req.topics or ()
        ]
    return resp


def _find_coordinator(req, version: int, code: int):
    """FindCoordinatorRequest.getErrorResponse: Node.noNode() (-1, "", -1) with the error and
    Errors.message(), for the one key below v4 (prepareOldResponse), per key from v4
    (prepareErrorResponse)."""
    from kafkatool.protocol.generated import find_coordinator_response as R

    if version < 4:
        return R.FindCoordinatorResponse(
            throttle_time_ms=0,
            error_code=code,
            error_message=default_message(code),
            node_id=-1,
            host="",
            port=-1,
        )
    return R.FindCoordinatorResponse(
        throttle_time_ms=0, coordinators=[no_coordinator(k, code) for k in req.coordinator_keys]
    )


def no_coordinator(key: str, code: int):
    """A FindCoordinator (v4+) key answered with an error: Node.noNode() (-1, "", -1), the
    error and Errors.message(), as KafkaApis' handler and prepareErrorResponse build it."""
    from kafkatool.protocol.generated.find_coordinator_response import Coordinator

    return Coordinator(
        key=key, node_id=-1, host="", port=-1, error_code=code, error_message=default_message(code)
    )


def _join_group(req, version: int, code: int):
    """JoinGroupRequest.getErrorResponse: generation -1, no leader, member id or members; the
    protocol name "" below v7, null from v7."""
    from kafkatool.protocol.generated import JoinGroupResponse

    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=code,
        generation_id=-1,
        protocol_name=None if version >= 7 else "",
        leader="",
        member_id="",
        members=[],
    )


def _leave_group(req, version: int, code: int):
    """LeaveGroupRequest.getErrorResponse: the top-level error alone (no member results)."""
    from kafkatool.protocol.generated import LeaveGroupResponse

    return LeaveGroupResponse(throttle_time_ms=0, error_code=code, members=[])


def _describe_groups(req, version: int, code: int):
    """DescribeGroupsRequest.getErrorResponse: DescribeGroupsResponse.groupError per group
    (state, protocol type and protocol "", no members, authorized operations omitted)."""
    from kafkatool.protocol.generated import describe_groups_response as R

    return R.DescribeGroupsResponse(
        throttle_time_ms=0,
        groups=[
            R.DescribedGroup(
                error_code=code, group_id=g, group_state="", protocol_type="", protocol_data="", members=[]
            )
            for g in req.groups
        ],
    )


def _api_versions(req, version: int, code: int):
    """ApiVersionsRequest.getErrorResponse: the error; ApiVersions' own versions only with
    UNSUPPORTED_VERSION (KIP-511)."""
    from kafkatool.protocol.errors import ErrorCode
    from kafkatool.protocol.generated import api_versions_response as R

    resp = R.ApiVersionsResponse(error_code=code, api_keys=[], throttle_time_ms=0)
    if code == ErrorCode.UNSUPPORTED_VERSION:
        info = API_BY_KEY[18]
        resp.api_keys = [R.ApiVersion(api_key=18, min_version=info.min_version, max_version=info.max_version)]
    return resp


def _create_topics(req, version: int, code: int):
    """CreateTopicsRequest.getErrorResponse: each topic's name and error, nothing else."""
    from kafkatool.protocol.generated import create_topics_response as R

    return R.CreateTopicsResponse(
        throttle_time_ms=0,
        topics=[R.CreatableTopicResult(name=t.name, error_code=code, error_message=None) for t in req.topics],
    )


def _delete_topics(req, version: int, code: int):
    """DeleteTopicsRequest.getErrorResponse: each topic of topics() (names below v6; name and
    id from v6) with the error."""
    from kafkatool.protocol.generated import delete_topics_response as R

    if version < 6:
        named = [(n, None) for n in req.topic_names]
    else:
        named = [(t.name, t.topic_id) for t in req.topics]
    results = []
    for name, topic_id in named:
        r = R.DeletableTopicResult(name=name, error_code=code, error_message=None)
        if topic_id is not None:
            r.topic_id = topic_id
        results.append(r)
    return R.DeleteTopicsResponse(throttle_time_ms=0, responses=results)


def _delete_records(req, version: int, code: int):
    """DeleteRecordsRequest.getErrorResponse: each partition's error, low watermark -1
    (DeleteRecordsResponse.INVALID_LOW_WATERMARK)."""
    from kafkatool.protocol.generated import delete_records_response as R

    return R.DeleteRecordsResponse(
        throttle_time_ms=0,
        topics=[
            R.DeleteRecordsTopicResult(
                name=t.name,
                partitions=[
                    R.DeleteRecordsPartitionResult(
                        partition_index=p.partition_index, low_watermark=-1, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


def _init_producer_id(req, version: int, code: int):
    """InitProducerIdRequest.getErrorResponse: no producer id, no epoch (-1, -1)."""
    from kafkatool.protocol.generated import InitProducerIdResponse

    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)


def _add_partitions_to_txn(req, version: int, code: int):
    """AddPartitionsToTxnRequest.getErrorResponse: below v4 each partition's error
    (errorResponseForTopics); from v4 (brokers' batches) the top-level error alone."""
    from kafkatool.protocol.generated import add_partitions_to_txn_response as R

    if version >= 4:
        return R.AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=code, results_by_transaction=[])
    return R.AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            R.AddPartitionsToTxnTopicResult(
                name=t.name,
                results_by_partition=[
                    R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
                    for p in t.partitions
                ],
            )
            for t in req.v3_and_below_topics
        ],
    )


def _describe_configs(req, version: int, code: int):
    """DescribeConfigsRequest.getErrorResponse: each resource's error with Errors.message(),
    no configs."""
    from kafkatool.protocol.generated import describe_configs_response as R

    return R.DescribeConfigsResponse(
        throttle_time_ms=0,
        results=[
            R.DescribeConfigsResult(
                error_code=code,
                error_message=default_message(code),
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[],
            )
            for r in req.resources
        ],
    )


def _alter_replica_log_dirs(req, version: int, code: int):
    """AlterReplicaLogDirsRequest.getErrorResponse: every partition of every dir's topics, one
    result per topic entry."""
    from kafkatool.protocol.generated import alter_replica_log_dirs_response as R

    return R.AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[
            R.AlterReplicaLogDirTopicResult(
                topic_name=t.name,
                partitions=[
                    R.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=code)
                    for p in t.partitions
                ],
            )
            for d in req.dirs
            for t in d.topics
        ],
    )


def _describe_log_dirs(req, version: int, code: int):
    """DescribeLogDirsRequest.getErrorResponse: the top-level error alone (a field from v3: the
    older versions' answer is empty)."""
    from kafkatool.protocol.generated import DescribeLogDirsResponse

    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=code, results=[])


def _create_delegation_token(req, version: int, code: int):
    """CreateDelegationTokenRequest.getErrorResponse: CreateDelegationTokenResponse.prepareResponse
    with KafkaPrincipal.ANONYMOUS as owner (and requester from v3), timestamps -1, no token."""
    from kafkatool.protocol.generated import CreateDelegationTokenResponse

    resp = CreateDelegationTokenResponse(
        error_code=code,
        principal_type="User",
        principal_name="ANONYMOUS",
        issue_timestamp_ms=-1,
        expiry_timestamp_ms=-1,
        max_timestamp_ms=-1,
        token_id="",
        hmac=b"",
        throttle_time_ms=0,
    )
    if version > 2:
        resp.token_requester_principal_type = "User"
        resp.token_requester_principal_name = "ANONYMOUS"
    return resp


def _describe_delegation_token(req, version: int, code: int):
    """DescribeDelegationTokenRequest.getErrorResponse: the error, no tokens."""
    from kafkatool.protocol.generated import DescribeDelegationTokenResponse

    return DescribeDelegationTokenResponse(error_code=code, tokens=[], throttle_time_ms=0)


def _delete_groups(req, version: int, code: int):
    """DeleteGroupsRequest.getErrorResponse: getErrorResultCollection, each group's error."""
    from kafkatool.protocol.generated import delete_groups_response as R

    return R.DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[R.DeletableGroupResult(group_id=g, error_code=code) for g in req.groups_names],
    )


def _offset_delete(req, version: int, code: int):
    """OffsetDeleteRequest.getErrorResponse: the top-level error alone, no topics."""
    from kafkatool.protocol.generated import OffsetDeleteResponse

    return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])


def _describe_client_quotas(req, version: int, code: int):
    """DescribeClientQuotasRequest.getErrorResponse: the error, entries null."""
    from kafkatool.protocol.generated import DescribeClientQuotasResponse

    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=code, error_message=None, entries=None)


def _alter_client_quotas(req, version: int, code: int):
    """AlterClientQuotasRequest.getErrorResponse: each entry's entities with the error and
    Errors.message()."""
    from kafkatool.protocol.generated import alter_client_quotas_response as R

    message = default_message(code)
    return R.AlterClientQuotasResponse(
        throttle_time_ms=0,
        entries=[
            R.EntryData(
                error_code=code,
                error_message=message,
                entity=[
                    R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity
                ],
            )
            for entry in req.entries
        ],
    )


def _alter_user_scram_credentials(req, version: int, code: int):
    """AlterUserScramCredentialsRequest.getErrorResponse: one result per user named by a
    deletion or an upsertion, sorted by name."""
    from kafkatool.protocol.generated import alter_user_scram_credentials_response as R

    users = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
    return R.AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            R.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=None) for u in users
        ],
    )


def _alter_partition(req, version: int, code: int):
    """AlterPartitionRequest.getErrorResponse: the top-level error alone, no topics."""
    from kafkatool.protocol.generated import AlterPartitionResponse

    return AlterPartitionResponse(throttle_time_ms=0, error_code=code, topics=[])


def _describe_transactions(req, version: int, code: int):
    """DescribeTransactionsRequest.getErrorResponse: each transactional id's error."""
    from kafkatool.protocol.generated import describe_transactions_response as R

    return R.DescribeTransactionsResponse(
        throttle_time_ms=0,
        transaction_states=[
            R.TransactionState(transactional_id=t, error_code=code) for t in req.transactional_ids
        ],
    )


def _described_groups(api_key: int):
    """ConsumerGroupDescribeRequest.getErrorResponse (and 3.9's ShareGroupDescribeRequest's):
    each group id's error."""

    def shape(req, version: int, code: int):
        cls = API_BY_KEY[api_key].response
        group = next(f.cls for f in cls._FIELDS if f.attr == "groups")
        return cls(throttle_time_ms=0, groups=[group(group_id=g, error_code=code) for g in req.group_ids])

    return shape


#: the APIs whose getErrorResponse is not the request mirrored (the others: :func:`mirror`)
_SHAPES = {
    0: _produce,
    1: _fetch,
    3: _metadata,
    4: _leader_and_isr,
    5: _stop_replica,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _join_group,
    13: _leave_group,
    15: _describe_groups,
    18: _api_versions,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _init_producer_id,
    24: _add_partitions_to_txn,
    32: _describe_configs,
    34: _alter_replica_log_dirs,
    35: _describe_log_dirs,
    38: _create_delegation_token,
    41: _describe_delegation_token,
    42: _delete_groups,
    47: _offset_delete,
    48: _describe_client_quotas,
    49: _alter_client_quotas,
    51: _alter_user_scram_credentials,
    56: _alter_partition,
    65: _describe_transactions,
    69: _described_groups(69),
    77: _described_groups(77),
}
