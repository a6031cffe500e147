"""Offline readers on top of the storage engine: ``verify`` and ``dump``.

Kafka keeps DumpLogSegments out of its storage module; so do we. These modules
read what ``kafkatool.log`` and ``kafkatool.formats`` give them and never write
to a log dir.
"""
