"""Replica fetchers: followers copy their leaders' logs byte for byte (ReplicaFetcherThread).

One task per source broker (``num.replica.fetchers`` = 1, Kafka's default) on the event
loop.  A partition joining a fetcher first truncates: OffsetForLeaderEpoch with its
latest local epoch, the KIP-101/KIP-279 rules of AbstractFetcherThread, repeated while
the answer names an epoch this log ends elsewhere.  Then Fetch v12 with ``replica_id``
from the log end offset; the leader's batches are appended with the leader's offsets
and epochs (``Log.append_as_follower``); the follower's high watermark is
min(leader's, log end offset) and its log start offset follows the leader's.

Fetches go through an incremental fetch session (KIP-227, as ReplicaFetcherThread does
through FetchSessionHandler): after a full fetch a request names only the partitions whose
fetch offset, epochs or log start offset moved, and the leader answers only the partitions
with news.  A session error or a lost connection makes the next fetch a full one.
"""

from __future__ import annotations

import asyncio
import logging

from kafkatool.broker.cluster.client import BrokerLink, BrokerLinkError
from kafkatool.broker.fetch_session import FetchSessionHandler
from kafkatool.broker.tasks import stop_tasks
from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError
from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import FetchRequest, OffsetForLeaderEpochRequest
from kafkatool.protocol.generated.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from kafkatool.protocol.generated.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)

log = logging.getLogger("kafkatool.replication")

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
#: KIP-279: a follower repeats OffsetForLeaderEpoch at most this many times per truncation
MAX_TRUNCATION_ROUNDS = 32


def fetcher_index(topic: str, partition: int, n: int) -> int:
    """AbstractFetcherManager.getFetcherId: ``Utils.abs(31 * topic.hashCode + partition) % n``."""
    from kafkatool.broker.group.hashing import INT32_MIN
    from kafkatool.formats.java_collections import java_string_hash

    h = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    h = h - 0x100000000 if h & 0x80000000 else h
    return (0 if h == INT32_MIN else abs(h)) % max(n, 1)


class FetcherManager:
    """num.replica.fetchers fetchers per source broker, each partition on Kafka's choice of one."""

    def __init__(self, rm):
        self.rm = rm
        self.n = max(1, rm.config.int("num.replica.fetchers"))
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}

    def add(self, part) -> None:
        self.remove(part.tp)
        key = (part.leader, fetcher_index(part.tp[0], part.tp[1], self.n))
        f = self.fetchers.get(key)
        if f is None:
            f = self.fetchers[key] = ReplicaFetcher(self.rm, part.leader, key[1])
        f.add(part)

    def remove(self, tp) -> None:
        for lid, f in list(self.fetchers.items()):
            if f.remove(tp) and not f.partitions:
                f.stop()
                del self.fetchers[lid]

    async def stop(self) -> None:
        for f in self.fetchers.values():
            f.stop()
        await stop_tasks([f.task for f in self.fetchers.values()], "replica fetcher")
        self.fetchers.clear()


class ReplicaFetcher:
    def __init__(self, rm, leader_id: int, index: int = 0):
        self.rm = rm
        self.leader_id = leader_id
        self.index = index
        cfg = rm.config
        self.max_wait = cfg.int("replica.fetch.wait.max.ms")
        self.min_bytes = cfg.int("replica.fetch.min.bytes")
        self.max_bytes = cfg.int("replica.fetch.response.max.bytes")
        self.partition_max = cfg.int("replica.fetch.max.bytes")
        self.backoff = cfg.int("replica.fetch.backoff.ms") / 1000.0
        self.timeout = cfg.int("replica.socket.timeout.ms") / 1000.0
        #: tp -> Partition; tps in ``truncating`` still need the epoch check
        self.partitions: dict = {}
        self.truncating: set = set()
        self.link: BrokerLink | None = None
        self.session = FetchSessionHandler()
        #: partitions whose log end reached the leader's high watermark (not throttled)
        self.in_sync: set = set()
        self.stopped = False
        self.task: asyncio.Task | None = asyncio.get_running_loop().create_task(self._run())
        self._changed = asyncio.Event()

    def add(self, part) -> None:
        self.partitions[part.tp] = part
        self.truncating.add(part.tp)
        self._changed.set()

    def remove(self, tp) -> bool:
        self.truncating.discard(tp)
        return self.partitions.pop(tp, None) is not None

    def stop(self) -> None:
        self.stopped = True  # a cancellation Python 3.11's wait_for swallowed still ends _run
        if self.task is not None:
            self.task.cancel()
        if self.link is not None:
            self.link.close()

    def _connect(self) -> BrokerLink | None:
        ep = self.rm.endpoint(self.leader_id, None)
        if ep is None:
            return None
        if self.link is None or (self.link.host, self.link.port) != ep:
            if self.link is not None:
                self.link.close()
            self.link = self.rm.link(*ep, f"fetcher-{self.index}", self.timeout + self.max_wait / 1000.0)
        return self.link

    async def _run(self) -> None:
        while not self.stopped:
            if not self.partitions:
                self._changed.clear()
                await self._changed.wait()
                continue
            link = self._connect()
            if link is None:
                await asyncio.sleep(self.backoff)
                continue
            try:
                if self.truncating:
                    await self._truncate(link)
                await self._fetch_once(link)
            except BrokerLinkError as exc:
                log.info("fetcher from broker %d: %s; retrying in %.1fs", self.leader_id, exc, self.backoff)
                link.close()
                self.link = None
                await asyncio.sleep(self.backoff)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fetcher from broker %d failed", self.leader_id)
                await asyncio.sleep(self.backoff)

    # ------------------------------------------------------------------ truncation
    async def _truncate(self, link: BrokerLink) -> None:
        for _ in range(MAX_TRUNCATION_ROUNDS):
            todo = {tp: self.partitions[tp] for tp in list(self.truncating) if tp in self.partitions}
            if not todo:
                self.truncating.clear()
                return
            ask = {}
            for tp, part in todo.items():
                lg = part.log
                latest = lg.leader_epoch_cache.latest_epoch
                if latest is None:
                    # no epochs: truncate to the high watermark (pre-KIP-101 rule)
                    self._truncate_to(part, lg.high_watermark, "no leader epochs")
                    self.truncating.discard(tp)
                    continue
                ask[tp] = latest
            if not ask:
                return
            topics: dict[str, list] = {}
            for (t, p), epoch in ask.items():
                topics.setdefault(t, []).append(
                    OffsetForLeaderPartition(
                        partition=p,
                        current_leader_epoch=self.partitions[(t, p)].leader_epoch,
                        leader_epoch=epoch,
                    )
                )
            req = OffsetForLeaderEpochRequest(
                replica_id=self.rm.node_id,
                topics=[OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            )
            resp = await link.request(23, OFFSET_FOR_LEADER_EPOCH_VERSION, req)
            again = False
            for rt in resp.topics:
                for rp in rt.partitions:
                    tp = (rt.topic, rp.partition)
                    part = self.partitions.get(tp)
                    if part is None or tp not in ask:
                        continue
                    if rp.error_code:
                        log.info(
                            "%s-%d: OffsetForLeaderEpoch answered %s",
                            tp[0],
                            tp[1],
                            ErrorCode(rp.error_code).name,
                        )
                        continue
                    done = self._apply_epoch_end(part, rp.leader_epoch, rp.end_offset)
                    if done:
                        self.truncating.discard(tp)
                    else:
                        again = True
            if not again:
                if self.truncating:
                    await asyncio.sleep(self.backoff)  # an error answer: try again later
                return

    def _apply_epoch_end(self, part, leader_epoch: int, end_offset: int) -> bool:
        """AbstractFetcherThread.getOffsetTruncationState; True when truncation is complete."""
        lg = part.log
        leo = lg.log_end_offset
        if end_offset < 0:
            self._truncate_to(part, lg.high_watermark, "leader has no offset for our epoch")
            return True
        if leader_epoch < 0:
            self._truncate_to(part, min(end_offset, leo), "leader answered no epoch")
            return True
        local_epoch, local_end = lg.leader_epoch_cache.end_offset_for(leader_epoch, leo)
        if local_epoch < 0:
            self._truncate_to(part, min(end_offset, leo), "no local epoch at or below the leader's")
            return True
        if local_epoch != leader_epoch:
            self._truncate_to(part, min(local_end, leo), f"epoch {local_epoch} ends at {local_end}")
            return False
        self._truncate_to(part, min(local_end, end_offset, leo), f"epoch {leader_epoch} ends at {end_offset}")
        return True

    def _truncate_to(self, part, offset: int, why: str) -> None:
        lg = part.log
        cache = lg.leader_epoch_cache
        if offset < lg.log_end_offset:
            log.info(
                "%s-%d: truncating from %d to %d (%s)", part.tp[0], part.tp[1], lg.log_end_offset, offset, why
            )
        elif cache.entries and cache.entries[-1][1] >= lg.log_end_offset:
            log.info(
                "%s-%d: dropping leader epoch %d, which starts at the log end %d with no records (%s)",
                part.tp[0],
                part.tp[1],
                cache.latest_epoch,
                lg.log_end_offset,
                why,
            )
        # Log.truncate_to also drops epoch entries at the log end when nothing is cut
        lg.truncate_to(offset)

    # ------------------------------------------------------------------ fetch
    async def _fetch_once(self, link: BrokerLink) -> None:
        ready = {tp: p for tp, p in self.partitions.items() if tp not in self.truncating}
        quota = self.rm.follower_quota
        # shouldFollowerThrottle: an out-of-sync throttled partition is left out of the fetch
        # while the follower's replication quota is exceeded (the session forgets it meanwhile)
        throttled = [tp for tp in ready if tp not in self.in_sync and quota.is_throttled(*tp)]
        if throttled and quota.exceeded():
            for tp in throttled:
                del ready[tp]
        want = {}
        for tp, part in ready.items():
            lg = part.log
            latest = lg.leader_epoch_cache.latest_epoch
            want[tp] = (
                part.leader_epoch,
                lg.log_end_offset,
                latest if latest is not None else -1,
                lg.log_start_offset,
                self.partition_max,
            )
        session = self.session
        send, forget = session.build(want)
        if not want and not forget:
            # AbstractFetcherThread.maybeFetch: no fetch to send, back off replica.fetch.backoff.ms
            await asyncio.sleep(self.backoff)
            return
        topics: dict[str, list] = {}
        for tp in send:
            leader_epoch, offset, last_epoch, log_start, max_bytes = want[tp]
            topics.setdefault(tp[0], []).append(
                FetchPartition(
                    partition=tp[1],
                    current_leader_epoch=leader_epoch,
                    fetch_offset=offset,
                    last_fetched_epoch=last_epoch,
                    log_start_offset=log_start,
                    partition_max_bytes=max_bytes,
                )
            )
        forgotten: dict[str, list] = {}
        for t, p in forget:
            forgotten.setdefault(t, []).append(p)
        req = FetchRequest(
            replica_id=self.rm.node_id,
            max_wait_ms=self.max_wait,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=0,
            session_id=session.session_id,
            session_epoch=session.epoch,
            topics=[FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()],
            rack_id="",
        )
        try:
            resp = await link.request(1, FETCH_VERSION, req)
        except BaseException:
            session.handle_error()
            raise
        got = [(rt.topic, pd.partition_index) for rt in resp.responses for pd in rt.partitions]
        had = session.session_id
        if session.handle_response(resp.error_code, resp.session_id, got):
            if session.session_id not in (had, 0):
                log.info("fetcher from broker %d: fetch session %d", self.leader_id, session.session_id)
        else:
            if resp.error_code in (
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
            ):
                # the leader lost or moved past our session: the next fetch (at once) is full
                log.info("fetch from broker %d: %s", self.leader_id, ErrorCode(resp.error_code).name)
                return
            if resp.error_code:
                log.info("fetch from broker %d: %s", self.leader_id, ErrorCode(resp.error_code).name)
            else:
                log.info(
                    "fetch from broker %d: a response that does not fit the fetch session", self.leader_id
                )
            await asyncio.sleep(self.backoff)
            return
        backoff = False
        for rt in resp.responses:
            for pd in rt.partitions:
                tp = (rt.topic, pd.partition_index)
                part = self.partitions.get(tp)
                if part is None or tp in self.truncating or tp not in ready:
                    continue
                if pd.diverging_epoch is not None and pd.diverging_epoch.epoch >= 0:
                    # truncate on the fetch response (AbstractFetcherThread.truncateOnFetchResponse)
                    before = (part.log.log_end_offset, part.log.leader_epoch_cache.latest_epoch)
                    if not self._apply_epoch_end(
                        part, pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset
                    ):
                        self.truncating.add(tp)
                    if (part.log.log_end_offset, part.log.leader_epoch_cache.latest_epoch) == before:
                        backoff = True  # no progress: back off, never a hot loop
                    continue
                if pd.error_code:
                    backoff |= self._fetch_error(part, pd)
                    continue
                self._process(part, pd)
                if part.log.log_end_offset >= pd.high_watermark:
                    self.in_sync.add(tp)
                else:
                    self.in_sync.discard(tp)
        if backoff:
            await asyncio.sleep(self.backoff)

    def _process(self, part, pd) -> None:
        """ReplicaFetcherThread.processPartitionData."""
        lg = part.log
        data = pd.records
        if data:
            view = memoryview(data)
            leo = lg.log_end_offset
            # skip whole batches we already hold (a response may start inside what we have)
            start = 0
            try:
                for b in R.iter_batches(view):
                    if b.last_offset >= leo:
                        break
                    start = b.end
            except FormatError as exc:
                log.warning("%s-%d: undecodable fetch data: %s", part.tp[0], part.tp[1], exc)
                return
            if start < len(view):
                try:
                    if lg.log_end_offset == 0 and lg.size == 0:
                        first = next(iter(R.iter_batches(view[start:])), None)
                        if first is not None and first.base_offset > 0:
                            lg.truncate_fully_and_start_at(first.base_offset)
                    lg.append_as_follower(view[start:])
                    # ReplicaFetcherThread.processPartitionData: updateReplicationBytesIn(records.sizeInBytes)
                    self.rm.broker.metrics.topics.all.replication_bytes_in += len(view)
                except FormatError as exc:
                    log.warning("%s-%d: follower append failed: %s", part.tp[0], part.tp[1], exc)
                    self.truncating.add(part.tp)
                    return
                except OSError as exc:
                    # a KafkaStorageException: the dir goes offline and its fetchers stop
                    # (ReplicaManager.handleLogDirFailure)
                    self.rm.broker.report_log_error(lg, "appending records to", exc)
                    self.remove(part.tp)
                    return
        quota = self.rm.follower_quota
        if quota.is_throttled(*part.tp):
            # in sync or not: all throttled replication counts against the quota
            quota.record(len(data) if data else 0)
        lg.update_high_watermark(min(pd.high_watermark, lg.log_end_offset))
        if pd.log_start_offset > lg.log_start_offset and pd.log_start_offset <= lg.high_watermark:
            try:
                lg.increment_log_start_offset(pd.log_start_offset)
            except Exception as exc:  # noqa: BLE001 (a follower keeps fetching whatever this says)
                log.info("%s-%d: log start offset not moved: %s", part.tp[0], part.tp[1], exc)
        self.rm.broker.wake(part.tp)

    def _fetch_error(self, part, pd) -> bool:
        code = pd.error_code
        lg = part.log
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            leo = lg.log_end_offset
            if pd.log_start_offset >= 0 and leo < pd.log_start_offset:
                log.info(
                    "%s-%d: behind the leader's log start %d: starting there",
                    part.tp[0],
                    part.tp[1],
                    pd.log_start_offset,
                )
                lg.truncate_fully_and_start_at(pd.log_start_offset)
            else:
                self.truncating.add(part.tp)
            return False
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            # our epoch is old: wait for the next LeaderAndIsr
            self.remove(part.tp)
            return False
        return True
