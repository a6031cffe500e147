"""Out of descriptors (issue 16): a broker at its open-files limit logs one line, not a traceback
per accept attempt, keeps serving the connections it has, and accepts again once descriptors
are free. A real `kafkatool serve` under a low RLIMIT_NOFILE; bounded in count and time."""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time

from tests.broker.conftest import REPO, free_port
from tests.broker.wire import WireClient

LIMIT = 96


def _limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def test_emfile_is_one_line_and_the_broker_recovers(tmp_path):
    port = free_port()
    log_path = tmp_path / "broker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkatool", "serve", "--no-banner", "-o", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "-o", f"log.dirs={tmp_path / 'data'}", "-o", "num.partitions=1"],  # fmt: skip
            cwd=REPO, stdout=log, stderr=log, preexec_fn=_limit, start_new_session=True,
        )  # fmt: skip
    socks: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with WireClient(f"127.0.0.1:{port}", timeout=2) as c:
                    c.api_versions()
                break
            except OSError:
                time.sleep(0.05)
        keeper = WireClient(f"127.0.0.1:{port}", timeout=5)
        keeper.__enter__()
        # more connections than the broker has descriptors: the kernel queues what it cannot accept
        for _ in range(LIMIT + 40):
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            socks.append(s)
        time.sleep(2.5)
        assert proc.poll() is None, "the broker died"
        # the connection it already had is still served
        assert keeper.api_versions().error_code == 0
        for s in socks:
            s.close()
        socks.clear()
        # asyncio retries accepting after a pause: this connection waits in the listen queue until
        # then, and its answer says the broker accepts again
        with WireClient(f"127.0.0.1:{port}", timeout=5) as c:
            assert c.api_versions().error_code == 0
        keeper.__exit__(None, None, None)
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        proc.wait(20)
    text = log_path.read_text(errors="replace")
    assert "out of file descriptors (EMFILE)" in text
    assert "Traceback" not in text
    assert text.count("out of file descriptors") <= 2  # one line per 10 s, not one per attempt
