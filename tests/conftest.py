import functools
import os
from pathlib import Path

import pytest
import typer.testing

from tests import server_logs
from tests.pycache import use_bytecode_cache

# typer's CliRunner builds the whole click command tree from the functions' signatures on
# every invoke (about 0.1 s for kafkatool's CLI); the tree does not change between invokes,
# so it is built once per app (the damage corpus alone invokes the CLI about 2,000 times)
typer.testing._get_command = functools.lru_cache(maxsize=None)(typer.testing._get_command)

REPO = Path(__file__).resolve().parent.parent
# brokers, the CLI and Spark's Python workers started by the tests read compiled modules
use_bytecode_cache()

SHARED = Path(os.environ.get("KAFKATOOL_SHARED", REPO.parent / "shared"))
CLIENT_BATCHES = SHARED / "fixtures" / "client-batches"


@pytest.fixture(scope="session")
def client_batches_dir() -> Path:
    if not CLIENT_BATCHES.is_dir():
        pytest.skip(f"client batch captures not found at {CLIENT_BATCHES}")
    return CLIENT_BATCHES


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local Spark session for the whole suite: its JVM's start costs 8-10 s, paid once by
    the first test that asks for it (the fleet scan's tests, and the cluster test that scans
    its brokers' dirs), in-process fleet scans reuse it (SparkSession.getOrCreate)."""
    # loopback only, and every scratch dir under pytest's tmp (CI runs as root with any HOME)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    tmp = tmp_path_factory.mktemp("spark")
    from kafkatool.fleet.job import make_spark

    session = make_spark(
        "local[2]",
        app_name="kafkatool-fleet-tests",
        conf={
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.local.dir": str(tmp / "local"),
            "spark.sql.warehouse.dir": str(tmp / "warehouse"),
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={tmp} -Dderby.system.home={tmp}",
        },
    )
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _no_client_security_left_over():
    """A command run in-process with --command-config sets TLS/SASL for every connection the
    process opens afterwards (assign/kafka_client.use_client_security): no test inherits it."""
    yield
    from kafkatool.assign import kafka_client

    kafka_client.use_client_security(None)


def pytest_collection_modifyitems(config, items):
    """Soak, fault and bench-sized tests (``@pytest.mark.slow``) run only when asked for with
    ``-m slow`` (or any -m expression naming slow): the default suite stays fast."""
    if "slow" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="opt-in: pytest -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


_LOG_MARK = pytest.StashKey[tuple]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Where each broker's log stands before the test's fixtures run (tests/server_logs.py)."""
    item.stash[_LOG_MARK] = server_logs.mark()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed setup, test or teardown carries what every broker logged during the test: a CI
    flake's broker side reaches the CI output instead of staying in a lost temporary dir."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for title, text in server_logs.logged_since(item.stash.get(_LOG_MARK, (0, {}))):
            rep.sections.append((title, text))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    count = server_logs.known()
    yield
    server_logs.note_started_since(count)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """A broker a test body started and did not stop (a failed assertion before its stop, no
    finally) is killed when its module's tests and fixtures are done, not left serving for the
    rest of the session."""
    yield
    if nextitem is None or getattr(nextitem, "module", None) is not getattr(item, "module", None):
        server_logs.kill_leftovers()


def pytest_sessionfinish(session, exitstatus):
    server_logs.kill_all()
