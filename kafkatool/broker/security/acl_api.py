"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31) with Kafka's answers: SECURITY_DISABLED
without an authorizer; the filters and validation of :mod:`kafkatool.broker.security.acl`."""

from __future__ import annotations

import logging

from kafkatool.broker.processes import once_applied
from kafkatool.broker.security import acl as A
from kafkatool.protocol.errors import ErrorCode as E

log = logging.getLogger("kafkatool.broker.security")
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _filter(r) -> A.AclFilter:
    return A.AclFilter(
        r.resource_type_filter,
        r.resource_name_filter,
        getattr(r, "pattern_type_filter", A.LITERAL)
        if getattr(r, "pattern_type_filter", None) is not None
        else A.LITERAL,
        r.principal_filter,
        r.host_filter,
        r.operation,
        r.permission_type,
    )


def handle_describe_acls(ctx, req):
    from kafkatool.protocol.generated.describe_acls_response import (
        AclDescription,
        DescribeAclsResource,
        DescribeAclsResponse,
    )

    auth = getattr(ctx.broker, "authorizer", None)
    if auth is None:
        return DescribeAclsResponse(
            throttle_time_ms=0, error_code=int(E.SECURITY_DISABLED), error_message=NO_AUTHORIZER, resources=[]
        )
    try:
        found = auth.describe(_filter(req))
    except A.AclError as exc:
        return DescribeAclsResponse(
            throttle_time_ms=0, error_code=int(exc.code), error_message=str(exc), resources=[]
        )
    by_resource: dict[tuple[int, str, int], list] = {}
    for b in found:
        by_resource.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
            AclDescription(
                principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission
            )
        )
    return DescribeAclsResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        resources=[
            DescribeAclsResource(resource_type=rt, resource_name=n, pattern_type=pt, acls=acls)
            for (rt, n, pt), acls in sorted(by_resource.items())
        ],
    )


def handle_create_acls(ctx, req):
    from kafkatool.protocol.generated.create_acls_response import AclCreationResult, CreateAclsResponse

    auth = getattr(ctx.broker, "authorizer", None)
    if auth is None:
        return CreateAclsResponse(
            throttle_time_ms=0,
            results=[
                AclCreationResult(error_code=int(E.SECURITY_DISABLED), error_message=NO_AUTHORIZER)
                for _ in req.creations
            ],
        )
    bindings = [
        A.AclBinding(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type if c.resource_pattern_type is not None else A.LITERAL,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        for c in req.creations
    ]
    results = auth.create(bindings)
    for b, err in zip(bindings, results, strict=True):
        if err is None:
            log.info("ACL created: %s", b.to_json())
    resp = CreateAclsResponse(
        throttle_time_ms=0,
        results=[
            AclCreationResult(error_code=0, error_message=None)
            if err is None
            else AclCreationResult(error_code=int(err.code), error_message=str(err))
            for err in results
        ],
    )
    return once_applied(ctx.broker, resp)


def handle_delete_acls(ctx, req):
    from kafkatool.protocol.generated.delete_acls_response import (
        DeleteAclsFilterResult,
        DeleteAclsMatchingAcl,
        DeleteAclsResponse,
    )

    auth = getattr(ctx.broker, "authorizer", None)
    if auth is None:
        return DeleteAclsResponse(
            throttle_time_ms=0,
            filter_results=[
                DeleteAclsFilterResult(
                    error_code=int(E.SECURITY_DISABLED), error_message=NO_AUTHORIZER, matching_acls=[]
                )
                for _ in req.filters
            ],
        )
    outcomes = auth.delete([_filter(f) for f in req.filters])
    results = []
    for out in outcomes:
        if isinstance(out, A.AclError):
            results.append(
                DeleteAclsFilterResult(error_code=int(out.code), error_message=str(out), matching_acls=[])
            )
            continue
        for b in out:
            log.info("ACL deleted: %s", b.to_json())
        results.append(
            DeleteAclsFilterResult(
                error_code=0,
                error_message=None,
                matching_acls=[
                    DeleteAclsMatchingAcl(
                        error_code=0,
                        error_message=None,
                        resource_type=b.resource_type,
                        resource_name=b.name,
                        pattern_type=b.pattern_type,
                        principal=b.principal,
                        host=b.host,
                        operation=b.operation,
                        permission_type=b.permission,
                    )  # fmt: skip
                    for b in out
                ],
            )
        )
    return once_applied(ctx.broker, DeleteAclsResponse(throttle_time_ms=0, filter_results=results))


def register(router) -> None:
    router.register(DESCRIBE_ACLS, 0, 3, handle_describe_acls)
    router.register(CREATE_ACLS, 0, 3, handle_create_acls)
    router.register(DELETE_ACLS, 0, 3, handle_delete_acls)
