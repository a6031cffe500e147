"""An acks=all produce waiting for its followers holds no request bytes (handlers/produce).

A large request is received into a pooled buffer (network.FrameBuffers) that goes back to
the pool once nothing refers to it.  The wait for the in-sync replicas refers only to the
answer it will send, so requests queued behind stopped followers cost the leader no memory
per request: with the request kept alive by the wait, 32 requests of 1 MB grew the leader by
32 MB of fresh buffers.
"""

from __future__ import annotations

import os
import signal

from kafkatool.formats import records as R
from kafkatool.protocol import generated as G
from kafkatool.protocol.generated.produce_request import PartitionProduceData, TopicProduceData
from tests.broker.conftest import rss_mb
from tests.broker.wire import WireClient
from tests.cluster.conftest import wait_for
from tests.cluster.test_replication import create_topic, partition_state

REQUESTS = 32


def one_mb_request() -> G.ProduceRequest:
    value = os.urandom(1000)
    records = R.build_record_batch([R.SimpleRecord(value, None, (), 1_700_000_000_000)] * 1000)
    return G.ProduceRequest(
        acks=-1,
        timeout_ms=60_000,
        topic_data=[
            TopicProduceData(name="mem", partition_data=[PartitionProduceData(index=0, records=records)])
        ],
    )


def test_acks_all_requests_waiting_for_followers_do_not_hold_their_buffers(cluster):
    create_topic(cluster, "mem", 1, 3, min_insync_replicas=2)
    st = wait_for(
        lambda: (s := partition_state(cluster, "mem", 0)) and len(s["isr"]) == 3 and s, 20, "ISR of 3"
    )
    leader = cluster.brokers[st["leader"]]
    followers = [cluster.brokers[b] for b in st["isr"] if b != st["leader"]]
    req = one_mb_request()
    segment = leader.data_dir / "mem-0" / "00000000000000000000.log"
    with WireClient(leader.bootstrap, timeout=60) as c:
        c.request(0, 7, req)  # warms the pool: one buffer of the request's size class
        before = rss_mb(leader.proc.pid)
        size0 = segment.stat().st_size
        for f in followers:
            os.kill(f.proc.pid, signal.SIGSTOP)
        try:
            for _ in range(REQUESTS):
                c.send(0, 7, req)
            # every request appended: each now only waits for the stopped followers
            wait_for(
                lambda: (
                    segment.stat().st_size
                    >= size0 + REQUESTS * len(req.topic_data[0].partition_data[0].records)
                ),
                8,
                "the appends",
            )
            grown = int((rss_mb(leader.proc.pid) - before) * 1024 * 1024)
        finally:
            for f in followers:
                os.kill(f.proc.pid, signal.SIGCONT)
        answers = [c.recv(0, 7)[1] for _ in range(REQUESTS)]
    assert grown < REQUESTS * 1_000_000 // 2, f"the leader grew by {grown} bytes"
    codes = {a.responses[0].partition_responses[0].error_code for a in answers}
    assert codes <= {0, 20}, codes  # 20: NOT_ENOUGH_REPLICAS_AFTER_APPEND, had the ISR shrunk
