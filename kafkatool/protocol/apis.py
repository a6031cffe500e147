"""The API version table: key -> name, version range, flexible-from, message classes."""

from __future__ import annotations

from dataclasses import dataclass

from kafkatool.formats.schema import Message
from kafkatool.protocol.generated import APIS, LISTENERS

__all__ = [
    "API_BY_KEY",
    "API_BY_NAME",
    "API_VERSIONS_KEY",
    "ApiInfo",
    "request_header_version",
    "response_header_version",
]

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


@dataclass(frozen=True)
class ApiInfo:
    key: int
    name: str
    min_version: int
    max_version: int
    #: first flexible version, or None when no version is flexible
    flexible_from: int | None
    request: type[Message]
    response: type[Message]
    listeners: tuple[str, ...]
    #: the schema marks the top version experimental: never advertise it
    latest_version_unstable: bool

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


def _build() -> dict[int, ApiInfo]:
    table = {}
    for key, (name, req, resp) in APIS.items():
        flex = req.FLEXIBLE_VERSIONS
        table[key] = ApiInfo(
            key=key,
            name=name,
            min_version=req.VALID_VERSIONS[0],
            max_version=req.VALID_VERSIONS[1],
            flexible_from=flex[0] if flex else None,
            request=req,
            response=resp,
            listeners=LISTENERS[key],
            latest_version_unstable=bool(getattr(req, "LATEST_VERSION_UNSTABLE", False)),
        )
    return table


API_BY_KEY: dict[int, ApiInfo] = _build()
API_BY_NAME: dict[str, ApiInfo] = {a.name: a for a in API_BY_KEY.values()}


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version for an API version (also for versions newer than we know).

    Flexible ranges are open-ended (``N+``), so a newer version of a known API
    is flexible too; that is what lets an ApiVersions v5 request be parsed.
    Unknown API keys are assumed to use header v1 (nothing better is knowable).
    """
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    info = API_BY_KEY.get(api_key)
    if info is None:
        return 1
    return 2 if info.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version; the ApiVersions response is always header v0 (KIP-511)."""
    if api_key == API_VERSIONS_KEY:
        return 0
    info = API_BY_KEY.get(api_key)
    if info is None:
        return 0
    return 1 if info.is_flexible(api_version) else 0
