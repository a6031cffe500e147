"""A real ``kafkatool serve`` subprocess per test module (or per test where restarts matter)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import server_logs
from tests.broker.wire import WireClient
from tests.ports import free_port

REPO = Path(__file__).resolve().parents[2]


def rss_mb(pid: int) -> float:
    """A process's resident memory (VmRSS) in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def tcp_sockets(pid: int, *where: str) -> list[tuple[str, str]]:
    """The TCP sockets process ``pid`` holds among those ``ss`` shows for ``where`` (ss's own
    state and address filter words), each as its line and its tcp_info line (``lastsnd``,
    ``lastrcv``, ... when ss has one): what the kernel knows of a broker's connections, which
    a stopped process cannot change."""
    out = subprocess.run(
        ["ss", "-Htinp", *where], capture_output=True, text=True, timeout=10, check=True
    ).stdout
    found: list[list[str]] = []
    for line in out.splitlines():
        if line[:1].isspace() and found:  # the tcp_info line of the socket above
            found[-1][1] = line.strip()
        else:
            found.append([line.strip(), ""])
    return [(head, info) for head, info in found if f"pid={pid}," in head]


class BrokerProcess:
    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        extra: list[str] | None = None,
        read_only: bool = False,
        host: str = "127.0.0.1",
        prefix: list[str] | None = None,
    ):
        #: ``host``/``prefix``: a broker in a network namespace (``ip netns exec NS``) at its address
        self.host = host
        self.prefix = list(prefix or [])
        self.data_dir = Path(data_dir)
        #: a port free_port() chose may be taken before the broker binds it: then it picks another
        self._auto_port = port is None
        self.port = port or free_port()
        self.extra = list(extra or [])
        self.read_only = read_only
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        return self.spawn().await_ready(timeout)

    def spawn(self) -> BrokerProcess:
        """Start the process; :meth:`await_ready` waits for it (a cluster starts its brokers
        side by side)."""
        cmd = [
            sys.executable,
            "-m",
            "kafkatool",
            "serve",
            "--no-banner",
            "-o",
            f"listeners=PLAINTEXT://{self.host}:{self.port}",
            "-o",
            f"log.dirs={self.data_dir}",
        ]
        for e in self.extra:
            cmd += ["-o", e]
        if self.read_only:
            cmd.append("--read-only")
        cmd = self.prefix + cmd
        self._log = open(self.log_path, "ab")
        self._log_start = self._log.tell()  # this run's lines start here
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, stdout=self._log, stderr=self._log, start_new_session=True
        )
        server_logs.register(self)  # a failing test's report shows this log (tests/conftest.py)
        return self

    def await_ready(self, timeout: float = 20.0) -> BrokerProcess:
        deadline = time.monotonic() + timeout
        rebinds = 0
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                this_run = self.log_path.read_bytes()[self._log_start :]
                if self._auto_port and rebinds < 3 and b"address already in use" in this_run:
                    # another process took the port between free_port() and the bind
                    rebinds += 1
                    self._log.close()
                    self.port = free_port()
                    self.spawn()
                    continue
                raise RuntimeError(f"broker exited with {self.proc.returncode}: {self.log_text()[-3000:]}")
            try:
                with WireClient(self.bootstrap, timeout=2) as c:
                    c.api_versions()
                return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"broker did not answer ApiVersions within {timeout}s: {self.log_text()[-3000:]}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait (clean shutdown)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGQUIT)  # every thread's stack into the log
                time.sleep(0.5)
                self.kill()
                raise AssertionError(
                    f"broker did not stop within {timeout}s; its last log lines:\n{self.log_text()[-6000:]}"
                ) from None
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        if self.proc is not None:
            self._log.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", extra=["num.partitions=1"]).start()
    yield b
    b.stop()


@pytest.fixture
def make_broker(tmp_path):
    started = []

    def make(data_dir=None, **kw) -> BrokerProcess:
        b = BrokerProcess(data_dir or tmp_path / "data", **kw)
        started.append(b)
        return b

    yield make
    for b in started:
        b.kill()
