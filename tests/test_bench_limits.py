"""The physical limits of ``kafkastore bench`` (issue 31, "The limits, reported"): the
helpers that do a limit's work, their timing in the same rounds as kafkastore and the
peers, the ``limit`` / ``limit time`` / ``of limit`` columns and the JSON fields.

No timing is asserted: the checks are on the work done (bytes copied, written, read, the
CRC computed) and on how the numbers are carried and printed. Tiny sizes keep it fast.
"""

from __future__ import annotations

import json
import os

import pytest

from kafkastore.bench import suite
from kafkastore.bench.suite import (
    LIMITS,
    Comparison,
    chained,
    compare,
    crc_limit,
    format_limits,
    format_table,
    memcpy_limit,
    pread_limit,
    run_suite,
    write_limit,
)
from kafkastore.cli import EXIT_OK, main

#: CRC-32C (Castagnoli) of b"123456789": the check value of RFC 3720's appendix B.4.
CRC32C_CHECK = 0xE3069283


# -- the helpers -------------------------------------------------------------------------------

def test_crc_limit_is_crc32c_of_the_bytes():
    assert crc_limit(b"123456789")() == CRC32C_CHECK
    assert crc_limit(bytearray(b"123456789"))() == CRC32C_CHECK


def test_memcpy_limit_copies_the_first_bytes_each_call():
    data = bytearray(os.urandom(1000))
    work = memcpy_limit(data, 600)
    copy = work()
    assert bytes(copy) == bytes(data[:600])
    data[0] ^= 0xFF   # a copy, not a view
    assert copy[0] != data[0]
    assert bytes(work()) == bytes(data[:600])   # each call copies again
    with pytest.raises(ValueError, match="nbytes"):
        memcpy_limit(data, 1001)


def test_chained_does_each_work_in_turn():
    seen = []
    chained(lambda: seen.append(1), lambda: seen.append(2))()
    assert seen == [1, 2]


def test_write_limit_writes_every_chunk_and_times_it(tmp_path):
    path = str(tmp_path / "out")
    chunks = [os.urandom(100), os.urandom(3000), b"", os.urandom(7)]
    before = []
    timer = write_limit(path, chunks, before=lambda: before.append(True))
    for _ in range(2):   # truncated each time: the same bytes, not twice them
        assert timer() >= 0
    with open(path, "rb") as f:
        assert f.read() == b"".join(chunks)
    assert before == [True, True]


def test_pread_limit_reads_at_each_place(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)) * 4)
    fd = os.open(path, os.O_RDONLY)
    try:
        reads = []
        real = os.pread

        def pread(fd_, size, position):
            data = real(fd_, size, position)
            reads.append((position, data))
            return data

        monkeypatch.setattr(os, "pread", pread)
        pread_limit([(fd, 10), (fd, 300)], 5)()
    finally:
        os.close(fd)
    assert reads == [(10, bytes(range(10, 15))), (300, bytes(range(44, 49)))]


# -- compare: the limit is timed in the same rounds ----------------------------------------------

def test_compare_times_the_limit_in_the_same_rounds():
    calls = []

    def timer(name, seconds):
        def run():
            calls.append(name)
            return seconds
        return run

    out = compare("scan", "none", timer("ours", 2.0), {"peer": lambda: timer("peer", 3.0)},
                  10, "bytes", reps=3, limit=("crc32c", lambda: timer("limit", 0.5)))
    assert calls == ["ours", "peer", "limit"] * 3   # alternating, rep by rep
    (c,) = out
    assert (c.limit, c.limit_s, c.ratio, c.of_limit) == ("crc32c", 0.5, 1.5, 0.25)
    d = c.as_dict()
    assert (d["limit"], d["limit_s"], d["of_limit"], d["ratio"]) == ("crc32c", 0.5, 0.25, 1.5)


def test_compare_without_a_limit_and_with_an_unknown_one():
    (c,) = compare("index", "x", lambda: 1.0, {"p": lambda: (lambda: 2.0)}, 1, "lookups", 1)
    assert c.limit is None and c.limit_s is None and c.of_limit is None
    assert c.as_dict()["of_limit"] is None
    with pytest.raises(ValueError, match="unknown limit 'memset'"):
        compare("x", "y", lambda: 1.0, {}, 1, "records", 1, ("memset", lambda: lambda: 1.0))


# -- the table -----------------------------------------------------------------------------------

ROWS = [Comparison("scan", "none", "crc32c (raw)", 0.004, 0.003, 1000, "bytes",
                   limit="crc32c", limit_s=0.003),
        Comparison("index", "x", "numpy searchsorted", 0.001, 0.002, 1000, "lookups"),
        Comparison("decode", "none", "kafka_python_crc", 0.01, None, 100_000, "records",
                   skipped="absent", limit="crc32c+memcpy", limit_s=0.002)]


def test_format_table_shows_the_limit_beside_the_ratio():
    text = format_table(ROWS).splitlines()
    assert text[0].split()[-6:] == ["peer", "time", "limit", "limit", "time", "of",
                                    "limit", "ratio"][-6:]
    assert text[1].split()[-5:] == ["crc32c", "3.00", "ms", "0.75", "0.75x"]
    assert text[2].split()[-4:] == ["-", "-", "-", "2.00x"]   # no limit: "-"
    assert text[3].split()[-6:] == ["crc32c+memcpy", "2.00", "ms", "0.20", "skipped:",
                                    "absent"]
    md = format_table(ROWS, markdown=True).splitlines()
    assert md[0] == ("| workload | variant | kafkastore | rate | peer | peer time | limit | "
                     "limit time | of limit | ratio |")
    assert md[1] == "|" + "---|" * 10
    assert md[2] == ("| scan | none | 4.00 ms | 0.00 GB/s | crc32c (raw) | 3.00 ms | crc32c "
                     "| 3.00 ms | 0.75 | 0.75x |")
    assert md[3].endswith("| - | - | - | 2.00x |")


def test_format_table_without_limits_has_no_limit_columns():
    md = format_table(ROWS[1:2], markdown=True).splitlines()
    assert md[0] == "| workload | variant | kafkastore | rate | peer | peer time | ratio |"


def test_format_limits_names_each_limit_once():
    assert format_limits(ROWS + ROWS) == [f"crc32c: {LIMITS['crc32c']}",
                                          f"crc32c+memcpy: {LIMITS['crc32c+memcpy']}"]
    assert format_limits(ROWS[1:2]) == []


# -- the suite: which rows carry which limit -----------------------------------------------------

#: (workload, codec or None) -> the limit its rows stand beside (None: "-").
EXPECTED_LIMITS = {
    ("decode", "none"): "crc32c+memcpy", ("decode", "zstd"): None,
    ("columns", "none"): "crc32c", ("columns", "zstd"): None,
    ("scan", "none"): "crc32c", ("index", None): None, ("append", None): "write(2)",
    ("read", None): "pread", ("recovery", None): "crc32c", ("clean", None): "crc32c+write(2)",
}


def test_run_suite_measures_each_rows_limit(tmp_path, monkeypatch):
    # the limits' work is done on the row's own bytes: record what each is given
    crc_sizes, copies, writes = [], [], []
    real_crc, real_copy, real_write = suite.crc_limit, suite.memcpy_limit, suite.write_limit

    def crc(data):
        crc_sizes.append(len(data))
        return real_crc(data)

    def copy(data, nbytes):
        copies.append((len(data), nbytes))
        return real_copy(data, nbytes)

    def write(path, chunks, before=None):
        writes.append(sum(len(c) for c in chunks))
        return real_write(path, chunks, before)

    monkeypatch.setattr(suite, "crc_limit", crc)
    monkeypatch.setattr(suite, "memcpy_limit", copy)
    monkeypatch.setattr(suite, "write_limit", write)
    workloads = sorted({w for w, _ in EXPECTED_LIMITS}, key=suite.WORKLOADS.index)
    out = run_suite(1000, workloads=workloads, codecs=("none", "zstd"), reps=1,
                    directory=str(tmp_path))
    for c in out:
        key = (c.workload, c.variant if c.workload in suite.PER_CODEC + ("scan",) else None)
        assert c.limit == EXPECTED_LIMITS[key], key
        if c.limit is None:
            assert c.limit_s is None and c.of_limit is None
        else:
            assert c.limit_s > 0 and c.of_limit == pytest.approx(c.limit_s / c.kafkastore_s)
    blob = len(suite._Run(1000, 1, ("none",), str(tmp_path), None).blob("none"))
    # decode, columns and scan: the CRC over the uncompressed blob; recovery and clean:
    # over a segment and the retained bytes (no smaller than one batch)
    assert crc_sizes[:3] == [blob] * 3 and all(n > 0 for n in crc_sizes[3:])
    # the keys and values copied (decode only: the columns' view layout copies none):
    # 16-byte keys and 100-byte values, within the blob
    assert copies == [(blob, 1000 * 116)]
    # append writes the encoded batches, about the blob's size; clean the retained bytes
    assert len(writes) == 2 and abs(writes[0] - blob) < blob // 10 and 0 < writes[1] < blob


def test_cli_bench_prints_the_limits_and_json_fields(capsys, tmp_path):
    code = main(["bench", "--records", "1000", "--reps", "1", "--workloads", "scan,index",
                 "--codecs", "none", "--tmp-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert f"  crc32c: {LIMITS['crc32c']}" in out.splitlines()
    header = out.splitlines()[out.splitlines().index("") + 1]
    assert header.split()[-6:] == ["limit", "limit", "time", "of", "limit", "ratio"]
    code = main(["bench", "--records", "1000", "--reps", "1", "--workloads", "recovery",
                 "--json", "--tmp-dir", str(tmp_path)])
    doc = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK and doc["limits"] == LIMITS
    (row,) = doc["results"]
    assert row["limit"] == "crc32c" and row["limit_s"] > 0
    assert row["of_limit"] == pytest.approx(row["limit_s"] / row["kafkastore_s"])
