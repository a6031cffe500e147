"""Kafka's ACL enum codes and names, as its records and messages carry them.

org.apache.kafka.common.resource.ResourceType and PatternType, acl.AclOperation and
AclPermissionType: the one table, for the authorizer (broker/security/acl.py) and the KRaft
metadata image (AccessControlEntryRecord, formats/metadata_image.py).
"""

from __future__ import annotations

RESOURCE_TYPES = {
    0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
    6: "DELEGATION_TOKEN", 7: "USER",
}  # fmt: skip
PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {
    0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
    8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
    12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS",
}  # fmt: skip
PERMISSIONS = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
