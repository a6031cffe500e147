"""The job on a real standalone Spark cluster (a master and a worker on 127.0.0.1, separate
JVMs and Python workers): the kafkatool package reaches the executor as the zip built on the
fly.  Costs ~40 s of JVM start-ups, so opt-in: ``pytest -m slow tests/fleet``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ports import free_port

pytestmark = pytest.mark.slow


def _wait_for(path: Path, text: str, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise AssertionError(
        f"{text!r} not in {path} after {timeout}s:\n{path.read_text(errors='replace')[-2000:]}"
    )


def test_scan_on_a_standalone_cluster_ships_the_package(tmp_path, request):
    if "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("opt-in (two more JVMs, ~40 s): pytest -m slow tests/fleet")
    import pyspark
    from fleet.fleetgen import build_fleet

    home = Path(pyspark.__file__).parent
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp_path),
    }
    port = free_port()
    work = tmp_path / "work"
    procs = []
    try:
        master_log = tmp_path / "master.log"
        procs.append(
            subprocess.Popen(
                [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(free_port())],
                stdout=master_log.open("w"), stderr=subprocess.STDOUT, env=env,
            )
        )  # fmt: skip
        _wait_for(master_log, "I have been elected leader", 60)
        worker_log = tmp_path / "worker.log"
        procs.append(
            subprocess.Popen(
                [str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                 "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g", "--work-dir", str(work),
                 f"spark://127.0.0.1:{port}"],
                stdout=worker_log.open("w"), stderr=subprocess.STDOUT, env=env,
            )
        )  # fmt: skip
        _wait_for(worker_log, "Successfully registered with master", 60)
        f = build_fleet(tmp_path / "fleet", topics=[("t", 2, 2)], batches=6, segment_bytes=2048, damage=False)
        out = subprocess.run(
            [sys.executable, "-m", "kafkatool.fleet.job", "--master", f"spark://127.0.0.1:{port}"]
            + [str(d) for d in f.all_log_dirs()],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        objs = [json.loads(x) for x in out.stdout.splitlines()]
        assert objs[-1]["type"] == "summary" and objs[-1]["findings"] == 0 and objs[-1]["partitions"] == 2
        # the executor fetched the package zip into its app dir
        assert list(work.glob("app-*/*/kafkatool-*.zip")), sorted(str(p) for p in work.rglob("*"))[:50]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
