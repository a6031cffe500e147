"""The shared compat matrix (/work/shared/compat) against a three-broker ZooKeeper-mode cluster with
replication-factor-3 topics (issue 13).

The harness is read-only and creates its topics with replication factor 1, so this runner adds the
cluster and the replication around it:

- a real ZooKeeper (tests/zk/conftest.run_zookeeper) and three ``kafkatool serve`` brokers
  (tests/cluster/conftest.Cluster) with num.partitions=1, default.replication.factor=3,
  min.insync.replicas=2, and the offsets and transaction topics at replication factor 3
  (transaction.state.log.min.isr=2);
- ``run.py --bootstrap <the three brokers>`` with compat_cluster_rf.py copied as
  ``sitecustomize.py`` into a temp dir put first on PYTHONPATH (the harness passes its environment
  to every cell): confluent-kafka's and kafka-python's create_topics send replication factor N
  (--replication-factor, default 3) where the adapters ask for 1; kcat's adapter creates its topics
  with confluent-kafka's helper, so the same wrapper covers it. A preflight checks the harness's
  interpreter loads it;
- after the run, at a quiet point (every partition's ISR back to its full replica set): every topic
  the wrapper created (its log, KAFKATOOL_COMPAT_RF_LOG) and every other ``hx-`` topic and internal
  topic in ZooKeeper has N distinct replicas in its assignment and partition state;
  ``kafkatool zk check`` reports no findings; ``kafkatool fleet scan`` over the three brokers'
  log dirs reports no divergence (nor any finding at warning or above).

It prints the harness's matrix and a summary and exits 1 when a cell or a check fails (run.py
itself always exits 0), 2 when something could not run.

    python3 tests/compat_cluster/run_compat_cluster.py [--work DIR] [--replication-factor N]
        [--broker-setting KEY=VALUE ...] [--skip-fleet-scan]
        [run.py options: --clients a,b --scenarios x,y --timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from tests.cluster.conftest import Cluster  # noqa: E402
from tests.compat_harness import (  # noqa: E402
    HARNESS,
    NICE,
    inject_sitecustomize,
    probe_injection,
    run_py,
    summarize,
)
from tests.zk.conftest import run_zookeeper  # noqa: E402

BROKERS = 3
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def broker_settings(rf: int, internal_partitions: int, extra: list[str]) -> list[str]:
    """The brokers' settings (the Cluster helper adds broker.id, zookeeper.connect, a 6 s session,
    replica.lag.time.max.ms=10000 and replica.fetch.max.bytes=65536; later settings win)."""
    return [
        "num.partitions=1",
        f"default.replication.factor={rf}",
        f"min.insync.replicas={min(2, rf)}",
        f"offsets.topic.replication.factor={rf}",
        f"offsets.topic.num.partitions={internal_partitions}",
        f"transaction.state.log.replication.factor={rf}",
        f"transaction.state.log.min.isr={min(2, rf)}",
        f"transaction.state.log.num.partitions={internal_partitions}",
        # Kafka's default (the Cluster helper's 64 KiB forces several fetch rounds in the tests)
        "replica.fetch.max.bytes=1048576",
        *extra,
    ]


def required_internal_topics(harness_args: list[str]) -> list[str]:
    """The internal topics the selected scenarios make the brokers create."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--scenarios", default=None)
    scenarios = p.parse_known_args(harness_args)[0].scenarios
    chosen = None if scenarios is None else {s.strip() for s in scenarios.split(",")}
    need = []
    if chosen is None or "group" in chosen:
        need.append("__consumer_offsets")
    if chosen is None or "transactions" in chosen:
        need.append("__transaction_state")
    return need


def injection_env(work: Path, rf: int) -> dict[str, str]:
    """The environment that carries the replication factor into the harness's cells."""
    rf_log = work / "created_topics.jsonl"
    rf_log.unlink(missing_ok=True)
    return inject_sitecustomize(work, HERE / "compat_cluster_rf.py") | {
        "KAFKATOOL_COMPAT_REPLICATION_FACTOR": str(rf),
        "KAFKATOOL_COMPAT_RF_LOG": str(rf_log),
    }


def check_injection(env: dict[str, str], rf: int) -> None:
    """The harness's interpreter loads our sitecustomize, with our factor, and wraps both
    libraries' create_topics; the adapters create topics only the ways the wrapper knows."""
    want = ["confluent_kafka.admin.AdminClient.create_topics", "kafka.KafkaAdminClient.create_topics"]
    got_rf, wrapped = probe_injection(env, ["RF", "WRAPPED"], "the replication-factor injection")
    if sorted(wrapped) != sorted(want):
        raise SystemExit(f"the injection is not loaded as expected: it wrapped {wrapped}")
    if got_rf != rf:
        raise SystemExit(f"the injection substitutes replication factor {got_rf}, not {rf}")
    sources = {n: (HARNESS / n).read_text() for n in ("c_confluent.py", "c_kafkapython.py", "c_kcat.py")}
    if (
        "create_topics(" not in sources["c_confluent.py"]
        or "create_topics(" not in sources["c_kafkapython.py"]
    ):
        raise SystemExit("an adapter no longer creates its topics with create_topics: check the wrapper")
    if "c_confluent.create_topic(" not in sources["c_kcat.py"] or "create_topics(" in sources["c_kcat.py"]:
        raise SystemExit(
            "c_kcat.py no longer creates its topics with c_confluent's helper: check the wrapper"
        )


def zk_topics(cluster: Cluster) -> dict[str, dict]:
    """{topic: {"replicas": {partition: [broker ids]}, "state": {partition: state or None}}}."""
    k = cluster.kazoo()
    try:
        out = {}
        for t in k.get_children("/brokers/topics"):
            try:
                assignment = json.loads(k.get(f"/brokers/topics/{t}")[0])["partitions"]
            except Exception:  # noqa: BLE001 - a topic being deleted
                continue
            state = {}
            for p in assignment:
                try:
                    state[p] = json.loads(k.get(f"/brokers/topics/{t}/partitions/{p}/state")[0])
                except Exception:  # noqa: BLE001
                    state[p] = None
            out[t] = {
                "replicas": assignment,
                "state": state,
                "deleting": k.exists(f"/admin/delete_topics/{t}") is not None,
            }
        return out
    finally:
        k.stop()
        k.close()


def not_caught_up(topics: dict[str, dict]) -> list[str]:
    """Partitions whose ISR is not their whole replica set (or without a live leader)."""
    lagging = []
    for t, d in topics.items():
        if d["deleting"]:
            lagging.append(f"{t} (being deleted)")
            continue
        for p, replicas in d["replicas"].items():
            st = d["state"][p]
            if st is None or st.get("leader", -1) < 0 or sorted(st.get("isr", [])) != sorted(replicas):
                lagging.append(f"{t}-{p}: replicas {replicas} state {st}")
    return lagging


def wait_quiet(cluster: Cluster, timeout: float) -> tuple[dict[str, dict], list[str]]:
    """Wait until every partition's ISR is its whole replica set and no deletion is pending."""
    deadline = time.monotonic() + timeout
    while True:
        topics = zk_topics(cluster)
        lagging = not_caught_up(topics)
        if not lagging or time.monotonic() > deadline:
            return topics, lagging
        time.sleep(1.0)


def created_topics(rf_log: Path) -> list[dict]:
    if not rf_log.exists():
        return []
    return [json.loads(line) for line in rf_log.read_text().splitlines() if line.strip()]


def check_replication(
    topics: dict[str, dict], created: list[dict], rf: int, required_internal: list[str]
) -> tuple[list[str], dict]:
    """Every topic the wrapper created (unless the harness deleted it: the delete_topic cells),
    every other harness (``hx-``) topic and the internal topics have ``rf`` distinct replicas per
    partition in their assignment and their partition state's ISR; ``required_internal`` must
    exist (the cells that use them ran)."""
    problems = []
    stats = {"created": len(created), "checked": 0, "deleted_by_harness": 0, "partitions": 0}
    for c in created:
        if c["sent"] != rf:
            problems.append(f"{c['topic']}: the wrapper sent replication factor {c['sent']}, not {rf}")
        if c["topic"] not in topics:
            if c["topic"].startswith("hx-delete-topic-"):
                stats["deleted_by_harness"] += 1
            else:
                problems.append(f"{c['topic']}: created by the harness but not in ZooKeeper")
    names = {c["topic"] for c in created}
    for t, d in sorted(topics.items()):
        if not (t in names or t.startswith("hx-") or t in INTERNAL_TOPICS):
            continue
        if t.startswith("hx-") and t not in names:
            problems.append(f"{t}: a harness topic the wrapper did not see being created")
        stats["checked"] += 1
        for p, replicas in sorted(d["replicas"].items(), key=lambda kv: int(kv[0])):
            stats["partitions"] += 1
            st = d["state"][p] or {}
            if len(set(replicas)) != rf or len(replicas) != rf:
                problems.append(f"{t}-{p}: replicas {replicas}, want {rf} distinct brokers")
            elif sorted(st.get("isr", [])) != sorted(replicas):
                problems.append(f"{t}-{p}: ISR {st.get('isr')} is not the replica set {replicas}")
    for t in required_internal:
        if t not in topics:
            problems.append(f"{t}: not created (the matrix's group/transactions cells should have)")
    return problems, stats


def kafkatool(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [*NICE, sys.executable, "-m", "kafkatool", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def zk_check(connect: str) -> tuple[bool, str]:
    r = kafkatool("zk", "check", "--zookeeper", connect, "--timeout", "20", timeout=180)
    return r.returncode == 0, f"exit {r.returncode}\n{(r.stdout + r.stderr).strip()[-3000:]}"


def fleet_scan(log_dirs: list[Path], out: Path) -> tuple[bool, str, float]:
    """The Spark scan of the three log dirs (read-only; the brokers keep running, nothing is
    produced): no divergence and no finding at warning or above."""
    t0 = time.monotonic()
    r = kafkatool("fleet", "scan", "--json", "--master", "local[2]", *map(str, log_dirs), timeout=1800)
    secs = time.monotonic() - t0
    out.write_text(r.stdout)
    (out.parent / "fleet_scan.stderr").write_text(r.stderr)
    rows = []
    for line in r.stdout.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    divergences = [x for x in rows if x.get("type") == "divergence"]
    bad = [x for x in rows if x.get("type") == "finding" and x.get("severity") not in ("info",)]
    summary = next((x for x in rows if x.get("type") == "summary"), None)
    lines = [
        f"exit {r.returncode}; {len(divergences)} divergence(s), {len(bad)} finding(s) at warning or above"
    ]
    lines += [f"  divergence {json.dumps(d)[:400]}" for d in divergences[:10]]
    lines += [f"  finding {json.dumps(f)[:400]}" for f in bad[:10]]
    if summary is not None:
        lines.append(f"  summary {json.dumps(summary)[:1500]}")
    if r.returncode not in (0, 1):
        lines.append(r.stderr.strip()[-2000:])
    return r.returncode == 0 and not divergences and not bad, "\n".join(lines), secs


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Other options go to run.py (--clients, --scenarios, --timeout).",
    )
    ap.add_argument("--work", type=Path, default=None, help="ZooKeeper and broker data, results, logs")
    ap.add_argument(
        "--replication-factor",
        type=int,
        default=int(os.environ.get("KAFKATOOL_COMPAT_REPLICATION_FACTOR") or 3),
        help="replication factor of the harness's topics (env KAFKATOOL_COMPAT_REPLICATION_FACTOR; 1..3)",
    )
    ap.add_argument(
        "--internal-partitions",
        type=int,
        default=3,
        help="partitions of __consumer_offsets and __transaction_state (Kafka's 50 is slow on 2 cores)",
    )
    ap.add_argument(
        "--broker-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another server.properties setting for all three brokers (repeatable)",
    )
    ap.add_argument("--quiet-timeout", type=float, default=120.0, help="seconds to wait for full ISRs")
    ap.add_argument("--skip-fleet-scan", action="store_true", help="no Spark fleet scan at the end")
    args, harness_args = ap.parse_known_args()
    rf = args.replication_factor
    if not 1 <= rf <= BROKERS:
        ap.error(f"--replication-factor must be 1..{BROKERS}")
    work = (args.work or Path(tempfile.mkdtemp(prefix="compat-cluster-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKATOOL_COMPAT_")}
    env |= injection_env(work, rf)
    check_injection(env, rf)
    out = work / "matrix.json"
    out.unlink(missing_ok=True)
    t_start = time.monotonic()
    checks: dict[str, tuple[bool, str]] = {}
    with run_zookeeper(work / "zk") as zk:
        cluster = Cluster(
            work, zk, BROKERS, broker_settings(rf, args.internal_partitions, args.broker_setting)
        )
        try:
            cluster.start()
            bootstrap = ",".join(b.bootstrap for b in cluster.brokers.values())
            print(f"cluster: ZooKeeper {cluster.connect}, brokers {bootstrap}", flush=True)
            cmd = run_py(bootstrap, out, work / "logs", harness_args)
            print("$", " ".join(cmd), flush=True)
            t_matrix = time.monotonic()
            rc = subprocess.run(cmd, env=env, timeout=3 * 3600).returncode
            matrix_s = time.monotonic() - t_matrix
            dead = [i for i, b in cluster.brokers.items() if not b.alive()]
            if dead:
                checks["brokers alive"] = (False, f"broker(s) {dead} exited during the run")
            topics, lagging = wait_quiet(cluster, args.quiet_timeout)
            checks["quiet point"] = (
                not lagging,
                "every partition's ISR is its replica set"
                if not lagging
                else f"{len(lagging)} partition(s) not caught up after {args.quiet_timeout:.0f} s: "
                + "; ".join(lagging[:10]),
            )
            problems, stats = check_replication(
                topics,
                created_topics(work / "created_topics.jsonl"),
                rf,
                required_internal_topics(harness_args),
            )
            checks[f"replication factor {rf}"] = (
                not problems,
                f"{stats['created']} topic(s) created through the wrapper "
                f"({stats['deleted_by_harness']} deleted by the delete_topic cells); "
                f"{stats['checked']} topic(s), {stats['partitions']} partition(s) checked in ZooKeeper"
                + "".join(f"\n  {p}" for p in problems[:20]),
            )
            checks["zk check"] = zk_check(cluster.connect)
            if not args.skip_fleet_scan:
                ok, text, secs = fleet_scan(
                    [b.data_dir for b in cluster.brokers.values()], work / "fleet_scan.jsonl"
                )
                checks["fleet scan"] = (ok, f"{text}\n  ({secs:.0f} s)")
        finally:
            cluster.stop()
    if rc != 0 or not out.exists():
        print(f"run.py exited {rc}; no result in {out}")
        return 2
    counts, failed = summarize(json.loads(out.read_text()))
    print(
        f"\n{BROKERS} brokers, replication factor {rf}: ok={counts['ok']} fail={counts['fail']} "
        f"n/a={counts['n/a']}  (matrix {matrix_s:.0f} s, whole run {time.monotonic() - t_start:.0f} s)"
    )
    for line in failed:
        print("  FAIL", line)
    for name, (ok, text) in checks.items():
        print(f"{name}: {'ok' if ok else 'FAIL'}: {text}")
    print(
        f"results {out}, per-cell logs {work / 'logs'}, broker logs "
        + ", ".join(str(b.log_path) for b in cluster.brokers.values())
    )
    return 1 if failed or not all(ok for ok, _ in checks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
