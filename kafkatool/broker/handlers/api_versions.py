"""ApiVersions (18): the table of every API and version this broker fully implements."""

from __future__ import annotations

import re

from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import ApiVersionsResponse
from kafkatool.protocol.generated.api_versions_response import (
    ApiVersion,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

API_KEY = 18
MIN_VERSION, MAX_VERSION = 0, 4
#: Kafka's feature flags (v3+ tags): group.version 1 is KIP-848's consumer groups, which this
#: broker serves (ConsumerGroupHeartbeat/Describe); transaction.version stays at its absent
#: level 0 (EndTxn v5, KIP-890 part 2, is not served), so clients keep transactions v1
SUPPORTED_FEATURES = {"group.version": (0, 1)}
FINALIZED_FEATURES = {"group.version": 1}
FINALIZED_FEATURES_EPOCH = 0
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
        # KAFKA-17011: clients before v4 reject a supported feature whose min version is 0, so
        # Kafka leaves those out of v3 answers
        supported_features=[
            SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
            for n, (lo, hi) in SUPPORTED_FEATURES.items()
            if ctx.version >= 4 or lo > 0
        ],
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=[
            FinalizedFeatureKey(name=n, min_version_level=v, max_version_level=v)
            for n, v in FINALIZED_FEATURES.items()
        ],
    )


def register(router) -> None:
    router.register(API_KEY, MIN_VERSION, MAX_VERSION, handle)
