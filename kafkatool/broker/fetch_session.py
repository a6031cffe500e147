"""Incremental fetch sessions (KIP-227), the broker's side: Kafka's ``FetchManager`` and
``FetchSessionCache`` (core/.../server/FetchSession.scala).

A full fetch (session epoch 0) may create a session: the answer carries its id, and the
client's next requests (epoch 1, 2, ...) name only the partitions whose fetch parameters
changed and the ones to forget; the broker reads every partition of the session and answers
only those with something new: records, a changed high watermark or log start offset, an
error, a diverging epoch.  Epoch -1 (and every Fetch before v7) is sessionless.

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions (Kafka's default
1000).  When it is full a new session may evict (``tryEvict``): a session unused for
``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`` (a constant in Kafka, 120 s); else the least
valuable evictable one, ordered (privileged, size, id), if the newcomer is worth at least
as much.  Followers' sessions are privileged: a consumer evicts a follower's session only
once that is stale.  Kafka shards the cache by request-handler thread since KAFKA-9401;
requests are handled on one event loop here, so there is one cache per broker process
(each process of ``kafkatool.processes`` is a node of its own with its own sessions).

Session errors answer at the top level with no partitions and session id 0:
FETCH_SESSION_ID_NOT_FOUND (an unknown id: never created, evicted, or another broker's),
INVALID_FETCH_SESSION_EPOCH (not the epoch the session expects, or a request superseded by a
newer one of the same session while it waited in a long poll), FETCH_SESSION_TOPIC_ID_ERROR
(a session made with topic names used by a v13+ request, or the reverse).
"""

from __future__ import annotations

import random
import time

from kafkatool.protocol.errors import ErrorCode

CACHE_SLOTS_CONFIG = "max.incremental.fetch.session.cache.slots"
#: KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (not a setting in Kafka either)
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
#: the first Fetch version with session_id / session_epoch / forgotten_topics_data
SESSIONS_FROM = 7
TOPIC_IDS_FROM = 13


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch: -1 stays -1, the epoch after 2^31-1 is 1 (0 means "full")."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class CachedPartition:
    """One partition of a session.  The request fields carry FetchPartition's names, so the
    fetch handler reads a cached partition exactly as it reads a request's partition; the
    response fields are what the client was last told."""

    __slots__ = (
        "topic",
        "topic_id",
        "partition",
        "current_leader_epoch",
        "fetch_offset",
        "last_fetched_epoch",
        "log_start_offset",
        "partition_max_bytes",
        "high_watermark",
        "local_log_start_offset",
    )

    def __init__(self, topic, topic_id, fp):
        self.topic = topic
        self.topic_id = topic_id
        self.partition = fp.partition
        self.update_request(fp)
        self.high_watermark = -1
        self.local_log_start_offset = -1

    def update_request(self, fp) -> None:
        self.current_leader_epoch = fp.current_leader_epoch
        self.fetch_offset = fp.fetch_offset
        self.last_fetched_epoch = fp.last_fetched_epoch
        self.log_start_offset = fp.log_start_offset
        self.partition_max_bytes = fp.partition_max_bytes

    def must_respond(self, pd, has_records: bool) -> bool:
        """CachedPartition.maybeUpdateResponseData(respData, updateResponseData = true)."""
        must = has_records
        if self.high_watermark != pd.high_watermark:
            self.high_watermark = pd.high_watermark
            must = True
        if self.local_log_start_offset != pd.log_start_offset:
            self.local_log_start_offset = pd.log_start_offset
            must = True
        if pd.error_code:
            # an error always goes out; -1 makes the partition go out again once it clears
            self.high_watermark = -1
            must = True
        if pd.preferred_read_replica >= 0 or pd.diverging_epoch.epoch >= 0:
            must = True
        return must


class FetchTopicView:
    """A run of one topic's session partitions, shaped like the request's FetchTopic."""

    __slots__ = ("topic", "topic_id", "partitions")

    def __init__(self, topic, topic_id, partitions):
        self.topic = topic
        self.topic_id = topic_id
        self.partitions = partitions


class FetchSession:
    __slots__ = (
        "id",
        "privileged",
        "partitions",
        "uses_topic_ids",
        "creation_ms",
        "last_used_ms",
        "epoch",
        "cached_size",
        "evictable_by_all",
        "evictable_by_privileged",
    )

    def __init__(self, session_id: int, privileged: bool, partitions: dict, uses_topic_ids: bool, now: int):
        self.id = session_id
        self.privileged = privileged
        #: (topic name or topic id, partition) -> CachedPartition, in Kafka's order: a
        #: partition that returned records moves to the end (fairness across responses)
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now
        self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = -1
        self.evictable_by_all = False
        self.evictable_by_privileged = False

    def evictable_key(self) -> tuple:
        return (self.privileged, self.cached_size, self.id)


class FetchSessionCache:
    """FetchSessionCache(Shard): the sessions of this broker process."""

    def __init__(self, max_entries: int, eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS):
        self.max_entries = max(0, max_entries)
        self.eviction_ms = eviction_ms
        #: id -> session, least recently used first (touch moves a session to the end)
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def total_partitions(self) -> int:
        return sum(max(s.cached_size, 0) for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def _new_session_id(self) -> int:
        while True:
            sid = random.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid

    def maybe_create_session(self, now: int, privileged: bool, partitions: dict, uses_topic_ids: bool) -> int:
        """The new session's id, or INVALID_SESSION_ID when the cache has no room for it."""
        size = len(partitions)
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, size, now):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_session_id(), privileged, partitions, uses_topic_ids, now)
        self.sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        oldest = next(iter(self.sessions.values()))
        if now - oldest.last_used_ms > self.eviction_ms:
            self.remove(oldest.id)
            self.evictions += 1
            return True
        attr = "evictable_by_privileged" if privileged else "evictable_by_all"
        candidates = [s for s in self.sessions.values() if getattr(s, attr)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.evictable_key)
        if (privileged, size, 0) < victim.evictable_key():
            return False
        self.remove(victim.id)
        self.evictions += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now: int) -> None:
        if self.sessions.pop(session.id, None) is not None:
            self.sessions[session.id] = session  # now the most recently used
        session.last_used_ms = now
        session.cached_size = len(session.partitions)
        aged = now - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or aged
        session.evictable_by_all = aged


class FetchContext:
    """What one Fetch request reads and how its answer is shaped (Kafka's FetchContext kinds:
    sessionless, full, incremental, session error).

    ``topics``: what to read, FetchTopic-shaped (the request's own topics for a full or
    sessionless fetch, the session's partitions for an incremental one).  ``finish`` runs
    once the partitions are read (after any long poll) and returns (error, session id) for
    the response; for an incremental fetch it drops the unchanged partitions from it."""

    __slots__ = ("kind", "error", "topics", "session", "_manager", "_req_epoch", "_privileged", "_by_id")

    SESSIONLESS, FULL, INCREMENTAL, ERROR = range(4)

    def __init__(self, kind: int, topics, *, error: int = 0, session=None, manager=None, req_epoch=0,
                 privileged=False, by_id=False):  # fmt: skip
        self.kind = kind
        self.error = error
        self.topics = topics
        self.session = session
        self._manager = manager
        self._req_epoch = req_epoch
        self._privileged = privileged
        self._by_id = by_id

    def finish(self, responses: list, has_records) -> tuple[int, int]:
        """``responses``: the FetchableTopicResponse list built from ``topics``, one per topic
        and one PartitionData per partition in the same order (pruned in place);
        ``has_records(pd)``: whether a partition's answer carries records."""
        kind = self.kind
        if kind == FetchContext.SESSIONLESS:
            return 0, INVALID_SESSION_ID
        if kind == FetchContext.ERROR:
            return self.error, INVALID_SESSION_ID
        if kind == FetchContext.FULL:
            return 0, self._create(responses)
        session = self.session
        if session.epoch != next_epoch(self._req_epoch):
            # a newer request of this session came in while this one waited
            responses.clear()
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id
        parts = session.partitions
        by_id = self._by_id
        kept_topics = []
        for view, tr in zip(self.topics, responses, strict=True):
            tkey = view.topic_id if by_id else view.topic
            kept = []
            for cp, pd in zip(view.partitions, tr.partitions, strict=True):
                records = has_records(pd)
                if cp.must_respond(pd, records):
                    kept.append(pd)
                    if records:
                        key = (tkey, cp.partition)
                        if parts.pop(key, None) is not None:
                            parts[key] = cp
            if kept:
                tr.partitions = kept
                kept_topics.append(tr)
        responses[:] = kept_topics
        return 0, session.id

    def throttled(self) -> tuple[int, int]:
        """FetchContext.getThrottledResponse's (error, session id): an empty answer that leaves
        the session as it was (a full fetch makes none; an incremental one keeps its epoch
        check)."""
        kind = self.kind
        if kind == FetchContext.ERROR:
            return self.error, INVALID_SESSION_ID
        if kind != FetchContext.INCREMENTAL:
            return 0, INVALID_SESSION_ID
        if self.session.epoch != next_epoch(self._req_epoch):
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, self.session.id
        return 0, self.session.id

    def _create(self, responses: list) -> int:
        """FullFetchContext.updateAndGenerateResponseData: a session of every partition asked
        for, remembering what this answer tells the client."""
        by_id = self._by_id
        parts = {}
        for ft, tr in zip(self.topics, responses, strict=True):
            tkey = ft.topic_id if by_id else ft.topic
            for fp, pd in zip(ft.partitions, tr.partitions, strict=True):
                cp = CachedPartition(ft.topic, ft.topic_id, fp)
                cp.high_watermark = pd.high_watermark
                cp.local_log_start_offset = pd.log_start_offset
                parts[(tkey, fp.partition)] = cp
        return self._manager.cache.maybe_create_session(_now_ms(), self._privileged, parts, by_id)


class FetchManager:
    """FetchManager.newContext: the one place a Fetch request's session is resolved."""

    def __init__(self, max_entries: int, eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS):
        self.cache = FetchSessionCache(max_entries, eviction_ms)

    def new_context(self, req, version: int, is_follower: bool) -> FetchContext:
        if version < SESSIONS_FROM:
            return FetchContext(FetchContext.SESSIONLESS, req.topics)
        session_id, epoch = req.session_id, req.session_epoch
        by_id = version >= TOPIC_IDS_FROM
        if epoch == INITIAL_EPOCH or epoch == FINAL_EPOCH:
            if session_id != INVALID_SESSION_ID:
                self.cache.remove(session_id)  # a full fetch closes the session it names
            if epoch == FINAL_EPOCH or self.cache.max_entries == 0:
                return FetchContext(FetchContext.SESSIONLESS, req.topics)
            return FetchContext(
                FetchContext.FULL, req.topics, manager=self, privileged=is_follower, by_id=by_id
            )
        session = self.cache.get(session_id)
        if session is None:
            return FetchContext(FetchContext.ERROR, (), error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(FetchContext.ERROR, (), error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != by_id:
            return FetchContext(FetchContext.ERROR, (), error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        parts = session.partitions
        for ft in req.topics:
            tkey = ft.topic_id if by_id else ft.topic
            for fp in ft.partitions:
                cp = parts.get((tkey, fp.partition))
                if cp is None:
                    parts[(tkey, fp.partition)] = CachedPartition(ft.topic, ft.topic_id, fp)
                else:
                    cp.update_request(fp)
        for ft in req.forgotten_topics_data:
            tkey = ft.topic_id if by_id else ft.topic
            for p in ft.partitions:
                parts.pop((tkey, p), None)
        if not parts:
            # nothing left: the session closes and this fetch is answered sessionless
            self.cache.remove(session.id)
            return FetchContext(FetchContext.SESSIONLESS, req.topics)
        self.cache.touch(session, _now_ms())
        session.epoch = next_epoch(session.epoch)
        return FetchContext(
            FetchContext.INCREMENTAL, _views(parts, by_id), session=session, req_epoch=epoch, by_id=by_id
        )


def _views(parts: dict, by_id: bool) -> list[FetchTopicView]:
    """The session's partitions grouped into runs of one topic, in session order (Kafka's
    FetchResponse.of groups consecutive partitions of a topic the same way)."""
    out = []
    last = None
    view = None
    for (tkey, _), cp in parts.items():
        if view is None or tkey != last:
            view = FetchTopicView(cp.topic, cp.topic_id, [])
            out.append(view)
            last = tkey
        view.partitions.append(cp)
    return out


class FetchSessionHandler:
    """The client's side (FetchSessionHandler.java), as a follower's fetcher uses it: one per
    leader connection.  ``build`` turns the partitions wanted now (tp -> the request fields as
    a tuple) into what this request sends; ``handle_response`` / ``handle_error`` move to the
    next epoch, or back to a full fetch after a session error or a broken connection."""

    __slots__ = ("session_id", "epoch", "session")

    def __init__(self):
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        #: tp -> the request fields the leader holds for it
        self.session: dict = {}

    @property
    def is_full(self) -> bool:
        return self.epoch == INITIAL_EPOCH or self.epoch == FINAL_EPOCH

    def build(self, want: dict) -> tuple[list, list]:
        """(tps to send, tps to forget).  A full fetch sends everything; an incremental one the
        partitions that are new to the session or whose fields changed."""
        old = self.session
        self.session = dict(want)
        if self.is_full:
            return list(want), []
        send = [tp for tp, fields in want.items() if old.get(tp) != fields]
        forget = [tp for tp in old if tp not in want]
        return send, forget

    def handle_response(self, error: int, session_id: int, tps) -> bool:
        """False when the response's partitions must not be used (a session error or a
        response that does not fit the session: the next fetch is full)."""
        if error:
            if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.epoch = INITIAL_EPOCH  # close the session we had and try a new one
            return False
        session = self.session
        if self.is_full:
            if set(tps) != session.keys():
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
                return False
            if session_id == INVALID_SESSION_ID:
                self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
            else:
                self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
            return True
        if any(tp not in session for tp in tps):
            self.epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """A request that got no answer: the next fetch is full and closes the session."""
        self.epoch = INITIAL_EPOCH
