"""Client quotas (Kafka 3.7's ClientQuotaManager, ClientRequestQuotaManager and
ControllerMutationQuotaManager): ``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage`` and ``controller_mutation_rate`` of (user, client-id) entities.

- The rule (:func:`metric_tags`, :func:`quota_limit`: DefaultQuotaCallback): which sensor a
  (user, client-id) counts in and which of KIP-55's eight entity levels sets its bound.
- The measures are broker/rates.py's (Rate over ``quota.window.num`` samples of
  ``quota.window.size.seconds``, KIP-599's TokenBucket) and so is the throttle time
  (QuotaUtils.throttleTime: ``(observed - bound) / bound * window``, rounded as Java's
  Math.round; the request quota's capped at one window, boundedThrottleTime).
- :class:`QuotaManagers`: one manager per quota type, ``enabled`` the one flag a request
  checks (no quota anywhere: nothing measured, nothing set).  The router begins and ends a
  request's accounting (:meth:`QuotaManagers.begin` / :meth:`QuotaManagers.finish`); Fetch
  (an empty answer when throttled) and the controller mutations ask their own questions.
- The entities' stores: the embedded metadata standalone, ZooKeeper's ``/config/users`` and
  ``/config/clients`` in cluster mode (:class:`ZkQuotaStore`), and DescribeClientQuotas' filter
  and AlterClientQuotas' checks over either (ZkAdminManager's rules and words).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from kafkatool.broker.rates import DEFAULT_SAMPLES, DEFAULT_WINDOW_S, Rate, TokenBucket, now_ms
from kafkatool.errors import KafkatoolError
from kafkatool.formats.schema import java_double_str
from kafkatool.zk.paths import DEFAULT  # the default entity of a type, one sentinel with ZooKeeper's

log = logging.getLogger("kafkatool.broker.quotas")

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
#: QuotaConfigs' user and client-id quota configs and their ConfigDef types
QUOTA_TYPES = {
    PRODUCER_BYTE_RATE: "LONG",
    CONSUMER_BYTE_RATE: "LONG",
    REQUEST_PERCENTAGE: "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
SCRAM_KEYS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: ClientQuotaEntity's entity types
USER, CLIENT_ID, IP = "user", "client-id", "ip"
#: ClientQuotaManager.InactiveSensorExpirationTimeSeconds
INACTIVE_SENSOR_S = 3600
#: ApiKeys whose clusterAction is true: exempt from the request quota (sendResponseExemptThrottle)
EXEMPT_APIS = frozenset({4, 5, 6, 7, 27, 56, 58, 62, 63, 64, 67})
#: the processes' own principal (broker/processes.PROCESS_PRINCIPAL): never throttled
PROCESS_PRINCIPAL = "Internal:kafkatool-processes"
NANOS_TO_PERCENTAGE = 100.0 / 1e9
LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


#: an entity: (user part, client-id part), each None (not part of it), DEFAULT or a name
Entity = tuple


# ------------------------------------------------------------------------------ the rule
def metric_tags(quotas: Mapping, user: str, client_id: str) -> tuple[str, str]:
    """DefaultQuotaCallback.quotaMetricTags: the (user, client-id) tags of the sensor a request
    of ``user`` and ``client_id`` counts in (``""``: not part of it), by the first of KIP-55's
    levels that has a quota: users/<u>/clients/<c>, users/<u>/clients/<default>, users/<u>,
    users/<default>/clients/<c>, users/<default>/clients/<default>, users/<default>,
    clients/<c>, clients/<default>."""
    if (user, client_id) in quotas or (user, DEFAULT) in quotas:
        return user, client_id
    if (user, None) in quotas:
        return user, ""
    if (DEFAULT, client_id) in quotas or (DEFAULT, DEFAULT) in quotas:
        return user, client_id
    if (DEFAULT, None) in quotas:
        return user, ""
    return "", client_id


def quota_limit(quotas: Mapping, tags: tuple[str, str]) -> float | None:
    """DefaultQuotaCallback.quotaLimit: the bound of the sensor with ``tags`` (None: none)."""
    user, client_id = tags
    if user and client_id:
        for key in ((user, client_id), (user, DEFAULT), (DEFAULT, client_id), (DEFAULT, DEFAULT)):
            q = quotas.get(key)
            if q is not None:
                return q
    elif user:
        for key in ((user, None), (DEFAULT, None)):
            q = quotas.get(key)
            if q is not None:
                return q
    elif client_id:
        for key in ((None, client_id), (None, DEFAULT)):
            q = quotas.get(key)
            if q is not None:
                return q
    return None


# ------------------------------------------------------------------------------ managers
class ClientQuotaManager:
    """One quota type: the entities' bounds and the sensors they measure in."""

    def __init__(self, key: str, *, samples: int, window_s: int, bucket: bool = False, cap: bool = False):
        self.key = key
        self.samples = samples
        self.window_ms = window_s * 1000
        self.bucket = bucket
        self.cap_ms = self.window_ms if cap else None
        self.quotas: dict = {}
        self.enabled = False
        self._sensors: dict = {}  # metric tags -> Rate / TokenBucket
        self._resolved: dict = {}  # (user, client_id) -> sensor or None (no bound)
        self._swept = 0

    def set_quotas(self, quotas: dict) -> None:
        """Replace the entities' bounds; sensors keep what they measured (Kafka changes the
        metric's config, not its samples), bounds follow the new quotas."""
        self.quotas = quotas
        self.enabled = bool(quotas)
        self._resolved.clear()
        for tags, sensor in list(self._sensors.items()):
            bound = quota_limit(quotas, tags)
            if bound is None:
                del self._sensors[tags]
            elif bound != sensor.bound:
                log.info("Sensor for quota-id %s already exists. Setting quota to %s", tags, bound)
                self._sensors[tags] = self._new(bound, sensor)

    def _new(self, bound: float, old=None):
        if self.bucket:
            s = TokenBucket(bound, self.samples, self.window_ms)
            if old is not None:
                s.tokens, s.last_ms = min(old.tokens, s.burst), old.last_ms
            return s
        s = Rate(bound, self.samples, self.window_ms)
        if old is not None:
            s._samples, s._current, s.last_ms = old._samples, old._current, old.last_ms
        return s

    def sensor(self, user: str, client_id: str):
        """The sensor a request of (user, client_id) counts in; None when no quota bounds it."""
        key = (user, client_id)
        try:
            return self._resolved[key]
        except KeyError:
            pass
        tags = metric_tags(self.quotas, user, client_id)
        bound = quota_limit(self.quotas, tags)
        sensor = None
        if bound is not None:
            sensor = self._sensors.get(tags)
            if sensor is None:
                sensor = self._sensors[tags] = self._new(bound)
        if len(self._resolved) > 100_000:
            self._resolved.clear()
        self._resolved[key] = sensor
        return sensor

    def record_and_throttle(self, user: str, client_id: str, value: float, now: int) -> int:
        """ClientQuotaManager.recordAndGetThrottleTimeMs: record, then the throttle time owed."""
        self._sweep(now)
        sensor = self.sensor(user, client_id)
        if sensor is None:
            return 0
        sensor.record(value, now)
        return sensor.throttle_ms(now, self.cap_ms)

    def unrecord(self, user: str, client_id: str, value: float, now: int) -> None:
        sensor = self.sensor(user, client_id)
        if sensor is not None:
            sensor.record(-value, now)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """getMaxValueInQuotaWindow: quota x (samples - 1) x window seconds (None: unbounded)."""
        sensor = self.sensor(user, client_id)
        if sensor is None:
            return None
        return sensor.bound * (self.samples - 1) * (self.window_ms / 1000.0)

    def _sweep(self, now: int) -> None:
        """Sensors idle for InactiveSensorExpirationTimeSeconds are dropped (looked at once a minute)."""
        if now - self._swept < 60_000:
            return
        self._swept = now
        idle = [t for t, s in self._sensors.items() if now - s.last_ms > INACTIVE_SENSOR_S * 1000]
        if idle:
            for t in idle:
                del self._sensors[t]
            self._resolved.clear()


class MutationQuota:
    """A request's controller mutation quota (Strict/PermissiveControllerMutationQuota)."""

    __slots__ = ("sensor", "strict", "throttle", "recorded_ms")

    def __init__(self, sensor: TokenBucket, strict: bool):
        self.sensor = sensor
        self.strict = strict
        self.throttle = 0
        self.recorded_ms = 0

    def record(self, permits: float) -> bool:
        """False: a strict quota refuses the mutation (THROTTLING_QUOTA_EXCEEDED)."""
        now = now_ms()
        if self.strict:
            if self.sensor.measure(now) < 0:  # Sensor.checkQuotas: a bucket in debt refuses
                self.throttle, self.recorded_ms = self.sensor.throttle_ms(now), now
                return False
            self.sensor.record(permits, now)
            return True
        self.sensor.record(permits, now)
        if self.sensor.measure(now) < 0:
            self.throttle, self.recorded_ms = self.sensor.throttle_ms(now), now
        return True

    def throttle_time(self) -> int:
        """The throttle time recorded, less the time since (a request may wait in purgatory)."""
        return max(0, self.throttle - (now_ms() - self.recorded_ms)) if self.throttle else 0


class QuotaRequest:
    """One request's accounting while quotas are enabled (RequestContext.quota)."""

    __slots__ = (
        "user",
        "client_id",
        "api_key",
        "start_ns",
        "thread_ns",
        "size",
        "throttle_ms",
        "mutation",
        "done",
    )

    def __init__(self, user: str, client_id: str, api_key: int, size: int, start_ns: int):
        self.user = user
        self.client_id = client_id
        self.api_key = api_key
        self.size = size
        self.start_ns = start_ns
        self.thread_ns = 0
        self.throttle_ms = 0
        self.mutation: MutationQuota | None = None
        self.done = False


def user_of(principal: str | None) -> str:
    """The quota user of a connection: its principal's name (KafkaPrincipal.getName)."""
    if not principal:
        return "ANONYMOUS"
    return principal.split(":", 1)[1] if ":" in principal else principal


class QuotaManagers:
    """QuotaFactory.QuotaManagers: produce, fetch, request and controller mutation."""

    def __init__(self, samples: int = DEFAULT_SAMPLES, window_s: int = DEFAULT_WINDOW_S):
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples=samples, window_s=window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples=samples, window_s=window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples=samples, window_s=window_s, cap=True)
        self.mutation = ClientQuotaManager(
            CONTROLLER_MUTATION_RATE, samples=samples, window_s=window_s, bucket=True
        )
        self.by_key = {m.key: m for m in (self.produce, self.fetch, self.request, self.mutation)}
        #: the one flag a request checks: some quota is configured
        self.enabled = False
        self.entities: dict = {}

    def load(self, entities: Mapping) -> None:
        """Take every entity's quota configs ({entity: {key: value}}), as ConfigHandler takes
        them (byte rates as longs, the others as doubles); a value that is not a number is
        logged and left out."""
        per: dict[str, dict] = {k: {} for k in self.by_key}
        for entity, configs in entities.items():
            for key, raw in configs.items():
                if key not in per:
                    continue
                try:
                    value = float(int(raw)) if QUOTA_TYPES[key] == "LONG" else float(raw)
                except (TypeError, ValueError):
                    log.error(
                        "quota %s=%r of %s is not a number: not applied", key, raw, describe_entity(entity)
                    )
                    continue
                # a bound of 0 or less never throttles (Kafka's throttle time of it is not a
                # positive int) but, as there, still takes the level from those below it
                per[key][entity] = value
        changed = dict(entities) != self.entities
        self.entities = {e: dict(c) for e, c in entities.items()}
        for key, manager in self.by_key.items():
            manager.set_quotas(per[key])
        self.enabled = any(m.enabled for m in self.by_key.values())
        if changed:
            log.info(
                "client quotas: %d entities, %s", len(entities), "enabled" if self.enabled else "none set"
            )

    def update_entity(self, entity: Entity, configs: Mapping[str, str]) -> None:
        """One entity changed (QuotaConfigHandler.updateQuotaConfig): its quota configs now."""
        entities = dict(self.entities)
        if configs:
            entities[entity] = dict(configs)
        else:
            entities.pop(entity, None)
        self.load(entities)

    # ----------------------------------------------------------- a request (the router's calls)
    def begin(self, conn, header, size: int) -> QuotaRequest | None:
        principal = getattr(conn, "principal", None)
        if principal == PROCESS_PRINCIPAL:
            return None
        return QuotaRequest(
            user_of(principal), header.client_id or "", header.api_key, size, time.perf_counter_ns()
        )

    def request_throttle(self, q: QuotaRequest, now: int) -> int:
        """The request quota's throttle for the time this request took on the event loop so far."""
        if not self.request.enabled or q.api_key in EXEMPT_APIS:
            return 0
        if not q.thread_ns:
            q.thread_ns = time.perf_counter_ns() - q.start_ns
        return self.request.record_and_throttle(q.user, q.client_id, q.thread_ns * NANOS_TO_PERCENTAGE, now)

    def finish(self, ctx, body, answer) -> int:
        """The answer (a message, or None: Produce acks=0) is about to be encoded: record,
        set its throttle_time_ms, mute the connection for the throttle time (KIP-219); the
        throttle time (0: none)."""
        q = ctx.quota
        if q is None or q.done:
            return 0
        q.done = True
        now = now_ms()
        t = q.throttle_ms
        if q.api_key == 0:  # Produce: the request's size; acks=0 is exempt from the request quota
            if self.produce.enabled:
                t = max(t, self.produce.record_and_throttle(q.user, q.client_id, q.size, now))
            if getattr(body, "acks", -1) != 0:
                t = max(t, self.request_throttle(q, now))
        else:
            t = max(t, self.request_throttle(q, now))
        if q.mutation is not None:
            t = max(t, q.mutation.throttle_time())
        if t <= 0:
            return 0
        set_throttle_time(answer, t)
        throttle_connection(ctx.connection, t)
        return t

    def new_mutation_quota(self, ctx, strict_since: int) -> MutationQuota | None:
        """ControllerMutationQuotaManager.newQuotaFor: strict from ``strict_since``, else permissive."""
        q = ctx.quota
        if q is None or not self.mutation.enabled:
            return None
        sensor = self.mutation.sensor(q.user, q.client_id)
        if sensor is None:
            return None
        q.mutation = MutationQuota(sensor, ctx.version >= strict_since)
        return q.mutation


def set_throttle_time(answer, ms: int) -> None:
    """The answer's throttle_time_ms (an answer of none, or no answer: acks=0, nothing)."""
    if answer is not None and hasattr(answer, "throttle_time_ms"):
        answer.throttle_time_ms = ms


def throttle_connection(conn, ms: int) -> None:
    """Mute the connection's reads for ``ms`` (a connection between processes has none)."""
    mute = getattr(conn, "throttle", None)
    if mute is not None and ms > 0:
        mute(ms)


# ------------------------------------------------------------------------------ stores
def describe_entity(entity: Entity) -> str:
    user, client = entity
    parts = []
    if user is not None:
        parts.append("default user" if user is DEFAULT else f"user {user}")
    if client is not None:
        parts.append("default client-id" if client is DEFAULT else f"client-id {client}")
    return " ".join(parts)


def entity_to_json(entity: Entity) -> dict:
    out = {}
    if entity[0] is not None:
        out[USER] = None if entity[0] is DEFAULT else entity[0]
    if entity[1] is not None:
        out[CLIENT_ID] = None if entity[1] is DEFAULT else entity[1]
    return out


def entity_from_json(d: dict) -> Entity:
    def part(k):
        if k not in d:
            return None
        return DEFAULT if d[k] is None else str(d[k])

    return part(USER), part(CLIENT_ID)


def quota_configs(config: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in config.items() if k in QUOTA_TYPES}


class EmbeddedQuotaStore:
    """Standalone: the embedded metadata's ``client_quotas`` (survives restart; a broker of
    several processes pushes it to its members with every save)."""

    def __init__(self, metadata):
        self.metadata = metadata

    def entries(self) -> dict:
        return {e: dict(c) for e, c in self.metadata.client_quotas.items()}

    def entry(self, entity: Entity) -> dict[str, str]:
        return dict(self.metadata.client_quotas.get(entity, {}))

    def alter(self, entity: Entity, configs: dict[str, str]) -> None:
        if configs:
            self.metadata.client_quotas[entity] = dict(configs)
        else:
            self.metadata.client_quotas.pop(entity, None)
        self.metadata.save()


def zk_entity_path(entity: Entity) -> tuple[str, object, object]:
    """(entity type, name, client id or None) of an entity as the zk client's entity functions
    take it (real names or DEFAULT; they sanitize)."""
    user, client = entity
    if user is not None:
        return "users", user, client
    return "clients", client, None


def zk_entity(entity_type: str, name, client=None) -> Entity | None:
    """The entity of /config/users/<name>[/clients/<client>] or /config/clients/<name> (real
    names or DEFAULT, as the zk client gives them); None: not a quota entity."""
    if entity_type == "clients":
        return None, name
    if entity_type != "users":
        return None
    return name, client


class ZkQuotaStore:
    """Cluster mode: ZooKeeper's /config/users/<u>, /config/clients/<c> and
    /config/users/<u>/clients/<c>, as Kafka keeps them (AdminZkClient: names sanitized by the zk
    client's entity functions), changed with a config change notification every broker follows
    (ConfigHandler)."""

    def __init__(self, zk):
        self.zk = zk

    def entries(self) -> dict:
        out = {}
        for etype in ("users", "clients"):
            for ent in self.zk.entity_configs(etype):
                if ent.error is not None or ent.config is None:
                    continue
                entity = zk_entity(etype, ent.name, ent.client)
                configs = quota_configs(ent.config.config)
                if entity is not None and configs:
                    out[entity] = configs
        return out

    def entry(self, entity: Entity) -> dict[str, str]:
        etype, name, client = zk_entity_path(entity)
        ent = self.zk.entity_config(etype, name, client)
        return quota_configs(ent.config.config) if ent is not None and ent.config is not None else {}

    def alter(self, entity: Entity, configs: dict[str, str]) -> None:
        etype, name, client = zk_entity_path(entity)
        before = self.entry(entity)
        self.zk.change_entity_config(
            etype, name, client=client, set_keys=configs, delete_keys=[k for k in before if k not in configs]
        )


# ------------------------------------------------------------------------------ the APIs' rules
class QuotaRequestError(KafkatoolError):
    """A DescribeClientQuotas filter or an AlterClientQuotas entry Kafka refuses."""

    def __init__(self, code: int, message: str | None):
        super().__init__(message or "")
        self.code = code
        self.message = message


INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35
UNKNOWN_SERVER_ERROR = -1
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def parse_filter(components, strict: bool) -> dict:
    """DescribeClientQuotasRequest.filter + ZkAdminManager.describeClientQuotas' checks:
    {entity type: match} where match is a name, DEFAULT or None (any)."""
    comps: dict = {}
    for c in components:
        et = c.entity_type
        if c.match_type == MATCH_EXACT:
            if c.match is None:  # ClientQuotaFilterComponent.ofEntity(type, null): Optional.of's NPE
                raise QuotaRequestError(UNKNOWN_SERVER_ERROR, None)
            match = c.match
        elif c.match_type == MATCH_DEFAULT:
            match = DEFAULT
        elif c.match_type == MATCH_ANY:
            match = None
        else:
            raise QuotaRequestError(UNKNOWN_SERVER_ERROR, None)
        if et in (USER, CLIENT_ID, IP):
            if et in comps:
                word = {USER: "user", CLIENT_ID: "client", IP: "ip"}[et]
                raise QuotaRequestError(INVALID_REQUEST, f"Duplicate {word} filter component entity type")
            comps[et] = match
        elif et == "":
            raise QuotaRequestError(INVALID_REQUEST, "Unexpected empty filter component entity type")
        else:
            raise QuotaRequestError(UNSUPPORTED_VERSION, f"Custom entity type '{et}' not supported")
    if (USER in comps or CLIENT_ID in comps) and IP in comps:
        raise QuotaRequestError(
            INVALID_REQUEST,
            "Invalid entity filter component combination, IP filter component should not be used with "
            "user or clientId filter component.",
        )
    return comps


def describe(entries: Mapping, comps: dict, strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    """ZkAdminManager.handleDescribeClientQuotas' match: each entity with quota configs whose
    parts meet the filter (a part the filter does not name: absent, unless not strict)."""
    if IP in comps:
        return []  # IP quotas (connection_creation_rate) are not kept by this broker

    def matches(et: str, part) -> bool:
        if et in comps:
            want = comps[et]
            if want is None:
                return part is not None
            return part is want if want is DEFAULT else part == want
        return part is None or not strict

    out = []
    for entity, configs in sorted(entries.items(), key=lambda kv: _sort_key(kv[0])):
        q = quota_configs(configs)
        if q and matches(USER, entity[0]) and matches(CLIENT_ID, entity[1]):
            try:
                out.append((entity, {k: float(v) for k, v in q.items()}))
            except ValueError:
                raise QuotaRequestError(
                    UNKNOWN_SERVER_ERROR, None
                ) from None  # IllegalStateException("Unexpected client quota configuration value")
    return out


def _sort_key(entity: Entity) -> tuple:
    return tuple("" if p is None else ("\0" if p is DEFAULT else "\1" + p) for p in entity)


def parse_entity(entries) -> Entity:
    """ZkAdminManager.parseAndSanitizeQuotaEntity and the combination check of alterEntityQuotas."""
    if not entries:
        raise QuotaRequestError(INVALID_REQUEST, "Invalid empty client quota entity")
    parts: dict = {}
    for et, name in entries:
        if et not in (USER, CLIENT_ID, IP):
            raise QuotaRequestError(INVALID_REQUEST, f"Unhandled client quota entity type: {et}")
        if name is not None and name == "":
            raise QuotaRequestError(INVALID_REQUEST, f"Empty {et} not supported")
        parts[et] = DEFAULT if name is None else name
    if IP in parts:
        if USER in parts or CLIENT_ID in parts:
            raise QuotaRequestError(
                INVALID_REQUEST,
                "Invalid quota entity combination, IP entity should not be used with user/client ID entity.",
            )
        raise QuotaRequestError(
            INVALID_REQUEST, "IP quotas (connection_creation_rate) are not supported by kafkatool"
        )
    return parts.get(USER), parts.get(CLIENT_ID)


def apply_ops(entity: Entity, current: Mapping[str, str], ops) -> dict[str, str]:
    """alterEntityQuotas' ops on an entity's configs: (key, value or None to remove); a LONG
    config must be a whole number (within 1e-6) and is kept as one, a DOUBLE as Java prints it."""
    props = dict(current)
    user_entity = entity[0] is not None and entity[1] is None
    for key, value in ops:
        if value is None:
            props.pop(key, None)
            continue
        kind = QUOTA_TYPES.get(key)
        if kind is None:
            if user_entity and key in SCRAM_KEYS:
                raise QuotaRequestError(UNKNOWN_SERVER_ERROR, None)  # "Unexpected config type STRING"
            raise QuotaRequestError(INVALID_REQUEST, f"Invalid configuration key {key}")
        if kind == "DOUBLE":
            props[key] = java_double_str(value)
            continue
        eps = 1e-6
        whole = _java_long(value + eps)
        if abs(float(whole) - value) > eps:
            raise QuotaRequestError(INVALID_REQUEST, f"Configuration {key} must be a {kind} value")
        props[key] = str(whole)
    return props


def _java_long(x: float) -> int:
    """Scala's Double.toLong: toward zero, NaN 0, saturating at Long's bounds."""
    if x != x:
        return 0
    if x >= LONG_MAX:
        return LONG_MAX
    if x <= -(2**63):
        return -(2**63)
    return int(x)
