"""Kafka's ZooKeeper layout (ZK-mode clusters, 0.9-3.x), shared by `zk`, `reassign` and the broker.

- ``paths``: every path Kafka uses (``paths.topic(t)``, ``paths.partition_state(t, p)``,
  ``paths.REASSIGN_PARTITIONS``...), ``split_connect("h:2181/chroot")`` -> (hosts, chroot),
  ``classify(path)`` -> what Kafka stores there.
- ``sanitizer``: Kafka's Sanitizer (``sanitize``/``desanitize``), the names of user principals and
  client ids in ZooKeeper; ``paths.entity_path(type, name, client)`` applies it.
- ``codecs``: pure, version-tolerant ``decode_*``/``encode_*`` per payload (dataclasses out,
  unknown keys kept in ``extra``; ``ZkPayloadError`` with a byte position otherwise), and
  ``decode_path(path, data)`` picking the codec by path.
- ``client.KafkaZk(connect, timeout=5)``: a kazoo wrapper used as a context manager; paths are
  chroot-relative.  Generic: ``get``/``get_or_none``/``exists``/``children``/``walk``/
  ``get_many``/``create``/``set``/``delete``/``commit`` (one atomic multi).  Typed reads return
  ``Typed(path, value, stat, raw, error)``: ``cluster_id``, ``controller``, ``controller_epoch``,
  ``brokers``, ``sessions``, ``topic_states``, ``reassign_partitions``, ``entity_configs``,
  ``acl_resources``, ``migration``.  Writes: ``create_reassignment``, ``delete_reassignment``,
  ``resign_controller``, ``change_entity_config`` (+ config change notification); the
  entity-config functions take and give real names (sanitized paths inside).  Errors are
  ``ZkError`` subclasses (``ZkConnectionError``, ``ZkNoNodeError``, ``ZkNodeExistsError``,
  ``ZkBadVersionError``, ``ZkNotEmptyError``).
- ``discovery.find_kafka_roots``: the Kafka chroots in a shared ensemble.
- ``check``: ``load_snapshot(zk)`` then the pure ``run_checks(snapshot)`` -> ``Finding`` list.
- ``dump``: JSON dump/restore of a subtree (validated first, written in multi transactions).
"""
