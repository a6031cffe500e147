import functools
import os
from pathlib import Path

import pytest
import typer.testing

# typer's CliRunner builds the whole click command tree from the functions' signatures on
# every invoke (about 0.1 s for kafkatool's CLI); the tree does not change between invokes,
# so it is built once per app (the damage corpus alone invokes the CLI about 2,000 times)
typer.testing._get_command = functools.lru_cache(maxsize=None)(typer.testing._get_command)

REPO = Path(__file__).resolve().parent.parent

# The processes the tests start (brokers, the CLI, Spark's Python workers) read compiled
# modules from a bytecode cache outside the tree.  Under PYTHONDONTWRITEBYTECODE (set on the
# machines this project runs on) every one of them compiled about 350 modules from source
# first: a broker was ready after 1.3-1.4 s, against 0.5 s with the cache.  The prefix keeps
# __pycache__ directories out of the tree, which is what that variable is there for.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    import tempfile

    os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(
        tempfile.gettempdir(), f"kafkatool-pycache-{os.getuid()}"
    )
    del os.environ["PYTHONDONTWRITEBYTECODE"]
SHARED = Path(os.environ.get("KAFKATOOL_SHARED", REPO.parent / "shared"))
CLIENT_BATCHES = SHARED / "fixtures" / "client-batches"


@pytest.fixture(scope="session")
def client_batches_dir() -> Path:
    if not CLIENT_BATCHES.is_dir():
        pytest.skip(f"client batch captures not found at {CLIENT_BATCHES}")
    return CLIENT_BATCHES


def pytest_collection_modifyitems(config, items):
    """Soak, fault and bench-sized tests (``@pytest.mark.slow``) run only when asked for with
    ``-m slow`` (or any -m expression naming slow): the default suite stays fast."""
    if "slow" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="opt-in: pytest -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
