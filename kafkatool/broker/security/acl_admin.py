"""The ACL APIs from the client side (``kafkatool acls --bootstrap-server``), on the project's one
admin client."""

from __future__ import annotations

from kafkatool.assign.kafka_client import KafkaAdmin, KafkaAdminError, describe_error
from kafkatool.broker.security import acl as A
from kafkatool.protocol.apis import API_BY_KEY

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31


def _filter_fields(f: A.AclFilter) -> dict:
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation,
        "permission_type": f.permission,
    }


def describe_live(admin: KafkaAdmin, f: A.AclFilter) -> list[A.AclBinding]:
    resp = admin.request(DESCRIBE_ACLS, API_BY_KEY[DESCRIBE_ACLS].request(**_filter_fields(f)))
    if resp.error_code:
        raise KafkaAdminError(
            f"DescribeAcls: {describe_error(resp.error_code, resp.error_message)}", resp.error_code
        )
    return [
        A.AclBinding(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )
        for r in resp.resources
        for a in r.acls
    ]


def create_live(admin: KafkaAdmin, bindings: list[A.AclBinding]) -> list[str]:
    """CreateAcls: one error text per binding ("" when created)."""
    from kafkatool.protocol.generated.create_acls_request import AclCreation

    req = API_BY_KEY[CREATE_ACLS].request(
        creations=[
            AclCreation(
                resource_type=b.resource_type,
                resource_name=b.name,
                resource_pattern_type=b.pattern_type,
                principal=b.principal,
                host=b.host,
                operation=b.operation,
                permission_type=b.permission,
            )  # fmt: skip
            for b in bindings
        ]
    )
    resp = admin.request(CREATE_ACLS, req)
    return [describe_error(r.error_code, r.error_message) if r.error_code else "" for r in resp.results]


def delete_live(admin: KafkaAdmin, filters: list[A.AclFilter]) -> list[A.AclBinding]:
    from kafkatool.protocol.generated.delete_acls_request import DeleteAclsFilter

    req = API_BY_KEY[DELETE_ACLS].request(filters=[DeleteAclsFilter(**_filter_fields(f)) for f in filters])
    resp = admin.request(DELETE_ACLS, req)
    out = []
    for r in resp.filter_results:
        if r.error_code:
            raise KafkaAdminError(
                f"DeleteAcls: {describe_error(r.error_code, r.error_message)}", r.error_code
            )
        out += [
            A.AclBinding(
                m.resource_type,
                m.resource_name,
                m.pattern_type,
                m.principal,
                m.host,
                m.operation,
                m.permission_type,
            )
            for m in r.matching_acls
            if not m.error_code
        ]
    return out
