"""The broker's loggers as Kafka's BROKER_LOGGER config resource shows and changes them
(Kafka's Log4jController and RuntimeLoggerManager, over Python's logging).

DescribeConfigs lists the broker's loggers ("root" and every logger of kafkatool's own that
exists: ``kafkatool`` and ``kafkatool.*``, the names its log lines carry) with their effective
level in log4j's names; IncrementalAlterConfigs SETs a logger's level or DELETEs it (the logger
inherits again). Kafka lists the log4j loggers its classes created (kafka.*, org.apache.kafka.*
and the root); the Python libraries a serve loads (asyncio, kazoo, ...) are not the broker's
and are neither listed nor alterable: one rule, :func:`_logger`, for both. Levels changed here
last until the process stops, as Kafka's.
"""

from __future__ import annotations

import logging

ROOT_LOGGER = "root"
#: the broker's own loggers: this one and those below it
BROKER_LOGGER_ROOT = "kafkatool"

#: log4j level -> Python level.  TRACE sits below DEBUG, FATAL is CRITICAL, OFF is above it
#: (the level kafkatool already silences a logger with)
LEVELS: dict[str, int] = {
    "TRACE": 5,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 1,
}
#: LogLevelConfig.VALID_LOG_LEVELS: what a SET may ask for (not OFF)
VALID_LOG_LEVELS = frozenset(LEVELS) - {"OFF"}
_BY_VALUE = sorted((v, k) for k, v in LEVELS.items())

#: what SET and DELETE changed in this process (logger -> level, None: unset), handed to the
#: other processes of a broker of several (kafkatool.processes)
_overrides: dict[str, str | None] = {}


def level_name(level: int) -> str:
    """A Python level in log4j's names: the highest log4j level at or below it (TRACE below all)."""
    name = "TRACE"
    for value, n in _BY_VALUE:
        if value <= level:
            name = n
    return name


def _is_broker_logger(name: str) -> bool:
    return name == BROKER_LOGGER_ROOT or name.startswith(BROKER_LOGGER_ROOT + ".")


def _logger(name: str) -> logging.Logger | None:
    """An existing logger of the broker (Log4jController.existingLogger): never creates one."""
    if name == ROOT_LOGGER:
        return logging.getLogger()
    if not _is_broker_logger(name):
        return None
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def loggers() -> dict[str, str]:
    """Log4jController.loggers: "root" and every existing logger of the broker (:func:`_logger`)
    with its effective level."""
    out = {ROOT_LOGGER: level_name(logging.getLogger().getEffectiveLevel())}
    for name in list(logging.Logger.manager.loggerDict):
        lg = _logger(name)
        if lg is not None:
            out[name] = level_name(lg.getEffectiveLevel())
    return out


def validate(name: str, op: int, value: str | None) -> tuple[str, str] | None:
    """RuntimeLoggerManager.validateLogLevelConfigs for one operation: (error kind, message),
    kind "request" (INVALID_REQUEST) or "config" (INVALID_CONFIG); None when it may be applied."""
    if op == 0:  # SET
        if _logger(name) is None:
            return "config", f"Logger {name} does not exist!"
        if value not in VALID_LOG_LEVELS:
            return "config", (
                f"Cannot set the log level of {name} to {value} as it is not a supported log level. "
                f"Valid log levels are {', '.join(sorted(VALID_LOG_LEVELS))}"
            )
        return None
    if op == 1:  # DELETE
        if _logger(name) is None:
            return "config", f"Logger {name} does not exist!"
        if name == ROOT_LOGGER:
            return "request", f"Removing the log level of the {ROOT_LOGGER} logger is not allowed"
        return None
    what = {2: "APPEND", 3: "SUBTRACT"}.get(op)
    if what is not None:
        return "request", f"{what} operation is not allowed for the BROKER_LOGGER resource"
    return "request", f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource"


def set_level(name: str, level: str | None) -> bool:
    """SET (a log4j level) or DELETE (None) on an existing logger; False if there is none."""
    lg = _logger(name)
    if lg is None:
        return False
    lg.setLevel(logging.NOTSET if level is None else LEVELS[level])
    _overrides[name] = level
    return True


def overrides() -> dict[str, str | None]:
    return dict(_overrides)


def apply_overrides(changes: dict[str, str | None]) -> None:
    """Another process's SET/DELETEs (a member of a broker of several processes): the loggers this
    process has take them; one it lacks is created, as the primary had it."""
    for name, level in changes.items():
        if _overrides.get(name, "") == level:
            continue
        if _logger(name) is None and _is_broker_logger(name):
            logging.getLogger(name)
        set_level(name, level if level in LEVELS else None)
