"""A deleted partition's Log leaves memory by reference counting, on a real Broker (storage in
a temp dir, no sockets): nothing the broker wires into a Log (append listeners, the roll's
flush hook) makes a reference cycle through it, so no full collection of the cyclic
collector is needed to free it, and freezing the start-up heap (gc.freeze) cannot leak the
logs of topics deleted later."""

from __future__ import annotations

import gc
import weakref

from kafkatool.broker.config import BrokerConfig
from kafkatool.broker.server import Broker


def test_a_deleted_topics_logs_and_segments_are_freed_without_the_cyclic_collector(tmp_path):
    b = Broker(BrokerConfig.load(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    b.open_storage()
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        b.create_topic("doomed", 3, {"segment.bytes": "1048576"})
        logs = [lg for (t, _), lg in b.manager.logs.items() if t == "doomed"]
        assert len(logs) == 3
        for lg in logs:
            # the broker's wiring is in place: a roll's fsync goes to the scheduler hook
            assert lg.flush_scheduler is not None and lg.listeners
            lg.roll()
        refs = [weakref.ref(lg) for lg in logs] + [weakref.ref(s) for lg in logs for s in lg.segments]
        del logs, lg
        b.delete_topic("doomed")
        alive = [r() for r in refs if r() is not None]
        assert not alive, f"held only by reference cycles: {[type(o).__name__ for o in alive]}"
    finally:
        if was:
            gc.enable()
        b.close_storage()
