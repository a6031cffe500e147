"""Request routing: frame -> header + body -> handler -> encoded response.

Handlers are plain functions ``handler(ctx, request) -> response`` where the
response is a message object (encoded here with the request's version and
correlation id), ``None`` (no response: Produce with acks=0), an awaitable
of either (long polls), or ready :class:`~kafkatool.broker.network.Parts`.
Each API family registers its handlers with the versions it fully implements;
ApiVersions advertises exactly this table, so adding group handlers later is
one ``register`` call.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter

from kafkatool.broker.error_response import error_response
from kafkatool.broker.handlers.fetch import fetch_replica_id
from kafkatool.broker.network import AfterWrite, CloseConnection, FinalResponse, RequestFailed
from kafkatool.broker.processes import LOCAL_APIS
from kafkatool.broker.quotas import set_throttle_time
from kafkatool.formats.schema import Message, SchemaDecodeError, UnsupportedVersionError, in_range
from kafkatool.protocol.apis import API_BY_KEY, API_VERSIONS_KEY
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.framing import (
    RequestHeader,
    UnsupportedRequestError,
    api_versions_unsupported_response,
    encode_response,
    parse_request,
)

log = logging.getLogger("kafkatool.broker.requests")


@dataclass
class Route:
    api_key: int
    min_version: int
    max_version: int
    handler: Callable


class RequestContext:
    """What a handler gets beside the request: the broker, the connection, the header and its
    ``version`` (a plain attribute: handlers read it several times per request)."""

    def __init__(self, broker, connection, header: RequestHeader, quota=None):
        self.broker = broker
        self.connection = connection
        self.header = header
        self.version = header.api_version
        #: the request's client-quota accounting (broker/quotas.QuotaRequest) while a quota is set
        self.quota = quota


class Router:
    def __init__(self, broker):
        self.broker = broker
        self.routes: dict[int, Route] = {}
        #: a member process of a broker of several (broker/processes.py): the coroutine that
        #: has the primary answer a request this process does not serve
        self.forward: Callable | None = None

    def register(self, api_key: int, min_version: int, max_version: int, handler: Callable) -> None:
        info = API_BY_KEY[api_key]
        if not (info.min_version <= min_version <= max_version <= info.max_version):
            raise ValueError(f"{info.name}: versions {min_version}-{max_version} outside the schema's")
        self.routes[api_key] = Route(api_key, min_version, max_version, handler)

    def advertised(self) -> list[tuple[int, int, int]]:
        return [
            (r.api_key, r.min_version, r.max_version)
            for r in sorted(self.routes.values(), key=lambda r: r.api_key)
        ]

    def dispatch(self, conn, frame: bytes):
        """Bytes / future / Parts to queue, or None; raises CloseConnection for bad input."""
        sasl = getattr(conn, "sasl", None)
        if sasl is not None and sasl.state == "failed":
            return None  # closing after an authentication failure: nothing more is read
        if sasl is not None and sasl.raw_expected:
            try:
                return sasl.raw_token(frame)
            except CloseConnection as exc:
                return self._refuse(conn, None, exc)
        try:
            header, body = parse_request(frame)
        except UnsupportedRequestError as exc:
            h = exc.header
            if h.api_key == API_VERSIONS_KEY:
                route = self.routes[API_VERSIONS_KEY]
                return api_versions_unsupported_response(
                    h.correlation_id, route.min_version, route.max_version
                )
            raise CloseConnection(
                f"unsupported request api_key={h.api_key} api_version={h.api_version}"
            ) from None
        except SchemaDecodeError as exc:
            raise CloseConnection(f"malformed request: {exc}") from None
        conn.client_id = header.client_id
        route = self.routes.get(header.api_key)
        if route is None or not (route.min_version <= header.api_version <= route.max_version):
            if header.api_key == API_VERSIONS_KEY:
                return api_versions_unsupported_response(
                    header.correlation_id, 0, self.routes[API_VERSIONS_KEY].max_version
                )
            name = API_BY_KEY[header.api_key].name
            raise CloseConnection(
                f"{name} v{header.api_version} is not served (client_id={header.client_id})"
            )
        if sasl is not None:
            # the one security hook: authentication state decides before any handler runs
            try:
                answer = sasl.intercept(header, body)
            except CloseConnection as exc:
                return self._refuse(conn, header, exc)
            if answer is not None:
                return self._encode(header, answer)
        if self.forward is not None and header.api_key not in LOCAL_APIS:
            return asyncio.ensure_future(self.forward(conn, bytes(frame)))
        ctx = RequestContext(self.broker, conn, header)
        quotas = self.broker.quotas
        if quotas.enabled:  # the one check a request pays when no quota is set anywhere
            ctx.quota = quotas.begin(conn, header, len(frame))
        # the cyclic collector waits while the handler builds and the encoder writes the
        # answer: its young collections then run between requests, when the request's
        # objects are gone, instead of promoting them to the old generation.  An answer
        # for every topic allocates an object per partition (10,000 at the scale)
        # that lives until encoded: collected mid-answer, every tenth one or so also ran a
        # full collection of the whole heap (with 10,000 partitions loaded 130 ms in-process,
        # 250-500 ms in a serve).  The allocation count still grows meanwhile, so the first
        # allocation after the request runs the collection that was due.  A caller that
        # holds the collector off already keeps it off.
        hold = gc.isenabled()
        if hold:
            gc.disable()
        started = perf_counter()
        timed = True  # RequestChannel's updateRequestMetrics: once the answer is done
        # a Fetch also counts as FetchConsumer or FetchFollower (taken now: a waiting answer
        # holds nothing of the request, whose records pin a pooled frame buffer)
        follower = header.api_key == 1 and fetch_replica_id(body, header.api_version) >= 0
        try:
            try:
                result = route.handler(ctx, body)
            except CloseConnection:
                raise
            except RequestFailed as exc:
                result = exc.answer(body)  # KafkaApis.handleError: the request as it came
            except Exception as exc:
                result = self._failed(conn, header, body, exc)
            if type(result) is AfterWrite:
                # a produce answer held until its writes are done (log/append_writer.py); with
                # quotas, recorded and throttled now, as an answer made at once is: the
                # connection reads nothing more for the throttle time (an acks=0 produce has
                # no answer to wait for), and the answer carries the time when it is built
                throttle_ms = 0 if ctx.quota is None else self.broker.quotas.finish(ctx, body, None)
                return self._after_write(conn, header, body, result, throttle_ms)
            if ctx.quota is not None:
                if inspect.isawaitable(result):
                    timed = False  # recorded by _finish once the answer is done
                return self._throttled(ctx, body, result, started, follower)
            if result is None:
                return None
            if isinstance(result, Message):
                # the common answer, checked first: isawaitable asks the Awaitable ABC
                return self._encode(header, result, conn, body)
            if inspect.isawaitable(result):
                timed = False
                return asyncio.ensure_future(self._finish(conn, header, body, result, started, follower))
            return self._encode(header, result)
        finally:
            if timed:
                self.broker.metrics.requests.record(header.api_key, header.api_version, started, follower)
            if hold:
                gc.enable()

    def _after_write(
        self, conn, header: RequestHeader, request, result: AfterWrite, throttle_ms: int = 0
    ) -> AfterWrite:
        """``result`` building the encoded answer (a failure of the handler's build answered as
        :meth:`_failed` answers one) with ``throttle_ms`` (the quotas', taken at dispatch); the
        connection writes it once the write is done."""
        build = result.build

        def answer():
            try:
                msg = build()
            except CloseConnection:
                raise
            except Exception as exc:
                msg = self._failed(conn, header, request, exc)
            if msg is None:
                return None
            if throttle_ms:
                set_throttle_time(msg, throttle_ms)
            return self._encode(header, msg, conn, request)

        result.build = answer
        return result

    def _throttled(self, ctx: RequestContext, body, result, started: float, follower: bool):
        """A handler's answer while client quotas are set: recorded and given its throttle
        time (broker/quotas.QuotaManagers.finish) as it is encoded; an answer already encoded
        (Fetch) did its own."""
        quotas = self.broker.quotas
        header = ctx.header
        if result is None or isinstance(result, Message):
            quotas.finish(ctx, body, result)
            return None if result is None else self._encode(header, result, ctx.connection, body)
        if inspect.isawaitable(result):
            q = ctx.quota
            q.thread_ns = time.perf_counter_ns() - q.start_ns  # the loop's time, not the wait
            return asyncio.ensure_future(
                self._finish(
                    ctx.connection, header, body, result, started, follower,
                    lambda answer: quotas.finish(ctx, body, answer),
                )
            )  # fmt: skip
        return self._encode(header, result)

    def _failed(self, conn, header: RequestHeader, request, exc: Exception):
        """A handler's unexpected exception (an internal bug), answered as KafkaApis.handle's
        catch does: "Unexpected error handling request" at ERROR with the stack trace, then
        RequestHandlerHelper.handleError's answer, the API's error response with
        UNKNOWN_SERVER_ERROR (AbstractRequest.getErrorResponse: error_response.py), the
        connection left open.  Where Kafka has no answer (a Produce with acks=0) the connection
        is closed (RequestChannel.closeConnection): CloseConnection."""
        name = API_BY_KEY[header.api_key].name
        log.error(
            "handler failed: Unexpected error handling request %s v%d correlation_id=%d client_id=%s from %s",
            name, header.api_version, header.correlation_id, header.client_id, getattr(conn, "peer", None),
            exc_info=exc,
        )  # fmt: skip
        # the unexpected failure Kafka's Failed{Produce,Fetch}RequestsPerSec count
        if header.api_key == 0:
            self.broker.metrics.topics.all.failed_produce += 1
        elif header.api_key == 1:
            self.broker.metrics.topics.all.failed_fetch += 1
        try:
            return error_response(header, request, ErrorCode.UNKNOWN_SERVER_ERROR)
        except CloseConnection:
            raise
        except Exception:
            log.exception("no error response for %s v%d", name, header.api_version)
            raise CloseConnection(f"internal error handling the request: {exc}") from None

    def _refuse(self, conn, header: RequestHeader | None, exc: CloseConnection):
        """Authentication failed: Kafka's one log line, the error answer after the failure delay, close."""
        response = getattr(exc, "response", None)
        if not hasattr(exc, "delay"):
            raise exc
        log.info("Failed authentication with /%s (%s)", conn.peer.rsplit(":", 1)[0], exc)
        data = None if response is None or header is None else self._encode(header, response)

        async def answer_then_close():
            await asyncio.sleep(exc.delay)
            return FinalResponse(data or b"")

        return asyncio.ensure_future(answer_then_close())

    async def _finish(
        self, conn, header: RequestHeader, request, awaitable, started: float, follower: bool, done=None
    ):
        """An answer that waited (a long poll, acks=all, a KIP-890 verification); a
        CloseConnection goes on to the connection's writer (one line, then closed).  A failure
        while it waits is answered as a failure of the handler's call is (:meth:`_failed`),
        from ``request``, the request itself: a Produce's has let go of its records once they
        were appended (acks=all waits long after: see produce._append_all), so holding it holds
        no pooled frame buffer.  ``done``: called with the answer (a message, or None) before it
        is encoded (the quotas' record and throttle)."""
        try:
            try:
                result = await awaitable
            except (asyncio.CancelledError, CloseConnection):
                raise
            except RequestFailed as exc:
                result = exc.answer(request)
            except Exception as exc:
                result = self._failed(conn, header, request, exc)
            if done is not None and (result is None or isinstance(result, Message)):
                done(result)
            return None if result is None else self._encode(header, result, conn, request)
        finally:
            self.broker.metrics.requests.record(header.api_key, header.api_version, started, follower)

    def _encode(self, header: RequestHeader, result, conn=None, request=None):
        """The answer's bytes (:func:`encode_answer`).  An answer that does not encode (a value
        its version cannot carry: an internal bug) is a failure of the handler, answered by
        :meth:`_failed` from ``request`` (Kafka serializes the response inside KafkaApis.handle's
        catch, whose handleError answers getErrorResponse); without ``request`` it goes on (the
        connection is closed)."""
        try:
            return encode_answer(header, result)
        except CloseConnection:
            raise
        except Exception as exc:
            if request is None:
                raise
            return encode_answer(header, self._failed(conn, header, request, exc))


def encode_answer(header: RequestHeader, result):
    """A handler's answer as bytes: a message encoded at the request's version (a field the
    version does not have dropped, as Java's ignorable fields are), bytes or Parts as they are."""
    if not isinstance(result, Message):
        return result  # already encoded: bytes, or Parts
    try:
        return encode_response(header.api_key, header.api_version, header.correlation_id, result)
    except UnsupportedVersionError:
        # a handler filled a field this version does not have: drop it (handlers set fields for
        # the newest version)
        fit_to_version(result, header.api_version)
        return encode_response(header.api_key, header.api_version, header.correlation_id, result)


def fit_to_version(msg: Message, version: int) -> None:
    """Reset every field ``version`` does not carry to its default, recursively."""
    for f in msg._FIELDS:
        value = getattr(msg, f.attr)
        present = in_range(version, f.versions) or in_range(version, f.tagged)
        if not present:
            setattr(msg, f.attr, f.default_value())
            continue
        if f.kind == "array" and f.cls is not None and value:
            for e in value:
                fit_to_version(e, version)
        elif f.kind == "struct" and value is not None:
            fit_to_version(value, version)
