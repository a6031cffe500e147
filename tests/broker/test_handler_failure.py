"""A handler's unexpected exception (an internal bug), answered as Kafka answers it: KafkaApis.handle
catches it, logs "Unexpected error handling request" at ERROR with the stack trace, and
RequestHandlerHelper.handleError sends the request's AbstractRequest.getErrorResponse with
UNKNOWN_SERVER_ERROR on the connection, which stays open; only a Produce with acks=0, whose
getErrorResponse is null, closes it (RequestChannel.closeConnection).

An internal bug cannot be had on purpose, so the route's handler is made to raise (fault
injection) on a real broker served in-process on a socket.  The error responses themselves
(broker/error_response.py, also the ACL rules' refusals) are checked for every API and version
of the protocol table, and against Kafka's request classes where theirs have a shape of their
own."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import uuid

import pytest

from kafkatool.broker.config import BrokerConfig
from kafkatool.broker.error_response import error_response
from kafkatool.broker.network import AfterWrite, CloseConnection
from kafkatool.broker.router import encode_answer
from kafkatool.broker.security import acl as A
from kafkatool.broker.server import Broker
from kafkatool.formats import records as R
from kafkatool.formats.schema import in_range
from kafkatool.log.append_writer import AppendWriter
from kafkatool.protocol import generated as G
from kafkatool.protocol.apis import API_BY_KEY
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.framing import RequestHeader, encode_request, parse_response
from kafkatool.protocol.generated.metadata_request import MetadataRequestTopic
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
from tests.broker.test_protocol import fetch_req
from tests.broker.wire import DispatchConn, WireClient

USE = int(ErrorCode.UNKNOWN_SERVER_ERROR)  # -1


class Records(logging.Handler):
    """Every record the broker logs (the ``kafkatool`` loggers), kept."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def errors(self) -> list[logging.LogRecord]:
        return [r for r in self.records if r.levelno >= logging.ERROR]


@pytest.fixture
def served(tmp_path):
    """A Broker served on 127.0.0.1 by its event loop in a thread: (broker, bootstrap, log
    records).  Topic "orders" (2 partitions)."""
    broker = Broker(BrokerConfig.load(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    broker.open_storage()
    broker.create_topic("orders", 2, {})
    records = Records()
    logger = logging.getLogger("kafkatool")
    logger.addHandler(records)
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    async def main():
        try:
            await broker.start()
        finally:
            ready.set()
        await broker.serve_until_stopped()
        await broker.stop()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    try:
        assert ready.wait(20) and thread.is_alive(), "the broker did not start"
        host, port = broker.bound[0]
        yield broker, f"{host}:{port}", records
    finally:
        loop.call_soon_threadsafe(broker.request_stop)
        thread.join(30)
        loop.close()
        logger.removeHandler(records)


def _boom(ctx, req):
    raise RuntimeError("injected fault")


def _metadata_request():
    return G.MetadataRequest(
        topics=[MetadataRequestTopic(name="orders"), MetadataRequestTopic(name="elsewhere")],
        allow_auto_topic_creation=False,
    )


def _produce_request(acks: int):
    batch = R.build_record_batch([R.SimpleRecord(b"v", b"k", [], 1_700_000_000_000)])
    return G.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(
                name="orders",
                partition_data=[
                    PartitionProduceData(index=0, records=batch),
                    PartitionProduceData(index=1, records=batch),
                ],
            )
        ],
    )


def _one_error_with_traceback(records: Records, api: str) -> logging.LogRecord:
    errors = records.errors()
    assert len(errors) == 1, [r.getMessage() for r in errors]
    (rec,) = errors
    assert rec.name == "kafkatool.broker.requests"
    assert f"Unexpected error handling request {api} " in rec.getMessage()
    assert rec.exc_info is not None
    text = logging.Formatter().formatException(rec.exc_info)
    assert text.startswith("Traceback") and "RuntimeError: injected fault" in text
    return rec


def test_a_failed_handler_answers_unknown_server_error_and_keeps_the_connection(served, monkeypatch):
    broker, bootstrap, records = served
    monkeypatch.setattr(broker.router.routes[3], "handler", _boom)
    with WireClient(bootstrap) as c:
        resp = c.request(3, 12, _metadata_request())
        # MetadataRequest.getErrorResponse: each named topic with the error, no partitions
        assert [(t.name, t.error_code, t.partitions) for t in resp.topics] == [
            ("orders", USE, []),
            ("elsewhere", USE, []),
        ]
        assert resp.brokers == []
        # the same connection goes on
        assert c.api_versions().error_code == 0
        again = c.request(3, 4, _metadata_request())
        assert [t.error_code for t in again.topics] == [USE, USE]
    assert len(records.errors()) == 2  # one per failed request
    records.records.clear()
    with WireClient(bootstrap) as c:
        c.request(3, 12, _metadata_request())
    rec = _one_error_with_traceback(records, "Metadata")
    assert "v12" in rec.getMessage() and "client_id=wire-test" in rec.getMessage()


def test_an_answer_that_does_not_encode_is_answered_as_a_failure(served, monkeypatch):
    """Kafka serializes the response inside KafkaApis.handle's catch: an answer carrying a value
    its version cannot (the Metadata v10 null topic name of session 26's handler fuzz) is an
    unexpected error, answered with getErrorResponse; the connection stays open.  Until then the
    network layer logged "connection error" and closed the connection."""
    broker, bootstrap, records = served

    def unencodable(ctx, req):
        return G.MetadataResponse(
            throttle_time_ms=0,
            brokers=[],
            topics=[G.metadata_response.MetadataResponseTopic(error_code=0, name=None, partitions=[])],
        )

    monkeypatch.setattr(broker.router.routes[3], "handler", unencodable)
    with WireClient(bootstrap) as c:
        resp = c.request(3, 10, _metadata_request())
        assert [(t.name, t.error_code) for t in resp.topics] == [("orders", USE), ("elsewhere", USE)]
        assert c.api_versions().error_code == 0
    (rec,) = records.errors()
    assert "Unexpected error handling request Metadata v10" in rec.getMessage() and rec.exc_info is not None


def test_a_failure_after_the_handler_waited_is_answered_too(served, monkeypatch):
    """An answer that waits (a long poll, acks=all, a group's join) and fails meanwhile."""
    broker, bootstrap, records = served

    def waits_then_fails(ctx, req):
        async def later():
            await asyncio.sleep(0.01)
            raise RuntimeError("injected fault")

        return later()

    monkeypatch.setattr(broker.router.routes[3], "handler", waits_then_fails)
    with WireClient(bootstrap) as c:
        resp = c.request(3, 9, _metadata_request())
        assert [(t.name, t.error_code) for t in resp.topics] == [("orders", USE), ("elsewhere", USE)]
        assert c.api_versions().error_code == 0
    _one_error_with_traceback(records, "Metadata")


def test_a_failed_produce_answers_every_partition_and_counts(served, monkeypatch):
    broker, bootstrap, records = served
    monkeypatch.setattr(broker.router.routes[0], "handler", _boom)
    before = broker.metrics.topics.all.failed_produce
    with WireClient(bootstrap) as c:
        resp = c.request(0, 9, _produce_request(acks=1))
        got = [
            (t.name, p.index, p.error_code, p.base_offset)
            for t in resp.responses
            for p in t.partition_responses
        ]
        assert got == [("orders", 0, USE, -1), ("orders", 1, USE, -1)]
        assert c.api_versions().error_code == 0
    assert broker.metrics.topics.all.failed_produce == before + 1
    _one_error_with_traceback(records, "Produce")


def test_a_failed_produce_with_acks_0_closes_the_connection(served, monkeypatch):
    """ProduceRequest.getErrorResponse is null for acks=0: the connection is closed."""
    broker, bootstrap, records = served
    monkeypatch.setattr(broker.router.routes[0], "handler", _boom)
    before = broker.metrics.topics.all.failed_produce
    with WireClient(bootstrap) as c:
        c.send(0, 9, _produce_request(acks=0))
        assert c.closed_by_peer()
    assert broker.metrics.topics.all.failed_produce == before + 1
    _one_error_with_traceback(records, "Produce")
    with WireClient(bootstrap) as c:  # the broker serves on
        assert c.api_versions().error_code == 0


# ----------------------------------------------------------------------------- every API


SCALAR = {
    "string": "x",
    "int8": 1,
    "int16": 1,
    "uint16": 1,
    "int32": 1,
    "uint32": 1,
    "int64": 1,
    "float64": 1.0,
    "bool": True,
    "uuid": uuid.UUID(int=7),
    "bytes": b"x",
    "records": b"",
}


def representative(cls, version: int):
    """A ``cls`` with every field ``version`` carries set: one element in each list, so every
    item a response may answer is there."""
    m = cls()
    for f in cls._FIELDS:
        if not (in_range(version, f.versions) or in_range(version, f.tagged)):
            continue
        if f.kind == "array":
            setattr(m, f.attr, [representative(f.cls, version) if f.cls is not None else SCALAR[f.elem]])
        elif f.kind == "struct":
            setattr(m, f.attr, representative(f.cls, version))
        else:
            setattr(m, f.attr, SCALAR[f.kind])
    return m


def error_codes(msg) -> list[int]:
    out = []
    for f in msg._FIELDS:
        v = getattr(msg, f.attr)
        if f.attr.endswith("error_code"):
            out.append(v)
        elif f.kind == "array" and f.cls is not None:
            for e in v or ():
                out += error_codes(e)
        elif f.kind == "struct" and v is not None:
            out += error_codes(v)
    return out


def header_of(api_key: int, version: int) -> RequestHeader:
    return RequestHeader(api_key, version, 7, "t", header_version=2, body_offset=0)


def answer(api_key: int, version: int, req, code: int = USE):
    """The error response to ``req`` as the broker sends it (encoded by the router, fitted to
    the version), decoded."""
    header = header_of(api_key, version)
    data = encode_answer(header, error_response(header, req, code))
    corr, resp = parse_response(bytes(data)[4:], api_key, version)
    assert corr == 7
    return resp


#: versions whose error response has no error field: DescribeLogDirs' top-level error is a
#: field from v3 (DescribeLogDirsRequest.getErrorResponse sets nothing else)
NO_ERROR_FIELD = {(35, v) for v in range(3)}


@pytest.mark.parametrize("api_key", sorted(API_BY_KEY), ids=lambda k: API_BY_KEY[k].name)
def test_every_api_has_an_error_response_at_every_version(api_key):
    info = API_BY_KEY[api_key]
    for version in range(info.min_version, info.max_version + 1):
        sent = representative(info.request, version)
        req = info.request.decode(sent.encode(version), version)  # as a handler gets it
        resp = answer(api_key, version, req)
        codes = error_codes(resp)
        if (api_key, version) in NO_ERROR_FIELD:
            assert set(codes) <= {0}, (info.name, version, resp)
        else:
            assert USE in codes and set(codes) <= {0, USE}, (info.name, version, resp)


def test_every_api_the_broker_serves_has_one():
    """The cluster-mode routes included (ZooKeeper mode's control plane)."""
    zk = Broker(BrokerConfig({"zookeeper.connect": "127.0.0.1:1/x", "broker.id": "1"}, {}))
    served = set(Broker(BrokerConfig({}, {})).router.routes) | set(zk.router.routes)
    assert served <= set(API_BY_KEY)
    assert {0, 1, 3, 4, 5, 18, 56} <= served


# ----------------------------------------------------------------------------- Kafka's shapes


def test_metadata_answers_each_named_topic():
    """MetadataRequest.getErrorResponse: a null name (a topic asked by id) answers ""."""
    tid = uuid.UUID(int=9)
    req = G.MetadataRequest(
        topics=[MetadataRequestTopic(name="a"), MetadataRequestTopic(name=None, topic_id=tid)]
    )
    resp = answer(3, 12, req)
    assert [(t.name, t.topic_id, t.error_code, t.is_internal, t.partitions) for t in resp.topics] == [
        ("a", uuid.UUID(int=0), USE, False, []),
        ("", tid, USE, False, []),
    ]
    assert answer(3, 12, G.MetadataRequest(topics=None)).topics == []  # all topics: none named


def test_fetch_answers_every_partition_below_v13_and_the_top_level_from_v13():
    """FetchRequest.getErrorResponse (fetch._whole_request_error): the session id kept."""
    req = fetch_req(("a", "b"), 0, session_id=5)
    old = answer(1, 12, req)
    assert old.error_code == USE and old.session_id == 5
    assert [
        (t.topic, [(p.partition_index, p.error_code, p.high_watermark) for p in t.partitions])
        for t in old.responses
    ] == [
        ("a", [(0, USE, -1)]),
        ("b", [(0, USE, -1)]),
    ]
    new = answer(1, 13, req)
    assert (new.error_code, new.session_id, new.responses) == (USE, 5, [])


def test_produce_answers_every_partition_and_acks_0_has_no_answer():
    """ProduceRequest.getErrorResponse (produce._whole_request_error)."""
    resp = answer(0, 9, _produce_request(acks=-1))
    got = [
        (p.index, p.error_code, p.base_offset, p.log_start_offset)
        for t in resp.responses
        for p in t.partition_responses
    ]
    assert got == [(0, USE, -1, -1), (1, USE, -1, -1)]
    with pytest.raises(CloseConnection):
        error_response(header_of(0, 9), _produce_request(acks=0), USE)


def test_api_versions_and_sasl_handshake_answer_the_error_alone():
    """ApiVersionsRequest.getErrorResponse (ApiVersions' own versions only for UNSUPPORTED_VERSION,
    KIP-511); SaslHandshakeRequest.getErrorResponse (no mechanisms)."""
    req = G.ApiVersionsRequest(client_software_name="x", client_software_version="1")
    resp = answer(18, 3, req)
    assert (resp.error_code, resp.api_keys) == (USE, [])
    unsupported = answer(18, 3, req, ErrorCode.UNSUPPORTED_VERSION)
    info = API_BY_KEY[18]
    assert [(k.api_key, k.min_version, k.max_version) for k in unsupported.api_keys] == [
        (18, info.min_version, info.max_version)
    ]
    hs = answer(17, 1, G.SaslHandshakeRequest(mechanism="PLAIN"))
    assert (hs.error_code, hs.mechanisms) == (USE, [])


def test_shapes_of_their_own():
    """Requests whose getErrorResponse copies nothing of the request but names, or has a layout
    of its own by version (the request's values are never echoed: the old mirror copied a
    JoinGroup's member id and protocols, an InitProducerId's producer id)."""
    from kafkatool.protocol.generated.find_coordinator_request import FindCoordinatorRequest
    from kafkatool.protocol.generated.join_group_request import JoinGroupRequestProtocol
    from kafkatool.protocol.generated.offset_fetch_request import (
        OffsetFetchRequestGroup,
        OffsetFetchRequestTopic,
    )

    message = "The server experienced an unexpected error when processing the request."
    # FindCoordinatorResponse.prepareOldResponse / prepareErrorResponse: Node.noNode(), Errors.message()
    old = answer(10, 3, FindCoordinatorRequest(key="g", key_type=0))
    assert (old.error_code, old.error_message, old.node_id, old.host, old.port) == (USE, message, -1, "", -1)
    new = answer(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["g", "h"]))
    assert [(c.key, c.error_code, c.error_message, c.node_id, c.port) for c in new.coordinators] == [
        ("g", USE, message, -1, -1),
        ("h", USE, message, -1, -1),
    ]
    # OffsetFetchRequest.getErrorResponse: partitions below v2, the top level v2-7, groups from v8
    topics = [OffsetFetchRequestTopic(name="t", partition_indexes=[0, 3])]
    v1 = answer(9, 1, G.OffsetFetchRequest(group_id="g", topics=topics))
    assert [
        (p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in v1.topics[0].partitions
    ] == [
        (0, -1, "", USE),
        (3, -1, "", USE),
    ]
    v5 = answer(9, 5, G.OffsetFetchRequest(group_id="g", topics=topics))
    assert (v5.error_code, v5.topics) == (USE, [])
    v8 = answer(9, 8, G.OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id="g", topics=topics)]))
    assert [(g.group_id, g.error_code, g.topics) for g in v8.groups] == [("g", USE, [])]
    # JoinGroupRequest.getErrorResponse
    join = G.JoinGroupRequest(
        group_id="g", session_timeout_ms=10, member_id="m-1", protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"x")],
    )  # fmt: skip
    for version, name in ((6, ""), (7, None)):
        j = answer(11, version, join)
        assert (j.error_code, j.generation_id, j.member_id, j.leader, j.protocol_name, j.members) == (
            USE, -1, "", "", name, [],
        )  # fmt: skip
    ipi = answer(22, 4, G.InitProducerIdRequest(transactional_id=None, producer_id=12, producer_epoch=3))
    assert (ipi.error_code, ipi.producer_id, ipi.producer_epoch) == (USE, -1, -1)
    # DescribeGroupsResponse.groupError per group; DeleteGroupsRequest.getErrorResultCollection
    dg = answer(15, 5, G.DescribeGroupsRequest(groups=["a", "b"]))
    assert [(g.group_id, g.error_code, g.group_state, g.members) for g in dg.groups] == [
        ("a", USE, "", []),
        ("b", USE, "", []),
    ]
    dl = answer(42, 2, G.DeleteGroupsRequest(groups_names=["a"]))
    assert [(r.group_id, r.error_code) for r in dl.results] == [("a", USE)]


# ----------------------------------------------------------------------------- with ACLs


def _waits_then_fails(ctx, req):
    async def later():
        await asyncio.sleep(0)
        raise RuntimeError("injected fault")

    return later()


def _written_then_fails(ctx, req):
    """A produce answer held until its writes are done (an AfterWrite: no awaitable) whose
    build fails."""

    def build():
        raise RuntimeError("injected fault")

    return AfterWrite(AppendWriter(native=False), 0, build)


@pytest.mark.parametrize(
    "failing",
    [_boom, _waits_then_fails, _written_then_fails],
    ids=["call", "waiting answer", "answer built after the write"],
)
def test_the_answer_covers_the_topics_an_acl_took_out_of_the_request(tmp_path, monkeypatch, failing):
    """KafkaApis authorizes inside the handler, and handleError answers request.body, which
    authorization left whole: the partitions alice may not write answer UNKNOWN_SERVER_ERROR
    too, not TOPIC_AUTHORIZATION_FAILED.  The same for an answer that waits (acks=all, a long
    poll) and fails meanwhile, and for a produce answer built once its writes are done
    (AfterWrite) whose build fails: the lists the rule narrowed are put back before the failure
    reaches the router (until session 27 only a failure of the handler's call put them back,
    and the refused topic was missing from the answer)."""
    broker = Broker(
        BrokerConfig.load(
            None,
            [
                f"log.dirs={tmp_path}",
                "listeners=PLAINTEXT://127.0.0.1:0",
                "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            ],
        )
    )
    # the handler the ACL rule wraps as the storage opens (Broker._install_authorizer)
    monkeypatch.setattr(broker.router.routes[0], "handler", failing)
    broker.open_storage()
    try:
        assert broker.router.routes[0].handler is not failing
        broker.create_topic("orders", 1, {})
        broker.create_topic("secret", 1, {})
        broker.authorizer.create(
            [A.AclBinding(A.TOPIC, "orders", A.LITERAL, "User:alice", "*", A.WRITE, A.ALLOW)]
        )
        conn = DispatchConn()
        conn.principal = "User:alice"
        batch = R.build_record_batch([R.SimpleRecord(b"v", b"k", [], 1)])
        req = G.ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                TopicProduceData(name=n, partition_data=[PartitionProduceData(index=0, records=batch)])
                for n in ("orders", "secret")
            ],
        )
        frame = bytearray(encode_request(0, 9, 3, "t", req)[4:])

        async def dispatched():
            answer = broker.router.dispatch(conn, frame)
            assert inspect.isawaitable(answer) == (failing is _waits_then_fails)
            if type(answer) is AfterWrite:  # as the connection builds it, once written
                assert failing is _written_then_fails and answer.done()
                return answer.build()
            return (await answer) if inspect.isawaitable(answer) else answer

        resp = parse_response(bytes(asyncio.run(dispatched()))[4:], 0, 9)[1]
        got = sorted((t.name, p.error_code) for t in resp.responses for p in t.partition_responses)
        assert got == [("orders", USE), ("secret", USE)]
    finally:
        broker.close_storage()


class _Sent:
    def __init__(self):
        self.written: list[bytes] = []

    def write(self, data) -> None:
        self.written.append(bytes(data))


def test_a_build_that_closes_the_connection_lets_the_answers_before_it_go_out():
    """Connection._flush: an AfterWrite whose build raises CloseConnection (a failed acks=0
    produce's write) as the reader writes its ready answers: those before it are written, the
    ones after it are not, and the CloseConnection goes on (the connection closes)."""
    from kafkatool.broker.network import Connection

    conn = Connection.__new__(Connection)
    conn.writer = _Sent()
    writer = AppendWriter(native=False)

    def closes():
        raise CloseConnection("acks=0 produce failed")

    pending = [b"a", AfterWrite(writer, 0, lambda: b"b"), AfterWrite(writer, 0, closes), b"c"]
    with pytest.raises(CloseConnection):
        conn._flush(pending)
    assert conn.writer.written == [b"ab"] and pending == []
