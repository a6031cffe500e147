"""SCRAM credentials of a ZooKeeper-mode cluster, where Kafka keeps them: the
``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` keys of ``/config/users/<sanitized user>`` (Kafka's
credential text ``salt=...,stored_key=...,server_key=...,iterations=N``; the user principal
through Sanitizer, ``alice%40EXAMPLE.COM``, by zk/client's entity-config functions), changed
with a config change notification that every broker applies (UserConfigHandler: the user
desanitized, never ``<default>``, whose znode holds quotas only).  The SASL server and the user APIs
(broker/security/users) see this store as they see the embedded metadata: a
``user_scram`` dict and ``save()`` after a change."""

from __future__ import annotations

import logging

from kafkatool.broker.security import scram
from kafkatool.zk.client import ZkError
from kafkatool.zk.paths import DEFAULT

log = logging.getLogger("kafkatool.broker.security")


class ZkScramStore:
    def __init__(self, zk):
        self.zk = zk
        self.user_scram: dict[str, dict[str, str]] = {}
        self._written: dict[str, dict[str, str]] = {}
        #: user znodes whose names do not desanitize, logged once each
        self._refused: set[str] = set()
        self.reload()

    def _creds(self, config: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in config.items() if k in scram.MECHANISMS}

    def reload(self) -> None:
        out = {}
        try:
            for ent in self.zk.entity_configs("users"):
                if ent.error is not None and ent.path not in self._refused:
                    self._refused.add(ent.path)
                    log.error("SCRAM credentials of %s not loaded: %s", ent.path, ent.error)
                if ent.client is not None or ent.config is None or ent.name is DEFAULT:
                    continue  # <user>/clients/<client> and <default>: quotas only
                creds = self._creds(ent.config.config)
                if creds:
                    out[ent.name] = creds
        except ZkError as exc:
            log.warning("SCRAM credentials not reloaded: %s", exc)
            return
        self.user_scram = out
        self._written = {u: dict(c) for u, c in out.items()}

    def reload_user(self, user: str) -> None:
        """A change notification of ``users/<sanitized user>``, ``user`` desanitized."""
        if user is DEFAULT:
            return
        try:
            ent = self.zk.entity_config("users", user)
        except ZkError as exc:
            log.warning("SCRAM credentials of %s not reloaded: %s", user, exc)
            return
        creds = self._creds(ent.config.config) if ent is not None and ent.config is not None else {}
        users = dict(self.user_scram)
        if creds:
            users[user] = creds
        else:
            users.pop(user, None)
        self.user_scram = users
        self._written = {u: dict(c) for u, c in users.items()}

    def save(self) -> None:
        """AdminZkClient.changeUserOrUserClientIdConfig for every user whose credentials changed."""
        for user in sorted(set(self.user_scram) | set(self._written)):
            now, before = self.user_scram.get(user, {}), self._written.get(user, {})
            if now == before:
                continue
            self.zk.change_entity_config(
                "users", user, set_keys=now, delete_keys=[m for m in before if m not in now]
            )
        self._written = {u: dict(c) for u, c in self.user_scram.items()}
