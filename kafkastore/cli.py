"""The ``kafkastore`` command line.

``kafkastore demo [DIR]`` writes a real Kafka-format segment into a local log
directory and reads it back three ways (header scan, record objects, numpy
columns), printing what a Kafka operator would look at. Further commands
(dump, inspect, produce, consume, repair) build on the same layers.

``main(argv=None) -> int`` is the entry point, so the CLI can be driven from
tests and from Python.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from kafkastore import __version__, records
from kafkastore._kernels import BACKEND
from kafkastore.errors import KafkaStoreError
from kafkastore.types import CompressionType, ControlRecordType

__all__ = ["main", "batch_line"]

_CODECS = (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
           CompressionType.LZ4, CompressionType.ZSTD)


def _segment_name(base_offset: int) -> str:
    # Kafka's LogFileUtils.filenamePrefixFromOffset: 20 digits, zero padded
    return f"{base_offset:020d}.log"


def batch_line(batch) -> str:
    """One batch as ``kafka-dump-log.sh`` prints it (without ``--deep-iteration``)."""
    if batch.magic >= 2:
        horizon = (f"OptionalLong[{batch.delete_horizon_ms}]"
                   if batch.has_delete_horizon else "OptionalLong.empty")
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
            f"count: {batch.record_count} baseSequence: {batch.base_sequence} "
            f"lastSequence: {batch.last_sequence} producerId: {batch.producer_id} "
            f"producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {str(batch.is_transactional).lower()} "
            f"isControl: {str(batch.is_control).lower()} deleteHorizonMs: {horizon}"
        )
    else:
        head = f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: 1"
    return (
        f"{head} position: {batch.position} {batch.timestamp_type.label}: "
        f"{batch.max_timestamp} size: {batch.size_in_bytes} magic: {batch.magic} "
        f"compresscodec: {batch.compression.name.lower()} crc: {batch.crc} "
        f"isvalid: {str(batch.is_valid()).lower()}"
    )


def _demo_records(start: int, count: int, now_ms: int):
    for i in range(start, start + count):
        key = f"user-{i % 5000:06d}".encode()
        value = json.dumps({"id": i, "event": ("click", "view", "buy")[i % 3],
                            "amount": (i * 37) % 1000}).encode()
        headers = (("source", b"demo"),) if i % 100 == 0 else ()
        yield key, value, now_ms + i, headers


def _cmd_demo(args: argparse.Namespace) -> int:
    root = Path(args.directory) if args.directory else Path(
        tempfile.mkdtemp(prefix="kafkastore-demo-"))
    partition_dir = root / "demo-0"  # Kafka's <topic>-<partition> directory name
    partition_dir.mkdir(parents=True, exist_ok=True)
    segment = partition_dir / _segment_name(0)
    per_batch = args.batch_size
    batches_per_codec = max(1, args.records // (per_batch * len(_CODECS)))
    now_ms = int(time.time() * 1000)

    offset = 0
    written = []
    t0 = time.perf_counter()
    with open(segment, "wb") as f:
        for codec in _CODECS:
            for _ in range(batches_per_codec):
                data = records.encode_batch(
                    _demo_records(offset, per_batch, now_ms), base_offset=offset,
                    compression=codec, producer_id=4242, producer_epoch=0,
                    base_sequence=offset, is_transactional=True)
                f.write(data)
                written.append((codec, per_batch, len(data)))
                offset += per_batch
        # a transaction marker closes the producer's transaction, as a coordinator writes
        marker = records.encode_control_batch(ControlRecordType.COMMIT, producer_id=4242,
                                              producer_epoch=0, coordinator_epoch=1,
                                              base_offset=offset)
        f.write(marker)
        offset += 1
        f.flush()
        os.fsync(f.fileno())
    write_s = time.perf_counter() - t0
    data_records = offset - 1
    print(f"kafkastore {__version__} ({BACKEND} kernels)")
    print(f"wrote {data_records} records in {len(written)} batches + 1 COMMIT marker "
          f"to {segment} ({segment.stat().st_size} bytes, {write_s * 1000:.0f} ms)")
    print()
    print(f"{'codec':8} {'batches':>8} {'records':>9} {'bytes':>11}")
    for codec in _CODECS:
        rows = [w for w in written if w[0] == codec]
        print(f"{codec.name.lower():8} {len(rows):>8} {sum(r[1] for r in rows):>9} "
              f"{sum(r[2] for r in rows):>11}")

    buf = segment.read_bytes()
    t0 = time.perf_counter()
    scan = records.scan_batches(buf)
    scan_s = time.perf_counter() - t0
    if scan.error is not None or scan.valid_bytes != len(buf):
        print(f"segment did not scan cleanly: {scan!r}", file=sys.stderr)
        return 1
    print()
    print(f"header scan with CRC check: {len(scan)} batches, {scan.valid_bytes} valid bytes, "
          f"last offset {int(scan.last_offset[-1])} ({scan_s * 1000:.1f} ms)")

    t0 = time.perf_counter()
    n = 0
    for i, rec in enumerate(records.iter_records(buf)):
        expected_key = f"user-{i % 5000:06d}".encode()
        if rec.offset != i or rec.key != expected_key:
            print(f"record {i} read back wrong: {rec!r}", file=sys.stderr)
            return 1
        n += 1
    iter_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    cols = records.decode_columns(buf)
    cols_s = time.perf_counter() - t0
    if n != data_records or len(cols) != data_records:
        print(f"expected {data_records} records, read {n} objects and {len(cols)} rows",
              file=sys.stderr)
        return 1
    print(f"read back {n} records as objects ({iter_s * 1000:.0f} ms) and as numpy "
          f"columns ({cols_s * 1000:.1f} ms); every offset and key matches")
    total_values = int(cols.value_offsets[-1])
    print(f"columns: offsets {int(cols.offset[0])}..{int(cols.offset[-1])}, "
          f"{total_values} value bytes, first value {cols.value(0)!r}")
    print()
    print("first batches and the marker, as kafka-dump-log prints them:")
    batches = list(records.iter_batches(buf))
    for batch in batches[:2] + batches[-1:]:
        print("  " + batch_line(batch))
    marker_rec = next(iter(batches[-1]))
    print(f"  | control record: {records.parse_control_record(marker_rec)}")
    print()
    print(f"log directory: {root}")
    return 0


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkastore",
        description="Kafka-format log storage: write, read and inspect Kafka log segments.")
    parser.add_argument("--version", action="version",
                        version=f"kafkastore {__version__} ({BACKEND} kernels)")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="write a Kafka-format segment to a log directory and read it back")
    demo.add_argument("directory", nargs="?",
                      help="log directory to write into (default: a new temporary one)")
    demo.add_argument("--records", type=int, default=50_000,
                      help="about how many records to write (default: 50000)")
    demo.add_argument("--batch-size", type=int, default=1000,
                      help="records per batch (default: 1000)")
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KafkaStoreError as err:
        print(f"kafkastore: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"kafkastore: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
