"""The data key's RSA-OAEP wrapping (kafkastore.tiered.crypto.KeyRing) against an
independent oracle.

Aiven's plugin wraps each segment's data key with ``RSA/NONE/OAEPWithSHA3-512AndMGF1Padding``
from BouncyCastle, which reads that name as OAEP with SHA3-512 for the label hash *and*
MGF1 over SHA3-512, empty label. The oracle below is RFC 8017 section 7.1 written from the
RFC with :mod:`hashlib` and ``pow`` on the key's numbers (read with ``cryptography``, not
with the library the key ring uses); it is first checked against OpenSSL's OAEP on SHA-512,
which OpenSSL does, then used with SHA3-512, which it does not.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from kafkastore.errors import ConfigError, CorruptManifestError, MissingKeyError
from kafkastore.tiered.crypto import KeyRing

pytest.importorskip("Crypto", reason="the key ring's RSA-OAEP is pycryptodome's "
                                     "(the tiered extra)")
serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization",
                                    reason="the oracle reads keys with cryptography")
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa  # noqa: E402

PATH = "mem://t/0/00000000000000000000-x.log"


# -- the oracle: RSAES-OAEP (RFC 8017 7.1) from the RFC ----------------------------------


def _mgf1(seed: bytes, length: int, hash_name: str) -> bytes:
    size = hashlib.new(hash_name).digest_size
    out = b"".join(hashlib.new(hash_name, seed + i.to_bytes(4, "big")).digest()
                   for i in range(-(-length // size)))
    return out[:length]


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def oracle_encrypt(n: int, e: int, message: bytes, hash_name: str = "sha3_512",
                   mgf_hash: str | None = None) -> bytes:
    mgf_hash = mgf_hash or hash_name
    k, h_len = (n.bit_length() + 7) // 8, hashlib.new(hash_name).digest_size
    db = (hashlib.new(hash_name).digest() + bytes(k - len(message) - 2 * h_len - 2)
          + b"\x01" + message)
    seed = os.urandom(h_len)
    masked_db = _xor(db, _mgf1(seed, k - h_len - 1, mgf_hash))
    masked_seed = _xor(seed, _mgf1(masked_db, h_len, mgf_hash))
    em = int.from_bytes(b"\x00" + masked_seed + masked_db, "big")
    return pow(em, e, n).to_bytes(k, "big")


def oracle_decrypt(n: int, d: int, blob: bytes, hash_name: str = "sha3_512") -> bytes:
    k, h_len = (n.bit_length() + 7) // 8, hashlib.new(hash_name).digest_size
    em = pow(int.from_bytes(blob, "big"), d, n).to_bytes(k, "big")
    masked_seed, masked_db = em[1:1 + h_len], em[1 + h_len:]
    seed = _xor(masked_seed, _mgf1(masked_db, h_len, hash_name))
    db = _xor(masked_db, _mgf1(seed, k - h_len - 1, hash_name))
    assert em[0] == 0 and db[:h_len] == hashlib.new(hash_name).digest()
    rest = db[h_len:].lstrip(b"\x00")
    assert rest[:1] == b"\x01"
    return rest[1:]


def _numbers(pem: bytes) -> tuple[int, int, int]:
    priv = serialization.load_pem_private_key(pem, password=None).private_numbers()
    return priv.public_numbers.n, priv.public_numbers.e, priv.d


def _pem(key, fmt=None) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM,
                             fmt or serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@pytest.fixture(scope="module", params=[2048, 2047, 3072])
def key_pem(request) -> bytes:
    # 2047 bits: a modulus whose top byte is not full (k = 256 bytes, n < 2^2047)
    return _pem(rsa.generate_private_key(public_exponent=65537, key_size=request.param))


@pytest.fixture(scope="module")
def ring_and_pem():
    return KeyRing.generate("key-a")


# -- the oracle is RFC 8017: it agrees with OpenSSL where OpenSSL can -----------------------


def test_oracle_agrees_with_openssl_oaep_on_sha512():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    n, e, d = _numbers(_pem(key))
    oaep = padding.OAEP(mgf=padding.MGF1(hashes.SHA512()), algorithm=hashes.SHA512(),
                        label=None)
    msg = os.urandom(32)
    assert key.decrypt(oracle_encrypt(n, e, msg, "sha512"), oaep) == msg
    assert oracle_decrypt(n, d, key.public_key().encrypt(msg, oaep), "sha512") == msg


# -- the key ring's OAEP is the oracle's with SHA3-512 --------------------------------------


@pytest.mark.parametrize("size", [16, 24, 32])
def test_wrap_and_unwrap_agree_with_the_oracle(key_pem, size):
    ring = KeyRing({"k": key_pem})
    n, e, d = _numbers(key_pem)
    for _ in range(3):
        data_key = os.urandom(size)
        key_id, blob = ring.wrap(data_key)
        assert key_id == "k" and len(blob) == (n.bit_length() + 7) // 8
        assert oracle_decrypt(n, d, blob) == data_key              # wrap: as the plugin's
        assert ring.unwrap("k", oracle_encrypt(n, e, data_key), path=PATH) == data_key
        assert ring.unwrap("k", blob, path=PATH) == data_key        # the round trip


def test_wraps_are_randomized(ring_and_pem):
    ring, _ = ring_and_pem
    (_, a), (_, b) = ring.wrap(b"k" * 32), ring.wrap(b"k" * 32)
    assert a != b and ring.unwrap("key-a", a, path=PATH) == ring.unwrap("key-a", b, path=PATH)


@pytest.mark.parametrize("hash_name, mgf_hash", [
    ("sha3_512", "sha1"),       # the JDK's SunJCE reading of the name: MGF1 stays on SHA-1
    ("sha3_512", "sha512"),
    ("sha512", "sha512"),
    ("sha1", "sha1"),           # OAEP's defaults
])
def test_other_oaep_digests_do_not_unwrap(ring_and_pem, hash_name, mgf_hash):
    ring, pem = ring_and_pem
    n, e, _d = _numbers(pem)
    blob = oracle_encrypt(n, e, b"d" * 32, hash_name, mgf_hash)
    with pytest.raises(CorruptManifestError, match="does not decrypt with RSA key 'key-a'"):
        ring.unwrap("key-a", blob, path=PATH)


def test_damaged_or_foreign_wrapped_keys_raise_typed_errors(ring_and_pem):
    ring, pem = ring_and_pem
    n, e, _d = _numbers(pem)
    _, blob = ring.wrap(b"d" * 32)
    k = len(blob)
    bad = [blob[:-1], blob + b"\x00", b"", bytes(k), b"\xff" * k,   # \xff..: >= n
           n.to_bytes(k, "big")]
    for i in (0, 1, 64, 65, k // 2, k - 1):
        flipped = bytearray(blob)
        flipped[i] ^= 0x01
        bad.append(bytes(flipped))
    for blob_ in bad:
        with pytest.raises(CorruptManifestError) as info:
            ring.unwrap("key-a", blob_, path=PATH)
        assert info.value.path == PATH
    other, _ = KeyRing.generate("key-a")
    with pytest.raises(CorruptManifestError, match="does not decrypt with RSA key 'key-a'"):
        other.unwrap("key-a", blob, path=PATH)
    with pytest.raises(MissingKeyError) as missing:
        ring.unwrap("key-b", blob, path=PATH)
    assert missing.value.key_id == "key-b"
    # decrypts, but to no AES key
    with pytest.raises(CorruptManifestError, match="20 bytes, not an AES key"):
        ring.unwrap("key-a", oracle_encrypt(n, e, b"x" * 20), path=PATH)


# -- one key-loading path ------------------------------------------------------------------


def test_key_formats_and_the_public_key():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    n, e, d = _numbers(_pem(key))
    for pem in (_pem(key), _pem(key, serialization.PrivateFormat.TraditionalOpenSSL)):
        ring = KeyRing({"k": pem})
        assert oracle_decrypt(n, d, ring.wrap(b"q" * 32)[1]) == b"q" * 32
        assert ring.public_key_pem("k") == key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    encrypted = key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(b"pw"))
    ec_key = _pem(ec.generate_private_key(ec.SECP256R1()))
    for bad in (public, encrypted, ec_key, b"not a key", b""):
        with pytest.raises(ConfigError) as info:
            KeyRing({"k": bad})
        assert info.value.key == "k" and "'k'" in str(info.value)


def test_generated_key_is_a_pkcs8_pem_of_the_asked_size():
    ring, pem = KeyRing.generate("g", bits=3072)
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    n, _e, d = _numbers(pem)
    assert n.bit_length() == 3072
    assert oracle_decrypt(n, d, ring.wrap(b"g" * 16)[1]) == b"g" * 16


# -- the crypto libraries are imported only for encrypted segments -------------------------


_WITHOUT_CRYPTO = """
import sys

BLOCKED = ("Crypto", "cryptography")

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Block())
import kafkastore.tiered.tiered_storage, kafkastore.tiered.upload, kafkastore.tiered.export
from kafkastore.errors import ConfigError
from kafkastore.tiered import open_tiered
from kafkastore.tiered.crypto import KeyRing
from kafkastore.tiered.transform import ChunkTransform
pem, vectors = sys.argv[1], sys.argv[2]
if vectors:   # a zstd copy reads without either library
    with open_tiered(vectors) as copy:
        for tp in copy.partitions():
            log = copy.log(tp)
            assert sum(1 for _ in log.records()) == log.log_end_offset - log.log_start_offset
    print("read")
assert not [m for m in sys.modules if m.split(".")[0] in BLOCKED]
for make in (lambda: KeyRing.generate("k"), lambda: KeyRing({"k": pem}),
             lambda: ChunkTransform(True, bytes(32), bytes(32))):
    try:
        make()
    except ConfigError as exc:
        print(exc)
    else:
        raise SystemExit("no error")
"""


def test_without_the_crypto_libraries_encryption_names_the_extra(ring_and_pem):
    from _copies import TIERED

    _, pem = ring_and_pem
    vectors = TIERED / "aiven-zstd" if TIERED is not None else None
    vectors = str(vectors) if vectors is not None and vectors.is_dir() else ""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", _WITHOUT_CRYPTO, pem.decode(), vectors],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    if vectors:
        assert lines.pop(0) == "read"
    assert lines == [
        *["Encrypted tiered copies need pycryptodome, which the tiered extra brings: "
          "pip install 'pycryptodome>=3.19.1', or in a clone of kafkastore "
          "pip install '.[tiered]'"] * 2,
        "Encrypted tiered copies need cryptography, which the tiered extra brings: "
        "pip install 'cryptography>=42', or in a clone of kafkastore pip install '.[tiered]'"]


def test_a_key_too_small_for_oaep_sha3_512_is_a_config_error():
    # k - 2 * 64 - 2 bytes fit: a 1024-bit key holds no 32-byte data key (refused when
    # the ring loads it, issue 28)
    small = _pem(rsa.generate_private_key(public_exponent=65537, key_size=1024))
    with pytest.raises(ConfigError, match="1024 bits: OAEP with SHA3-512 wraps a 32-byte "
                       "data key only under a key of at least 1289 bits") as info:
        KeyRing({"s": small}).wrap(b"k" * 32)
    assert info.value.key == "s"
