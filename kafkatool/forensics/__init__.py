"""Offline readers on top of the storage engine: ``verify`` and ``dump``.

Kafka keeps DumpLogSegments out of its storage module; so do we. These modules
read what ``kafkatool.log`` and ``kafkatool.formats`` give them and never write
to a log dir.
"""

#: kafka-dump-log.sh's --max-bytes default (Integer.MAX_VALUE) and --max-message-size default
#: (5 MiB); here, not in dump.py, so that ``kafkatool dump-log --help`` shows them without
#: importing the readers (the CLI imports a command's modules when that command runs)
INT32_MAX = 2**31 - 1
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
