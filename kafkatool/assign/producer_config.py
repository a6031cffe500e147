"""The producer configs of ``kafkatool produce`` as kafka-console-producer.sh (Kafka 3.7) makes
them and Kafka's producer checks them.

- Precedence (ConsoleProducer.producerProps): the ``--producer.config`` file, then every
  ``--producer-property`` over it; ``compression.type`` is always ``--compression-codec``'s (its
  default ``none`` included: 3.7 overwrites a compression.type of the file or a property, and so do
  we, with a warning when they differ); ``client.id`` is ``console-producer`` unless set; a dedicated
  option (``--timeout``, ``--request-required-acks``, ``--request-timeout-ms``,
  ``--message-send-max-retries``, ``--retry-backoff-ms``, ``--socket-buffer-size``,
  ``--max-memory-bytes``, ``--batch-size``, ``--max-partition-memory-bytes``,
  ``--metadata-expiry-ms``, ``--max-block-ms``) wins when it is given and otherwise only fills in
  its default where the config is not set (CommandLineUtils.maybeMergeOptions).
- Checks (ProducerConfig's ConfigDef and postProcessAndValidateIdempotenceConfigs,
  KafkaProducer.configureDeliveryTimeout): a value of the wrong type or out of range, an explicit
  ``enable.idempotence=true`` with ``acks`` not all, ``retries=0`` or more than 5 requests in
  flight, ``delivery.timeout.ms`` below ``linger.ms + request.timeout.ms`` when set: Kafka's
  ConfigException message (:class:`ProducerConfigError`). The same conflicts with idempotence
  only defaulted turn it off, with Kafka's log line as a note.
- Names: a config Kafka 3.7's producer does not know is warned about in Kafka's words
  ("... was supplied but isn't a known config.") and left out, as Kafka's AbstractConfig.logUnused
  does (KIP-390's compression.<codec>.level are Kafka 3.8's: 3.7 warns about them and writes its
  default levels, and so do we); Kafka's own names that do not change what is written (reconnect
  backoffs, metrics.* ...) are taken silently; ``partitioner.class`` and ``interceptor.classes``
  ask for what this producer does not do and are refused; security configs
  (``security.protocol``, ``ssl.*``, ``sasl.*``) are handed to the client's security
  (broker/security/client.ClientSecurity, the parser of ``--command-config``).
- Transactions: ``transactional.id`` (ConfigDef's NonEmptyString; idempotence required, Kafka's
  words) and ``transaction.timeout.ms`` are the producer's (assign/producer runs the transactions
  of ``perf produce``); kafka-console-producer.sh never calls initTransactions, so there a
  transactional.id is refused (:func:`refuse_console_transactions`), as Kafka's producer refuses
  every send of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkatool.assign.client_config import (
    INT_MAX,
    ClientConfigError,
    is_security_config,
    parse_value,
    unknown_config,
)
from kafkatool.formats import compression


class ProducerConfigError(ClientConfigError):
    """Kafka's ConfigException (or a config this producer cannot honour): one line, exit 2."""


#: ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION_FOR_IDEMPOTENCE
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5

#: ConsoleProducer's dedicated options: config name -> its default (ProducerConfig in
#: ConsoleProducer.scala); maybeMergeOptions puts the default in where the config is unset
CONSOLE_DEFAULTS = {
    "linger.ms": "1000",
    "acks": "-1",
    "request.timeout.ms": "1500",
    "retries": "3",
    "retry.backoff.ms": "100",
    "send.buffer.bytes": "102400",
    "buffer.memory": "33554432",
    "batch.size": "16384",
    "metadata.max.age.ms": "300000",
    "max.block.ms": "60000",
}

#: Kafka 3.7 ProducerConfig's configs this producer acts on: name -> (type, default, minimum,
#: maximum); types as ConfigDef's (INT, LONG, BOOLEAN, STRING)
APPLIED: dict[str, tuple[str, str, int | None, int | None]] = {
    "acks": ("STRING", "all", None, None),
    "compression.type": ("STRING", "none", None, None),
    "linger.ms": ("LONG", "0", 0, None),
    "batch.size": ("INT", "16384", 0, None),
    "enable.idempotence": ("BOOLEAN", "true", None, None),
    "retries": ("INT", str(INT_MAX), 0, INT_MAX),
    "retry.backoff.ms": ("LONG", "100", 0, None),
    "retry.backoff.max.ms": ("LONG", "1000", 0, None),
    "delivery.timeout.ms": ("INT", "120000", 0, None),
    "request.timeout.ms": ("INT", "30000", 0, None),
    "max.request.size": ("INT", "1048576", 0, None),
    "client.id": ("STRING", "", None, None),
    "max.in.flight.requests.per.connection": ("INT", "5", 1, None),
    "partitioner.ignore.keys": ("BOOLEAN", "false", None, None),
    "buffer.memory": ("LONG", "33554432", 0, None),
    "max.block.ms": ("LONG", "60000", 0, None),
    "metadata.max.age.ms": ("LONG", "300000", 0, None),
    "send.buffer.bytes": ("INT", "131072", -1, None),
    "receive.buffer.bytes": ("INT", "32768", -1, None),
    "transaction.timeout.ms": ("INT", "60000", None, None),
}

#: Kafka 3.7 producer configs taken without effect on what is written or how it is acknowledged
#: (reconnects, idle connections, metrics; the serializers and bootstrap.servers ConsoleProducer
#: sets itself)
TAKEN_SILENTLY = frozenset(
    {
        "bootstrap.servers",
        "key.serializer",
        "value.serializer",
        "metadata.max.idle.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "connections.max.idle.ms",
        "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
        "client.dns.lookup",
        "metrics.sample.window.ms",
        "metrics.num.samples",
        "metrics.recording.level",
        "metric.reporters",
        "auto.include.jmx.reporter",
        "enable.metrics.push",
        "partitioner.adaptive.partitioning.enable",
        "partitioner.availability.timeout.ms",
        "security.providers",
    }
)


@dataclass
class ProducerSettings:
    """What the producer runs with (assign/producer.Producer's parameters)."""

    acks: int
    codec: int
    linger_ms: int
    batch_size: int
    idempotence: bool
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    delivery_timeout_ms: int
    request_timeout_ms: int
    max_request_size: int
    client_id: str
    max_in_flight: int
    ignore_keys: bool
    #: buffer.memory: the bytes of batches waiting to be sent or answered (each takes at least
    #: batch.size, as BufferPool allocates them); a record larger is refused
    buffer_memory: int = 33554432
    #: max.block.ms: the wait for the topic's metadata at the start
    max_block_ms: int = 60000
    #: metadata.max.age.ms: the metadata is asked for again when it is older
    metadata_max_age_ms: int = 300000
    #: send.buffer.bytes, receive.buffer.bytes (-1: the OS's)
    send_buffer: int = 131072
    receive_buffer: int = 32768
    #: transactional.id (None: not transactional) and transaction.timeout.ms (InitProducerId's)
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    #: security.protocol, ssl.*, sasl.* as given (for ClientSecurity)
    security: dict[str, str] = field(default_factory=dict)
    #: lines Kafka's producer logs as warnings or notes (unknown configs, idempotence turned off)
    notes: list[str] = field(default_factory=list)


def console_producer_props(
    file_props: dict[str, str],
    properties: dict[str, str],
    options: list[tuple[str, str | None]],
    compression_codec: str,
    notes: list[str],
) -> dict[str, str]:
    """ConsoleProducer.producerProps: the file, the --producer-property items over it,
    compression.type from --compression-codec, client.id's default, then each dedicated option
    (``options``: (config name, the option's value or None when not given), in ConsoleProducer's
    order: --batch-size, then --max-partition-memory-bytes, both batch.size) by
    maybeMergeOptions."""
    props = dict(file_props)
    props.update(properties)
    given = props.get("compression.type")
    if given is not None and given.strip() != compression_codec:
        notes.append(
            f"compression.type={given} of the producer configs is replaced by --compression-codec "
            f"({compression_codec}), as kafka-console-producer.sh does"
        )
    props["compression.type"] = compression_codec
    if props.get("client.id") is None:
        props["client.id"] = "console-producer"
    for name, value in options:
        if value is not None:
            props[name] = value
        elif name not in props and name in CONSOLE_DEFAULTS:
            props[name] = CONSOLE_DEFAULTS[name]
    return props


def _parse(name: str, raw: str) -> int | bool | str:
    """ConfigDef.parseType and the value's validator (Range, ValidString)."""
    kind, _default, low, high = APPLIED[name]
    choices = {
        "acks": ["all", "-1", "0", "1"],
        "compression.type": list(compression.CODEC_NAMES.values()),
    }.get(name)
    return parse_value(name, raw, kind, low, high, choices, ProducerConfigError)


def producer_settings(props: dict[str, str]) -> ProducerSettings:
    """ProducerConfig and KafkaProducer's checks of the merged configs (``props`` as
    :func:`console_producer_props` made them: Kafka's "originals")."""
    notes: list[str] = []
    security: dict[str, str] = {}
    for name in props:
        if name in APPLIED or name in TAKEN_SILENTLY:
            continue
        if is_security_config(name):
            security[name] = props[name]
        elif name == "transactional.id":
            continue  # checked below, once idempotence is decided (Kafka's order)
        elif name in ("partitioner.class", "interceptor.classes"):
            if props[name].strip():
                raise ProducerConfigError(
                    f"{name}={props[name]}: kafkatool produce has Kafka's built-in partitioner and no "
                    "interceptors; leave it out"
                )
        else:
            notes.append(unknown_config(name))
    value = {name: _parse(name, props.get(name, spec[1])) for name, spec in APPLIED.items()}

    # postProcessAndValidateIdempotenceConfigs
    acks = -1 if value["acks"] == "all" else int(value["acks"])
    user_idempotence = "enable.idempotence" in props
    idempotence = value["enable.idempotence"]
    if idempotence:
        disable = []
        if value["retries"] == 0:
            if user_idempotence:
                raise ProducerConfigError("Must set retries to non-zero when using the idempotent producer.")
            disable.append("Idempotence will be disabled because retries is set to 0.")
        if acks != -1:
            if user_idempotence:
                raise ProducerConfigError(
                    "Must set acks to all in order to use the idempotent producer. Otherwise we cannot "
                    "guarantee idempotence."
                )
            disable.append(f"Idempotence will be disabled because acks is set to {acks}, not set to 'all'.")
        in_flight = value["max.in.flight.requests.per.connection"]
        if in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
            if user_idempotence:
                raise ProducerConfigError(
                    "Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent producer."
                )
            disable.append(
                f"Idempotence will be disabled because max.in.flight.requests.per.connection is set to "
                f"{in_flight}, which is greater than 5. Please note that in v4.0.0 and onward, this will "
                "become an error."
            )
        if disable:
            # Kafka logs the retries and acks cases at INFO: only the in-flight one is a warning
            notes += [d for d in disable if "in.flight" in d]
            idempotence = False
    transactional_id = None
    if "transactional.id" in props:
        # ConfigDef: a STRING is trimmed, NonEmptyString refuses ""
        transactional_id = props["transactional.id"].strip()
        if not transactional_id:
            raise ProducerConfigError(
                f"Invalid value {transactional_id} for configuration transactional.id: String must be non-empty"
            )
        if not idempotence:
            raise ProducerConfigError("Cannot set a transactional.id without also enabling idempotence.")

    # KafkaProducer.configureDeliveryTimeout
    linger = min(value["linger.ms"], INT_MAX)
    delivery = value["delivery.timeout.ms"]
    floor = min(linger + value["request.timeout.ms"], INT_MAX)
    if delivery < floor:
        if "delivery.timeout.ms" in props:
            raise ProducerConfigError(
                "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms"
            )
        notes.append(
            f"delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms. "
            f"Setting it to {floor}."
        )
        delivery = floor
    return ProducerSettings(
        acks=acks,
        codec=compression.codec_from_name(value["compression.type"]),
        linger_ms=linger,
        # "batch.size may be set to 0 to explicitly disable batching": a batch size of 1
        batch_size=max(1, value["batch.size"]),
        idempotence=idempotence,
        retries=value["retries"],
        retry_backoff_ms=value["retry.backoff.ms"],
        retry_backoff_max_ms=value["retry.backoff.max.ms"],
        delivery_timeout_ms=delivery,
        request_timeout_ms=value["request.timeout.ms"],
        max_request_size=value["max.request.size"],
        client_id=value["client.id"],
        max_in_flight=value["max.in.flight.requests.per.connection"],
        ignore_keys=value["partitioner.ignore.keys"],
        buffer_memory=value["buffer.memory"],
        max_block_ms=value["max.block.ms"],
        metadata_max_age_ms=value["metadata.max.age.ms"],
        send_buffer=value["send.buffer.bytes"],
        receive_buffer=value["receive.buffer.bytes"],
        transactional_id=transactional_id,
        transaction_timeout_ms=value["transaction.timeout.ms"],
        security=security,
        notes=notes,
    )


def refuse_console_transactions(settings: ProducerSettings) -> None:
    """kafka-console-producer.sh with a transactional.id: ConsoleProducer never calls
    initTransactions, so Kafka's KafkaProducer.send refuses every record (an
    IllegalStateException, the tool's stack trace); refused here before anything is sent."""
    if settings.transactional_id is not None:
        raise ProducerConfigError(
            f"transactional.id={settings.transactional_id}: kafka-console-producer.sh never calls "
            "initTransactions, so Kafka's producer refuses every send (\"Cannot perform a 'send' before "
            'completing a call to initTransactions when transactions are enabled."); leave it out, or run '
            "transactions with kafkatool perf produce --transaction-duration-ms"
        )
