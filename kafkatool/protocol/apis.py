"""The API version table: key -> name, version range, flexible-from, message classes.

The table is built from the generated package's ``API_INDEX`` (names and versions), so
importing it imports no message module: an API's request and response classes are imported
the first time ``ApiInfo.request`` / ``.response`` is read, and kept on the ApiInfo after
that (a plain attribute read from then on, as on the decode path of every request).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from kafkatool.formats.schema import Message
from kafkatool.protocol import generated
from kafkatool.protocol.generated import API_INDEX

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
    #: names of the message classes (the classes themselves: ``request`` / ``response``)
    request_name: str
    response_name: str
    listeners: tuple[str, ...]
    #: the schema marks the top version experimental: never advertise it
    latest_version_unstable: bool

    # cached_property stores the class in the instance dict, which a frozen dataclass allows
    # (it bypasses __setattr__): the first read imports the module, later reads are plain
    @cached_property
    def request(self) -> type[Message]:
        return getattr(generated, self.request_name)

    @cached_property
    def response(self) -> type[Message]:
        return getattr(generated, self.response_name)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


API_BY_KEY: dict[int, ApiInfo] = {
    key: ApiInfo(key, name, valid[0], valid[1], flex, req, resp, listeners, unstable)
    for key, (name, req, resp, valid, flex, listeners, unstable) in API_INDEX.items()
}
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
