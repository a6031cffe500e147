"""Replication's cost, measured in one run: three brokers through ZooKeeper with replication
factor 3 and acks=all against one broker with acks=1, same machine, same loads.

Run standalone (opt-in, not part of pytest)::

    python bench/bench_cluster.py [--records 1000000] [--rounds 5] [--seconds 5] [--jepsen 0]
    python bench/bench_cluster.py --quick      # 200 MB, one round

Loads (bench_broker's own, so the figures compare with its table):

* produce with librdkafka (confluent-kafka, default batching), 1 KiB records: MB/s;
* produce latency p50/p99 at 1,000 records/s (one record per request, one connection);
* failover: the leader of a replication-factor-3 partition is killed with SIGKILL under an
  idempotent acks=all producer; seconds until the new leader is in the partition state
  (bounded below by zookeeper.session.timeout.ms, 6 s here) and until producing resumes.

The single broker and the cluster are both up for the whole run and the produce runs
alternate between them, each round to a new topic deleted afterwards; the throughput
ratio is that of the medians over the rounds (see ``run`` for why).  It prints each figure
and the ratio cluster/single (target: throughput >= 0.5, p99 <= 5 ms
at 1,000 msg/s), and where the CPU went (``cpu_note``): the brokers' CPU per GB and how much
of it the kernel's (each byte is received and written by all three, sent twice), the
client's, and the most the machine's cores allow with the brokers' own (user) CPU at zero,
which bounds the ratio whatever the broker's code does.  ``--jepsen SECONDS`` also runs the Jepsen-style checker
(tests/cluster/jepsen.py) for that long and prints its report.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_broker  # noqa: E402
from bench_broker import Target, latency, produce_librdkafka, start_ours  # noqa: E402
from quiet import proc_cpu  # noqa: E402
from table import emit, limit_row, ratio_row  # noqa: E402

from tests.cluster.conftest import Cluster, wait_for  # noqa: E402
from tests.cluster.test_replication import Writer, create_topic, partition_state  # noqa: E402
from tests.zk.conftest import run_zookeeper  # noqa: E402

PARTITIONS = 4  # bench_broker.produce_librdkafka writes round-robin over this many partitions
#: the producer's queue.buffering.max.messages: librdkafka's default (the judged figure) and
#: bench_broker's 1,000,000 (the whole 1 GB run fits the client's queue: the loop never waits
#: and the single broker's figure is the client's enqueue rate; on this VM the client's
#: first touch of 1 GB of memory also costs it up to 50% more CPU in the slower set-up)
VARIANTS = (("default", None), ("queue1M", 1_000_000))


def set_partitions(n: int) -> None:
    global PARTITIONS
    PARTITIONS = n
    bench_broker.PARTITIONS = n  # produce_librdkafka writes round-robin over this many


def _delete(bootstrap: str, topic: str) -> None:
    """Delete a measured topic so the next round writes as much new data as this one."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until the answer arrives
    fs = admin.delete_topics([topic], request_timeout=30)
    fs[topic].result(timeout=60)


def _cpu(pids: list[int]) -> tuple[float, float]:
    """(user, system) CPU seconds of the processes ``pids`` together."""
    user = system = 0.0
    for pid in pids:
        u, s = proc_cpu(pid)
        user += u
        system += s
    return user, system


def _produce(t: Target, topic: str, records: int, broker_pids: list[int], queue: int | None) -> dict:
    c0, (u0, s0) = os.times(), _cpu(broker_pids)
    thr = produce_librdkafka(t, topic, 1024, records, queue)
    c1, (u1, s1) = os.times(), _cpu(broker_pids)
    gb = records * 1024 / 1e9
    return {
        "mb_s": thr.mb_s,
        "errors": thr.errors,
        "brokers_cpu_s_per_gb": (u1 + s1 - u0 - s0) / gb,
        "brokers_sys_s_per_gb": (s1 - s0) / gb,
        "client_cpu_s_per_gb": (c1.user + c1.system - c0.user - c0.system) / gb,
    }


def run(workdir: Path, records: int, rounds: int, seconds: float, jepsen_s: float, idle: int = 0) -> dict:
    """Both set-ups stay up for the whole run and the produce runs alternate between them
    (single, cluster, then cluster, single, ...), each to a new topic deleted afterwards: on a
    virtual machine the cost of writing a page depends on what the machine did seconds before
    (free page reporting, see bench_limits), so back-to-back blocks would measure the machine's
    history as much as the brokers."""
    (workdir / "single").mkdir()
    one = start_ours(workdir / "single")
    out: dict = {"rounds": []}
    try:
        from bench_broker import create_topic as raw_create

        raw_create(one.port, "lat", 1)
        with run_zookeeper(workdir / "zk") as zk:
            # Kafka's own fetch size (the tests' Cluster uses 64 KiB to force several fetch rounds)
            c = Cluster(
                workdir,
                zk,
                3,
                ["num.partitions=1", "replica.fetch.max.bytes=1048576", *bench_broker.overrides()],
            )
            c.start()
            try:
                create_topic(c, "lat", 1, 3, min_insync_replicas=2)
                if idle:
                    # partitions that never get a record: a follower's full fetch names every one
                    # of them each time, an incremental fetch session (KIP-227) leaves them out
                    raw_create(one.port, "idle", idle)
                    create_topic(c, "idle", idle, 3)
                    for p in range(idle):
                        wait_for(lambda p=p: len(partition_state(c, "idle", p)["isr"]) == 3, 60, "ISR")
                st = wait_for(
                    lambda: (s := partition_state(c, "lat", 0)) and len(s["isr"]) == 3 and s, 30, "ISR"
                )
                leader = c.brokers[st["leader"]]
                # librdkafka bootstraps from the leader of "lat" and finds every partition's leader
                three = Target("cluster", leader.proc, leader.port, workdir)
                pids = [b.proc.pid for b in c.brokers.values()]
                for r in range(rounds):
                    res = {}
                    for variant, queue in VARIANTS:
                        topic = f"bench{r}{variant}"
                        raw_create(one.port, topic, PARTITIONS)
                        create_topic(c, topic, PARTITIONS, 3, min_insync_replicas=2)
                        for p in range(PARTITIONS):
                            wait_for(
                                lambda p=p, t=topic: len(partition_state(c, t, p)["isr"]) == 3, 30, "ISR"
                            )
                        order = ("single", "cluster") if r % 2 == 0 else ("cluster", "single")
                        v = res[variant] = {}
                        for which in order:
                            if which == "single":
                                v["single"] = _produce(one, topic, records, [one.pid], queue)
                            else:
                                v["cluster"] = _produce(three, topic, records, pids, queue)
                        v["ratio"] = v["cluster"]["mb_s"] / v["single"]["mb_s"]
                        _delete(f"127.0.0.1:{one.port}", topic)
                        _delete(c.bootstrap, topic)
                        print(
                            f"round {r + 1} {variant}: single {v['single']['mb_s']:.1f} MB/s, "
                            f"cluster {v['cluster']['mb_s']:.1f} MB/s, ratio {v['ratio']:.2f}",
                            file=sys.stderr,
                            flush=True,
                        )
                    out["rounds"].append(res)
                lat1 = latency(one, "lat", 1000, seconds)
                lat3 = latency(three, "lat", 1000, seconds)
                out["latency"] = {
                    "single": {k: lat1.extra[k] for k in ("p50_ms", "p99_ms")},
                    "cluster": {k: lat3.extra[k] for k in ("p50_ms", "p99_ms")},
                }
                out.update(failover(c))
                c.brokers[out.pop("killed")].start(timeout=60)
                if jepsen_s > 0:
                    from tests.cluster import jepsen

                    rep = jepsen.run(
                        c,
                        topic="jepsen",
                        partitions=3,
                        seconds=jepsen_s,
                        seed=int(time.time()),
                        session_s=6.0,
                    )
                    out["jepsen"] = rep.summary()
                    out["jepsen_ok"] = rep.ok
            finally:
                c.stop()
    finally:
        one.stop()
    return out


def failover(c) -> dict:
    """The leader of a replication-factor-3 partition is killed under an idempotent acks=all
    producer: seconds to a new leader in the partition state and to the next acknowledgement."""
    create_topic(c, "failover", 1, 3, min_insync_replicas=2)
    st = wait_for(lambda: (s := partition_state(c, "failover", 0)) and len(s["isr"]) == 3 and s, 30, "ISR")
    w = Writer(c.bootstrap, "failover")
    w.start()
    wait_for(lambda: len(w.acked) > 200, 30, "acks")
    k0 = time.monotonic()
    c.brokers[st["leader"]].kill()
    wait_for(
        lambda: partition_state(c, "failover", 0)["leader"] not in (st["leader"], -1),
        60,
        "leader",
        0.05,
    )
    out = {"election_s": time.monotonic() - k0, "killed": st["leader"]}
    n = len(w.acked)
    wait_for(lambda: len(w.acked) > n, 60, "acks again", 0.02)
    out["resumed_s"] = time.monotonic() - k0
    w.stop_ev.set()
    w.join(120)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="1 KiB records per produce run (1 GB)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="alternating single/cluster produce rounds (one round's ratio swung 0.35-1.04 on this VM)",
    )
    ap.add_argument("--seconds", type=float, default=5.0, help="each latency run")
    ap.add_argument("--quick", action="store_true", help="200 MB per run, one round")
    ap.add_argument(
        "--partitions",
        type=int,
        default=PARTITIONS,
        help="of the produce topics (default 4: leaders on every broker; 1: one leader, two followers)",
    )
    ap.add_argument(
        "--jepsen", type=float, default=0.0, help="also run the Jepsen-style checker this long (s)"
    )
    ap.add_argument(
        "--idle-partitions",
        type=int,
        default=0,
        help="also hold an idle topic of this many partitions (RF 3 in the cluster): what fetch "
        "sessions save (--quick, 1000: the cluster's 37-47 MB/s without them, 58-75 with them)",
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    set_partitions(a.partitions)
    if a.quick:
        a.records, a.rounds, a.seconds = 200_000, 1, 2.0
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as d:
        res = run(Path(d), a.records, a.rounds, a.seconds, a.jepsen, a.idle_partitions)
    if a.json:
        rounds = res["rounds"]
        lat = res["latency"]["cluster"]
        emit(
            [
                replace(
                    ratio_row(
                        "cluster",
                        "produce RF 3 acks=all vs one broker (median)",
                        _median(rounds, "default", "cluster", "mb_s"),
                        "MB/s",
                        _median(rounds, "default", "single", "mb_s"),
                        "one broker",
                        0.5,
                    ),
                    note=cpu_note(rounds),
                ),
                limit_row("cluster", "RF 3 acks=all p99 @1000 msg/s", lat["p99_ms"], "ms", 5.0),
                limit_row("cluster", "failover: producing again after", res["resumed_s"], "s"),
            ]
        )
        return
    for row in table(res):
        print(row)


def cpu_note(rounds: list) -> str:
    """Where the cluster's CPU went (medians over the rounds of librdkafka's default queue) and
    what the cores allow with the brokers' kernel work and the client's CPU as measured and the
    brokers' own (user) CPU at zero: the machine's bound on this ratio, whatever the broker's
    code does.  Every process shares the machine's cores here (brokers, client, ZooKeeper)."""
    brokers = _median(rounds, "default", "cluster", "brokers_cpu_s_per_gb")
    system = _median(rounds, "default", "cluster", "brokers_sys_s_per_gb")
    client = _median(rounds, "default", "cluster", "client_cpu_s_per_gb")
    single = _median(rounds, "default", "single", "mb_s")
    cores = os.cpu_count() or 1
    text = f"CPU-s per GB: brokers {brokers:.2f} (system {system:.2f}), client {client:.2f}"
    if system + client > 0 and single:
        bound = cores / (system + client) * 1000
        text += (
            f"; {cores} cores allow at most {bound:.0f} MB/s ({bound / single:.2f} of one broker) "
            "with the brokers' user CPU at zero"
        )
    return text


def _median(rounds: list, variant: str, which: str, key: str) -> float:
    return statistics.median(r[variant][which][key] for r in rounds)


def table(res: dict) -> list[str]:
    rounds = res["rounds"]
    lat = res["latency"]
    rows = [f"{'':40s} {'single broker':>14s} {'3 brokers RF 3':>14s} {'ratio':>7s} {'target':>7s}"]
    for variant, label in (("default", "librdkafka's default queue"), ("queue1M", "1,000,000-message queue")):
        s = _median(rounds, variant, "single", "mb_s")
        c = _median(rounds, variant, "cluster", "mb_s")
        ratio = c / s if s else 0.0
        judged = variant == "default"
        mark = ("ok" if ratio >= 0.5 else "below") if judged else ""
        t = ">=0.50" if judged else ""
        rows.append(f"{'produce MB/s, ' + label:40s} {s:14.1f} {c:14.1f} {ratio:7.2f} {t:>7s} {mark}")
        rows.append(
            f"{'  rounds':40s} "
            + " ".join(
                f"{r[variant]['single']['mb_s']:.0f}/{r[variant]['cluster']['mb_s']:.0f}={r[variant]['ratio']:.2f}"
                for r in rounds
            )
        )
        for key, name in (
            ("brokers_cpu_s_per_gb", "broker cpu-s/GB, all brokers"),
            ("brokers_sys_s_per_gb", "  of which system (kernel)"),
            ("client_cpu_s_per_gb", "client cpu-s/GB"),
        ):
            a = _median(rounds, variant, "single", key)
            b = _median(rounds, variant, "cluster", key)
            rows.append(f"{'  ' + name:40s} {a:14.2f} {b:14.2f} {b / a if a else 0:7.2f}")
    rows.append(f"  {cpu_note(rounds)}")
    for k in ("p50_ms", "p99_ms"):
        a, b = lat["single"][k], lat["cluster"][k]
        t = "<=5" if k == "p99_ms" else ""
        mark = ("ok" if b <= 5 else "below") if t else ""
        rows.append(f"{'latency ' + k + ' @1000 msg/s':40s} {a:14.2f} {b:14.2f} {b / a:7.2f} {t:>7s} {mark}")
    rows.append(
        f"failover: new leader after {res['election_s']:.1f} s, producing again after {res['resumed_s']:.1f} s"
    )
    if "jepsen" in res:
        rows.append(f"jepsen: {res['jepsen']}")
    return rows


if __name__ == "__main__":
    main()
