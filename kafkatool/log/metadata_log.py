"""Reading a KRaft ``__cluster_metadata-0`` dir or one of its files into a metadata image.

The one replay of the KRaft metadata log on disk (formats/metadata_image.MetadataImage's
rules): ``kafkatool metadata-shell`` shows it, :func:`kafkatool.log.topic_settings.read_kraft`
takes the topic and broker configs from it.  Read-only: no lock, nothing written, so it runs on
a live broker's dir or on a backup.

* :func:`load_directory` is what a broker loads: the latest snapshot
  (``<20-digit end offset>-<10-digit epoch>.checkpoint``; ``.checkpoint.part`` and
  ``.checkpoint.deleted`` files are not snapshots) and then the log segments' records at or
  after its end offset (MetadataLoader: the snapshot's provenance is its end offset - 1, its
  epoch and its header's lastContainedLogTimestamp, then each batch's last offset, epoch and
  append time).
* :func:`load_file` is kafka-metadata-shell.sh's ``--snapshot`` (SnapshotFileReader): every data
  batch of one file, a snapshot or a log segment, from an empty image.

Damage stops the reading where it is (:class:`Damage`: file, batch offset, byte position, and
the offset the image holds the records up to): an entry whose size or magic is impossible, a
batch whose CRC does not match, records that do not decode, or bytes at the end that are not a
whole batch (a torn write; a zero-filled tail is not damage).  Offsets the dir lacks (a log that
starts after the snapshot's end, or after 0 with no snapshot; a jump between batches) are noted
in :attr:`MetadataLoad.gaps` and the reading goes on.  A record whose value is not a
metadata record Kafka knows, or that the image refuses, is skipped with a note, as Kafka's
loader logs it and goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kafkatool.formats import records as R
from kafkatool.formats.errors import FormatError
from kafkatool.formats.generated import SnapshotHeaderRecord
from kafkatool.formats.internal_topics import cluster_metadata_record_dict
from kafkatool.formats.metadata_image import MetadataImage, Replayer
from kafkatool.formats.schema import SchemaDecodeError
from kafkatool.log.file_records import FileRecords, all_zero_from

SNAPSHOT_SUFFIX = ".checkpoint"
LOG_SUFFIX = ".log"


@dataclass
class Damage:
    """Where reading stopped: the image holds what came before."""

    file: str
    #: the damaged batch's base offset (None when its header could not be read)
    offset: int | None
    position: int
    reason: str
    #: the last offset whose records are in the image (-1: none)
    read_up_to: int

    def line(self) -> str:
        at = f"offset {self.offset}, " if self.offset is not None else ""
        upto = f"offset {self.read_up_to}" if self.read_up_to >= 0 else "no offset (nothing was read)"
        return (
            f"{self.file}: {self.reason} ({at}byte position {self.position}); "
            f"the image holds the records up to {upto}"
        )


@dataclass
class MetadataLoad:
    image: MetadataImage = field(default_factory=MetadataImage)
    #: the files read, in order
    files: list[Path] = field(default_factory=list)
    damage: Damage | None = None
    #: records skipped (not decodable, refused by the image), each "file: offset O (byte P): why"
    notes: list[str] = field(default_factory=list)
    #: batches read, and whether any data batch was
    batches: int = 0
    #: the records of a KIP-868 transaction still open at the end, not in the image
    pending: int = 0
    #: offsets the dir lacks (a log that starts after the snapshot's end, or after 0 with no
    #: snapshot; a jump between batches): the image misses their records
    gaps: list[str] = field(default_factory=list)


def metadata_files(mdir: Path) -> tuple[Path | None, list[Path]]:
    """The latest snapshot (or None) and the log segments, in offset order."""
    snapshots = sorted(p for p in mdir.glob("*" + SNAPSHOT_SUFFIX) if _snapshot_id(p) is not None)
    logs = sorted(p for p in mdir.glob("*" + LOG_SUFFIX) if p.name.split(".")[0].isdigit())
    return (snapshots[-1] if snapshots else None), logs


def _snapshot_id(path: Path) -> tuple[int, int] | None:
    """Snapshots.parse: ``<end offset>-<epoch>.checkpoint``."""
    stem = path.name[: -len(SNAPSHOT_SUFFIX)]
    head, sep, tail = stem.partition("-")
    if not sep or not head.isdigit() or not tail.isdigit():
        return None
    return int(head), int(tail)


class _Reader:
    def __init__(self, load: MetadataLoad):
        self.load = load
        self.replayer = Replayer(load.image)
        self.last_read = -1
        #: the offset the next log batch should start at (directory mode)
        self.next_offset: int | None = None

    def read(self, path: Path, *, snapshot: bool, start: int = 0, file_mode: bool = False) -> bool:
        """Apply ``path``'s records at offsets >= ``start``; False once damage stopped it."""
        load = self.load
        load.files.append(path)
        with FileRecords(path) as fr:
            pos = 0
            try:
                for batch in fr.batches():
                    pos = batch.position
                    if not self._batch(path, batch, snapshot=snapshot, start=start, file_mode=file_mode):
                        return False
                    pos = batch.end
            except FormatError as exc:
                where = exc.position if exc.position is not None else pos
                load.damage = Damage(
                    str(path), None, where, f"unreadable entry: {exc.message}", self.last_read
                )
                return False
            if pos < fr.size and not all_zero_from(fr.buf, pos):
                load.damage = Damage(
                    str(path),
                    None,
                    pos,
                    f"{fr.size - pos} bytes at the end are not a whole batch (a torn write)",
                    self.last_read,
                )
                return False
        return True

    def _batch(self, path: Path, batch, *, snapshot: bool, start: int, file_mode: bool) -> bool:
        load = self.load
        damage = None
        if batch.magic != 2:
            damage = f"magic {batch.magic} batch: the metadata log has only v2 batches"
        elif not batch.is_valid():
            damage = "batch CRC does not match its bytes"
        if damage is not None:
            load.damage = Damage(str(path), batch.base_offset, batch.position, damage, self.last_read)
            return False
        if not snapshot and batch.last_offset < start:
            return True
        if not snapshot and not file_mode and self.next_offset is not None:
            if batch.base_offset > self.next_offset:
                self.load.gaps.append(
                    f"{path}: offsets {self.next_offset} to {batch.base_offset - 1} are missing before the "
                    f"batch at byte {batch.position}: the image lacks their records"
                )
        if not snapshot and not file_mode:
            self.next_offset = max(self.next_offset or 0, batch.next_offset)
        try:
            records = list(batch.records())
        except FormatError as exc:
            load.damage = Damage(
                str(path),
                batch.base_offset,
                batch.position,
                f"records do not decode: {exc.message}",
                self.last_read,
            )
            return False
        load.batches += 1
        image = load.image
        if batch.is_control:
            for r in records:
                if snapshot and not file_mode and _control_type(r) == R.SNAPSHOT_HEADER:
                    self._snapshot_header(path, r, batch)
            if not snapshot and not file_mode:
                image.provenance = (batch.last_offset, batch.partition_leader_epoch, batch.max_timestamp)
            self.last_read = batch.last_offset
            return True
        applied = 0
        for r in records:
            if not snapshot and r.offset < start:
                continue
            where = (str(path), r.offset, batch.position)
            try:
                rec = cluster_metadata_record_dict(r.value)
            except FormatError as exc:
                load.notes.append(
                    f"{path}: offset {r.offset} (batch at byte {batch.position}): {exc.message}"
                )
                continue
            applied += 1
            for w, why in self.replayer.apply(rec, where):
                load.notes.append(f"{w[0]}: offset {w[1]} (batch at byte {w[2]}): {why}")
        if file_mode:
            # SnapshotFileReader: Batch.data(baseOffset, epoch, maxTimestamp, records read)
            if applied:
                image.provenance = (
                    batch.base_offset + applied - 1,
                    batch.partition_leader_epoch,
                    batch.max_timestamp,
                )
        elif not snapshot:
            image.provenance = (batch.last_offset, batch.partition_leader_epoch, batch.max_timestamp)
        self.last_read = batch.last_offset
        return True

    def _snapshot_header(self, path: Path, record, batch) -> None:
        sid = _snapshot_id(path)
        if sid is None or record.value is None:
            return
        try:
            header, _ = SnapshotHeaderRecord.decode_from(memoryview(record.value), 0, len(record.value), 0)
        except SchemaDecodeError:
            return
        self.load.image.provenance = (sid[0] - 1, sid[1], header.last_contained_log_timestamp)


def _control_type(record) -> int | None:
    try:
        return R.parse_control_record(record).type
    except FormatError:
        return None


def load_file(path: Path) -> MetadataLoad:
    """kafka-metadata-shell.sh --snapshot FILE: the file's data batches, from an empty image."""
    load = MetadataLoad()
    reader = _Reader(load)
    reader.read(Path(path), snapshot=True, file_mode=True)
    load.pending = len(reader.replayer.pending or ())
    return load


def load_directory(mdir: Path) -> MetadataLoad:
    """The image a broker loads from a ``__cluster_metadata-0`` dir: the latest snapshot, then
    the log's records from the snapshot's end offset on."""
    mdir = Path(mdir)
    load = MetadataLoad()
    reader = _Reader(load)
    snapshot, logs = metadata_files(mdir)
    start = 0
    reader.next_offset = 0
    if snapshot is not None:
        sid = _snapshot_id(snapshot)
        start = sid[0] if sid else 0
        if not reader.read(snapshot, snapshot=True):
            return load
        reader.last_read = max(reader.last_read, start - 1)
        reader.next_offset = start
    for log in logs:
        if not reader.read(log, snapshot=False, start=start):
            break
    load.pending = len(reader.replayer.pending or ())
    return load
