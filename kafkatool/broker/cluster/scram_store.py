"""SCRAM credentials of a ZooKeeper-mode cluster, where Kafka keeps them: the
``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` keys of ``/config/users/<user>`` (Kafka's credential
text ``salt=...,stored_key=...,server_key=...,iterations=N``), changed with a config change
notification that every broker applies.  The SASL server and the user APIs
(broker/security/users) see this store as they see the embedded metadata: a
``user_scram`` dict and ``save()`` after a change."""

from __future__ import annotations

import logging

from kafkatool.broker.security import scram
from kafkatool.zk.client import ZkError

log = logging.getLogger("kafkatool.broker.security")


class ZkScramStore:
    def __init__(self, zk):
        self.zk = zk
        self.user_scram: dict[str, dict[str, str]] = {}
        self._written: dict[str, dict[str, str]] = {}
        self.reload()

    def _creds(self, config: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in config.items() if k in scram.MECHANISMS}

    def reload(self) -> None:
        out = {}
        try:
            for ent in self.zk.entity_configs("users"):
                if "/" in ent.name or ent.config is None:
                    continue  # <user>/clients/<client>: quotas only
                creds = self._creds(ent.config.config)
                if creds:
                    out[ent.name] = creds
        except ZkError as exc:
            log.warning("SCRAM credentials not reloaded: %s", exc)
            return
        self.user_scram = out
        self._written = {u: dict(c) for u, c in out.items()}

    def reload_user(self, user: str) -> None:
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
