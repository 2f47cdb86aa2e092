"""Hostile tiered copies: any damage to a copy's objects gives the right records or a
typed kafkastore error naming the object, never another exception or a crash."""

from __future__ import annotations

import json
import random
import shutil

import pytest
from _vectors import VECTORS

from kafkastore.errors import KafkaStoreError
from kafkastore.tiered import open_tiered
from kafkastore.tiered.chunk_index import serialize_transformed_chunks
from kafkastore.topic import TopicPartition

TIERED = VECTORS / "tiered" if VECTORS is not None else None
pytestmark = pytest.mark.skipif(TIERED is None or not TIERED.is_dir(),
                                reason="the tiered-storage vectors are absent")
TP = TopicPartition("orders", 0)


def read_all(copy_dir):
    """Every record of the copy, or the typed error reading it raised."""
    try:
        with open_tiered(str(copy_dir)) as copy:
            log = copy.log(TP)
            return [(r.offset, r.key, r.value) for r in log.records()], None
    except KafkaStoreError as exc:
        assert exc.path, f"{type(exc).__name__} without a path: {exc}"
        return None, exc


@pytest.fixture(scope="module")
def expected():
    rows, err = read_all(TIERED / "aiven-zstd")
    assert err is None
    return rows


@pytest.fixture
def copy_dir(tmp_path):
    dest = tmp_path / "copy"
    shutil.copytree(TIERED / "aiven-zstd", dest)
    return dest


def _objects(copy_dir):
    return {p.suffix: p for p in copy_dir.rglob("*") if p.is_file()}


@pytest.mark.parametrize("target", [".log", ".indexes", ".rsm-manifest"])
def test_random_damage_is_correct_data_or_a_typed_error(copy_dir, expected, target):
    rng = random.Random(f"tiered-{target}")
    path = _objects(copy_dir)[target]
    original = path.read_bytes()
    outcomes = {"same": 0, "error": 0}
    for trial in range(40):
        data = bytearray(original)
        kind = trial % 4
        if kind == 0:        # flip a few bytes
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1:      # truncate
            del data[rng.randrange(len(data)):]
        elif kind == 2:      # append garbage
            data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        else:                # overwrite a run with zeros
            a = rng.randrange(len(data))
            data[a:a + rng.randint(1, 256)] = bytes(min(256, len(data) - a))
        path.write_bytes(bytes(data))
        rows, err = read_all(copy_dir)
        if err is None:
            # a damage the format cannot see (an index byte a lookup never uses, JSON
            # whitespace): the records must still be the right ones
            assert rows == expected, f"trial {trial}: wrong records, no error"
            outcomes["same"] += 1
        else:
            outcomes["error"] += 1
    path.write_bytes(original)
    assert outcomes["error"] > 0


@pytest.mark.parametrize("edit", [
    lambda m: m["chunkIndex"].update(originalFileSize=2**31 - 1),
    lambda m: m["chunkIndex"].update(originalChunkSize=0),
    lambda m: m["chunkIndex"].update(originalChunkSize=-8192),
    lambda m: m["chunkIndex"].update(transformedChunks=serialize_transformed_chunks([100] * 26)),
    lambda m: m["chunkIndex"].update(transformedChunks=serialize_transformed_chunks([1] * 3)),
    lambda m: m["chunkIndex"].update(transformedChunks="!!not base64!!"),
    lambda m: m["chunkIndex"].update(type="banana"),
    lambda m: m["segmentIndexes"]["offset"].update(position=10**9),
    lambda m: m["segmentIndexes"]["offset"].update(size=-5),
    lambda m: m["segmentIndexes"].update(timestamp=None),
    lambda m: m.update(compression="yes"),
    lambda m: m.update(encryption={"dataKey": "nokey:AAAA", "aad": "AAAA"}),
    lambda m: m.update(encryption={"dataKey": "no colon", "aad": "AAAA"}),
    lambda m: m.pop("chunkIndex"),
    lambda m: m["remoteLogSegmentMetadata"].update(endOffset="x"),
    lambda m: m["remoteLogSegmentMetadata"].update(endOffset=10),
])
def test_manifest_edits_give_typed_errors(copy_dir, expected, edit):
    path = _objects(copy_dir)[".rsm-manifest"]
    manifest = json.loads(path.read_bytes())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    rows, err = read_all(copy_dir)
    assert err is not None or rows == expected
