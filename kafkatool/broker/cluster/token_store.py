"""Delegation tokens of a ZooKeeper-mode cluster, where Kafka keeps them (DelegationTokenManagerZk,
KafkaZkClient): ``/delegation_token/tokens/<tokenId>`` holds DelegationTokenInfoZNode's JSON
(zk/codecs), and every change writes a ``/delegation_token/token_changes/token_change_<seq>``
node holding the token id, which every broker's listener (ZkNodeChangeNotificationListener)
answers by reading that token again (gone: removed from its cache).  Notifications older than
15 minutes are deleted as the listener purges them.  security/tokens.TokenManager sees this
store as it sees the embedded one: ``tokens()``, ``put``, ``remove``."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from kafkatool.zk import codecs, paths
from kafkatool.zk.client import ZkError, ZkNoNodeError

log = logging.getLogger("kafkatool.broker.security")

#: ZkNodeChangeNotificationListener's changeExpirationMs
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class ZkTokenStore:
    def __init__(self, zk, *, enabled: bool):
        self.zk = zk
        self.enabled = enabled
        self._tokens: dict[str, codecs.DelegationTokenInfo] = {}
        self._lock = threading.Lock()
        self._last_change: str | None = None
        if enabled:
            # KafkaZkClient.createDelegationTokenPaths, then loadCache
            for p in (paths.DELEGATION_TOKEN_CHANGES, paths.DELEGATION_TOKENS):
                with contextlib.suppress(ZkError):
                    self.zk.ensure_path(p)
            self._load_all()

    def _read(self, token_id: str) -> codecs.DelegationTokenInfo | None:
        path = paths.join(paths.DELEGATION_TOKENS, token_id)
        node = self.zk.get_or_none(path)
        if node is None:
            return None
        try:
            return codecs.decode_delegation_token(node.data, path)
        except codecs.ZkPayloadError as exc:
            log.error("Error while getting Token for tokenId: %s: %s", token_id, exc)
            return None

    def _load_all(self) -> None:
        ids = self.zk.children_or_empty(paths.DELEGATION_TOKENS)
        log.info("Loading the token cache. Total token count: %d", len(ids))
        tokens = {}
        for tid in ids:
            info = self._read(tid)
            if info is not None:
                tokens[tid] = info
        with self._lock:
            self._tokens = tokens

    def tokens(self) -> dict[str, codecs.DelegationTokenInfo]:
        with self._lock:
            return dict(self._tokens)

    def _notify(self, token_id: str) -> None:
        self.zk.create(
            paths.join(paths.DELEGATION_TOKEN_CHANGES, paths.TOKEN_CHANGE_PREFIX),
            codecs.encode_token_change(token_id),
            sequence=True,
        )

    def put(self, info: codecs.DelegationTokenInfo) -> None:
        """DelegationTokenManagerZk.updateToken: setOrCreateDelegationToken, then the notification."""
        path = paths.join(paths.DELEGATION_TOKENS, info.token_id)
        data = codecs.encode_delegation_token(info)
        try:
            self.zk.set(path, data)
        except ZkNoNodeError:
            self.zk.create(path, data)
        with self._lock:
            self._tokens = {**self._tokens, info.token_id: info}
        self._notify(info.token_id)

    def remove(self, token_id: str) -> None:
        """DelegationTokenManagerZk.removeToken: delete the znode, then the notification."""
        with contextlib.suppress(ZkNoNodeError):
            self.zk.delete(paths.join(paths.DELEGATION_TOKENS, token_id), recursive=True)
        with self._lock:
            self._tokens = {t: i for t, i in self._tokens.items() if t != token_id}
        self._notify(token_id)

    # ------------------------------------------------------------------ the listener
    def watch(self) -> None:
        if not self.enabled:
            return
        from kazoo.recipe.watchers import ChildrenWatch

        ChildrenWatch(self.zk.kazoo, paths.DELEGATION_TOKEN_CHANGES, self._changes)

    def _changes(self, children) -> bool:
        """TokenChangedNotificationHandler for every notification newer than the last one taken."""
        seqs = sorted(c for c in children if c.startswith(paths.TOKEN_CHANGE_PREFIX))
        try:
            if self._last_change is None:
                # the start-up load read every token already
                self._last_change = seqs[-1] if seqs else ""
            for child in [c for c in seqs if c > self._last_change]:
                self._last_change = child
                node = self.zk.get_or_none(paths.join(paths.DELEGATION_TOKEN_CHANGES, child))
                if node is None:
                    continue
                token_id = bytes(node.data or b"").decode("utf-8", "replace")
                log.info("Processing Token Notification for tokenId: %s", token_id)
                info = self._read(token_id)
                with self._lock:
                    tokens = dict(self._tokens)
                    if info is None:
                        tokens.pop(token_id, None)
                    else:
                        tokens[token_id] = info
                    self._tokens = tokens
            self._purge(seqs)
        except ZkError as exc:
            log.warning("delegation token notifications not processed: %s", exc)
        return True

    def _purge(self, seqs: list[str]) -> None:
        """ZkNodeChangeNotificationListener.purgeObsoleteNotifications."""
        now = time.time() * 1000
        for child in seqs:
            path = paths.join(paths.DELEGATION_TOKEN_CHANGES, child)
            stat = self.zk.exists(path)
            if stat is not None and now - stat.ctime_ms > CHANGE_EXPIRATION_MS:
                with contextlib.suppress(ZkNoNodeError):
                    self.zk.delete(path)
