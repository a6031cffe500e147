import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("KAFKATOOL_SHARED", REPO.parent / "shared"))
CLIENT_BATCHES = SHARED / "fixtures" / "client-batches"


@pytest.fixture(scope="session")
def client_batches_dir() -> Path:
    if not CLIENT_BATCHES.is_dir():
        pytest.skip(f"client batch captures not found at {CLIENT_BATCHES}")
    return CLIENT_BATCHES
