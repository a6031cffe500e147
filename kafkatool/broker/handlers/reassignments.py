"""Reassignment APIs: AlterPartitionReassignments (45), ListPartitionReassignments (46), and the
dynamic broker configs kafka-reassign-partitions sets (IncrementalAlterConfigs on the broker);
ElectLeaders (43); registers the log dir APIs of :mod:`kafkatool.broker.handlers.log_dirs` too.

A single-node cluster answers as Kafka's controller would with one live broker:
every partition's replica set is ``[node_id]``, so a target equal to it
completes at once (nothing is ever left in progress, and List returns
nothing); a target naming any other broker is INVALID_REPLICA_ASSIGNMENT (the
controller only accepts registered brokers); cancelling (null replicas) finds
no reassignment: NO_REASSIGNMENT_IN_PROGRESS.  ElectLeaders finds every partition led by its
preferred (only) replica: ELECTION_NOT_NEEDED, as KafkaController.processReplicaLeaderElection
answers for a partition whose leader is already the one the election would choose.
"""

from __future__ import annotations

import json
import logging

from kafkatool.protocol.errors import ErrorCode
from kafkatool.protocol.generated import (
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
)
from kafkatool.protocol.generated.alter_partition_reassignments_response import (
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

log = logging.getLogger("kafkatool.broker")

ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS, ELECT_LEADERS = 45, 46, 43


def check_target(broker, topic: str, partition: int, replicas: list[int] | None) -> tuple[int, str | None]:
    """(error code, message) of one partition of an AlterPartitionReassignments request."""
    t = broker.topic(topic)
    if t is None or not 0 <= partition < t.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
    if replicas is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
    if not replicas:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    seen: set[int] = set()
    for b in replicas:
        if b < 0:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes an invalid broker id {b}.",
            )
        if b in seen:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {b} more than once.",
            )
        seen.add(b)
    for b in replicas:
        if b != broker.node_id:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {b}, but no such broker is registered.",
            )
    # the current replica set: the reassignment is complete as soon as it is accepted
    return ErrorCode.NONE, None


def _dynamic_path(broker):
    from kafkatool.log import topic_settings as ts

    dirs = broker.config.log_dirs
    return dirs[0] / ts.DYNAMIC_CONFIGS_FILE if dirs else None


def load_dynamic_configs(broker) -> None:
    """Put the persisted dynamic broker configs back into ``broker.config.dynamic`` (this broker's)
    and ``.dynamic_default`` (the cluster-wide defaults), checked as a change is. In cluster mode
    ZooKeeper's /config/brokers is their one store (membership takes it, as Kafka's
    DynamicBrokerConfig does, which never reads a local file): a file left in the log dir (from
    a standalone run of the same dir) is ignored, and the log says so."""
    from kafkatool.log import topic_settings as ts

    dirs = broker.config.log_dirs
    path = _dynamic_path(broker)
    if broker.config.get("zookeeper.connect") and not broker.read_only:
        if path is not None and path.exists():
            log.warning(
                "%s ignored: with zookeeper.connect the dynamic broker configs are ZooKeeper's "
                "(/config/brokers/<default> and /config/brokers/%d)",
                path,
                broker.node_id,
            )
        return
    layer = ts.read_dynamic_broker_configs(dirs[0]) if dirs else None
    if layer is None:
        return
    where = str(path)
    notes = list(layer.notes)
    notes += broker.config.take_dynamic(
        {False: (where, layer.broker_default), True: (where, layer.broker_node)}
    )[1]
    for note in notes:
        log.warning("%s", note)


def _save_dynamic_configs(broker) -> None:
    from kafkatool.broker import config as C
    from kafkatool.log import fileops

    path = _dynamic_path(broker)
    if path is None or not path.parent.is_dir():
        return
    cfg = broker.config
    doc = {
        "version": 1,
        "broker": broker.node_id,
        "configs": {k: v for k, v in sorted(cfg.dynamic.items()) if k in C.ALTERABLE},
        "default_configs": {k: v for k, v in sorted(cfg.dynamic_default.items()) if k in C.ALTERABLE},
    }
    fileops.atomic_write(path, (json.dumps(doc, indent=1) + "\n").encode())


def alter_broker_configs(broker, res, validate_only: bool) -> tuple[int, str | None]:
    """IncrementalAlterConfigs on a broker resource: this broker's id (DYNAMIC_BROKER_CONFIG) or
    "" (the cluster-wide default), SET or DELETE of the configs this broker applies at runtime
    (config.ALTERABLE: the replication and log-dir move throttles, DynamicLogConfig's topic
    defaults, the cleaner's I/O rate), persisted in the first log dir (cluster mode: ZooKeeper).
    Refusals as Kafka 3.7's ConfigAdminManager: INVALID_REQUEST with DynamicBrokerConfig's and
    KafkaConfig's messages (KAFKA-13609), in both metadata modes: a ZooKeeper-mode broker's
    KafkaApis preprocesses a BROKER resource the same way before ZkAdminManager sees it, so
    ZkAdminManager's INVALID_CONFIG "Invalid config value for resource ..." is never the answer
    for a value DynamicBrokerConfig.validate refuses.  The handler has already made
    ConfigAdminManager's duplicate and null checks (admin.preprocess_error).  The logs take new
    topic defaults at once (Broker.reconfigure_logs)."""
    from kafkatool.broker import config as C
    from kafkatool.broker.handlers.admin import broker_resource_error

    name = res.resource_name or ""
    err = broker_resource_error(broker, name, logger=False, alter=True)
    if err is not None:
        return ErrorCode.INVALID_REQUEST, err
    changes: dict[str, str | None] = {}
    for c in res.configs:
        if c.config_operation == 0:  # SET
            changes[c.name] = c.value
        elif c.config_operation == 1:  # DELETE
            changes[c.name] = None
        elif c.config_operation in (2, 3):
            # ConfigAdminManager.prepareIncrementalConfigs: a LIST config only, from the value the
            # resource stores (else Kafka's default), never what server.properties says
            what = "append" if c.config_operation == 2 else "subtract"
            d = C.kafka_config_def(c.name)
            if d is None:
                # not in KafkaConfig.configKeys (the throttles are DynamicConfig.Broker's own):
                # Kafka answers UNKNOWN_SERVER_ERROR, see admin.unknown_config_key
                from kafkatool.broker.handlers.admin import unknown_config_key

                unknown_config_key(f"ConfigResource(type=BROKER, name='{name}')", c.name, preprocess=True)
                return ErrorCode.UNKNOWN_SERVER_ERROR, None
            if d.type != C.LIST:
                return (
                    ErrorCode.INVALID_CONFIG,
                    f"Config value {what} is not allowed for config key: {c.name}",
                )
            from kafkatool.broker.handlers.admin import incremental_list_value

            stored = (broker.config.dynamic if name else broker.config.dynamic_default).get(c.name)
            changes[c.name] = incremental_list_value(
                c.config_operation,
                stored if stored is not None else d.default,
                c.value,
                kraft=broker.cluster is None,
            )
        else:
            return ErrorCode.INVALID_REQUEST, f"Unknown operations type {c.config_operation}"
    err = C.dynamic_update_error({n: v for n, v in changes.items() if v is not None}, per_broker=name != "")
    if err is None:
        err = broker.config.with_dynamic(name != "", changes).dynamic_error(changes)
    if err is not None:
        return ErrorCode.INVALID_REQUEST, err
    # the throttles kept as the number they parse to (as before); the others as given, as Kafka keeps them
    changes = {
        n: (str(int(v.strip())) if v is not None and n in C.DYNAMIC_ONLY_CONFIGS else v)
        for n, v in changes.items()
    }
    if validate_only:
        return ErrorCode.NONE, None
    if broker.cluster is not None:
        broker.cluster.alter_broker_configs(name, changes)
        if name in ("", str(broker.node_id)):
            broker.cluster._load_broker_configs()  # and the logs follow
        log.info(
            "dynamic broker configs altered broker=%s configs=%s",
            name or "<default>",
            json.dumps(changes, sort_keys=True),
        )
        return ErrorCode.NONE, None
    layer = broker.config.dynamic if name else broker.config.dynamic_default
    for key, value in changes.items():
        if value is None:
            layer.pop(key, None)
        else:
            layer[key] = value
    if changes:
        broker.reconfigure_logs()
        if not broker.read_only:
            _save_dynamic_configs(broker)
            if broker.processes is not None and broker.processes.is_primary:
                broker.processes.push_metadata()  # the other processes apply them too
        log.info(
            "dynamic broker configs altered broker=%s configs=%s",
            name or "<default>",
            json.dumps(changes, sort_keys=True),
        )
    return ErrorCode.NONE, None


def replace_broker_configs(broker, res, validate_only: bool) -> tuple[int, str | None]:
    """AlterConfigs (the legacy API) on a broker resource: the entity's dynamic configs become
    exactly the ones given (Kafka replaces the entity's whole config), through
    :func:`alter_broker_configs`: a SET for each given, a DELETE for every other."""
    from types import SimpleNamespace

    from kafkatool.broker import config as C

    given = {c.name: c.value for c in res.configs if c.value is not None}
    ops = [SimpleNamespace(name=n, config_operation=0, value=v) for n, v in given.items()]
    ops += [
        SimpleNamespace(name=n, config_operation=1, value=None) for n in sorted(C.ALTERABLE) if n not in given
    ]
    return alter_broker_configs(
        broker, SimpleNamespace(resource_name=res.resource_name, configs=ops), validate_only
    )


def _cluster_alter_reassignments(broker, req):
    """Cluster mode: the active controller starts, replaces or cancels each move (KIP-455)."""
    import asyncio

    if not broker.cluster.is_controller():
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.NOT_CONTROLLER,
            error_message="This is not the correct controller for this cluster.",
            responses=[],
        )
    items = [
        ((rt.name, rp.partition_index), None if rp.replicas is None else list(rp.replicas))
        for rt in req.topics
        for rp in rt.partitions
    ]

    async def run():
        codes = await asyncio.wrap_future(broker.cluster.controller.submit("alter_reassignments", items))
        by_topic: dict[str, list] = {}
        for (topic, p), _target in items:
            code = int(codes[(topic, p)])
            by_topic.setdefault(topic, []).append(
                ReassignablePartitionResponse(
                    partition_index=p,
                    error_code=code,
                    error_message=None if not code else ErrorCode(code).name,
                )
            )
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            responses=[ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

    return run()


def _cluster_list_reassignments(broker, req):
    import asyncio

    from kafkatool.protocol.generated.list_partition_reassignments_response import (
        OngoingPartitionReassignment,
        OngoingTopicReassignment,
    )

    if not broker.cluster.is_controller():
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, error_message=None, topics=[]
        )
    tps = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]

    async def run():
        found = await asyncio.wrap_future(broker.cluster.controller.submit("list_reassignments", tps))
        by_topic: dict[str, list] = {}
        for (topic, p), (rs, adding, removing) in sorted(found.items()):
            by_topic.setdefault(topic, []).append(
                OngoingPartitionReassignment(
                    partition_index=p, replicas=rs, adding_replicas=adding, removing_replicas=removing
                )
            )
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            topics=[OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

    return run()


def handle_alter_partition_reassignments(ctx, req):
    broker = ctx.broker
    if broker.cluster is not None:
        return _cluster_alter_reassignments(broker, req)
    responses = []
    for rt in req.topics:
        parts = []
        for rp in rt.partitions:
            replicas = None if rp.replicas is None else list(rp.replicas)
            code, message = check_target(broker, rt.name, rp.partition_index, replicas)
            parts.append(
                ReassignablePartitionResponse(
                    partition_index=rp.partition_index, error_code=int(code), error_message=message
                )
            )
            if code == ErrorCode.NONE:
                log.info(
                    "reassignment of %s-%d to %s completed at once (current replica set)",
                    rt.name,
                    rp.partition_index,
                    replicas,
                )
        responses.append(ReassignableTopicResponse(name=rt.name, partitions=parts))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, responses=responses
    )


def handle_list_partition_reassignments(ctx, req):
    if ctx.broker.cluster is not None:
        return _cluster_list_reassignments(ctx.broker, req)
    # Nothing is ever in progress on one node; unknown topics are skipped, as the controller does.
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=0, error_message=None, topics=[])


def handle_elect_leaders(ctx, req):
    """ElectLeaders on one node (KafkaApis.handleElectLeaders, KafkaController's election)."""
    from kafkatool.protocol.generated.elect_leaders_response import (
        ElectLeadersResponse,
        PartitionResult,
        ReplicaElectionResult,
    )

    broker = ctx.broker
    if req.topic_partitions is None:  # every partition the cluster has
        wanted = [(name, list(range(t.partitions))) for name, t in sorted(broker.metadata.topics.items())]
    else:
        wanted = [(tp.topic, list(tp.partitions)) for tp in req.topic_partitions]
    if broker.cluster is not None:
        return _elect_in_cluster(broker, req, wanted)
    results = []
    for topic, parts in wanted:
        t = broker.topic(topic)
        out = []
        for p in parts:
            if t is None or not 0 <= p < t.partitions:
                out.append(
                    PartitionResult(
                        partition_id=p,
                        error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        error_message="The partition does not exist.",
                    )
                )
            else:
                # preferred: the leader is the first replica; unclean: the partition has a leader
                out.append(
                    PartitionResult(
                        partition_id=p,
                        error_code=int(ErrorCode.ELECTION_NOT_NEEDED),
                        error_message="Leader election not needed for topic partition.",
                    )
                )
        results.append(ReplicaElectionResult(topic=topic, partition_result=out))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=results)


_ELECTION_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "Failed to elect leader: the preferred replica is not in the ISR or not alive.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Failed to elect leader: no replica is alive.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "The partition does not exist.",
    ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
}


def _elect_in_cluster(broker, req, wanted):
    """Cluster mode: the active controller runs the preferred or unclean election
    (KafkaController.electLeaders); other brokers answer NOT_CONTROLLER per partition."""
    import asyncio

    from kafkatool.protocol.generated.elect_leaders_response import (
        ElectLeadersResponse,
        PartitionResult,
        ReplicaElectionResult,
    )

    tps = [(topic, p) for topic, parts in wanted for p in parts]
    unclean = getattr(req, "election_type", 0) == 1

    def answer(codes):
        results = []
        for topic, parts in wanted:
            out = []
            for p in parts:
                code = int(codes.get((topic, p), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                out.append(
                    PartitionResult(
                        partition_id=p,
                        error_code=code,
                        error_message=_ELECTION_MESSAGES.get(code) if code else None,
                    )
                )
            results.append(ReplicaElectionResult(topic=topic, partition_result=out))
        return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=results)

    if not broker.cluster.is_controller():
        return answer(dict.fromkeys(tps, ErrorCode.NOT_CONTROLLER))

    async def run():
        fut = broker.cluster.controller.submit("elect_unclean" if unclean else "elect_preferred", tps)
        return answer(await asyncio.wrap_future(fut))

    return run()


def register(router) -> None:
    broker = getattr(router, "broker", None)
    if broker is not None and not broker.member_process:  # a member takes the primary's
        load_dynamic_configs(broker)
    router.register(ALTER_PARTITION_REASSIGNMENTS, 0, 0, handle_alter_partition_reassignments)
    router.register(LIST_PARTITION_REASSIGNMENTS, 0, 0, handle_list_partition_reassignments)
    router.register(ELECT_LEADERS, 0, 2, handle_elect_leaders)
    from kafkatool.broker.handlers import log_dirs

    log_dirs.register(router)
