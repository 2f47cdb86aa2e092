"""Issue 28's tiered-copy frictions: a key too small refused when the key ring loads it
(one line, exit 2) and ``tiered keygen`` to make one; ``describe --tiered`` of an
encrypted copy without the key lists what the manifests tell; a re-run ``tiered
upload`` uploads only what the copy does not already hold complete."""

from __future__ import annotations

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

def test_the_smallest_key_oaep_over_sha3_512_can_wrap_with(tmp_path):
    # RFC 8017 7.1.1: a message of at most k - 2*hLen - 2 bytes; SHA3-512's hLen is 64
    assert MIN_KEY_BITS == 8 * (2 * 64 + 2 + 32 - 1) + 1 == 1289


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
