"""The generated protocol package imports a message module on first use, and its index agrees with the classes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kafkatool.protocol.generated as pgen
from kafkatool.protocol.apis import API_BY_KEY, API_BY_NAME

REPO = Path(__file__).resolve().parents[2]


def _modules_after(code: str) -> list[str]:
    """The protocol.generated modules a fresh interpreter holds after running ``code``."""
    probe = (
        code
        + "\nimport json, sys\n"
        + "print(json.dumps(sorted(m.rsplit('.', 1)[1] for m in sys.modules"
        + " if m.startswith('kafkatool.protocol.generated.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_api_table_imports_no_message_module():
    assert _modules_after("import kafkatool.protocol.apis") == []


def test_decoding_a_request_imports_its_api_alone():
    code = (
        "from kafkatool.protocol.framing import encode_request, parse_request\n"
        "from kafkatool.protocol.generated import FindCoordinatorRequest\n"
        "frame = encode_request(10, 4, 1, 'c', FindCoordinatorRequest(key_type=0, coordinator_keys=['g']))\n"
        "header, body = parse_request(frame[4:])\n"
        "assert body.coordinator_keys == ['g'], body\n"
    )
    # framing answers unsupported ApiVersions requests itself: that response class is its own import
    assert _modules_after(code) == ["api_versions_response", "find_coordinator_request"]


def test_import_forms_resolve_one_module():
    code = (
        "from kafkatool.protocol.generated import FetchRequest\n"
        "import kafkatool.protocol.generated as G\n"
        "from kafkatool.protocol.generated.produce_request import PartitionProduceData\n"
        "from kafkatool.protocol.generated import offset_fetch_response as R\n"
        "assert G.FetchRequest is FetchRequest and FetchRequest.NAME == 'FetchRequest'\n"
        "assert R.OffsetFetchResponse is G.OffsetFetchResponse\n"
        "assert PartitionProduceData.NAME == 'PartitionProduceData'\n"
    )
    assert _modules_after(code) == ["fetch_request", "offset_fetch_response", "produce_request"]


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchRequest"):
        pgen.NoSuchRequest  # noqa: B018
    with pytest.raises(ImportError):
        from kafkatool.protocol.generated import NoSuchRequest  # noqa: F401


def test_index_agrees_with_the_classes():
    assert len(API_BY_KEY) == len(pgen.API_INDEX) >= 80
    assert set(pgen.LISTENERS) == set(API_BY_KEY)
    for key, info in API_BY_KEY.items():
        req, resp = info.request, info.response
        assert req is getattr(pgen, f"{info.name}Request") and resp is getattr(pgen, f"{info.name}Response")
        assert req.API_KEY == resp.API_KEY == key
        assert (info.min_version, info.max_version) == req.VALID_VERSIONS
        flex = req.FLEXIBLE_VERSIONS
        assert info.flexible_from == (flex[0] if flex else None)
        assert info.latest_version_unstable == bool(getattr(req, "LATEST_VERSION_UNSTABLE", False))
        assert info.listeners == pgen.LISTENERS[key]
        assert API_BY_NAME[info.name] is info
        assert pgen.APIS[key] == (info.name, req, resp)
    # every class the package names resolves, to a class of that name
    for name in pgen.__all__:
        obj = getattr(pgen, name)
        assert getattr(obj, "NAME", None) == name or name in ("API_INDEX", "APIS", "LISTENERS")


def test_classes_are_kept_after_the_first_read():
    info = API_BY_KEY[API_BY_NAME["Fetch"].key]
    first = info.request
    # the decode path reads a plain attribute from then on: the class sits in the instance dict
    assert vars(info)["request"] is first is info.request
    assert vars(pgen)["FetchRequest"] is first
