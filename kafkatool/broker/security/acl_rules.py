"""Which ACL each request needs, as Kafka's KafkaApis asks its authorizer, applied around the
handlers (``install``): the handlers themselves stay unaware of ACLs.

Three shapes of rule:
- one resource decides the whole request (a group, a transactional id, the cluster): a denied
  request gets the API's error answer, the handler never runs;
- requests naming many topics or partitions: the denied ones are taken out of the request,
  the handler runs on the rest, and the denied ones come back in the response with
  TOPIC_AUTHORIZATION_FAILED (KafkaApis splits them the same way);
- Metadata lists only the topics the principal may DESCRIBE; a named topic it may not
  describe answers TOPIC_AUTHORIZATION_FAILED; auto-creation needs CREATE.
Fetch puts its READ check on the request context (``ctx.acl_may_read``): the handler knows
which topics it reads (a fetch session's), and its response is spliced from file slices, so
it fills TOPIC_AUTHORIZATION_FAILED in place.
An API not listed here is refused to everyone but the super users (CLUSTER_AUTHORIZATION_FAILED
closes nothing: the API's answer is its getErrorResponse, broker/error_response.py, as the
router's answer to a handler's unexpected exception).
"""

from __future__ import annotations

import copy
import inspect
import logging

from kafkatool.broker.error_response import error_response, fill_errors
from kafkatool.broker.network import AfterWrite
from kafkatool.broker.security import acl as A
from kafkatool.protocol.errors import ErrorCode as E

log = logging.getLogger("kafkatool.broker.security")


_who = A.requester


def allowed(ctx, op: int, rtype: int, name: str) -> bool:
    principal, host = _who(ctx)
    ok = ctx.broker.authorizer.authorize(principal, host, op, rtype, name)
    if not ok:
        log.info(
            "Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s",
            principal, A.OPERATIONS[op], host, A.RESOURCE_TYPES[rtype], name,
        )  # fmt: skip
    return ok


def _then(result, after):
    """Apply ``after`` to a handler's result, awaited when it is awaitable (a produce answer
    held until its writes are done, an AfterWrite: to the answer it builds)."""
    if type(result) is AfterWrite:
        build = result.build
        result.build = lambda: after(build())
        return result
    if inspect.isawaitable(result):

        async def finish():
            return after(await result)

        return finish()
    return after(result)


# ----------------------------------------------------------------------------- topic splitting


def _split(ctx, items, name_of, op: int):
    """(kept, denied) items of a topic list by ``op`` on each topic."""
    kept, denied = [], []
    cache: dict[str, bool] = {}
    for it in items:
        name = name_of(it)
        if name not in cache:
            cache[name] = allowed(ctx, op, A.TOPIC, name)
        (kept if cache[name] else denied).append(it)
    return kept, denied


def _topics_rule(req_attr, req_name, op, add_denied):
    """Rule for requests whose ``req_attr`` lists topics: deny per topic, merge back."""

    def rule(ctx, req, handler):
        items = getattr(req, req_attr) or []
        kept, denied = _split(ctx, items, lambda t: getattr(t, req_name), op)
        if not denied:
            return handler(ctx, req)
        setattr(req, req_attr, kept)
        return _then(handler(ctx, req), lambda resp: add_denied(resp, denied, ctx) or resp)

    return rule


def _partitions_response(resp_list_attr, topic_cls, part_cls, name_attr, parts_attr, pidx_attr, req_parts):
    """Builder of denied entries for topic -> partitions responses."""

    def add(resp, denied, ctx):
        lst = getattr(resp, resp_list_attr)
        for t in denied:
            parts = []
            for p in req_parts(t):
                part = part_cls()
                setattr(part, pidx_attr, p)
                fill_errors(part, E.TOPIC_AUTHORIZATION_FAILED)
                parts.append(part)
            entry = topic_cls()
            setattr(entry, name_attr, _name(t))
            setattr(entry, parts_attr, parts)
            lst.append(entry)

    return add


def _name(t) -> str:
    for attr in ("name", "topic"):
        v = getattr(t, attr, None)
        if v:
            return v
    return ""


# ----------------------------------------------------------------------------- the rules


def _acks0_failed(failed: dict[tuple[str, int], int]):
    """A failed acks=0 produce has no answer: Kafka closes the connection (the client learns
    something went wrong and refreshes its metadata); ProduceRequest.getErrorResponse is null."""
    from kafkatool.broker.network import CloseConnection

    summary = ", ".join(f"{t}-{p}: {E(code).name}" for (t, p), code in failed.items())
    return CloseConnection(f"error during produce request with acks=0 ({summary})")


def _has_transactional_records(req) -> bool:
    """RequestUtils.hasTransactionalRecords: a magic-2 batch header with the transactional bit
    (read in place: byte 16 is the magic, 21-22 the attributes)."""
    for t in req.topic_data:
        for p in t.partition_data:
            rec = p.records
            if rec is not None and len(rec) > 22 and rec[16] == 2 and rec[22] & 0x10:
                return True
    return False


def _produce(ctx, req, handler):
    from kafkatool.protocol.generated import ProduceResponse
    from kafkatool.protocol.generated.produce_response import PartitionProduceResponse, TopicProduceResponse

    if _has_transactional_records(req) and (
        req.transactional_id is None or not allowed(ctx, A.WRITE, A.TRANSACTIONAL_ID, req.transactional_id)
    ):
        code = int(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if req.acks == 0:
            raise _acks0_failed({(t.name, p.index): code for t in req.topic_data for p in t.partition_data})
        resp_topics = []
        for t in req.topic_data:
            parts = [
                PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
                for p in t.partition_data
            ]
            resp_topics.append(TopicProduceResponse(name=t.name, partition_responses=parts))
        return ProduceResponse(responses=resp_topics, throttle_time_ms=0)
    add = _partitions_response(
        "responses", TopicProduceResponse, PartitionProduceResponse, "name", "partition_responses", "index",
        lambda t: [p.index for p in t.partition_data],
    )  # fmt: skip
    whole = req.topic_data
    kept, denied = _split(ctx, whole, lambda t: t.name, A.WRITE)
    if not denied:
        return handler(ctx, req)
    req.topic_data = kept
    # a failure thrown out of the handler (RequestFailed: an authorized partition's unknown
    # codec bits below v7; an unexpected exception) is answered for every partition of the
    # request, the denied ones too: install's wrapper puts the request back whole
    result = handler(ctx, req) if kept else None
    if req.acks == 0:
        # the allowed partitions are appended first (Kafka answers for all of them at once); a
        # failure among them closes the connection in the handler already
        failed = {
            (t.name, p.index): int(E.TOPIC_AUTHORIZATION_FAILED) for t in denied for p in t.partition_data
        }

        if not kept:
            raise _acks0_failed(failed)

        def close(_):
            raise _acks0_failed(failed)

        return _then(result, close)
    if not kept:
        resp = ProduceResponse(responses=[], throttle_time_ms=0)
        add(resp, denied, ctx)
        return resp
    return _then(result, lambda resp: add(resp, denied, ctx) or resp)


def _fetch(ctx, req, handler):
    replica = (
        req.replica_state.replica_id if getattr(req, "replica_state", None) is not None else req.replica_id
    )
    if replica is not None and replica >= 0:
        if not allowed(ctx, A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME):
            ctx.acl_denied_all = True
        return handler(ctx, req)
    # the handler asks about every topic it reads: an incremental fetch (KIP-227) reads its
    # session's partitions, not only those the request names
    ctx.acl_may_read = lambda name: allowed(ctx, A.READ, A.TOPIC, name)
    return handler(ctx, req)


def _metadata(ctx, req, handler):
    from kafkatool.broker.handlers.metadata import ids_before_v12

    if ids_before_v12(req, ctx.version):  # refused before any topic is authorized
        return handler(ctx, req)
    named = req.topics is not None and len(req.topics) > 0
    if named:
        names = [t.name for t in req.topics if t.name]
        denied = {n for n in names if not allowed(ctx, A.DESCRIBE, A.TOPIC, n)}
        # auto-creation of a topic that does not exist needs CREATE on the cluster or the topic
        if req.allow_auto_topic_creation:
            for n in names:
                if n not in denied and ctx.broker.topic(n) is None:
                    if not (
                        allowed(ctx, A.CREATE, A.CLUSTER, A.CLUSTER_NAME)
                        or allowed(ctx, A.CREATE, A.TOPIC, n)
                    ):
                        denied.add(n)
        req.topics = [t for t in req.topics if t.name not in denied]

        def add(resp):
            from kafkatool.protocol.generated.metadata_response import MetadataResponseTopic

            for n in sorted(denied):
                resp.topics.append(
                    MetadataResponseTopic(
                        error_code=int(E.TOPIC_AUTHORIZATION_FAILED), name=n, is_internal=False, partitions=[]
                    )
                )
            return resp

        if denied and not req.topics:
            # every named topic denied: answer brokers and controller only
            req.topics = []
            return _then(handler(ctx, _metadata_brokers_only(req)), add)
        return _then(handler(ctx, req), add) if denied else handler(ctx, req)

    def keep(resp):
        resp.topics = [t for t in resp.topics if allowed(ctx, A.DESCRIBE, A.TOPIC, t.name)]
        return resp

    return _then(handler(ctx, req), keep)


def _metadata_brokers_only(req):
    """A Metadata request for no topic at all (an empty list; null means all)."""
    r = copy.copy(req)
    r.topics = []
    return r


def _group_whole(op: int, group_of=lambda req: req.group_id):
    def rule(ctx, req, handler):
        g = group_of(req)
        if g is not None and not allowed(ctx, op, A.GROUP, g):
            return _error_response(ctx, req, handler, E.GROUP_AUTHORIZATION_FAILED)
        return handler(ctx, req)

    return rule


def _cluster_whole(op: int):
    def rule(ctx, req, handler):
        if not allowed(ctx, op, A.CLUSTER, A.CLUSTER_NAME):
            return _error_response(ctx, req, handler, E.CLUSTER_AUTHORIZATION_FAILED)
        return handler(ctx, req)

    return rule


def _txn_whole(op: int):
    def rule(ctx, req, handler):
        tid = getattr(req, "transactional_id", None)
        if tid is not None and not allowed(ctx, op, A.TRANSACTIONAL_ID, tid):
            return _error_response(ctx, req, handler, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return handler(ctx, req)

    return rule


def _error_response(ctx, req, handler, code: int):
    """The API's answer with ``code`` (AbstractRequest.getErrorResponse); the handler never runs."""
    return error_response(ctx.header, req, code)


def _offset_commit(ctx, req, handler):
    if not allowed(ctx, A.READ, A.GROUP, req.group_id):
        from kafkatool.protocol.generated.offset_commit_response import (
            OffsetCommitResponse,
            OffsetCommitResponsePartition,
            OffsetCommitResponseTopic,
        )

        return OffsetCommitResponse(
            throttle_time_ms=0,
            topics=[
                OffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=int(E.GROUP_AUTHORIZATION_FAILED)
                        )
                        for p in t.partitions
                    ],
                )
                for t in req.topics
            ],
        )
    from kafkatool.protocol.generated.offset_commit_response import (
        OffsetCommitResponsePartition,
        OffsetCommitResponseTopic,
    )

    add = _partitions_response(
        "topics", OffsetCommitResponseTopic, OffsetCommitResponsePartition, "name", "partitions", "partition_index",
        lambda t: [p.partition_index for p in t.partitions],
    )  # fmt: skip
    return _topics_rule("topics", "name", A.READ, add)(ctx, req, handler)


def _offset_fetch(ctx, req, handler):
    """KafkaApis: DESCRIBE on each group (per group from v8; GROUP_AUTHORIZATION_FAILED); named
    partitions of topics the principal may not DESCRIBE answer TOPIC_AUTHORIZATION_FAILED
    (OffsetFetchResponse.UNAUTHORIZED_PARTITION); for "all partitions" they are left out."""
    from kafkatool.protocol.generated import offset_fetch_response as R

    def split(topics):
        """Drop requested topics the principal may not describe: (kept, {name: partitions})."""
        if topics is None:
            return None, {}
        denied, kept = {}, []
        for t in topics:
            if allowed(ctx, A.DESCRIBE, A.TOPIC, t.name):
                kept.append(t)
            else:
                denied.setdefault(t.name, []).extend(t.partition_indexes or [])
        return kept, denied

    def unauthorized(denied, topic_cls, part_cls):
        return [
            topic_cls(
                name=n,
                partitions=[
                    part_cls(
                        partition_index=p,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=int(E.TOPIC_AUTHORIZATION_FAILED),
                    )
                    for p in ps
                ],
            )
            for n, ps in denied.items()
        ]

    def visible(topics):
        return [t for t in topics if allowed(ctx, A.DESCRIBE, A.TOPIC, t.name)]

    if getattr(req, "groups", None):  # v8+: a batch of groups, each decided alone
        denied_groups = [g.group_id for g in req.groups if not allowed(ctx, A.DESCRIBE, A.GROUP, g.group_id)]
        denied_topics = {}
        for g in req.groups:
            g.topics, denied_topics[g.group_id] = split(g.topics)
        req.groups = [g for g in req.groups if g.group_id not in denied_groups]

        def finish(resp):
            for g in resp.groups:
                g.topics = visible(g.topics)
                if g.error_code == 0:
                    g.topics += unauthorized(
                        denied_topics.get(g.group_id, {}),
                        R.OffsetFetchResponseTopics,
                        R.OffsetFetchResponsePartitions,
                    )
            resp.groups += [
                R.OffsetFetchResponseGroup(
                    group_id=g, topics=[], error_code=int(E.GROUP_AUTHORIZATION_FAILED)
                )
                for g in denied_groups
            ]
            return resp

        if not req.groups:
            return finish(R.OffsetFetchResponse(throttle_time_ms=0, groups=[]))
        return _then(handler(ctx, req), finish)

    if not allowed(ctx, A.DESCRIBE, A.GROUP, req.group_id):
        # OffsetFetchRequest.getErrorResponse: the top-level error from v2, every partition before
        code = int(E.GROUP_AUTHORIZATION_FAILED)
        if ctx.version >= 2:
            return R.OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=[])
        named = {t.name: list(t.partition_indexes or []) for t in req.topics or []}
        topics = unauthorized(named, R.OffsetFetchResponseTopic, R.OffsetFetchResponsePartition)
        for t in topics:
            for p in t.partitions:
                p.error_code = code
        return R.OffsetFetchResponse(throttle_time_ms=0, topics=topics)
    req.topics, denied = split(req.topics)

    def finish_one(resp):
        resp.topics = visible(resp.topics)
        if not getattr(resp, "error_code", 0):
            resp.topics += unauthorized(denied, R.OffsetFetchResponseTopic, R.OffsetFetchResponsePartition)
        return resp

    return _then(handler(ctx, req), finish_one)


def _find_coordinator(ctx, req, handler):
    keys = list(req.coordinator_keys or []) or [req.key]
    rtype, op = (A.TRANSACTIONAL_ID, A.DESCRIBE) if req.key_type == 1 else (A.GROUP, A.DESCRIBE)
    code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if req.key_type == 1 else E.GROUP_AUTHORIZATION_FAILED
    if all(allowed(ctx, op, rtype, k) for k in keys):
        return handler(ctx, req)
    denied = {k for k in keys if not allowed(ctx, op, rtype, k)}

    def mark(resp):
        if resp.coordinators:
            for c in resp.coordinators:
                if c.key in denied:
                    c.error_code, c.error_message, c.node_id, c.host, c.port = int(code), None, -1, "", -1
        else:
            resp.error_code, resp.error_message, resp.node_id, resp.host, resp.port = (
                int(code),
                None,
                -1,
                "",
                -1,
            )
        return resp

    return _then(handler(ctx, req), mark)


def _describe_groups(ctx, req, handler):
    denied = [g for g in req.groups if not allowed(ctx, A.DESCRIBE, A.GROUP, g)]
    if not denied:
        return handler(ctx, req)
    from kafkatool.protocol.generated.describe_groups_response import DescribedGroup

    req.groups = [g for g in req.groups if g not in denied]

    def add(resp):
        for g in denied:
            resp.groups.append(
                DescribedGroup(
                    error_code=int(E.GROUP_AUTHORIZATION_FAILED),
                    group_id=g,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )
            )
        return resp

    return _then(handler(ctx, req), add)


def _list_groups(ctx, req, handler):
    if allowed(ctx, A.DESCRIBE, A.CLUSTER, A.CLUSTER_NAME):
        return handler(ctx, req)

    def keep(resp):
        resp.groups = [g for g in resp.groups if allowed(ctx, A.DESCRIBE, A.GROUP, g.group_id)]
        return resp

    return _then(handler(ctx, req), keep)


def _create_topics(ctx, req, handler):
    if allowed(ctx, A.CREATE, A.CLUSTER, A.CLUSTER_NAME):
        return handler(ctx, req)
    from kafkatool.protocol.generated.create_topics_response import CreatableTopicResult

    def add(resp, denied, _ctx):
        for t in denied:
            resp.topics.append(
                CreatableTopicResult(
                    name=t.name,
                    error_code=int(E.TOPIC_AUTHORIZATION_FAILED),
                    error_message="Authorization failed.",
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=None,
                )
            )

    return _topics_rule("topics", "name", A.CREATE, add)(ctx, req, handler)


def _delete_topics(ctx, req, handler):
    from kafkatool.protocol.generated.delete_topics_response import DeletableTopicResult

    if req.topics:  # v6: names or ids

        def name_of(t):
            if t.name:
                return t.name
            m = ctx.broker.metadata.topic_by_id(t.topic_id) if t.topic_id is not None else None
            return m.name if m is not None else ""

        def add(resp, denied, _ctx):
            for t in denied:
                resp.responses.append(
                    DeletableTopicResult(
                        name=t.name,
                        topic_id=t.topic_id,
                        error_code=int(E.TOPIC_AUTHORIZATION_FAILED),
                        error_message=None,
                    )
                )

        kept, denied = _split(ctx, req.topics, name_of, A.DELETE)
        if not denied:
            return handler(ctx, req)
        req.topics = kept
        return _then(handler(ctx, req), lambda resp: add(resp, denied, ctx) or resp)
    names = list(req.topic_names or [])
    denied = [n for n in names if not allowed(ctx, A.DELETE, A.TOPIC, n)]
    if not denied:
        return handler(ctx, req)
    req.topic_names = [n for n in names if n not in denied]

    def add_names(resp):
        for n in denied:
            resp.responses.append(
                DeletableTopicResult(name=n, error_code=int(E.TOPIC_AUTHORIZATION_FAILED), error_message=None)
            )
        return resp

    return _then(handler(ctx, req), add_names)


def _configs_rule(op: int, resp_list: str, result_cls_path: tuple[str, str]):
    """DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: per resource (topic, broker or
    group)."""

    def rule(ctx, req, handler):
        import importlib

        denied = []
        kept = []
        for r in req.resources:
            if r.resource_type == 2:
                ok = allowed(ctx, op, A.TOPIC, r.resource_name)
                code = E.TOPIC_AUTHORIZATION_FAILED
            elif r.resource_type in (4, 8):  # BROKER, BROKER_LOGGER
                ok = allowed(ctx, op, A.CLUSTER, A.CLUSTER_NAME)
                code = E.CLUSTER_AUTHORIZATION_FAILED
            elif r.resource_type == 32:  # GROUP (Kafka 4.0 group configs)
                ok = allowed(ctx, op, A.GROUP, r.resource_name)
                code = E.GROUP_AUTHORIZATION_FAILED
            else:
                ok, code = True, 0
            (kept if ok else denied).append((r, code))
        if not denied:
            return handler(ctx, req)
        req.resources = [r for r, _ in kept]
        cls = getattr(importlib.import_module(result_cls_path[0]), result_cls_path[1])

        def add(resp):
            lst = getattr(resp, resp_list)
            for r, code in denied:
                entry = cls(
                    error_code=int(code),
                    error_message=None,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                if hasattr(entry, "configs"):
                    entry.configs = []
                lst.append(entry)
            return resp

        return _then(handler(ctx, req), add)

    return rule


def _create_partitions(ctx, req, handler):
    from kafkatool.protocol.generated.create_partitions_response import CreatePartitionsTopicResult

    def add(resp, denied, _ctx):
        for t in denied:
            resp.results.append(
                CreatePartitionsTopicResult(
                    name=t.name, error_code=int(E.TOPIC_AUTHORIZATION_FAILED), error_message=None
                )
            )

    return _topics_rule("topics", "name", A.ALTER, add)(ctx, req, handler)


def _init_producer_id(ctx, req, handler):
    if req.transactional_id is not None:
        return _txn_whole(A.WRITE)(ctx, req, handler)
    principal, host = _who(ctx)
    auth = ctx.broker.authorizer
    if auth.authorize(principal, host, A.IDEMPOTENT_WRITE, A.CLUSTER, A.CLUSTER_NAME) or auth.any_allowed(
        principal, host, A.WRITE, A.TOPIC
    ):
        return handler(ctx, req)
    return _error_response(ctx, req, handler, E.CLUSTER_AUTHORIZATION_FAILED)


def _offset_for_leader_epoch(ctx, req, handler):
    """KafkaApis: CLUSTER_ACTION (a follower) serves every partition; otherwise DESCRIBE per topic
    (KIP-320: consumers check truncation with it), a denied topic's partitions answering
    TOPIC_AUTHORIZATION_FAILED while the others are served."""
    from kafkatool.protocol.generated.offset_for_leader_epoch_response import (
        EpochEndOffset,
        OffsetForLeaderTopicResult,
    )

    principal, host = _who(ctx)
    if ctx.broker.authorizer.authorize(principal, host, A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME):
        return handler(ctx, req)  # Kafka asks with logIfDenied=false: no denial line here
    add = _partitions_response(
        "topics", OffsetForLeaderTopicResult, EpochEndOffset, "topic", "partitions", "partition",
        lambda t: [p.partition for p in t.partitions],
    )  # fmt: skip
    return _topics_rule("topics", "topic", A.DESCRIBE, add)(ctx, req, handler)


def _delete_records(ctx, req, handler):
    """KafkaApis: DELETE per topic; a denied topic's partitions answer TOPIC_AUTHORIZATION_FAILED
    with low watermark -1 (DeleteRecordsResponse.INVALID_LOW_WATERMARK), the others are served."""
    from kafkatool.protocol.generated.delete_records_response import (
        DeleteRecordsPartitionResult,
        DeleteRecordsTopicResult,
    )

    base = _partitions_response(
        "topics", DeleteRecordsTopicResult, DeleteRecordsPartitionResult, "name", "partitions", "partition_index",
        lambda t: [p.partition_index for p in t.partitions],
    )  # fmt: skip

    def add(resp, denied, ctx):
        before = len(resp.topics)
        base(resp, denied, ctx)
        for t in resp.topics[before:]:
            for p in t.partitions:
                p.low_watermark = -1

    return _topics_rule("topics", "name", A.DELETE, add)(ctx, req, handler)


def _all_topics(op: int, topics_of, code=E.TOPIC_AUTHORIZATION_FAILED):
    """Strict form for the less common multi-topic APIs: every named topic must be allowed,
    else the whole request answers ``code`` (Kafka fails only the denied partitions)."""

    def rule(ctx, req, handler):
        names = {n for n in topics_of(ctx, req) if n}
        if all(allowed(ctx, op, A.TOPIC, n) for n in names):
            return handler(ctx, req)
        return _error_response(ctx, req, handler, code)

    return rule


def _and(*rules):
    def rule(ctx, req, handler):
        def chain(i, c, r):
            if i == len(rules):
                return handler(c, r)
            return rules[i](c, r, lambda c2, r2: chain(i + 1, c2, r2))

        return chain(0, ctx, req)

    return rule


def _add_partitions_to_txn(ctx, req, handler):
    if ctx.version >= 4:
        # KafkaApis.handleAddPartitionsToTxnRequest: v4+ come from brokers only (KIP-890)
        if not allowed(ctx, A.CLUSTER_ACTION, A.CLUSTER, A.CLUSTER_NAME):
            return _error_response(ctx, req, handler, E.CLUSTER_AUTHORIZATION_FAILED)
        return handler(ctx, req)
    if not allowed(ctx, A.WRITE, A.TRANSACTIONAL_ID, req.v3_and_below_transactional_id):
        return _error_response(ctx, req, handler, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    topics = [t.name for t in req.v3_and_below_topics]
    if all(allowed(ctx, A.WRITE, A.TOPIC, n) for n in set(topics)):
        return handler(ctx, req)
    return _error_response(ctx, req, handler, E.TOPIC_AUTHORIZATION_FAILED)


def _txn_offset_commit(ctx, req, handler):
    if not allowed(ctx, A.WRITE, A.TRANSACTIONAL_ID, req.transactional_id):
        return _error_response(ctx, req, handler, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(ctx, A.READ, A.GROUP, req.group_id):
        return _error_response(ctx, req, handler, E.GROUP_AUTHORIZATION_FAILED)
    # KafkaApis.handleTxnOffsetCommitRequest: a topic without READ fails its own partitions only
    from kafkatool.protocol.generated.txn_offset_commit_response import (
        TxnOffsetCommitResponsePartition,
        TxnOffsetCommitResponseTopic,
    )

    add = _partitions_response(
        "topics", TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition, "name", "partitions",
        "partition_index", lambda t: [p.partition_index for p in t.partitions],
    )  # fmt: skip
    return _topics_rule("topics", "name", A.READ, add)(ctx, req, handler)


def _add_offsets_to_txn(ctx, req, handler):
    if not allowed(ctx, A.WRITE, A.TRANSACTIONAL_ID, req.transactional_id):
        return _error_response(ctx, req, handler, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return _group_whole(A.READ)(ctx, req, handler)


def _delete_groups(ctx, req, handler):
    denied = [g for g in req.groups_names if not allowed(ctx, A.DELETE, A.GROUP, g)]
    if not denied:
        return handler(ctx, req)
    from kafkatool.protocol.generated.delete_groups_response import DeletableGroupResult

    req.groups_names = [g for g in req.groups_names if g not in denied]

    def add(resp):
        resp.results.extend(
            DeletableGroupResult(group_id=g, error_code=int(E.GROUP_AUTHORIZATION_FAILED)) for g in denied
        )
        return resp

    return _then(handler(ctx, req), add)


def _describe_topic_partitions(ctx, req, handler):
    """DescribeTopicPartitionsRequestHandler: a named topic the principal may not DESCRIBE gets
    its own TOPIC_AUTHORIZATION_FAILED entry; unnamed (all topics) it is left out."""
    from kafkatool.formats.schema import ZERO_UUID
    from kafkatool.protocol.generated.describe_topic_partitions_response import (
        DescribeTopicPartitionsResponseTopic,
    )

    denied = [t.name for t in req.topics or [] if not allowed(ctx, A.DESCRIBE, A.TOPIC, t.name)]
    req.topics = [t for t in req.topics or [] if t.name not in denied]

    def keep(resp):
        topics = [t for t in resp.topics if allowed(ctx, A.DESCRIBE, A.TOPIC, t.name)]
        topics += [
            DescribeTopicPartitionsResponseTopic(
                error_code=int(E.TOPIC_AUTHORIZATION_FAILED),
                name=n,
                topic_id=ZERO_UUID,
                is_internal=False,
                partitions=[],
            )
            for n in denied
        ]
        resp.topics = sorted(topics, key=lambda t: t.name or "")
        return resp

    if denied and not req.topics:
        from kafkatool.protocol.generated import DescribeTopicPartitionsResponse

        return keep(DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[], next_cursor=None))
    return _then(handler(ctx, req), keep)


def _list_transactions(ctx, req, handler):
    def keep(resp):
        resp.transaction_states = [
            s
            for s in resp.transaction_states
            if allowed(ctx, A.DESCRIBE, A.TRANSACTIONAL_ID, s.transactional_id)
        ]
        return resp

    return _then(handler(ctx, req), keep)


def _describe_transactions(ctx, req, handler):
    if all(allowed(ctx, A.DESCRIBE, A.TRANSACTIONAL_ID, t) for t in req.transactional_ids):
        return handler(ctx, req)
    return _error_response(ctx, req, handler, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def _consumer_group_heartbeat(ctx, req, handler):
    if not allowed(ctx, A.READ, A.GROUP, req.group_id):
        return _error_response(ctx, req, handler, E.GROUP_AUTHORIZATION_FAILED)
    return handler(ctx, req)


def _consumer_group_describe(ctx, req, handler):
    if all(allowed(ctx, A.DESCRIBE, A.GROUP, g) for g in req.group_ids):
        return handler(ctx, req)
    return _error_response(ctx, req, handler, E.GROUP_AUTHORIZATION_FAILED)


def _offset_delete(ctx, req, handler):
    """KafkaApis.handleOffsetDeleteRequest: DELETE on the group, else GROUP_AUTHORIZATION_FAILED at
    the top level and no topics (OffsetDeleteRequest.getErrorResponse); then READ per topic, a
    denied topic's partitions answering TOPIC_AUTHORIZATION_FAILED beside the coordinator's answer
    for the others.  A top-level error of the coordinator (an unknown group, say) is the whole
    answer, as OffsetDeleteResponse.Builder.merge keeps it alone."""
    from kafkatool.protocol.generated import offset_delete_response as R

    if not allowed(ctx, A.DELETE, A.GROUP, req.group_id):
        return R.OffsetDeleteResponse(
            error_code=int(E.GROUP_AUTHORIZATION_FAILED), throttle_time_ms=0, topics=[]
        )
    kept, denied = _split(ctx, req.topics or [], lambda t: t.name, A.READ)
    if not denied:
        return handler(ctx, req)
    req.topics = kept

    def merge(resp):
        if resp.error_code == 0:
            unauthorized = [
                R.OffsetDeleteResponseTopic(
                    name=t.name,
                    partitions=[
                        R.OffsetDeleteResponsePartition(
                            partition_index=p.partition_index, error_code=int(E.TOPIC_AUTHORIZATION_FAILED)
                        )
                        for p in t.partitions or []
                    ],
                )
                for t in denied
            ]
            resp.topics = unauthorized + list(resp.topics or [])
        return resp

    return _then(handler(ctx, req), merge)


#: Errors.TOPIC_AUTHORIZATION_FAILED's message, which ApiError carries where a response has one
TOPIC_AUTHORIZATION_FAILED_MESSAGE = "Topic authorization failed."


def _describe_producers(ctx, req, handler):
    """KafkaApis.handleDescribeProducersRequest: a valid topic name without READ answers
    TOPIC_AUTHORIZATION_FAILED on each of its partitions (whether the topic exists is not told);
    the other topics are served; the answer keeps the request's topic order."""
    from kafkatool.log.topic_settings import topic_name_error
    from kafkatool.protocol.generated import describe_producers_response as R

    topics = list(req.topics or [])
    # an invalid name is refused for what it is before any ACL is asked (Kafka's checkValidTopic)
    checked = [t for t in topics if topic_name_error(t.name or "") is None]
    _, denied = _split(ctx, checked, lambda t: t.name, A.READ)
    if not denied:
        return handler(ctx, req)
    denied_ids = {id(t) for t in denied}
    req.topics = [t for t in topics if id(t) not in denied_ids]

    def merge(resp):
        served = list(resp.topics or [])
        out = []
        for t in topics:
            if id(t) in denied_ids:
                parts = [
                    R.PartitionResponse(
                        partition_index=p,
                        error_code=int(E.TOPIC_AUTHORIZATION_FAILED),
                        error_message=TOPIC_AUTHORIZATION_FAILED_MESSAGE,
                        active_producers=[],
                    )
                    for p in t.partition_indexes or []
                ]
                out.append(R.TopicResponse(name=t.name, partitions=parts))
            elif served:
                out.append(served.pop(0))
        resp.topics = out + served
        return resp

    return _then(handler(ctx, req), merge)


RULES = {
    0: _produce,
    1: _fetch,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _group_whole(A.READ),
    12: _group_whole(A.READ),
    13: _group_whole(A.READ),
    14: _group_whole(A.READ),
    15: _describe_groups,
    16: _list_groups,
    19: _create_topics,
    20: _delete_topics,
    21: _delete_records,
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    24: _add_partitions_to_txn,
    25: _add_offsets_to_txn,
    26: _txn_whole(A.WRITE),
    28: _txn_offset_commit,
    29: _cluster_whole(A.DESCRIBE),
    30: _cluster_whole(A.ALTER),
    31: _cluster_whole(A.ALTER),
    32: _configs_rule(
        A.DESCRIBE_CONFIGS,
        "results",
        ("kafkatool.protocol.generated.describe_configs_response", "DescribeConfigsResult"),
    ),
    33: _configs_rule(
        A.ALTER_CONFIGS,
        "responses",
        ("kafkatool.protocol.generated.alter_configs_response", "AlterConfigsResourceResponse"),
    ),
    34: _cluster_whole(A.ALTER),
    35: _cluster_whole(A.DESCRIBE),
    37: _create_partitions,
    42: _delete_groups,
    43: _cluster_whole(A.ALTER),
    44: _configs_rule(
        A.ALTER_CONFIGS,
        "responses",
        ("kafkatool.protocol.generated.incremental_alter_configs_response", "AlterConfigsResourceResponse"),
    ),
    45: _cluster_whole(A.ALTER),
    46: _cluster_whole(A.DESCRIBE),
    47: _offset_delete,
    # KafkaApis: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster, else the request's error response
    # (DescribeClientQuotas: no entries, no message, ApiError.fromThrowable's generic message
    # left out; AlterClientQuotas: every entry with Errors.message())
    48: _cluster_whole(A.DESCRIBE_CONFIGS),
    49: _cluster_whole(A.ALTER_CONFIGS),
    50: _cluster_whole(A.DESCRIBE),
    51: _cluster_whole(A.ALTER),
    60: lambda ctx, req, handler: handler(ctx, req),  # DescribeCluster: brokers only, as Metadata
    # delegation tokens: the handlers ask KafkaApis' questions (CREATE_TOKENS on the owner,
    # DESCRIBE on each token, DESCRIBE_TOKENS on its owner) themselves (security/tokens.py)
    38: lambda ctx, req, handler: handler(ctx, req),
    39: lambda ctx, req, handler: handler(ctx, req),
    40: lambda ctx, req, handler: handler(ctx, req),
    41: lambda ctx, req, handler: handler(ctx, req),
    61: _describe_producers,
    65: _describe_transactions,
    66: _list_transactions,
    68: _consumer_group_heartbeat,
    69: _consumer_group_describe,
    75: _describe_topic_partitions,
    # the control plane of a ZooKeeper-mode cluster: brokers and the controller only
    4: _cluster_whole(A.CLUSTER_ACTION),
    5: _cluster_whole(A.CLUSTER_ACTION),
    6: _cluster_whole(A.CLUSTER_ACTION),
    7: _cluster_whole(A.CLUSTER_ACTION),
    27: _cluster_whole(A.CLUSTER_ACTION),
    56: _cluster_whole(A.CLUSTER_ACTION),
}
#: no ACL: the connection's own business (version negotiation, authentication)
UNCHECKED = {17, 18, 36}


def _list_offsets(ctx, req, handler):
    from kafkatool.protocol.generated.list_offsets_response import (
        ListOffsetsPartitionResponse,
        ListOffsetsTopicResponse,
    )

    add = _partitions_response(
        "topics", ListOffsetsTopicResponse, ListOffsetsPartitionResponse, "name", "partitions", "partition_index",
        lambda t: [p.partition_index for p in t.partitions],
    )  # fmt: skip
    return _topics_rule("topics", "name", A.DESCRIBE, add)(ctx, req, handler)


RULES[2] = _list_offsets


def install(router) -> None:
    """Wrap every registered handler with its rule (the broker has an authorizer).

    A rule narrows the request to what the principal may touch by replacing its top-level
    lists, in a shallow copy: the router keeps the request as the client sent it, so its
    answer to a failure (RequestFailed's, or the error response to an unexpected exception,
    of the handler's call or of its waiting answer) covers every topic the client named:
    Kafka authorizes inside the handler and RequestHandlerHelper.handleError answers
    request.body, which authorization left whole."""

    for key, route in router.routes.items():
        if key in UNCHECKED:
            continue
        rule = RULES.get(key, _cluster_whole(A.ALTER))
        original = route.handler

        def wrapped(ctx, req, _rule=rule, _original=original):
            return _rule(ctx, copy.copy(req), _original)

        route.handler = wrapped
