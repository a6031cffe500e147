"""One module per API family; ``register_all`` fills the router (and so the ApiVersions table)."""

from __future__ import annotations


def register_all(router) -> None:
    from kafkatool.broker.handlers import admin, api_versions, fetch, group, metadata, offsets, produce

    # group last: its FindCoordinator (which creates __consumer_offsets) replaces metadata's
    for module in (api_versions, metadata, produce, fetch, offsets, admin, group):
        module.register(router)
    from kafkatool.broker.handlers import reassignments

    reassignments.register(router)
    from kafkatool.broker.handlers import txn

    txn.register(router)  # after produce: takes over InitProducerId (22) for transactional ids
    from kafkatool.broker.handlers import client_quotas

    client_quotas.register(router)
