"""ApiVersions (18): the table of every API and version this broker fully implements."""

from __future__ import annotations

import re

from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import ApiVersionsResponse
from kafkatool.protocol.generated.api_versions_response import ApiVersion

API_KEY = 18
MIN_VERSION, MAX_VERSION = 0, 4
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def handle(ctx, req):
    router = ctx.broker.router
    if ctx.version >= 3 and not (
        _SOFTWARE.match(req.client_software_name or "") and _SOFTWARE.match(req.client_software_version or "")
    ):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=[])
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in router.advertised()],
        throttle_time_ms=0,
    )


def register(router) -> None:
    router.register(API_KEY, MIN_VERSION, MAX_VERSION, handle)
