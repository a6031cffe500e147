"""ACLs and the authorizer, with Kafka's AclAuthorizer semantics.

Enabled by ``authorizer.class.name`` (Kafka's ``kafka.security.authorizer.AclAuthorizer``, or
KRaft's ``org.apache.kafka.metadata.authorizer.StandardAuthorizer``: the same rules).  An ACL
binds a resource pattern (type, name, LITERAL or PREFIXED; the literal name ``*`` matches every
name) to an entry (principal ``User:name`` or ``User:*``, host or ``*``, operation, ALLOW or DENY).

A request is allowed (AclAuthorizer.authorizeAction) when the principal is one of
``super.users``; or no ACL at all names the resource and ``allow.everyone.if.no.acl.found`` is
true; or no DENY entry matches and an ALLOW entry matches the operation or one that implies it
(DESCRIBE is implied by READ, WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS; ALL
implies every operation).  The ACLs live where this broker keeps its metadata (the embedded
metadata of the log dir), so they survive restarts and ``kafkatool acls --log-dir`` reads them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kafkatool.errors import KafkatoolError
from kafkatool.formats.acl_codes import OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES
from kafkatool.protocol.errors import ErrorCode

# Kafka's codes: formats/acl_codes, the one table
RT = {v: k for k, v in RESOURCE_TYPES.items()}
PT = {v: k for k, v in PATTERN_TYPES.items()}
OP = {v: k for k, v in OPERATIONS.items()}
PERM = {v: k for k, v in PERMISSIONS.items()}

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
LITERAL, PREFIXED, ANY_PATTERN, MATCH = 3, 4, 1, 2
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALL = 9, 10, 11, 12, 2
DENY, ALLOW = 2, 3
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
#: the principal of calls between the processes of one broker (broker/processes.py)
PROCESS_PRINCIPAL = "Internal:kafkatool-processes"
WILDCARD_PRINCIPAL = "User:*"

#: ResourceType -> the operations an ACL may name (AclEntry.supportedOperations); ALL always
SUPPORTED_OPERATIONS = {
    TOPIC: {READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS},
    GROUP: {READ, DESCRIBE, DELETE},
    CLUSTER: {CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE},
    TRANSACTIONAL_ID: {DESCRIBE, WRITE},
    DELEGATION_TOKEN: {DESCRIBE},
    USER: {13, 14},
}
#: operation -> the operations whose ALLOW also allows it (AclAuthorizer.authorizeAction)
IMPLIED_BY = {
    DESCRIBE: {DESCRIBE, READ, WRITE, DELETE, ALTER},
    DESCRIBE_CONFIGS: {DESCRIBE_CONFIGS, ALTER_CONFIGS},
}

AUTHORIZER_CLASSES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)


class AclError(KafkatoolError):
    """An ACL that Kafka would refuse (code: the error code a CreateAcls result carries)."""

    def __init__(self, message: str, code: int = ErrorCode.INVALID_REQUEST):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, order=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def to_json(self) -> dict:
        return {
            "resource_type": RESOURCE_TYPES.get(self.resource_type, str(self.resource_type)),
            "name": self.name,
            "pattern_type": PATTERN_TYPES.get(self.pattern_type, str(self.pattern_type)),
            "principal": self.principal,
            "host": self.host,
            "operation": OPERATIONS.get(self.operation, str(self.operation)),
            "permission": PERMISSIONS.get(self.permission, str(self.permission)),
        }

    @classmethod
    def from_json(cls, d: dict) -> AclBinding:
        return cls(
            RT[d["resource_type"]], d["name"], PT[d["pattern_type"]], d["principal"], d["host"],
            OP[d["operation"]], PERM[d["permission"]],
        )  # fmt: skip

    def validate(self) -> None:
        """AclAuthorizer's checks of a new binding (and the request's: concrete types only)."""
        if self.resource_type not in SUPPORTED_OPERATIONS:
            raise AclError(
                f"Invalid resource type {RESOURCE_TYPES.get(self.resource_type, self.resource_type)}"
            )
        if self.pattern_type not in (LITERAL, PREFIXED):
            raise AclError(f"Invalid pattern type {PATTERN_TYPES.get(self.pattern_type, self.pattern_type)}")
        if self.permission not in (ALLOW, DENY):
            raise AclError(f"Invalid permission type {PERMISSIONS.get(self.permission, self.permission)}")
        if self.operation != ALL and self.operation not in SUPPORTED_OPERATIONS[self.resource_type]:
            raise AclError(
                f"ACL binding contains invalid operation {OPERATIONS.get(self.operation, self.operation)} for "
                f"resource type {RESOURCE_TYPES[self.resource_type]}"
            )
        if not self.name:
            raise AclError("Resource name must not be empty")
        if self.resource_type == CLUSTER and self.name != CLUSTER_NAME:
            raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if self.pattern_type == PREFIXED and self.name == WILDCARD:
            raise AclError("Prefixed resource patterns may not use the wildcard name")
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise AclError(f"Invalid principal {self.principal!r}: expected <type>:<name>, e.g. User:alice")


@dataclass(frozen=True)
class AclFilter:
    """AclBindingFilter: None or ANY matches anything; pattern MATCH matches what would apply."""

    resource_type: int = 1
    name: str | None = None
    pattern_type: int = ANY_PATTERN
    principal: str | None = None
    host: str | None = None
    operation: int = 1
    permission: int = 1

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != 1 and self.resource_type != b.resource_type:
            return False
        if self.pattern_type == MATCH:
            if self.name is not None and not _applies(b, self.name):
                return False
        else:
            if self.pattern_type != ANY_PATTERN and self.pattern_type != b.pattern_type:
                return False
            if self.name is not None and self.name != b.name:
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != 1 and self.operation != b.operation:
            return False
        return self.permission == 1 or self.permission == b.permission

    def validate(self) -> None:
        if self.resource_type == 0 or self.pattern_type == 0 or self.operation == 0 or self.permission == 0:
            raise AclError("Filter contains UNKNOWN elements")


def _applies(b: AclBinding, name: str) -> bool:
    """Does the binding's pattern cover a resource called ``name``?"""
    if b.pattern_type == LITERAL:
        return b.name == name or b.name == WILDCARD
    if b.pattern_type == PREFIXED:
        return name.startswith(b.name)
    return False


class Authorizer:
    """The ACLs of this broker and the decision of each request."""

    def __init__(self, store, *, super_users: str | None, allow_if_no_acl: bool):
        self.store = store
        self.super_users = {p.strip() for p in (super_users or "").split(";") if p.strip()}
        # the processes of one broker ask each other (WriteTxnMarkers, KIP-890 verification)
        # as this principal, which no client can have (theirs are User:)
        self.super_users.add(PROCESS_PRINCIPAL)
        self.allow_if_no_acl = allow_if_no_acl

    @property
    def acls(self) -> list[AclBinding]:
        return self.store.acls

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        on_resource = [b for b in self.acls if b.resource_type == resource_type and _applies(b, name)]
        if not on_resource:
            return self.allow_if_no_acl

        def entry(b: AclBinding, perm: int, ops) -> bool:
            return (
                b.permission == perm
                and (b.principal == principal or b.principal == WILDCARD_PRINCIPAL)
                and (b.host == host or b.host == WILDCARD)
                and (b.operation == ALL or b.operation in ops)
            )

        if any(entry(b, DENY, {operation}) for b in on_resource):
            return False
        allowed = IMPLIED_BY.get(operation, {operation})
        return any(entry(b, ALLOW, allowed) for b in on_resource)

    def any_allowed(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """AclAuthorizer.authorizeByResourceType: may the principal do ``operation`` on SOME
        resource of the type (KafkaApis asks it of WRITE on topics for an InitProducerId without a
        transactional id)?  Only the operation itself or ALL counts (no implied operations).
        Denied by a DENY on the literal ``*``; otherwise allowed everywhere when
        ``allow.everyone.if.no.acl.found`` is set; otherwise by an ALLOW, PREFIXED whose prefix no
        DENY prefix dominates, or LITERAL (``*``, or a name neither denied literally nor under a
        DENY prefix)."""
        if principal in self.super_users:
            return True

        def names(perm: int, pattern: int) -> set[str]:
            return {
                b.name
                for b in self.acls
                if b.resource_type == resource_type
                and b.pattern_type == pattern
                and b.permission == perm
                and b.principal in (principal, WILDCARD_PRINCIPAL)
                and b.host in (host, WILDCARD)
                and b.operation in (ALL, operation)
            }

        deny_literals = names(DENY, LITERAL)
        if WILDCARD in deny_literals:
            return False
        if self.allow_if_no_acl:
            return True
        deny_prefixes = names(DENY, PREFIXED)

        def dominated(name: str) -> bool:  # some DENY prefix is a prefix of ``name``
            return any(name.startswith(p) for p in deny_prefixes)

        return any(not dominated(p) for p in names(ALLOW, PREFIXED)) or any(
            n == WILDCARD or (n not in deny_literals and not dominated(n)) for n in names(ALLOW, LITERAL)
        )

    # ------------------------------------------------------------------ changes
    def create(self, bindings: list[AclBinding]) -> list[AclError | None]:
        results: list[AclError | None] = []
        current = set(self.acls)
        added = []
        for b in bindings:
            try:
                b.validate()
            except AclError as exc:
                results.append(exc)
                continue
            if b not in current:
                current.add(b)
                added.append(b)
            results.append(None)
        if added:
            self.store.acls = sorted(current)
            self.store.save()
        return results

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding] | AclError]:
        out: list[list[AclBinding] | AclError] = []
        remaining = list(self.acls)
        for f in filters:
            try:
                f.validate()
            except AclError as exc:
                out.append(exc)
                continue
            gone = [b for b in remaining if f.matches(b)]
            remaining = [b for b in remaining if not f.matches(b)]
            out.append(gone)
        if len(remaining) != len(self.acls):
            self.store.acls = remaining
            self.store.save()
        return out

    def describe(self, f: AclFilter) -> list[AclBinding]:
        f.validate()
        return [b for b in self.acls if f.matches(b)]


def requester(ctx) -> tuple[str, str]:
    """(principal, host) of a request as ACLs match them: the connection's principal and the
    peer's address without its port."""
    conn = ctx.connection
    host = getattr(conn, "peer", "") or ""
    host = host.rsplit(":", 1)[0].strip("[]")
    return getattr(conn, "principal", "User:ANONYMOUS"), host


def authorized_operations(ctx, resource_type: int, name: str) -> int:
    """The authorized-operations bitfield of a resource for the requester (AuthHelper
    .authorizedOperations): bit N set for each operation code N of the type's supported operations
    (AclEntry.supportedOperations) that the authorizer allows on the resource, implied operations
    included; every supported operation without an authorizer.  Metadata (v8-v10) and
    DescribeCluster tell the cluster's operations only to who may DESCRIBE the cluster (0 to
    others); the topics and groups asked about have passed their API's DESCRIBE check already."""
    ops = SUPPORTED_OPERATIONS[resource_type]
    auth = getattr(ctx.broker, "authorizer", None)
    if auth is not None:
        principal, host = requester(ctx)
        if resource_type == CLUSTER and not auth.authorize(principal, host, DESCRIBE, CLUSTER, name):
            return 0
        ops = {op for op in ops if auth.authorize(principal, host, op, resource_type, name)}
    bits = 0
    for op in ops:
        bits |= 1 << op
    return bits


def binding_json(b: AclBinding) -> dict:
    return asdict(b)


def enabled(config) -> bool:
    """``authorizer.class.name`` names Kafka's ACL authorizer (anything else: refused at start)."""
    name = (config.get("authorizer.class.name") or "").strip()
    if not name:
        return False
    if name not in AUTHORIZER_CLASSES:
        raise AclError(
            f"authorizer.class.name {name}: kafkatool serve implements {', '.join(AUTHORIZER_CLASSES[:1])} (ACLs)"
        )
    return True
