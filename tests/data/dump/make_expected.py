"""Write the expected ``kafka-dump-log`` output for the reference segments.

Run once by hand (``python tests/data/dump/make_expected.py [VECTORS_DIR]``); the outputs
are committed next to it and compared byte for byte by ``tests/test_dump.py``. This script
does NOT use kafkastore: every line is formatted from the formats in kafka-storage.md
section 9.3-9.5 (as ``kafka.tools.DumpLogSegments`` prints them) and filled from the
vectors' own decodes (``expected.json``: batch headers, index entries; ``*.records.jsonl``:
records). The only facts not in those decodes are the CRCs of the inner messages of the
legacy compressed wrappers in s2 (Kafka prints each inner message's own CRC); they are
recomputed here from the spec: the inner message is ``magic, attributes 0, [timestamp],
keyLength, key, valueLength, value`` and its CRC is CRC-32 (IEEE) over those bytes. For
the gzip wrappers (whose inner timestamps the LogAppendTime wrapper hides) the inner
messages are read from the decompressed payload instead, and the two ways are checked
against each other where both apply.

``@DIR@`` in the outputs stands for the segment's directory.
"""

from __future__ import annotations

import base64
import gzip
import json
import struct
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEGMENTS = ("s1_v2_mixed_codecs", "s2_mixed_magic")


def b64(v):
    return None if v is None else base64.b64decode(v)


def incr_seq(seq, inc):
    imax = 2**31 - 1
    return inc - (imax - seq) - 1 if seq > imax - inc else seq + inc


def batch_line(b, count):
    codec = b["compression"]
    crc = b["crc"]
    if b["magic"] >= 2:
        delta = b["lastOffset"] - b["baseOffset"]
        last_seq = -1 if b["baseSequence"] == -1 else incr_seq(b["baseSequence"], delta)
        head = (f"baseOffset: {b['baseOffset']} lastOffset: {b['lastOffset']} count: {count} "
                f"baseSequence: {b['baseSequence']} lastSequence: {last_seq} "
                f"producerId: {b['producerId']} producerEpoch: {b['producerEpoch']} "
                f"partitionLeaderEpoch: {b['partitionLeaderEpoch']} "
                f"isTransactional: {str(b['isTransactional']).lower()} "
                f"isControl: {str(b['isControl']).lower()} deleteHorizonMs: OptionalLong.empty")
    else:
        head = f"offset: {b['lastOffset']}"
    ts_type = b["timestampType"] or "NoTimestampType"
    return (f"{head} position: {b['position']} {ts_type}: {b['maxTimestamp']} "
            f"size: {b['sizeInBytes']} magic: {b['magic']} compresscodec: {codec} crc: {crc} "
            f"isvalid: true")


def legacy_inner_crcs(log: bytes, b: dict, records: list) -> list[int]:
    """CRC-32 of each inner message of a legacy wrapper."""
    magic = b["magic"]
    built = []
    for r in records:
        key, value = b64(r["key"]), b64(r["value"])
        body = bytes([magic, 0])
        if magic == 1:
            body += struct.pack(">q", r["timestamp"])
        for part in (key, value):
            body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
        built.append(zlib.crc32(body))
    if b["compression"] != "gzip":
        return built
    # gzip: read the inner messages themselves (the wrapper's value, after the key)
    pos = b["position"]
    entry = log[pos:pos + b["sizeInBytes"]]
    at = 12 + 4 + 2 + (8 if magic == 1 else 0)
    klen = struct.unpack_from(">i", entry, at)[0]
    at += 4 + max(klen, 0)
    vlen = struct.unpack_from(">i", entry, at)[0]
    inner = gzip.decompress(entry[at + 4:at + 4 + vlen])
    stored = []
    p = 0
    while p < len(inner):
        size = struct.unpack_from(">i", inner, p + 8)[0]
        stored.append(struct.unpack_from(">I", inner, p + 12)[0])
        p += 12 + size
    if b["timestampType"] != "LogAppendTime":
        assert stored == built, (b["position"], stored, built)
    return stored


def main(vectors: Path) -> None:
    for seg in SEGMENTS:
        d = vectors / "segments" / seg
        exp = json.loads((d / "expected.json").read_text())
        log_name = exp["files"]["log"]["name"]
        log = (d / log_name).read_bytes()
        prefix = log_name.split(".")[0]
        records = [json.loads(line) for line in
                   (d / f"{prefix}.records.jsonl").read_text().splitlines()]
        by_batch: dict[int, list] = {}
        for r in records:
            by_batch.setdefault(r["batchPosition"], []).append(r)

        plain = [f"Dumping @DIR@/{log_name}", f"Log starting offset: {exp['baseOffset']}"]
        deep = list(plain)
        for b in exp["batches"]:
            recs = by_batch[b["position"]]
            line = batch_line(b, b["records"])
            plain.append(line)
            deep.append(line)
            ts_type = b["timestampType"] or "NoTimestampType"
            crcs = None
            if b["magic"] < 2:
                crcs = [b["crc"]] if b["compression"] == "none" else \
                    legacy_inner_crcs(log, b, recs)
            for i, r in enumerate(recs):
                key, value = b64(r["key"]), b64(r["value"])
                ts = -1 if r["timestamp"] is None else r["timestamp"]
                text = (f"| offset: {r['offset']} {ts_type}: {ts} "
                        f"keySize: {-1 if key is None else len(key)} "
                        f"valueSize: {-1 if value is None else len(value)}")
                if b["magic"] >= 2:
                    seq = (incr_seq(b["baseSequence"], r["offset"] - b["baseOffset"])
                           if b["baseSequence"] >= 0 else -1)
                    keys = ",".join(h["key"] for h in r["headers"])
                    text += f" sequence: {seq} headerKeys: [{keys}]"
                else:
                    text += f" isValid: true crc: {crcs[i]}}}"
                if key is not None:
                    text += f" key: {key.decode('utf-8')}"
                if value is not None:
                    text += f" payload: {value.decode('utf-8')}"
                deep.append(text)

        index = [f"Dumping @DIR@/{exp['files']['index']['name']}"]
        index += [f"offset: {e['offset']} position: {e['position']}" for e in exp["offsetIndex"]]
        tindex = [f"Dumping @DIR@/{exp['files']['timeindex']['name']}"]
        tindex += [f"timestamp: {e['timestamp']} offset: {e['offset']}"
                   for e in exp["timeIndexClosed"]]

        outputs = {"log": plain, "log.deep-print": deep, "index": index, "timeindex": tindex}
        for kind, lines in outputs.items():
            text = "\n".join(lines) + "\n"
            path = HERE / f"{seg}.{kind}.txt"
            if len(text) > 200_000:
                with gzip.GzipFile(path.with_suffix(".txt.gz"), "wb", mtime=0) as f:
                    f.write(text.encode("utf-8"))
            else:
                path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[2].parent / "shared" / "vectors")
