"""Lock-free readers under a busy writer (issue 18, defect 1).

``offset_for_timestamp`` raised ``IndexClosedError`` / ``ValueError`` when another thread
appended and the log rolled or deleted segments: every index resize unmapped the index
under the lookup. Each kind of reader now runs against a writer that appends, rolls,
applies retention, deletes records, truncates and cleans, and must only ever see a
correct answer (or ``OffsetOutOfRangeError`` for an offset that left the log).

Every record's value is its offset and its timestamp ``T0 + 10 * offset``, so a reader
checks what it got without knowing the writer's state.
"""

from __future__ import annotations

import random
import threading
import traceback

import pytest

from _logtools import T0, open_log
from kafkastore.cleaner import CleanerConfig, clean
from kafkastore.errors import OffsetOutOfRangeError
from kafkastore.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kafkastore.records import decode_columns
from kafkastore.retention import delete_old_segments

OPS = 400


def _records(first: int, n: int):
    return [(b"k%d" % (o % 7), b"%d" % o, T0 + 10 * o) for o in range(first, first + n)]


class Writer(threading.Thread):
    def __init__(self, log, seed: int, compact: bool) -> None:
        super().__init__(daemon=True)
        self.log, self.rng, self.compact = log, random.Random(seed), compact
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        log, rng = self.log, self.rng
        try:
            for _ in range(OPS):
                kind = rng.choices(["append", "roll", "retention", "delete_records",
                                    "truncate", "clean"], [30, 3, 2, 1, 1, 1])[0]
                end = log.log_end_offset
                if kind == "append":
                    log.append(_records(end, rng.randint(1, 20)),
                               compression=rng.choice(["none", "gzip"]))
                elif kind == "roll" and log.active_segment.size:
                    log.roll()
                elif kind == "retention":
                    delete_old_segments(log)
                elif kind == "delete_records" and end > log.log_start_offset:
                    log.delete_records(rng.randint(log.log_start_offset, end))
                elif kind == "truncate" and end > log.log_start_offset + 5:
                    log.truncate_to(rng.randint(max(log.log_start_offset,
                                                    log.active_segment.base_offset), end))
                elif kind == "clean" and self.compact and len(log.segments) > 2:
                    clean(log, config=CleanerConfig(dedupe_buffer_size=1 << 20),
                          now_ms=T0 + 10 ** 9)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
            traceback.print_exc()
        finally:
            self.done.set()


def _check_record(offset: int, value: bytes, timestamp: int) -> None:
    assert value == b"%d" % offset, (offset, value)
    assert timestamp == T0 + 10 * offset, (offset, timestamp)


def _reader(kind: str):
    def read_records(log, rng):
        start = rng.randint(log.log_start_offset, log.log_end_offset)
        prev = start - 1
        for r in log.read(start, rng.choice([100, 2000, 1 << 16])).records():
            assert r.offset > prev
            prev = r.offset
            if r.offset >= start:
                _check_record(r.offset, r.value, r.timestamp)

    def read_columns(log, rng):
        start = rng.randint(log.log_start_offset, log.log_end_offset)
        cols = decode_columns(log.read(start, rng.choice([100, 2000, 1 << 16])).to_bytes())
        offsets = cols.offset.tolist()
        assert offsets == sorted(set(offsets))
        for i, o in enumerate(offsets):
            value = bytes(cols.value_data[cols.value_offsets[i]:cols.value_offsets[i + 1]])
            _check_record(o, value, int(cols.timestamp[i]))

    def by_timestamp(log, rng):
        target = T0 + 10 * rng.randint(0, log.log_end_offset + 10)
        found = log.offset_for_timestamp(target)
        if found is not None:
            assert found.timestamp >= target
            assert found.timestamp == T0 + 10 * found.offset

    def special(log, rng):
        for ts in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP):
            found = log.offset_for_timestamp(ts)
            if ts == MAX_TIMESTAMP:
                if found is not None:
                    assert found.timestamp == T0 + 10 * found.offset
            else:
                assert found is not None and found.offset >= 0

    return {"records": read_records, "columns": read_columns, "timestamp": by_timestamp,
            "special": special}[kind]


@pytest.mark.parametrize("compact", [False, True], ids=["delete", "compact"])
def test_every_reader_stays_correct_under_a_busy_writer(tmp_path, compact):
    log = open_log(tmp_path / "t-0", segment_bytes=2048, index_interval_bytes=64,
                   segment_index_bytes=4096, retention_bytes=12_000,
                   cleanup_policy="compact,delete" if compact else "delete",
                   file_delete_delay_ms=60_000)
    log.append(_records(0, 10))
    writer = Writer(log, seed=18 + compact, compact=compact)
    failures: list[str] = []
    counts: dict[str, int] = {}

    def loop(kind: str, seed: int) -> None:
        rng, fn = random.Random(seed), _reader(kind)
        n = 0
        while not writer.done.is_set():
            try:
                fn(log, rng)
            except OffsetOutOfRangeError:
                pass   # the offset left the log (retention, truncation) meanwhile
            except BaseException:  # noqa: BLE001 - collected and reported
                failures.append(f"{kind}: {traceback.format_exc()}")
                return
            n += 1
        counts[kind] = n

    readers = [threading.Thread(target=loop, args=(k, i), daemon=True)
               for i, k in enumerate(["records", "columns", "timestamp", "special"])]
    for t in readers:
        t.start()
    writer.start()
    writer.join(120)
    for t in readers:
        t.join(30)
    assert writer.error is None, repr(writer.error)
    assert not failures, failures[0]
    assert all(counts.get(k, 0) > 10 for k in ("records", "columns", "timestamp",
                                                "special")), counts
    log.close()


def test_a_slice_taken_before_a_truncation_keeps_only_what_lay_below_the_cut(tmp_path):
    """A reader's slice outliving a follower's truncate_to and the appends after it reads
    the bytes below the cut (its own state, ending at an entry boundary), never the new
    bytes at its old positions as if they were the old records, and never an error."""
    log = open_log(tmp_path / "t-0")
    for first in range(0, 30, 5):
        log.append(_records(first, 5))
    segment = log.active_segment
    lazy = segment.log.slice(0, segment.size)   # read nothing yet
    fetched = log.read(0, 1 << 20)              # may hold its bytes already
    log.truncate_to(10)   # at a batch boundary: new appends land in this segment, at the cut
    log.append([(b"k", b"new", T0)] * 3)
    old = [(o, b"%d" % o) for o in range(30)]
    assert [(r.offset, r.value) for r in lazy.records()] == old[:10]
    assert [(r.offset, r.value) for r in fetched.records()] in (old[:10], old)
    log.close()
