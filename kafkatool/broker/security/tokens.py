"""Delegation tokens (KIP-48): Kafka's DelegationTokenManager(Zk), DelegationTokenCache and the
four KafkaApis handlers (CreateDelegationToken 38, Renew 39, Expire 40, Describe 41).

A token is TokenInformation (zk/codecs.DelegationTokenInfo: id, owner, requester, renewers,
issue/expiry/max times); its HMAC is never stored: HmacSHA512 of the token id keyed with
``delegation.token.secret.key`` (legacy ``delegation.token.master.key``), recomputed by every
broker that holds the same key.  Tokens are off without a key: the APIs answer
DELEGATION_TOKEN_AUTH_DISABLED.  A client logs in with SCRAM, the token id as user name, the
HMAC's base64 as password and the extension ``tokenauth=true``; the cache holds a SCRAM
credential per token and mechanism derived from that password (a random salt, the mechanism's
minimum iterations), as DelegationTokenManager.updateCache makes them.

Where tokens live (a store: ``tokens()``, ``put``, ``remove``): standalone in the embedded metadata
(``kafkatool-cluster.json``'s ``delegation_tokens``, the znode's JSON per token; a broker of
several processes pushes it to its members like every other change), in a ZooKeeper cluster
under ``/delegation_token/tokens/<tokenId>`` with a ``token_change_`` notification per change
(broker/cluster/token_store.py).  The cache follows the store: :meth:`TokenManager.sync` takes
what changed before every use.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import time

from kafkatool.broker.security import scram
from kafkatool.errors import KafkatoolError
from kafkatool.formats.uuid import random_uuid
from kafkatool.protocol.errors import ErrorCode as E
from kafkatool.zk.codecs import (
    DelegationTokenInfo,
    ZkPayloadError,
    delegation_token_from_json,
    delegation_token_json,
)

log = logging.getLogger("kafkatool.broker.security")

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41
SECRET_KEY = "delegation.token.secret.key"
SECRET_KEY_ALIAS = "delegation.token.master.key"
MAX_LIFETIME = "delegation.token.max.lifetime.ms"
EXPIRY_TIME = "delegation.token.expiry.time.ms"
EXPIRY_CHECK_INTERVAL = "delegation.token.expiry.check.interval.ms"
#: the configs of this module whose values must be at least 1 (KafkaConfig's atLeast(1))
AT_LEAST_ONE = (MAX_LIFETIME, EXPIRY_TIME, EXPIRY_CHECK_INTERVAL)
USER_TYPE = "User"
ERROR_TIMESTAMP = -1


def secret_key(config) -> str | None:
    """KafkaConfig.delegationTokenSecretKey: the key, else the legacy name's; None or empty: off."""
    value = config.get(SECRET_KEY)
    if value is None:
        value = config.get(SECRET_KEY_ALIAS)
    return value or None


def create_hmac(token_id: str, key: str) -> bytes:
    """DelegationTokenManager.createHmac: HmacSHA512 of the id's UTF-8 bytes, keyed with the
    secret's UTF-8 bytes."""
    return hmac.new(key.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def new_token_id() -> str:
    """CoreUtils.generateUuidAsBase64: a random type-4 UUID, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(random_uuid(os.urandom).raw).decode().rstrip("=")


def _now_ms() -> int:
    return int(time.time() * 1000)


class EmbeddedTokenStore:
    """Tokens in the embedded metadata: ``delegation_tokens`` (token id -> the znode's JSON
    object), saved with the metadata; a member process sees the primary's after each push."""

    def __init__(self, metadata):
        self.metadata = metadata
        #: stored tokens that do not decode, logged once each (DelegationTokenManagerZk.loadCache)
        self._refused: set[str] = set()

    def tokens(self) -> dict[str, DelegationTokenInfo]:
        out = {}
        for tid, obj in self.metadata.delegation_tokens.items():
            try:
                out[tid] = delegation_token_from_json(obj, f"{self.metadata.path}: delegation token {tid}")
            except ZkPayloadError as exc:
                if tid not in self._refused:
                    self._refused.add(tid)
                    log.error("Error while getting Token for tokenId: %s: %s", tid, exc)
        return out

    def put(self, info: DelegationTokenInfo) -> None:
        self.metadata.delegation_tokens[info.token_id] = delegation_token_json(info)
        self.metadata.save()

    def remove(self, token_id: str) -> None:
        if self.metadata.delegation_tokens.pop(token_id, None) is not None:
            self.metadata.save()


class TokenManager:
    """DelegationTokenManagerZk's rules on a store (:class:`EmbeddedTokenStore`,
    cluster/token_store.ZkTokenStore), and the DelegationTokenCache."""

    def __init__(self, config, store, *, node_id: int = -1):
        self.key = secret_key(config)
        self.max_lifetime = config.int(MAX_LIFETIME)
        self.default_renew = config.int(EXPIRY_TIME)
        self.store = store
        self.node_id = node_id
        self._synced: dict[str, DelegationTokenInfo] = {}
        self._by_hmac: dict[str, str] = {}
        self._creds: dict[tuple[str, str], scram.ScramCredential] = {}

    @property
    def enabled(self) -> bool:
        return self.key is not None

    # ------------------------------------------------------------------ the cache
    def sync(self) -> dict[str, DelegationTokenInfo]:
        """Bring the cache to the store's tokens (updateCache / removeCache of what changed)."""
        if not self.enabled:
            return {}
        current = self.store.tokens()
        for tid in [t for t in self._synced if t not in current]:
            self._remove_cached(tid)
        for tid, info in current.items():
            if self._synced.get(tid) != info:
                self._update_cached(info)
        return current

    def _update_cached(self, info: DelegationTokenInfo) -> None:
        password = base64.b64encode(create_hmac(info.token_id, self.key)).decode()
        if info.token_id not in self._synced:
            # every SCRAM mechanism (KafkaServer: "to simplify dynamic update"), new salt each time
            for mech, (_algo, iterations) in scram.MECHANISMS.items():
                self._creds[(info.token_id, mech)] = scram.new_credential(mech, password, iterations)
        self._synced[info.token_id] = info
        self._by_hmac[password] = info.token_id

    def _remove_cached(self, token_id: str) -> None:
        self._synced.pop(token_id, None)
        for mech in scram.MECHANISMS:
            self._creds.pop((token_id, mech), None)
        self._by_hmac = {h: t for h, t in self._by_hmac.items() if t != token_id}

    def credential(self, token_id: str, mechanism: str):
        """ScramServerCallbackHandler's DelegationTokenCredentialCallback: (credential, the
        owner's name, expiry timestamp) of a token, None for an unknown one."""
        tokens = self.sync()
        info = tokens.get(token_id)
        cred = self._creds.get((token_id, mechanism))
        if info is None or cred is None:
            return None
        return cred, parse_principal(info.owner)[1], info.expiry_timestamp

    def _token_for_hmac(self, mac: bytes) -> DelegationTokenInfo | None:
        tokens = self.sync()
        tid = self._by_hmac.get(base64.b64encode(bytes(mac)).decode())
        return tokens.get(tid) if tid is not None else None

    def hmac_of(self, info: DelegationTokenInfo) -> bytes:
        return create_hmac(info.token_id, self.key)

    # ------------------------------------------------------------------ the operations
    def create(
        self, owner: str, requester: str, renewers: list[str], max_lifetime_ms: int
    ) -> tuple[int, DelegationTokenInfo | None, bytes]:
        if not self.enabled:
            return E.DELEGATION_TOKEN_AUTH_DISABLED, None, b""
        token_id = new_token_id()
        issue = _now_ms()
        life = self.max_lifetime if max_lifetime_ms <= 0 else min(max_lifetime_ms, self.max_lifetime)
        max_ts = issue + life
        info = DelegationTokenInfo(
            token_id, owner, requester, list(renewers), issue, max_ts, min(max_ts, issue + self.default_renew)
        )
        self.store.put(info)
        self.sync()
        log.info("Created a delegation token: %s for owner: %s", token_id, owner)
        return E.NONE, info, self.hmac_of(info)

    def _token_to_change(self, principal: str, mac: bytes) -> tuple[int, DelegationTokenInfo | None]:
        """What renew and expire check first (DelegationTokenManager's renewToken and
        expireToken): tokens enabled, the token of ``mac`` known, ``principal`` its owner or
        a renewer; (error, None) or (NONE, the token)."""
        if not self.enabled:
            return E.DELEGATION_TOKEN_AUTH_DISABLED, None
        info = self._token_for_hmac(mac)
        if info is None:
            return E.DELEGATION_TOKEN_NOT_FOUND, None
        if not info.may_renew(principal):
            return E.DELEGATION_TOKEN_OWNER_MISMATCH, None
        return E.NONE, info

    def renew(self, principal: str, mac: bytes, renew_period_ms: int) -> tuple[int, int]:
        err, info = self._token_to_change(principal, mac)
        if info is None:
            return err, ERROR_TIMESTAMP
        now = _now_ms()
        if info.max_timestamp < now or info.expiry_timestamp < now:
            return E.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
        period = self.default_renew if renew_period_ms < 0 else renew_period_ms
        expiry = min(info.max_timestamp, now + period)
        self._put(info, expiry)
        log.info("Delegation token renewed for token: %s for owner: %s", info.token_id, info.owner)
        return E.NONE, expiry

    def expire(self, principal: str, mac: bytes, expiry_period_ms: int) -> tuple[int, int]:
        err, info = self._token_to_change(principal, mac)
        if info is None:
            return err, ERROR_TIMESTAMP
        now = _now_ms()
        if expiry_period_ms < 0:  # expire at once
            self.remove(info.token_id)
            log.info("Token expired for token: %s for owner: %s", info.token_id, info.owner)
            return E.NONE, now
        if info.max_timestamp < now or info.expiry_timestamp < now:
            return E.DELEGATION_TOKEN_EXPIRED, ERROR_TIMESTAMP
        expiry = min(info.max_timestamp, now + expiry_period_ms)
        self._put(info, expiry)
        log.info("Updated expiry time for token: %s for owner: %s", info.token_id, info.owner)
        return E.NONE, expiry

    def _put(self, info: DelegationTokenInfo, expiry: int) -> None:
        from dataclasses import replace

        self.store.put(replace(info, expiry_timestamp=expiry))
        self.sync()

    def remove(self, token_id: str) -> None:
        self.store.remove(token_id)
        self.sync()

    def expire_tokens(self) -> int:
        """DelegationTokenManager.expireTokens, the periodic check: remove every token past its
        expiry or max time; the count removed."""
        removed = 0
        for info in list(self.sync().values()):
            now = _now_ms()
            if info.max_timestamp < now or info.expiry_timestamp < now:
                log.info("Delegation token expired for token: %s for owner: %s", info.token_id, info.owner)
                self.remove(info.token_id)
                removed += 1
        return removed

    def tokens(self, eligible) -> list[tuple[DelegationTokenInfo, bytes]]:
        """getTokens(filterToken): the tokens ``eligible`` keeps, each with its HMAC, in the
        order Kafka's token cache lists them: a hash map's order of the ids put in creation
        order (its ConcurrentHashMap differs only within a bin two ids share after a resize)."""
        from kafkatool.formats.java_collections import hash_map_order, java_string_hash

        current = self.sync()
        created = sorted(current, key=lambda t: current[t].issue_timestamp)
        order = hash_map_order(created, java_string_hash)
        return [(current[t], self.hmac_of(current[t])) for t in order if eligible(current[t])]


def parse_principal(text: str) -> tuple[str, str]:
    from kafkatool.zk.codecs import parse_kafka_principal

    return parse_kafka_principal(text)


def filter_token(
    requester: str, owners: list[str] | None, info: DelegationTokenInfo, may_describe, may_describe_owner
):
    """DelegationTokenManager.filterToken."""
    if owners is not None and not any(info.owner_or_renewer(o) for o in owners):
        return False
    if info.owner_or_renewer(requester):
        return True
    return may_describe(info.token_id) or may_describe_owner(info.owner)


# ---------------------------------------------------------------------- handlers (KafkaApis)
def allow_token_requests(ctx) -> bool:
    """KafkaApis.allowTokenRequests: not on a token-authenticated connection, not on PLAINTEXT,
    not on SSL without a client certificate (the ANONYMOUS principal)."""
    conn = ctx.connection
    if getattr(conn, "token_authenticated", False):
        return False
    lst = getattr(conn, "listener", None)
    if lst is None:
        lst = ctx.broker.config.listeners[0]
    protocol = lst.security_protocol
    principal = getattr(conn, "principal", "User:ANONYMOUS")
    return protocol != "PLAINTEXT" and not (protocol == "SSL" and principal == "User:ANONYMOUS")


def _authorize(ctx, op: int, rtype: int, name: str) -> bool:
    """AuthHelper.authorize: everything without an authorizer."""
    if getattr(ctx.broker, "authorizer", None) is None:
        return True
    from kafkatool.broker.security.acl_rules import allowed

    return allowed(ctx, op, rtype, name)


def _principal(ctx) -> str:
    return getattr(ctx.connection, "principal", "User:ANONYMOUS")


def handle_create(ctx, req):
    from kafkatool.broker.security import acl as A
    from kafkatool.protocol.generated.create_delegation_token_response import CreateDelegationTokenResponse

    requester = _principal(ctx)
    rtype, rname = parse_principal(requester)
    # KafkaApis: the owner is the request's (v3) unless its name is null or empty
    otype, oname = (
        (req.owner_principal_type, req.owner_principal_name) if req.owner_principal_name else (rtype, rname)
    )
    owner = f"{otype}:{oname}"
    renewers = [f"{r.principal_type}:{r.principal_name}" for r in req.renewers]

    def answer(code: int, info: DelegationTokenInfo | None = None, mac: bytes = b""):
        # CreateDelegationTokenResponse.prepareResponse (the requester from v3 on)
        return CreateDelegationTokenResponse(
            error_code=int(code),
            principal_type=otype,
            principal_name=oname,
            token_requester_principal_type=rtype,
            token_requester_principal_name=rname,
            issue_timestamp_ms=info.issue_timestamp if info else ERROR_TIMESTAMP,
            expiry_timestamp_ms=info.expiry_timestamp if info else ERROR_TIMESTAMP,
            max_timestamp_ms=info.max_timestamp if info else ERROR_TIMESTAMP,
            token_id=info.token_id if info else "",
            hmac=mac,
            throttle_time_ms=0,
        )

    if otype is None:
        # a v3 owner name with a null type: KafkaApis.handleCreateTokenRequest builds the owner
        # first, and KafkaPrincipal's constructor refuses a null type (NullPointerException), so
        # handleError answers CreateDelegationTokenRequest.getErrorResponse: UNKNOWN_SERVER_ERROR
        # with ANONYMOUS as owner and requester; no token is made
        from kafkatool.broker.error_response import error_response

        return error_response(ctx.header, req, E.UNKNOWN_SERVER_ERROR)
    if not allow_token_requests(ctx):
        return answer(E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    if owner != requester and not _authorize(ctx, A.OP["CREATE_TOKENS"], A.USER, owner):
        return answer(E.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
    if any(r.principal_type != USER_TYPE for r in req.renewers):
        return answer(E.INVALID_PRINCIPAL_TYPE)
    code, info, mac = ctx.broker.token_manager.create(owner, requester, renewers, req.max_lifetime_ms)
    return answer(code, info, mac)


def _renew_like(ctx, req, op):
    code, expiry = (
        op(_principal(ctx), bytes(req.hmac))
        if allow_token_requests(ctx)
        else (E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP)
    )
    return int(code), expiry


def handle_renew(ctx, req):
    from kafkatool.protocol.generated.renew_delegation_token_response import RenewDelegationTokenResponse

    manager = ctx.broker.token_manager
    code, expiry = _renew_like(ctx, req, lambda p, mac: manager.renew(p, mac, req.renew_period_ms))
    return RenewDelegationTokenResponse(error_code=code, expiry_timestamp_ms=expiry, throttle_time_ms=0)


def handle_expire(ctx, req):
    from kafkatool.protocol.generated.expire_delegation_token_response import ExpireDelegationTokenResponse

    manager = ctx.broker.token_manager
    code, expiry = _renew_like(ctx, req, lambda p, mac: manager.expire(p, mac, req.expiry_time_period_ms))
    return ExpireDelegationTokenResponse(error_code=code, expiry_timestamp_ms=expiry, throttle_time_ms=0)


def handle_describe(ctx, req):
    from kafkatool.broker.security import acl as A
    from kafkatool.protocol.generated import describe_delegation_token_response as R

    def answer(code: int, tokens=()):
        return R.DescribeDelegationTokenResponse(
            error_code=int(code),
            tokens=[
                R.DescribedDelegationToken(
                    principal_type=parse_principal(info.owner)[0],
                    principal_name=parse_principal(info.owner)[1],
                    token_requester_principal_type=parse_principal(info.token_requester)[0],
                    token_requester_principal_name=parse_principal(info.token_requester)[1],
                    issue_timestamp=info.issue_timestamp,
                    expiry_timestamp=info.expiry_timestamp,
                    max_timestamp=info.max_timestamp,
                    token_id=info.token_id,
                    hmac=mac,
                    renewers=[
                        R.DescribedDelegationTokenRenewer(
                            principal_type=parse_principal(r)[0], principal_name=parse_principal(r)[1]
                        )
                        for r in info.renewers
                    ],
                )
                for info, mac in tokens
            ],
            throttle_time_ms=0,
        )

    if not allow_token_requests(ctx):
        return answer(E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    manager = ctx.broker.token_manager
    if not manager.enabled:
        return answer(E.DELEGATION_TOKEN_AUTH_DISABLED)
    if req.owners is not None and not req.owners:
        return answer(E.NONE)
    owners = None if req.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in req.owners]
    requester = _principal(ctx)

    def may_describe(token_id: str) -> bool:
        return _authorize(ctx, A.DESCRIBE, A.DELEGATION_TOKEN, token_id)

    def may_describe_owner(owner: str) -> bool:
        return _authorize(ctx, A.OP["DESCRIBE_TOKENS"], A.USER, owner)

    return answer(
        E.NONE,
        manager.tokens(lambda info: filter_token(requester, owners, info, may_describe, may_describe_owner)),
    )


def register(router) -> None:
    router.register(CREATE, 0, 3, handle_create)
    router.register(RENEW, 0, 2, handle_renew)
    router.register(EXPIRE, 0, 2, handle_expire)
    router.register(DESCRIBE, 0, 3, handle_describe)


# ---------------------------------------------------------------- the `kafkatool delegation-tokens` side
def refused(code: int) -> str:
    """What Kafka's admin client throws for an error code, as its tools print it
    (``e.getMessage()`` of the ExecutionException: the exception's class and message)."""
    from kafkatool.protocol.errors import default_message, exception_class

    message = default_message(code)
    return f"{exception_class(code)}: {message}" if message else str(exception_class(code))


class TokenRefused(KafkatoolError):
    """The broker answered an error code (``code``); ``str`` is Kafka's exception line."""

    def __init__(self, code: int):
        super().__init__(refused(code))
        self.code = code


def _principals(values: list[str]) -> list[tuple[str, str]]:
    return [parse_principal(v.strip()) for v in values]


def create_live(
    admin, renewers: list[str], max_lifetime_ms: int, owner: str | None = None
) -> tuple[DelegationTokenInfo, bytes]:
    """KafkaAdminClient.createDelegationToken: (token, HMAC); TokenRefused on an error code."""
    from kafkatool.protocol.generated.create_delegation_token_request import (
        CreatableRenewers,
        CreateDelegationTokenRequest,
    )

    req = CreateDelegationTokenRequest(
        renewers=[CreatableRenewers(principal_type=t, principal_name=n) for t, n in _principals(renewers)],
        max_lifetime_ms=max_lifetime_ms,
    )
    if owner is not None:
        req.owner_principal_type, req.owner_principal_name = parse_principal(owner.strip())
    resp = admin.request(CREATE, req)
    if resp.error_code:
        raise TokenRefused(resp.error_code)
    owner_text = f"{resp.principal_type}:{resp.principal_name}"
    requester = (
        f"{resp.token_requester_principal_type}:{resp.token_requester_principal_name}"
        if resp.token_requester_principal_name
        else owner_text
    )
    info = DelegationTokenInfo(
        resp.token_id,
        owner_text,
        requester,
        [f"{t}:{n}" for t, n in _principals(renewers)],
        resp.issue_timestamp_ms,
        resp.max_timestamp_ms,
        resp.expiry_timestamp_ms,
    )
    return info, bytes(resp.hmac)


def renew_live(admin, mac: bytes, renew_period_ms: int) -> int:
    """KafkaAdminClient.renewDelegationToken: the new expiry timestamp."""
    from kafkatool.protocol.generated.renew_delegation_token_request import RenewDelegationTokenRequest

    resp = admin.request(RENEW, RenewDelegationTokenRequest(hmac=mac, renew_period_ms=renew_period_ms))
    if resp.error_code:
        raise TokenRefused(resp.error_code)
    return resp.expiry_timestamp_ms


def expire_live(admin, mac: bytes, expiry_period_ms: int) -> int:
    """KafkaAdminClient.expireDelegationToken: the new expiry timestamp."""
    from kafkatool.protocol.generated.expire_delegation_token_request import ExpireDelegationTokenRequest

    resp = admin.request(
        EXPIRE, ExpireDelegationTokenRequest(hmac=mac, expiry_time_period_ms=expiry_period_ms)
    )
    if resp.error_code:
        raise TokenRefused(resp.error_code)
    return resp.expiry_timestamp_ms


def describe_live(admin, owners: list[str] | None) -> list[tuple[DelegationTokenInfo, bytes]]:
    """KafkaAdminClient.describeDelegationToken (owners None: every token the principal may see)."""
    from kafkatool.protocol.generated.describe_delegation_token_request import (
        DescribeDelegationTokenOwner,
        DescribeDelegationTokenRequest,
    )

    req = DescribeDelegationTokenRequest(
        owners=None
        if owners is None
        else [
            DescribeDelegationTokenOwner(principal_type=t, principal_name=n) for t, n in _principals(owners)
        ]
    )
    resp = admin.request(DESCRIBE, req)
    if resp.error_code:
        raise TokenRefused(resp.error_code)
    out = []
    for t in resp.tokens:
        owner = f"{t.principal_type}:{t.principal_name}"
        requester = (
            f"{t.token_requester_principal_type}:{t.token_requester_principal_name}"
            if t.token_requester_principal_name
            else owner
        )
        info = DelegationTokenInfo(
            t.token_id,
            owner,
            requester,
            [f"{r.principal_type}:{r.principal_name}" for r in t.renewers],
            t.issue_timestamp,
            t.max_timestamp,
            t.expiry_timestamp,
        )
        out.append((info, bytes(t.hmac)))
    return out
