"""Fleet-wide scans of Kafka log dirs on Apache Spark (``kafkatool fleet scan``).

``scan`` (executor side: list a log dir, verify one segment), ``aggregate``
(cross-segment checks, replica comparison), ``job`` (the Spark job), ``inventory``
(FLEET.json), ``package`` (the zip shipped to executors).  pyspark is imported only
inside ``job``'s functions.
"""
