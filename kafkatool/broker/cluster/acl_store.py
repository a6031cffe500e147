"""The ACLs of a ZooKeeper-mode cluster, where Kafka's AclAuthorizer keeps them.

``/kafka-acl/<ResourceType>/<name>`` (literal) and ``/kafka-acl-extended/prefixed/...``
hold one JSON set per resource; a change is announced with a sequential
``/kafka-acl-changes/acl_changes_`` (``ResourceType:name``) or
``/kafka-acl-extended-changes/acl_changes_`` node, and every broker reloads.  The
authorizer (broker/security/acl.Authorizer) sees this store as it sees the embedded
metadata: an ``acls`` list and ``save()`` after a change.
"""

from __future__ import annotations

import contextlib
import logging
import re

from kafkatool.broker.security import acl as A
from kafkatool.zk import codecs, paths
from kafkatool.zk.client import ZkError, ZkNodeExistsError, ZkNoNodeError

log = logging.getLogger("kafkatool.broker.security")


def _camel(name: str) -> str:
    """CLUSTER_ACTION -> ClusterAction (ZooKeeper's spelling of Kafka's enums)."""
    return "".join(w.capitalize() for w in name.split("_"))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def to_zk(b: A.AclBinding) -> tuple[tuple[str, str, str], codecs.Acl]:
    key = (_camel(A.RESOURCE_TYPES[b.resource_type]), b.name, A.PATTERN_TYPES[b.pattern_type])
    return key, codecs.Acl(
        b.principal, _camel(A.PERMISSIONS[b.permission]), _camel(A.OPERATIONS[b.operation]), b.host
    )


def from_zk(resource_type: str, name: str, pattern_type: str, a: codecs.Acl) -> A.AclBinding:
    return A.AclBinding(
        A.RT[_snake(resource_type)],
        name,
        A.PT[pattern_type.upper()],
        a.principal,
        a.host,
        A.OP[_snake(a.operation)],
        A.PERM[a.permission_type.upper()],
    )


class ZkAclStore:
    def __init__(self, zk):
        self.zk = zk
        self.acls: list[A.AclBinding] = self._load()
        self._written = set(self.acls)

    def _load(self) -> list[A.AclBinding]:
        out = []
        for res in self.zk.acl_resources():
            if res.acls is None:
                log.warning("%s: %s", res.path, res.error)
                continue
            for a in res.acls.acls:
                try:
                    out.append(from_zk(res.resource_type, res.name, res.pattern_type, a))
                except KeyError:
                    log.warning("%s: an ACL this broker does not know: %s", res.path, a)
        return sorted(set(out))

    def reload(self, *_args) -> bool:
        try:
            fresh = self._load()
        except ZkError as exc:
            log.warning("ACLs not reloaded: %s", exc)
            return True
        self.acls = fresh
        self._written = set(fresh)
        return True

    def watch(self) -> None:
        from kazoo.recipe.watchers import ChildrenWatch

        for p in (paths.KAFKA_ACL_CHANGES, paths.KAFKA_ACL_EXTENDED_CHANGES):
            with contextlib.suppress(ZkNodeExistsError):
                self.zk.ensure_path(p)
            ChildrenWatch(self.zk.kazoo, p, self.reload)

    def save(self) -> None:
        """Write every resource whose ACL set changed, then announce it (AclAuthorizer's
        updateResourceAcls + the change notification)."""
        now = set(self.acls)
        touched = {to_zk(b)[0] for b in now ^ self._written}
        for key in sorted(touched):
            rtype, name, pattern = key
            acls = [to_zk(b)[1] for b in sorted(now) if to_zk(b)[0] == key]
            path = paths.acl_resource(rtype, name, pattern)
            if acls:
                data = codecs.encode_acls(acls)
                try:
                    self.zk.set(path, data)
                except ZkNoNodeError:
                    self.zk.create(path, data, makepath=True)
            else:
                with contextlib.suppress(ZkNoNodeError):
                    self.zk.delete(path)
            change_root = (
                paths.KAFKA_ACL_CHANGES if pattern == "LITERAL" else paths.KAFKA_ACL_EXTENDED_CHANGES
            )
            self.zk.create(
                f"{change_root}/{paths.ACL_CHANGE_PREFIX}",
                codecs.encode_acl_change(rtype, name, pattern),
                sequence=True,
                makepath=True,
            )
        self._written = now
