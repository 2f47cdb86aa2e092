"""ChunkedReader: any byte range of the original segment, through zstd and AES-GCM chunks.

Ranges inside one chunk, across two, across many, ending at or past the end of the
segment, and reads that find some of their chunks in the reader's cache all give exactly
the original bytes, as ``bytes``.
"""

from __future__ import annotations

import os
import random

import pytest

from kafkastore.log import Log
from kafkastore.log_view import ReadOnlyLog
from kafkastore.tiered import open_tiered
from kafkastore.tiered.chunk_reader import ChunkedReader
from kafkastore.tiered.upload import UploadOptions, upload_partition

TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"


@pytest.fixture(scope="module")
def partition(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("chunks") / "t-0")
    log = Log.open(path, {"segment.bytes": 20_000}, topic_id=TOPIC_ID)
    rng = random.Random(3)
    for i in range(60):
        log.append([(b"k%d" % j, rng.randbytes(40) * 3) for j in range(10)],
                   timestamp=1_700_000_000_000 + i)
    log.roll()
    log.close()
    return path


def _key_ring():
    pytest.importorskip("cryptography")
    pytest.importorskip("Crypto", reason="the key ring's RSA is pycryptodome's")
    from kafkastore.tiered.crypto import KeyRing

    return KeyRing.generate("test")[0]


@pytest.mark.parametrize("transform", ["zstd", "aes-gcm"])
def test_every_range_reads_the_original_bytes(partition, tmp_path, transform):
    ring = _key_ring() if transform == "aes-gcm" else None
    options = UploadOptions(chunk_size=1000, compression=transform == "zstd", key_ring=ring)
    upload_partition(partition, str(tmp_path), options=options, topic_id=TOPIC_ID)
    copy = open_tiered(str(tmp_path), key_ring=ring)
    local = ReadOnlyLog.open(partition)
    log = copy.log(copy.partitions()[0])
    seg = log.segments[0]
    with open(os.path.join(partition, os.path.basename(local.segments[0].path)), "rb") as f:
        original = f.read()
    assert seg.size == len(original) > 5000
    reader = copy.tiered_storage.open(seg.path, seg.size)
    assert isinstance(reader, ChunkedReader)
    rng = random.Random(5)
    ranges = [(0, 1), (0, 1000), (999, 2), (1000, 1000), (500, 3000), (0, len(original)),
              (len(original) - 10, 100), (len(original), 5), (123, 0)]
    ranges += [(rng.randrange(len(original)), rng.choice([1, 50, 999, 1001, 4000]))
               for _ in range(200)]
    with reader:
        for position, size in ranges:
            data = reader.read(position, size)
            assert type(data) is bytes
            assert data == original[position:position + size], (position, size)
    copy.close()
    local.close()
