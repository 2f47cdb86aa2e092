"""One v2 record parser: the reader and the log cleaner's kernel accept the same batches.

The reader (``record_batch``: iterating a batch's records) and the cleaner's kernel
(``offset_map``: ``put_keys``, ``retained_mask`` and ``select_records`` over a batch's
records section) must agree on every batch: both accept it, or both reject it with
:class:`~kafkastore.errors.CorruptRecordError`. Otherwise the cleaner can refuse a
batch that every consumer reads (or keep one no consumer can read). The columnar
decoder (``decode_columns``, whose C fast path must defer to the parser) is held to
the same verdicts. They are fed
every input of the fuzz corpus (``fuzz/corpus/*.zip``, ``tests/data/fuzz/**``), the
batches the structured fuzz target builds from its inputs, and every Kafka reference
vector, plus hand-made records with lengths below -1 (Kafka reads any negative key,
value or header value length as null).

Runs on the live backend (``kafkastore._kernels``), so on both in CI.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from _fuzz_targets import _build_structured
from _helpers import framed, len_bytes, rec, v2_batch, varint, varlong
from _vectors import VECTORS

from kafkastore import _kernels, compression, records  # records: installs the decompressor
from kafkastore.errors import CorruptRecordError, KafkaStoreError

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "fuzz" / "corpus"
SAVED = HERE / "data" / "fuzz"
KEY = bytes(range(16))
LIMIT = 1 << 20  # decompressed bytes per batch: the corpus inputs are small
assert records.decode_columns  # imported for its side effect
RB = _kernels.record_batch
OM = _kernels.offset_map


# == the two verdicts =====================================================================


def _reader(batch) -> str | None:
    """None if the reader decodes every record of ``batch``, else the error's type name."""
    try:
        for record in batch:
            record.key, record.value, record.headers  # noqa: B018 - decoded, not checked
    except CorruptRecordError:
        return "CorruptRecordError"
    except Exception as exc:  # noqa: BLE001 - any other error is a finding of its own
        return type(exc).__name__
    return None


def _cleaner(section, batch) -> str | None:
    """None if every record walk of the cleaner's kernel takes ``section``, else the
    error's type name (the walks must agree with each other too)."""
    count = batch.record_count
    omap = OM.SkimpyOffsetMap(24 * 1024, hash_key=KEY)
    walks = [lambda: omap.put_keys(section, count, batch.base_offset, 0, 512),
             lambda: omap.retained_mask(section, count, batch.base_offset,
                                        batch.base_offset + 1, True)]
    if 0 <= count <= len(section):  # select_records wants a mask of `count` entries
        walks.append(lambda: OM.select_records(section, count, b"\x01" * count,
                                               batch.first_timestamp, None, -1))
    verdicts = set()
    for walk in walks:
        try:
            walk()
            verdicts.add(None)
        except CorruptRecordError:
            verdicts.add("CorruptRecordError")
        except Exception as exc:  # noqa: BLE001
            verdicts.add(type(exc).__name__)
    assert len(verdicts) == 1, f"the cleaner's walks disagree: {verdicts}"
    return verdicts.pop()


def _columns(buf: bytes, pos: int, batch) -> str | None:
    """None if decode_columns (its C fast path, then the parser for what the fast path
    leaves) decodes the batch, headers included, else the error's type name."""
    try:
        RB.decode_columns(buf, pos, pos + batch.size_in_bytes, validate=False,
                          include_control=True, headers=True, max_decompressed_bytes=LIMIT)
    except CorruptRecordError:
        return "CorruptRecordError"
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    return None


def _records_section(batch):
    """The (decompressed) records section, as the cleaner takes it; None if it cannot be
    inflated (nothing to compare then: neither parser sees records)."""
    codec = batch.attributes & 0x07
    section = batch.payload()
    if not codec:
        return section
    try:
        return compression.decompress(codec, section, max_size=LIMIT, magic=2)
    except KafkaStoreError:
        return None


def _v2_batches(buf: bytes):
    """Every magic 2 batch of ``buf`` that the entry walk reaches."""
    scan = RB.scan_batches(buf, validate=False)
    for pos, magic in zip(scan.position.tolist(), scan.magic.tolist()):
        if magic == 2:
            yield pos, RB.read_batch(buf, pos, max_decompressed_bytes=LIMIT)


def _disagreements(buf: bytes, name: str, seen: list) -> list[str]:
    bad = []
    for pos, batch in _v2_batches(buf):
        section = _records_section(batch)
        if section is None:
            continue
        reader, cleaner = _reader(batch), _cleaner(section, batch)
        columns = _columns(buf, pos, batch)
        seen.append(reader)
        if not reader == cleaner == columns:
            bad.append(f"{name} @ {pos}: reader {reader or 'accepts'}, "
                       f"cleaner {cleaner or 'accepts'}, columns {columns or 'accepts'}")
    return bad


# == the inputs ===========================================================================


def _corpus_inputs():
    """(name, bytes) of every committed fuzz input, and for the structured target's
    inputs also the batch it builds from them."""
    out = []
    for archive in sorted(CORPUS.glob("*.zip")):
        with zipfile.ZipFile(archive) as z:
            for member in sorted(z.namelist()):
                out.append((archive.stem, f"{archive.name}:{member}", z.read(member)))
    if SAVED.is_dir():
        for path in sorted(SAVED.rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                out.append((path.parent.name, str(path.relative_to(HERE)), path.read_bytes()))
    inputs = []
    for target, name, data in out:
        inputs.append((name, data))
        if target == "structured":
            try:
                inputs.append((name + " (built)", _build_structured(data)))
            except Exception:  # noqa: BLE001, S112 - an input the builder cannot use
                continue
        elif target == "segment":
            inputs.append((name + " (log)", data[7:]))  # after the target's 7-byte header
    return inputs


def _vector_inputs():
    if VECTORS is None:
        return []
    paths = sorted(VECTORS.glob("batches/**/*.bin")) + sorted(VECTORS.glob("negative/*.bin"))
    paths += sorted(VECTORS.glob("segments/*/*.log"))
    return [(str(p.relative_to(VECTORS)), p.read_bytes()) for p in paths]


# == tests ================================================================================


def _assert_agree(inputs) -> list:
    """Compare the verdicts on every batch of ``inputs``; return the reader's verdicts."""
    seen: list = []
    bad = [line for name, data in inputs for line in _disagreements(data, name, seen)]
    assert not bad, "\n".join(bad[:20]) + f"\n({len(bad)} batches)"
    return seen


def test_fuzz_corpus_reader_and_cleaner_agree():
    inputs = _corpus_inputs()
    if not inputs:
        pytest.skip("no fuzz corpus (fuzz/corpus, tests/data/fuzz)")
    seen = _assert_agree(inputs)
    # the corpus reaches both verdicts: the comparison is not vacuous
    assert None in seen and "CorruptRecordError" in seen, set(seen)


def test_vectors_reader_and_cleaner_agree():
    inputs = _vector_inputs()
    if not inputs:
        pytest.skip("no reference vectors (tests/_vectors.py)")
    assert None in _assert_agree(inputs)


def _record_with(*, key_len=None, value_len=None, header_value_len=None) -> bytes:
    """A record whose key, value or header value length varint is the value given
    (and no bytes follow it): Kafka reads any negative one as null."""
    body = b"\x00" + varlong(0) + varint(0)
    body += len_bytes(b"k") if key_len is None else varint(key_len)
    body += len_bytes(b"v") if value_len is None else varint(value_len)
    if header_value_len is None:
        body += varint(0)
    else:
        body += varint(1) + varint(1) + b"h" + varint(header_value_len)
    return framed(body)


@pytest.mark.parametrize("field", ["key", "value", "header_value"])
@pytest.mark.parametrize("length", [-2, -7, -(2**31)])
def test_lengths_below_minus_one_are_null_for_both(field, length):
    odd = _record_with(**{f"{field}_len": length})
    section = rec(key=b"a", value=b"1") + odd + rec(offset_delta=2, key=b"b", value=b"2")
    buf = v2_batch(section, count=3, last_offset_delta=2)
    (_, batch), = _v2_batches(buf)
    assert _reader(batch) is None
    assert _cleaner(batch.payload(), batch) is None
    assert _columns(buf, 0, batch) is None
    record = list(batch)[1]
    if field == "key":
        assert record.key is None and record.value == b"v"
    elif field == "value":
        assert record.key == b"k" and record.value is None
    else:
        assert record.headers == (("h", None),)
    # the cleaner reads the same nulls: a null key is keyless (dropped, counted),
    # a null value a tombstone
    omap = OM.SkimpyOffsetMap(24 * 64, hash_key=KEY)
    result = omap.retained_mask(batch.payload(), 3, 0, -1, True)
    assert result.keyless_dropped == 0 and result.kept == 3  # all beyond the map's offset
    assert result.tombstones_kept == (1 if field == "value" else 0)
    result = omap.retained_mask(batch.payload(), 3, 0, 2, True)
    assert result.keyless_dropped == (1 if field == "key" else 0)
