"""Issue 28's tiered-copy frictions: a key too small refused when the key ring loads it
(one line, exit 2) and ``tiered keygen`` to make one; ``describe --tiered`` of an
encrypted copy without the key lists what the manifests tell; a re-run ``tiered
upload`` uploads only what the copy does not already hold complete."""

from __future__ import annotations

import json
import os
import stat

import pytest
from _copies import TOPIC_ID, run, write_partition

from kafkastore.cli import EXIT_OK, EXIT_USAGE
from kafkastore.errors import ConfigError

pytest.importorskip("Crypto", reason="encrypted copies need pycryptodome (the tiered extra)")

from kafkastore.tiered.crypto import MIN_KEY_BITS, KeyRing  # noqa: E402


def _rsa_pem(bits: int) -> bytes:
    """A PKCS#8 PEM of a ``bits``-bit key made by pycryptodome directly (not by the code
    under test)."""
    from Crypto.PublicKey import RSA

    return RSA.generate(bits).export_key(format="PEM", pkcs=8)


@pytest.fixture(scope="module")
def small_key(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "small.pem"
    path.write_bytes(_rsa_pem(1024))
    return path


def _partition(tmp_path, n=120):
    src = write_partition(tmp_path / "src" / "orders-0", n)
    (src / "partition.metadata").write_text(f"version: 0\ntopic_id: {TOPIC_ID}")
    return src


# -- item 9: keys ------------------------------------------------------------------------------

def test_the_minimum_is_the_smallest_key_oaep_over_sha3_512_wraps_a_data_key_with():
    # RFC 8017 7.1.1: at most k - 2*hLen - 2 bytes, k the modulus in whole bytes; with
    # SHA3-512 (hLen 64) a 32-byte data key needs k = 162, a modulus of 1289 bits or more
    assert MIN_KEY_BITS == 1289
    ring = KeyRing({"edge": _rsa_pem(MIN_KEY_BITS)})
    key_id, wrapped = ring.wrap(b"\x07" * 32)
    assert ring.unwrap(key_id, wrapped, path="test") == b"\x07" * 32
    with pytest.raises(ConfigError, match=f"{MIN_KEY_BITS - 1} bits"):
        KeyRing({"edge": _rsa_pem(MIN_KEY_BITS - 1)})


def test_a_key_too_small_is_refused_when_the_ring_loads_it(small_key):
    with pytest.raises(ConfigError) as info:
        KeyRing({"small": small_key})
    message = str(info.value)
    assert "'small' is 1024 bits" in message and f"at least {MIN_KEY_BITS} bits" in message
    assert "2048" in message and "\n" not in message


def test_upload_with_a_1024_bit_key_is_one_line_and_exit_2(tmp_path, capsys, small_key):
    src = _partition(tmp_path)
    code, out, err = run(capsys, "tiered", "upload", src, tmp_path / "remote",
                         "--key-ring", f"small={small_key}")
    assert code == EXIT_USAGE
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "--key-ring" in err and "1024 bits" in err and f"{MIN_KEY_BITS} bits" in err
    # refused before anything was written
    assert not (tmp_path / "remote").exists() or not any((tmp_path / "remote").rglob("*.log"))


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(tmp_path,
                                                                            capsys):
    from Crypto.PublicKey import RSA

    key, pub = tmp_path / "k1.pem", tmp_path / "k1.pub.pem"
    code, out, err = run(capsys, "tiered", "keygen", key, "--public-key", pub)
    assert code == EXIT_OK, err
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    pem = key.read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")   # PKCS#8
    private = RSA.import_key(pem)
    assert private.size_in_bits() == 2048
    assert RSA.import_key(pub.read_bytes()) == private.public_key()
    assert f"--key-ring ID={key}" in out
    # the key encrypts an upload that reads back with it
    src = _partition(tmp_path)
    code, _, err = run(capsys, "tiered", "upload", src, tmp_path / "remote", "--key-ring",
                       f"k1={key}")
    assert code == EXIT_OK, err
    code, out, err = run(capsys, "verify", tmp_path / "remote", "--tiered", "--key-ring",
                         f"k1={key}")
    assert code == EXIT_OK, out + err
    # never overwritten: neither file changes
    for argv in ([key], [tmp_path / "other.pem", "--public-key", pub]):
        code, _, err = run(capsys, "tiered", "keygen", *argv)
        assert code == EXIT_USAGE and "exists: not overwritten" in err, err
    assert key.read_bytes() == pem and not (tmp_path / "other.pem").exists()
    code, _, err = run(capsys, "tiered", "keygen", tmp_path / "weak.pem", "--bits", "1024")
    assert code == EXIT_USAGE and "--bits must be in [2048" in err
    assert not (tmp_path / "weak.pem").exists()


def test_a_key_made_by_openssl_genpkey_as_the_docs_show_is_read(tmp_path):
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("no openssl command on this machine")
    path = tmp_path / "o.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt",
                    "rsa_keygen_bits:2048", "-out", str(path)], check=True,
                   capture_output=True)
    ring = KeyRing({"o": path})
    key_id, wrapped = ring.wrap(b"\x01" * 32)
    assert ring.unwrap(key_id, wrapped, path="test") == b"\x01" * 32


# -- item 15: a re-run uploads only what is missing ---------------------------------------------

def _copy_rows(capsys, remote, *ring):
    code, out, err = run(capsys, "consume", remote, "orders", "--print-offset", "--tiered",
                         *ring)
    assert code == EXIT_OK, err
    return out


def _uploads(remote):
    """``{start offset: set of segment ids}`` of the .log objects under ``remote``."""
    out = {}
    for p in remote.rglob("*.log"):
        start, sid = p.stem.split("-", 1)
        out.setdefault(int(start), set()).add(sid)
    return out


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "zstd+aes"])
def test_a_rerun_after_a_failure_uploads_only_the_missing_segments(tmp_path, capsys,
                                                                   monkeypatch, encrypted):
    from _copies import segment_bases

    from kafkastore.tiered.object_sink import LocalSink

    src = _partition(tmp_path)
    rolled = segment_bases(src)[:-1]
    assert len(rolled) >= 3
    remote = tmp_path / "remote"
    argv = ["--chunk-size", "300"]
    ring = []
    if encrypted:
        key = tmp_path / "k1.pem"
        key.write_bytes(_rsa_pem(2048))
        ring = ["--key-ring", f"k1={key}"]
        argv += ["--compression", *ring]
    # the second segment's manifest fails to write: the run stops there, the first
    # segment complete, the second's objects removed, the rest not started
    put = LocalSink.put

    def failing_put(self, path, data):
        if path.endswith(".rsm-manifest") and f"{rolled[1]:020d}-" in path:
            raise OSError(5, "injected failure")
        return put(self, path, data)

    monkeypatch.setattr(LocalSink, "put", failing_put)
    code, _, err = run(capsys, "tiered", "upload", src, remote, *argv)
    assert code != EXIT_OK and "injected failure" in err
    first = _uploads(remote)
    assert list(first) == [rolled[0]] and len(first[rolled[0]]) == 1
    monkeypatch.setattr(LocalSink, "put", put)

    code, out, err = run(capsys, "tiered", "upload", src, remote, *argv)
    assert code == EXIT_OK, err
    lines = out.splitlines()
    assert lines[0].endswith("already in the copy, skipped")
    assert lines[0].startswith(f"orders-0: {rolled[0]:020d}-{next(iter(first[rolled[0]]))}")
    assert not any("skipped" in line for line in lines[1:-1])
    assert lines[-1] == (f"uploaded {len(rolled) - 1} segment(s) to {remote}, skipped 1 the "
                         "copy already holds complete (--force uploads them again)")
    done = _uploads(remote)
    assert sorted(done) == rolled and all(len(ids) == 1 for ids in done.values())
    assert done[rolled[0]] == first[rolled[0]]   # the first upload kept, not redone
    # the copy reads back as the log's rolled segments
    code, want, _ = run(capsys, "consume", src.parent, "orders", "--print-offset")
    assert _copy_rows(capsys, remote, *ring) == want

    # a third run has nothing to do; --force uploads everything again
    code, out, err = run(capsys, "tiered", "upload", src, remote, *argv)
    assert code == EXIT_OK and out.splitlines()[-1].startswith(
        f"uploaded 0 segment(s) to {remote}, skipped {len(rolled)} "), out + err
    code, out, err = run(capsys, "tiered", "upload", src, remote, *argv, "--force")
    assert code == EXIT_OK and out.splitlines()[-1] == \
        f"uploaded {len(rolled)} segment(s) to {remote}", out + err
    assert all(len(ids) == 2 for ids in _uploads(remote).values())
    assert _copy_rows(capsys, remote, *ring) == want


def test_an_upload_not_complete_or_not_the_same_is_uploaded_again(tmp_path):
    from _copies import segment_bases

    from kafkastore.tiered.upload import upload_partition

    src = _partition(tmp_path)
    rolled = segment_bases(src)[:-1]
    remote = tmp_path / "remote"
    upload_partition(str(src), str(remote))
    by_start = {int(p.stem.split("-")[0]): p for p in remote.rglob("*.log")}
    # a crash between objects: the .log and .indexes there, no manifest
    by_start[rolled[0]].with_suffix(".rsm-manifest").unlink()
    # a damaged upload: its .log object shorter than its chunk index says
    log_obj = by_start[rolled[1]]
    log_obj.write_bytes(log_obj.read_bytes()[:-1])
    done = upload_partition(str(src), str(remote))
    assert [(s.key.start_offset, s.skipped) for s in done] == \
        [(rolled[0], False), (rolled[1], False)] + [(b, True) for b in rolled[2:]]
    assert all(s.bytes == 0 and s.objects for s in done if s.skipped)
    # a different layout at the same destination is not the same upload
    local = upload_partition(str(src), str(remote),
                             options=__import__("kafkastore.tiered.upload", fromlist=["x"])
                             .UploadOptions(layout="local"))
    assert not any(s.skipped for s in local)


# -- item 10: describe of an encrypted copy without its key ------------------------------------

def test_describe_without_the_key_lists_what_the_manifests_tell(tmp_path, capsys):
    from _copies import segment_bases

    src = _partition(tmp_path)
    rolled = segment_bases(src)[:-1]
    key, other = tmp_path / "k1.pem", tmp_path / "k2.pem"
    key.write_bytes(_rsa_pem(2048))
    other.write_bytes(_rsa_pem(2048))
    remote = tmp_path / "remote"
    code, _, err = run(capsys, "tiered", "upload", src, remote, "--compression",
                       "--chunk-size", "300", "--key-ring", f"k1={key}")
    assert code == EXIT_OK, err
    # an unfinished upload too: the first segment again, without its manifest
    [manifest] = [p for p in remote.rglob("*.rsm-manifest")
                  if p.name.startswith(f"{rolled[0]:020d}-")]
    for p in manifest.parent.glob(manifest.name.rsplit(".", 1)[0] + ".*"):
        if p.suffix != ".rsm-manifest":
            (p.parent / p.name.replace(p.name.split("-", 1)[1].split(".")[0],
                                       "AAAAAAAAAAAAAAAAAAAAAA")).write_bytes(p.read_bytes())
    code, out, err = run(capsys, "describe", remote, "--tiered", "--json", "--key-ring",
                         f"k1={key}")
    assert code == EXIT_OK, err
    want = json.loads(out)
    served = [u for u in want["uploads"] if u["status"] == "served"]
    assert len(served) == len(rolled)

    for ring in ([], ["--key-ring", f"k2={other}"]):
        code, out, err = run(capsys, "describe", remote, "--tiered", "--json", *ring)
        assert code == EXIT_OK, err
        [note] = err.splitlines()
        assert "RSA key 'k1'" in note and "--key-ring" in note and "Traceback" not in err
        row = json.loads(out)
        assert row["needs_key"] == ["k1"]
        listed = [u for u in row["uploads"] if u["status"] == "listed"]
        # every complete upload, with the offsets, sizes and chunks the keyed describe
        # shows for the served ones
        keep = ("segment_id", "start_offset", "end_offset", "bytes", "chunks", "transforms",
                "objects")
        assert [{k: u[k] for k in keep} for u in listed] == \
            [{k: u[k] for k in keep} for u in served]
        [unfinished] = [u for u in row["uploads"] if u["status"] == "dropped"]
        assert (unfinished["segment_id"], unfinished["reason"]) == \
            ("AAAAAAAAAAAAAAAAAAAAAA", "unfinished upload")
        assert (row["log_start_offset"], row["log_end_offset"], row["segments"]) == \
            (want["log_start_offset"], want["log_end_offset"], len(rolled))
        assert row["log_bytes"] == want["log_bytes"]
        assert row["bytes_on_disk"] == want["bytes_on_disk"]
    code, out, err = run(capsys, "describe", remote, "--tiered")
    assert code == EXIT_OK, err
    assert f"{len(rolled)} listed, 1 dropped (not resolved: needs --key-ring for key k1)" \
        in out
