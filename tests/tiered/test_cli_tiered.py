"""``describe``, ``consume``, ``dump-log`` and ``verify`` with ``--tiered``: on the Aiven
vectors (plain and zstd chunks) and on LocalTieredStorage copies, the output is the
source's (dump-log line for line, consume record for record), describe shows every
upload with its fate and the gaps, and verify names the object and chunk of each
problem with exit code 1."""

from __future__ import annotations

import json
import shutil

import pytest
from _copies import (
    LOCAL_TOPIC_ID,
    SEGMENTS,
    TIERED,
    TOPIC_ID,
    VECTOR_SOURCES,
    damaged_zstd_copy,
    local_copy,
    local_upload,
    needs_vectors,
    overlap_copy,
    run,
    segment_bases,
    write_partition,
)

from kafkastore.cli import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE
from kafkastore.tiered import open_tiered
from kafkastore.topic import TopicPartition

ORDERS0 = TopicPartition("orders", 0)


# -- describe ---------------------------------------------------------------------------------

@needs_vectors
@pytest.mark.parametrize("name, chunks, transforms",
                         [("aiven-plain", 51, "none"), ("aiven-zstd", 26, "zstd")])
def test_describe_shows_the_served_segments_of_a_vector_copy(capsys, name, chunks, transforms):
    code, out, err = run(capsys, "describe", TIERED / name, "--tiered")
    assert code == EXIT_OK, err
    lines = out.splitlines()
    assert lines[1].split()[:5] == ["orders-0", TOPIC_ID, "1", "114514", "116568"]
    assert f"orders-0: topic id {TOPIC_ID}, aiven layout, 1 served, 0 dropped, no gaps" in out
    served = next(line for line in lines if line.strip().startswith("served"))
    assert served.split()[1:6] == ["114514", "116567", "204879", str(chunks), transforms]
    code, out, _ = run(capsys, "describe", TIERED / name, "--tiered", "--json", "--topic",
                       "orders")
    row = json.loads(out.splitlines()[0])
    assert (row["topic_id"], row["layout"], row["gaps"]) == (TOPIC_ID, "aiven", [])
    [upload] = row["uploads"]
    assert upload["file"] == f"{TIERED / name}/orders-0/00000000000000114514.log"
    assert (upload["status"], upload["chunks"], upload["transforms"]) == \
        ("served", chunks, transforms)


def test_describe_reports_dropped_uploads_and_gaps(tmp_path, capsys):
    src = write_partition(tmp_path / "src" / "orders-0", 200)
    bases = segment_bases(src)
    remote = tmp_path / "remote"
    kept = [b for b in bases[:-1] if b != bases[2]]          # bases[2] missing: a gap
    local_upload(src, remote, bases=kept, segment_id=lambda base: f"z{base:021d}")
    # a retry of the same offsets: the greater segment id is kept (resolution's last rule)
    local_upload(src, remote, bases=[bases[1]], segment_id=lambda _: "A" * 22)
    local_upload(src, remote, bases=[bases[3]], segment_id=lambda _: "B" * 22,
                 skip=(".snapshot",))                         # unfinished
    code, out, err = run(capsys, "describe", remote, "--tiered")
    assert code == EXIT_OK, err
    assert f"orders-0: topic id {LOCAL_TOPIC_ID}, local layout, {len(kept)} served, " \
           "2 dropped, 1 gap(s)" in out
    detail = out.split(f"topic id {LOCAL_TOPIC_ID}")[1].splitlines()
    dropped = [line.split() for line in detail if line.strip().startswith("dropped")]
    assert [(d[1], d[6]) for d in dropped] == [(str(bases[1]), "AAAAAAAAAAAAAAAAAAAAAA"),
                                               (str(bases[3]), "BBBBBBBBBBBBBBBBBBBBBB")]
    assert "duplicate: same offsets as" in out and "unfinished upload: missing .snapshot" in out
    gap = next(line.split() for line in detail if line.strip().startswith("gap"))
    assert gap[:3] == ["gap", str(bases[2]), str(bases[3] - 1)]
    # consume reads across the gap and says so on stderr
    code, out, err = run(capsys, "consume", remote, "orders", "--tiered", "--print-offset")
    assert code == EXIT_OK
    assert err == f"kafkastore consume: orders-0: offsets {bases[2]}..{bases[3] - 1} are in " \
                  "no segment of the copy (a gap)\n"
    assert [int(line.split(":")[1].split()[0]) for line in out.splitlines()] == \
        list(range(0, bases[2])) + list(range(bases[3], bases[4]))


def test_describe_says_where_an_overlap_cuts_a_segment(tmp_path, capsys):
    _src, remote, cut = overlap_copy(tmp_path)
    with open_tiered(str(remote)) as copy:
        [(earlier, later, _first, _last)] = copy.resolution(ORDERS0).overlaps
    code, out, err = run(capsys, "describe", remote, "--tiered")
    assert code == EXIT_OK, err
    line = next(x for x in out.splitlines() if earlier.segment_id in x)
    assert line.split()[:3] == ["served", str(earlier.start_offset), str(earlier.end_offset)]
    assert line.endswith(f"serves {earlier.start_offset}..{cut - 1} (the next segment the "
                         "rest)")
    assert later.start_offset == cut


# -- consume ----------------------------------------------------------------------------------

def test_consume_a_local_tiered_copy_prints_the_source_records(tmp_path, capsys):
    src, remote = local_copy(tmp_path)
    argv = ["orders", "--print-offset", "--print-key", "--print-timestamp"]
    code, want, _ = run(capsys, "consume", src.parent, *argv)
    assert code == EXIT_OK
    code, out, err = run(capsys, "consume", remote, *argv, "--tiered")
    assert code == EXIT_OK, err
    assert out == want and out.count("\n") == 120
    code, out, _ = run(capsys, "consume", remote, *argv, "--tiered", "--offset", "50",
                       "--max-records", "3", "--format", "json")
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [50, 51, 52]


@needs_vectors
def test_consume_a_vector_copy_prints_the_source_records(tmp_path, capsys):
    source = tmp_path / "logs" / "orders-0"
    shutil.copytree(SEGMENTS / "s1_v2_mixed_codecs", source,
                    ignore=shutil.ignore_patterns("*.jsonl", "*.json"))
    argv = ["orders", "--print-offset", "--print-key", "--max-records", "40"]
    code, want, _ = run(capsys, "consume", source.parent, *argv)
    assert code == EXIT_OK
    code, out, err = run(capsys, "consume", TIERED / "aiven-zstd", *argv, "--tiered")
    assert code == EXIT_OK, err
    assert out == want


# -- dump-log ---------------------------------------------------------------------------------

def dump(capsys, *files, tiered=False):
    return run(capsys, "dump-log", "--files", ",".join(str(f) for f in files),
               "--deep-iteration", "--print-data-log", *(["--tiered"] if tiered else []))


@needs_vectors
@pytest.mark.parametrize("name", ["aiven-plain", "aiven-zstd"])
def test_dump_log_of_a_remote_segment_is_the_source_segment_dump(capsys, name):
    for partition, source in VECTOR_SOURCES[name].items():
        src_dir = SEGMENTS / source
        base = next(src_dir.glob("*.log")).stem
        for suffix in (".log", ".index", ".timeindex"):
            code, want, _ = dump(capsys, src_dir / (base + suffix))
            assert code == EXIT_OK
            virtual = TIERED / name / f"orders-{partition}"
            code, out, err = dump(capsys, virtual / (base + suffix), tiered=True)
            assert code == EXIT_OK, err
            assert out.replace(str(virtual), str(src_dir)) == want
            assert len(want.splitlines()) > 2


def test_dump_log_of_local_tiered_segments_and_of_one_upload(tmp_path, capsys):
    src, remote = local_copy(tmp_path)
    base = f"{segment_bases(src)[1]:020d}"
    code, want, _ = dump(capsys, src / f"{base}.log", src / f"{base}.index")
    code, out, err = dump(capsys, remote / "orders-0" / f"{base}.log",
                          remote / "orders-0" / f"{base}.index", tiered=True)
    assert code == EXIT_OK, err
    assert out.replace(str(remote / "orders-0"), str(src)) == want
    # any complete upload by its segment id, under .segments/
    with open_tiered(str(remote)) as copy:
        sid = copy.resolution(ORDERS0).segments[1].segment_id
    hidden = remote / ".segments" / "orders-0" / sid
    code, out, err = dump(capsys, hidden / f"{base}.log", tiered=True)
    assert code == EXIT_OK, err
    assert out.replace(str(hidden), str(src)) == dump(capsys, src / f"{base}.log")[1]


# -- verify -----------------------------------------------------------------------------------

@needs_vectors
@pytest.mark.parametrize("name", ["aiven-plain", "aiven-zstd"])
def test_verify_passes_the_vector_copies(capsys, name):
    code, out, err = run(capsys, "verify", TIERED / name, "--tiered")
    assert code == EXIT_OK, out + err
    partitions = len(VECTOR_SOURCES[name])
    assert out == f"verified {partitions} partitions of the tiered copy: no problems\n"


def test_verify_passes_a_local_tiered_copy(tmp_path, capsys):
    _src, remote = local_copy(tmp_path)
    code, out, err = run(capsys, "verify", remote, "--tiered", "--layout", "local")
    assert code == EXIT_OK, out + err


@needs_vectors
def test_verify_names_the_object_and_chunk_of_a_damaged_chunk(tmp_path, capsys):
    copy_dir, log_obj, chunk = damaged_zstd_copy(tmp_path)
    code, out, err = run(capsys, "verify", copy_dir, "--tiered")
    assert code == EXIT_PROBLEM, err
    [problem, summary] = out.splitlines()
    assert problem.startswith(f"{log_obj}: chunk 3 at position {chunk.transformed_position}: ")
    assert summary == "verified 1 partitions of the tiered copy: 1 problem(s)"


@needs_vectors
def test_verify_finds_a_bad_crc_naming_object_position_and_chunk(tmp_path, capsys):
    copy_dir = tmp_path / "copy"
    shutil.copytree(TIERED / "aiven-plain", copy_dir)
    log_obj = next((copy_dir / f"orders-{TOPIC_ID}" / "0").glob("*.log"))
    data = bytearray(log_obj.read_bytes())
    data[5000] ^= 0xFF   # inside a batch that starts in chunk 0 (4,096-byte chunks)
    log_obj.write_bytes(bytes(data))
    code, out, err = run(capsys, "verify", copy_dir, "--tiered", "--topic", "orders")
    assert code == EXIT_PROBLEM, err
    [problem, *_rest, summary] = out.splitlines()
    assert problem.startswith(f"{log_obj}: corrupt entry at position 1319 (chunk 0): Record "
                              "batch is corrupt"), out
    assert summary.startswith("verified 2 partitions of the tiered copy: ")


@needs_vectors
def test_verify_checks_the_manifest_offsets_against_the_batches(tmp_path, capsys):
    copy_dir = tmp_path / "copy"
    shutil.copytree(TIERED / "aiven-plain", copy_dir)
    manifest = next((copy_dir / f"orders-{TOPIC_ID}" / "1").glob("*.rsm-manifest"))
    meta = json.loads(manifest.read_bytes())
    meta["remoteLogSegmentMetadata"]["endOffset"] = 1000050
    manifest.write_text(json.dumps(meta, separators=(",", ":")))
    code, out, err = run(capsys, "verify", copy_dir, "--tiered")
    assert code == EXIT_PROBLEM, err
    assert out.splitlines() == [
        f"{manifest}: remoteLogSegmentMetadata endOffset 1000050, but the batches end at "
        "1000060", "verified 2 partitions of the tiered copy: 1 problem(s)"]


def test_verify_finds_an_index_that_disagrees_with_the_batches(tmp_path, capsys):
    src, remote = local_copy(tmp_path)
    index = next(remote.rglob("00000000000000000000-*.index"))
    data = bytearray(index.read_bytes())
    assert len(data) >= 16
    data[12:16] = (int.from_bytes(data[12:16], "big") + 1).to_bytes(4, "big")  # a position
    index.write_bytes(bytes(data))
    code, out, err = run(capsys, "verify", remote, "--tiered")
    assert code == EXIT_PROBLEM, err
    assert f"{index}: " in out


# -- usage ------------------------------------------------------------------------------------

def test_tiered_usage_errors(tmp_path, capsys):
    code, _, err = run(capsys, "verify", tmp_path, "--layout", "aiven")
    assert code == EXIT_USAGE and "add --tiered" in err
    code, _, err = run(capsys, "describe", tmp_path / "nope", "--tiered")
    assert code == EXIT_USAGE and "no such tiered copy" in err
    code, _, err = run(capsys, "verify", tmp_path, "--tiered", "--repair")
    assert code == EXIT_USAGE and "read-only" in err
    (tmp_path / "x.txt").write_text("not a copy")
    code, _, err = run(capsys, "describe", tmp_path, "--tiered")
    assert code == EXIT_USAGE and "no tiered-storage segment objects" in err
    assert "Traceback" not in err


@needs_vectors
def test_the_commands_on_a_copy_in_the_s3_emulator(s3_server, capsys):
    bucket = s3_server.new_bucket("tiered-cli")
    uri = s3_server.upload_dir(TIERED / "aiven-zstd", bucket, "cluster-a")
    opts = [a for k, v in s3_server.options().items()
            for a in ("--storage-option", f"{k}={v}")]
    code, out, err = run(capsys, "verify", uri, "--tiered", *opts)
    assert code == EXIT_OK, out + err
    code, out, err = run(capsys, "describe", uri, "--tiered", "--json", *opts)
    assert code == EXIT_OK, err
    [upload] = json.loads(out)["uploads"]
    assert upload["file"] == f"{uri}/orders-0/00000000000000114514.log"
    code, out, err = run(capsys, "dump-log", "--tiered", "--files", upload["file"], *opts)
    assert code == EXIT_OK, err
    src = SEGMENTS / "s1_v2_mixed_codecs"
    code, want, _ = run(capsys, "dump-log", "--files", src / "00000000000000114514.log")
    assert out.replace(f"{uri}/orders-0", str(src)) == want
    code, _, err = run(capsys, "verify", uri, "--tiered", "--storage-option", "nope=1")
    assert code == EXIT_USAGE and "--storage-option" in err


# -- tiered upload, and the commands on what it writes ------------------------------------------

@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    from kafkastore.tiered import KeyRing

    _ring, pem = KeyRing.generate("k1")
    path = tmp_path_factory.mktemp("keys") / "k1.pem"
    path.write_bytes(pem)
    return path


def test_upload_compressed_and_encrypted_then_read_it_back(tmp_path, capsys, key_file):
    src = write_partition(tmp_path / "src" / "orders-0", 120)
    (src / "partition.metadata").write_text(f"version: 0\ntopic_id: {TOPIC_ID}")
    remote = tmp_path / "remote"
    code, out, err = run(capsys, "tiered", "upload", src, remote, "--chunk-size", "300",
                         "--compression", "--key-ring", f"k1={key_file}", "--active-key",
                         "k1", "--key-prefix", "cluster/")
    assert code == EXIT_OK, err
    rolled = segment_bases(src)[:-1]
    assert out.splitlines()[-1] == f"uploaded {len(rolled)} segment(s) to {remote}"
    ring = ["--key-ring", f"k1={key_file}"]
    code, out, err = run(capsys, "describe", remote, "--tiered", "--json", *ring)
    assert code == EXIT_OK, err
    row = json.loads(out)
    assert [u["start_offset"] for u in row["uploads"]] == rolled
    assert {u["transforms"] for u in row["uploads"]} == {"zstd+aes-gcm (key k1)"}
    assert all(u["chunks"] > 1 for u in row["uploads"])
    code, out, err = run(capsys, "verify", remote, "--tiered", *ring)
    assert (code, err) == (EXIT_OK, ""), out
    code, want, _ = run(capsys, "consume", src.parent, "orders", "--print-offset")
    code, out, err = run(capsys, "consume", remote, "orders", "--print-offset", "--tiered",
                         *ring)
    assert code == EXIT_OK, err
    assert out == want
    base = f"{rolled[1]:020d}"
    code, want, _ = run(capsys, "dump-log", "--files", src / f"{base}.log", "--deep-iteration")
    code, out, err = run(capsys, "dump-log", "--files", remote / "orders-0" / f"{base}.log",
                         "--deep-iteration", "--tiered", *ring)
    assert code == EXIT_OK, err
    assert out.replace(str(remote / "orders-0"), str(src)) == want
    # without the key: the partition cannot be resolved (its last segment's batches are
    # read for its end offset), a line naming the manifest and the key id, exit code 1
    code, out, err = run(capsys, "verify", remote, "--tiered")
    assert code == EXIT_PROBLEM
    [problem, _summary] = out.splitlines()
    assert problem.endswith(".rsm-manifest: the segment is encrypted with RSA key 'k1' "
                            "and no key ring was given (orders-0 cannot be resolved)"), out
    # a damaged encrypted chunk: its GCM tag fails
    log_obj = sorted(remote.rglob("*.log"))[0]
    data = bytearray(log_obj.read_bytes())
    data[-5] ^= 1
    log_obj.write_bytes(bytes(data))
    code, out, err = run(capsys, "verify", remote, "--tiered", *ring)
    assert code == EXIT_PROBLEM
    [problem, _summary] = out.splitlines()
    assert problem.startswith(f"{log_obj}: chunk ") and " at position " in problem


def test_upload_options_and_their_mistakes(tmp_path, capsys, key_file):
    src = write_partition(tmp_path / "src" / "orders-0", 120)
    bases = segment_bases(src)
    remote = tmp_path / "remote"
    code, out, err = run(capsys, "tiered", "upload", src, remote, "--layout", "local",
                         "--segments", f"{bases[1]}", "--topic-id", TOPIC_ID)
    assert code == EXIT_OK, err
    assert out.splitlines()[0].startswith(f"orders-0: {bases[1]:020d}-")
    assert [p.name.split("-")[0] for p in (remote / f"orders-0-{TOPIC_ID}").glob("*.log")] \
        == [f"{bases[1]:020d}"]
    for argv, message in (
            (["--segments", "x"], "--segments expects base offsets"),
            (["--active-key", "k1"], "--active-key names a key of --key-ring"),
            (["--compression-heuristic"], "compression.enabled must be enabled"),
            (["--chunk-size", "0"], "--chunk-size must be at least 1")):
        code, _, err = run(capsys, "tiered", "upload", src, tmp_path / "other", *argv,
                           "--topic-id", TOPIC_ID)
        assert code == EXIT_USAGE and message in err, (argv, err)
        assert "Traceback" not in err
