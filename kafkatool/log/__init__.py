"""The storage engine on files: segments, partition logs, log dirs, recovery, retention, cleaning."""
