"""The child of the ``kill -9`` loop (tests/reliability/test_kill_loop.py).

Run as ``python _kill_child.py <dir> <seed> <config-json> <plan-json>``. It opens the log
in ``<dir>`` with the public API (``Log.open(dir, config)``), then appends batches of
deterministic records for ever: the record at offset ``o`` is :func:`expected_record`
``(seed, o)``, so the parent can recompute every record without any state crossing the
process boundary. The plan gives ``child_seed`` (batch sizes, codecs, when to flush and
roll), ``flush_p`` (chance of a flush after a batch), ``partial_flush_p`` (chance that
flush is ``flush(offset)`` below the end) and ``roll_p`` (chance of an explicit roll).
Every batch comes from one idempotent producer (:data:`PRODUCER_ID`, sequence = the
batch's first offset) with the partition leader epoch :func:`leader_epoch` of its first
offset, so each reopen must have rebuilt the producer state (from ``.snapshot`` files and
the log) well enough to take the next sequence, and kept ``leader-epoch-checkpoint`` in
step with the batches.

It talks to the parent through stdout (a pipe), one line per ``os.write`` (atomic below
PIPE_BUF, so a kill never leaves half a line):

``open <backend> <new|clean|unclean>``
    about to call ``Log.open`` on a directory with no segment yet, with the clean-shutdown
    marker, or without it (the open recovers: the parent may kill it there);
``ready <log_start_offset> <log_end_offset>``
    ``Log.open`` returned;
``roll <offset>`` / ``rolled <offset>``
    before and after an explicit ``Log.roll()``;
``ack <offset>``
    ``Log.flush()`` (or ``flush(offset)``) RETURNED: every record below ``offset`` is on
    disk. Nothing else is ever acknowledged.

It never closes the log: it runs until the parent kills it (or, as a safety net, exits
with status 3 after ``MAX_SECONDS``, or quietly when the parent's end of the pipe is gone).

Only ``kafkastore`` and the standard library are imported, so this file runs against an
installed kafkastore from any directory (scripts/test.sh runs the suite from an empty one).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
import sys
import time

#: The timestamp of offset 0 (records go up by ~3 ms an offset, with jitter).
T0 = 1_700_000_000_000
#: The child exits on its own after this long (a parent that died never kills it).
MAX_SECONDS = 120.0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_HEADER_KEYS = ("trace-id", "", "é-clé", "x")
_PACK = struct.Struct(">QQ").pack
PRODUCER_ID = 4242
#: The records carry 2023 timestamps: with Kafka's one-day producer.id.expiration.ms the
#: producer would expire on every open. Child and parent never expire it.
NEVER_EXPIRE = 1 << 62


def leader_epoch(first_offset: int) -> int:
    """The partition leader epoch of the batch starting at ``first_offset``."""
    return first_offset // 700


def expected_record(seed: int, offset: int):
    """The record at ``offset`` of a log written with ``seed``: ``(key, value, timestamp,
    headers)``, keys and values bytes or None, headers a tuple of ``(str, bytes | None)``.

    Keys, values and headers vary in presence and length; half the values are
    compressible text that names the offset, the rest random bytes."""
    d = hashlib.blake2b(_PACK(seed & 0xFFFFFFFFFFFFFFFF, offset), digest_size=16).digest()
    key = None if d[0] < 40 else b"key-%d-" % (offset % 97) + d[1:1 + d[0] % 12]
    kind = d[2] & 7
    n = (d[3] | d[4] << 8) % 600
    if kind == 0:
        value = None
    elif kind == 1:
        value = b""
    elif kind < 5:
        unit = b"value-of-%d;" % offset
        value = (unit * (n // len(unit) + 1))[:n]
    else:
        value = hashlib.shake_128(d).digest(n)
    timestamp = T0 + 3 * offset + d[5] % 41 - 20
    headers = tuple(
        (_HEADER_KEYS[(d[7] + i) & 3],
         None if d[8 + i] % 5 == 0 else d[8 + i:9 + i + d[11 + i] % 5])
        for i in range(d[6] % 4))
    return key, value, timestamp, headers


def _size_estimate(record) -> int:
    key, value, _, headers = record
    return (30 + (len(key) if key else 0) + (len(value) if value else 0)
            + sum(len(k) + 4 + (len(v) if v else 0) for k, v in headers))


def _batch_size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.3:
        return 1
    if r < 0.7:
        return rng.randint(2, 10)
    if r < 0.95:
        return rng.randint(11, 60)
    return rng.randint(61, 200)


def main(argv: list[str]) -> int:
    directory, seed = argv[1], int(argv[2])
    config, plan = json.loads(argv[3]), json.loads(argv[4])
    rng = random.Random(plan["child_seed"])
    flush_p, partial_p, roll_p = plan["flush_p"], plan["partial_flush_p"], plan["roll_p"]
    deadline = time.monotonic() + MAX_SECONDS

    def emit(line: str) -> None:
        try:
            os.write(1, (line + "\n").encode())
        except BrokenPipeError:
            os._exit(0)   # the parent is gone: nobody to report to

    import kafkastore
    from kafkastore.log import CLEAN_SHUTDOWN_FILE, Log

    if not os.path.isdir(directory) or not any(
            name.endswith(".log") for name in os.listdir(directory)):
        state = "new"      # nothing to recover
    elif os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_FILE)):
        state = "clean"
    else:
        state = "unclean"  # Log.open re-validates every segment
    emit(f"open {kafkastore.BACKEND} {state}")
    log = Log.open(directory, config, producer_id_expiration_ms=NEVER_EXPIRE)
    emit(f"ready {log.log_start_offset} {log.log_end_offset}")

    codec_weights = [rng.random() for _ in CODECS]
    budget = max(1, config["segment.bytes"] // 2)
    while True:
        first = log.log_end_offset
        n = _batch_size(rng)
        records = []
        size = 0
        for offset in range(first, first + n):
            record = expected_record(seed, offset)
            size += _size_estimate(record)
            if records and size > budget:
                break
            records.append(record)
        codec = rng.choices(CODECS, codec_weights)[0]
        info = log.append(records, compression=codec, producer_id=PRODUCER_ID,
                          producer_epoch=0, base_sequence=first,
                          partition_leader_epoch=leader_epoch(first))
        if info.first_offset != first or info.last_offset != first + len(records) - 1:
            sys.stderr.write(f"append gave offsets {info.first_offset}..{info.last_offset}, "
                             f"expected {first}..{first + len(records) - 1}\n")
            return 4
        if rng.random() < flush_p:
            if rng.random() < partial_p:
                upto = rng.randint(log.recovery_point, log.log_end_offset)
                log.flush(upto)           # a partial flush: offsets below upto are durable
                emit(f"ack {upto}")
            else:
                log.flush()
                emit(f"ack {log.log_end_offset}")
        if rng.random() < roll_p:
            end = log.log_end_offset
            emit(f"roll {end}")
            log.roll()
            emit(f"rolled {end}")
        if time.monotonic() > deadline:
            sys.stderr.write(f"not killed within {MAX_SECONDS} s\n")
            return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
