"""DescribeUserScramCredentials / AlterUserScramCredentials on the credentials the broker stores.

Kafka's rules (ControllerApis / ZkAdminManager): a user named twice in one request is
DUPLICATE_RESOURCE for each of its entries; an unknown mechanism is
UNSUPPORTED_SASL_MECHANISM; iterations outside [4096, 16384] is
UNACCEPTABLE_CREDENTIAL; deleting what does not exist is RESOURCE_NOT_FOUND; Describe of
an unknown user is RESOURCE_NOT_FOUND ("Attempt to describe a user credential that does
not exist").  The salted password arrives already salted (the client never sends the
password): the broker keeps StoredKey/ServerKey from it, as Kafka does.
"""

from __future__ import annotations

from kafkatool.broker.security import scram

DESCRIBE = 50
ALTER = 51
NONE = 0
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
UNSUPPORTED_SASL_MECHANISM = 33


def set_credential(store, user: str, mechanism: str, cred: scram.ScramCredential) -> None:
    store.user_scram.setdefault(user, {})[mechanism] = cred.to_text()


def delete_credential(store, user: str, mechanism: str) -> bool:
    creds = store.user_scram.get(user, {})
    if mechanism not in creds:
        return False
    del creds[mechanism]
    if not creds:
        store.user_scram.pop(user, None)
    return True


def describe(store, users: list[str] | None) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
    """(user, error, message, [(mechanism code, iterations)]) per user; None: every user."""
    names = sorted(store.user_scram) if users is None else users
    out = []
    seen: dict[str, int] = {}
    for u in names:
        seen[u] = seen.get(u, 0) + 1
    for u in dict.fromkeys(names):
        if seen[u] > 1:
            out.append(
                (
                    u,
                    DUPLICATE_RESOURCE,
                    f"Cannot describe SCRAM credentials for the same user twice in a single request: {u}",
                    [],
                )
            )
            continue
        creds = store.user_scram.get(u)
        if not creds:
            out.append(
                (u, RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {u}", [])
            )
            continue
        infos = [
            (scram.CODE_OF[m], scram.ScramCredential.from_text(t).iterations)
            for m, t in sorted(creds.items())
            if m in scram.CODE_OF
        ]
        out.append((u, NONE, None, infos))
    return out


def alter(store, deletions, upsertions) -> list[tuple[str, int, str | None]]:
    """deletions: [(user, mech code)]; upsertions: [(user, mech code, iterations, salt, salted_password)]."""
    users = [d[0] for d in deletions] + [u[0] for u in upsertions]
    order = list(dict.fromkeys(users))
    errors: dict[str, tuple[int, str]] = {}
    pairs = [(d[0], d[1]) for d in deletions] + [(u[0], u[1]) for u in upsertions]
    for u, code in pairs:
        if pairs.count((u, code)) > 1 and u not in errors:
            errors[u] = (
                DUPLICATE_RESOURCE,
                f"A user credential cannot be altered twice in the same request: {u}",
            )
    for u, code in pairs:
        if u in errors:
            continue
        if not u:
            errors[u] = (UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif code not in scram.MECHANISM_CODES:
            errors[u] = (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for u, code, iterations, _salt, salted in upsertions:
        if u in errors:
            continue
        mech = scram.MECHANISM_CODES[code]
        if iterations < scram.MECHANISMS[mech][1]:
            errors[u] = (UNACCEPTABLE_CREDENTIAL, f"Too few iterations: {iterations}")
        elif iterations > scram.MAX_ITERATIONS:
            errors[u] = (UNACCEPTABLE_CREDENTIAL, f"Too many iterations: {iterations}")
        elif not salted or not _salt:
            errors[u] = (UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    for u, code in [(d[0], d[1]) for d in deletions]:
        if u in errors:
            continue
        if scram.MECHANISM_CODES[code] not in store.user_scram.get(u, {}):
            errors[u] = (RESOURCE_NOT_FOUND, f"Attempt to delete a user credential that does not exist: {u}")
    for u, code in [(d[0], d[1]) for d in deletions]:
        if u not in errors:
            delete_credential(store, u, scram.MECHANISM_CODES[code])
    for u, code, iterations, salt, salted in upsertions:
        if u not in errors:
            mech = scram.MECHANISM_CODES[code]
            set_credential(
                store, u, mech, scram.credential_from_salted(mech, bytes(salted), bytes(salt), iterations)
            )
    store.save()
    return [(u, *errors.get(u, (NONE, None))) for u in order]


def handle_describe(ctx, req):
    from kafkatool.protocol.generated import describe_user_scram_credentials_response as R

    names = None if req.users is None else [u.name for u in req.users]
    results = [
        R.DescribeUserScramCredentialsResult(
            user=u,
            error_code=err,
            error_message=msg,
            credential_infos=[R.CredentialInfo(mechanism=m, iterations=i) for m, i in infos],
        )
        for u, err, msg, infos in describe(ctx.broker.metadata, names)
    ]
    return R.DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, results=results
    )


def handle_alter(ctx, req):
    from kafkatool.protocol.generated import alter_user_scram_credentials_response as R

    out = alter(
        ctx.broker.metadata,
        [(d.name, d.mechanism) for d in req.deletions],
        [(u.name, u.mechanism, u.iterations, u.salt, u.salted_password) for u in req.upsertions],
    )
    return R.AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[R.AlterUserScramCredentialsResult(user=u, error_code=e, error_message=m) for u, e, m in out],
    )


def register(router) -> None:
    router.register(DESCRIBE, 0, 0, handle_describe)
    router.register(ALTER, 0, 0, handle_alter)
