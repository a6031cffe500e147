"""DescribeClientQuotas (48) and AlterClientQuotas (49): KafkaApis' handlers over
ZkAdminManager's describeClientQuotas / alterClientQuotas (broker/quotas.py has the rules and
the stores: the embedded metadata standalone, ZooKeeper in cluster mode)."""

from __future__ import annotations

import logging

from kafkatool.broker import quotas as Q
from kafkatool.formats.java_collections import hash_map_order, java_string_hash
from kafkatool.zk.client import ZkError

log = logging.getLogger("kafkatool.broker.quotas")

DESCRIBE = 48
ALTER = 49


def _entity_data(cls, entity: Q.Entity) -> list:
    out = []
    if entity[0] is not None:
        out.append(cls(entity_type=Q.USER, entity_name=None if entity[0] is Q.DEFAULT else entity[0]))
    if entity[1] is not None:
        out.append(cls(entity_type=Q.CLIENT_ID, entity_name=None if entity[1] is Q.DEFAULT else entity[1]))
    return out


def _props_order(values: dict) -> list[str]:
    """The order ZkAdminManager hands an entity's quota configs on: a Properties' (a
    ConcurrentHashMap of 16 bins), which the admin client's HashMap then keeps for keys that
    share a bin."""
    return hash_map_order(values, java_string_hash, 16)


def handle_describe(ctx, req):
    from kafkatool.protocol.generated import describe_client_quotas_response as R

    try:
        comps = Q.parse_filter(req.components, req.strict)
        found = Q.describe(ctx.broker.quota_store.entries(), comps, req.strict)
    except Q.QuotaRequestError as exc:
        return R.DescribeClientQuotasResponse(
            throttle_time_ms=0, error_code=exc.code, error_message=exc.message, entries=None
        )
    except ZkError as exc:
        log.warning("DescribeClientQuotas: %s", exc)
        return R.DescribeClientQuotasResponse(
            throttle_time_ms=0, error_code=Q.UNKNOWN_SERVER_ERROR, error_message=None, entries=None
        )
    return R.DescribeClientQuotasResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        entries=[
            R.EntryData(
                entity=_entity_data(R.EntityData, entity),
                values=[R.ValueData(key=k, value=values[k]) for k in _props_order(values)],
            )
            for entity, values in found
        ],
    )


def handle_alter(ctx, req):
    from kafkatool.broker.processes import once_applied
    from kafkatool.protocol.generated import alter_client_quotas_response as R

    broker = ctx.broker
    store = broker.quota_store
    out = []
    changed = False
    for entry in req.entries:
        code, message = 0, None
        try:
            entity = Q.parse_entity([(e.entity_type, e.entity_name) for e in entry.entity])
            current = store.entry(entity)
            new = Q.apply_ops(
                entity, current, [(op.key, None if op.remove else op.value) for op in entry.ops]
            )
            if broker.read_only:
                code, message = 44, "the broker is read-only (serve --read-only)"  # POLICY_VIOLATION
            elif not req.validate_only and new != current:
                store.alter(entity, new)
                broker.quotas.update_entity(entity, new)
                changed = True
        except Q.QuotaRequestError as exc:
            log.info("Error encountered while updating client quotas: %s", exc.message)
            code, message = exc.code, exc.message
        except ZkError as exc:
            log.warning("Error encountered while updating client quotas: %s", exc)
            code, message = Q.UNKNOWN_SERVER_ERROR, None
        out.append(
            R.EntryData(
                error_code=code,
                error_message=message,
                entity=[
                    R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity
                ],
            )
        )
    resp = R.AlterClientQuotasResponse(throttle_time_ms=0, entries=out)
    return once_applied(broker, resp) if changed else resp


def register(router) -> None:
    router.register(DESCRIBE, 0, 1, handle_describe)
    router.register(ALTER, 0, 1, handle_alter)
