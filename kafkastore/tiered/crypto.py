"""The encryption of Aiven's tiered-storage plugin: AES-256-GCM chunks under a per-segment
data key, the data key wrapped with an RSA key of a key ring.

Per segment (``AesEncryptionProvider.createDataKeyAndAAD``): a random 256-bit AES data key
and 32 random bytes of additional authenticated data (AAD). Each chunk (and each non-empty
index) is encrypted on its own, ``AES/GCM/NoPadding`` with a 128-bit tag, under a fresh
random 12-byte IV, the AAD given to the cipher; the transformed chunk is
``IV || ciphertext || tag`` (12 + n + 16 bytes; :func:`encrypt_chunk`).

The data key is wrapped (``RsaEncryptionProvider``) with the key ring's active RSA public
key, ``RSA/NONE/OAEPWithSHA3-512AndMGF1Padding`` from BouncyCastle. BouncyCastle's RSA
``CipherSpi`` maps that name to OAEP with SHA3-512 as the label hash *and* MGF1 over
SHA3-512 (``new OAEPParameterSpec("SHA3-512", "MGF1", new MGF1ParameterSpec("SHA3-512"),
PSource.PSpecified.DEFAULT)``, an empty label), unlike the JDK's SunJCE provider, whose
``OAEPWith<digest>AndMGF1Padding`` names keep MGF1 on SHA-1. The manifest stores it as
``"<key id>:<base64 of the RSA ciphertext>"`` (``EncryptedDataKey``).

The RSA side is pycryptodome's (``Crypto.Cipher.PKCS1_OAEP`` with SHA3-512 as the hash
and MGF1 over SHA3-512): ``cryptography`` (OpenSSL) refuses SHA-3 digests in OAEP
(``UnsupportedAlgorithm`` with cryptography 50 on OpenSSL 4.0). pycryptodome blinds the
RSA decryption and gives one error for every failure of the OAEP decoding, so a writer of
manifests learns nothing from which check failed. The AES-GCM side stays ``cryptography``'s
AESGCM: five times pycryptodome's MODE_GCM on a 4 MiB chunk, eight on 64 KiB
(``asv_bench/compare_crypto.py``).

Keys are PEM files, as the plugin reads them (``RsaKeyReader``: PKCS#8 private keys; the
plugin also reads the X.509 public key, which is derived from the private key here); every
key, given or generated, is read by pycryptodome's ``RSA.import_key`` alone.

Neither library is imported with this module: ``cryptography`` when a segment's AES-GCM
cipher is made (:func:`new_aead`), pycryptodome when a key ring is made or used, so plain
and zstd copies need neither. Without the one needed, the call raises
:class:`~kafkastore.errors.ConfigError` naming the ``tiered`` extra.

Thread-safety: a :class:`KeyRing` is immutable after construction and may be shared; it
pickles as its PEM bytes (Spark ships it to executors).
"""

from __future__ import annotations

import functools
import os
import secrets
from collections.abc import Mapping
from types import SimpleNamespace

from kafkastore.errors import (
    ConfigError,
    CorruptChunkError,
    CorruptManifestError,
    MissingKeyError,
    missing_extra,
)

__all__ = [
    "IV_SIZE",
    "TAG_SIZE",
    "DATA_KEY_SIZE",
    "AAD_SIZE",
    "MIN_KEY_BITS",
    "RECOMMENDED_KEY_BITS",
    "KeyRing",
    "new_aead",
    "new_data_key_and_aad",
    "encrypt_chunk",
    "decrypt_chunk",
]

IV_SIZE = 12
TAG_SIZE = 16
DATA_KEY_SIZE = 32
AAD_SIZE = 32
#: SHA3-512's digest size: OAEP spends two of them and 2 bytes on its padding.
_OAEP_HASH_SIZE = 64
#: The smallest RSA modulus, in bits, that can wrap a data key: OAEP (RFC 8017 7.1.1)
#: takes at most ``k - 2*hLen - 2`` bytes, so with SHA3-512 a 32-byte key needs a
#: ``k`` of 2*64 + 2 + 32 = 162 bytes, i.e. a modulus above 161*8 = 1288 bits. A smaller
#: key can neither wrap a data key nor have wrapped one (no copy can need it), so the key
#: ring refuses it when it loads it. New keys should be :data:`RECOMMENDED_KEY_BITS`.
MIN_KEY_BITS = 8 * (2 * _OAEP_HASH_SIZE + 2 + DATA_KEY_SIZE - 1) + 1
#: The size ``tiered keygen`` makes at least (NIST SP 800-57 part 1: 2048-bit RSA for
#: 112-bit security, the floor for new keys).
RECOMMENDED_KEY_BITS = 2048


# -- AES-GCM chunks ----------------------------------------------------------------------


def new_data_key_and_aad() -> tuple[bytes, bytes]:
    """A fresh 256-bit data key and 32 bytes of AAD (two separate random draws, as the
    plugin insists)."""
    return secrets.token_bytes(DATA_KEY_SIZE), secrets.token_bytes(AAD_SIZE)


#: What the tiered extra brings (pyproject.toml), by the name pip installs it under.
_TIERED_EXTRA = {"pycryptodome": "pycryptodome>=3.19.1", "cryptography": "cryptography>=42"}


def _need(library: str) -> ConfigError:
    return missing_extra("Encrypted tiered copies need", library, _TIERED_EXTRA[library],
                         "tiered")


@functools.cache
def _cryptography() -> SimpleNamespace:
    """``cryptography``'s AES-GCM, imported on first use (cached: a chunk's decryption
    looks it up)."""
    try:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise _need("cryptography") from None
    return SimpleNamespace(AESGCM=AESGCM, InvalidTag=InvalidTag)


def new_aead(key: bytes):
    """``cryptography``'s ``AESGCM`` under ``key``: one per segment, used for each of its
    chunks."""
    return _cryptography().AESGCM(bytes(key))


def _aead(key):
    return new_aead(key) if isinstance(key, (bytes, bytearray, memoryview)) else key


def encrypt_chunk(key, aad: bytes, plain: bytes) -> bytes:
    """``IV || ciphertext || tag`` of ``plain`` under ``key`` (bytes, or the
    :func:`new_aead` of them) with a fresh random IV."""
    iv = secrets.token_bytes(IV_SIZE)
    return iv + _aead(key).encrypt(iv, bytes(plain), aad)


def decrypt_chunk(key, aad: bytes, blob: bytes, *, chunk: int | None, position: int | None,
                  path: str, what: str | None = None) -> bytes:
    """The plain bytes of an encrypted chunk; a short blob or a tag that does not verify
    (a wrong key, flipped or cut bytes) raises
    :class:`~kafkastore.errors.CorruptChunkError` with ``chunk``, ``position``, ``path``.
    ``what`` names the chunk in the message (default ``chunk <n>``)."""
    name = what or f"chunk {chunk}"
    if len(blob) < IV_SIZE + TAG_SIZE:
        raise CorruptChunkError(
            f"{path}: {name} at byte {position} is {len(blob)} bytes, shorter than an "
            f"encrypted chunk's IV and tag ({IV_SIZE + TAG_SIZE})",
            chunk=chunk, position=position, path=path)
    view = memoryview(blob)   # AESGCM reads buffers: no copy of the chunk
    invalid_tag = _cryptography().InvalidTag
    try:
        return _aead(key).decrypt(bytes(view[:IV_SIZE]), view[IV_SIZE:], aad)
    except invalid_tag:
        raise CorruptChunkError(
            f"{path}: {name} at byte {position} does not decrypt: its AES-GCM tag does not "
            f"verify (a wrong data key, or damaged or truncated bytes)",
            chunk=chunk, position=position, path=path) from None


# -- RSA-OAEP with SHA3-512 -------------------------------------------------------------


def _pycryptodome() -> SimpleNamespace:
    """pycryptodome's RSA pieces, imported on first use (module caching makes later calls
    cheap); ConfigError naming the extra when it is not installed."""
    try:
        from Crypto.Cipher import PKCS1_OAEP
        from Crypto.Hash import SHA3_512
        from Crypto.PublicKey import RSA
        from Crypto.Signature.pss import MGF1
    except ImportError:
        raise _need("pycryptodome") from None
    return SimpleNamespace(RSA=RSA, PKCS1_OAEP=PKCS1_OAEP, SHA3_512=SHA3_512, MGF1=MGF1)


def _oaep(key):
    """The plugin's OAEP (BouncyCastle's ``OAEPWithSHA3-512AndMGF1Padding``): SHA3-512 for
    the label hash and for MGF1, empty label. A new cipher per call: they are cheap, and
    one would not be shared between threads."""
    lib = _pycryptodome()
    return lib.PKCS1_OAEP.new(key, hashAlgo=lib.SHA3_512,
                              mgfunc=lambda seed, n: lib.MGF1(seed, n, lib.SHA3_512))


# -- the key ring -------------------------------------------------------------------------


def _load_pem(key_id: str, source) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if isinstance(source, str) and source.lstrip().startswith("-----BEGIN"):
        return source.encode("ascii")
    try:
        with open(os.fspath(source), "rb") as f:
            return f.read()
    except (OSError, TypeError) as exc:
        raise ConfigError(f"Cannot read the RSA key {key_id!r} from {source!r}: {exc}",
                          key=key_id, value=str(source)) from None


def _private_key(key_id: str, pem: bytes):
    """The pycryptodome RSA key of ``pem`` (PKCS#8 or PKCS#1, unencrypted): the one way
    keys are read."""
    rsa = _pycryptodome().RSA
    try:
        key = rsa.import_key(pem)
    except (ValueError, TypeError, IndexError) as exc:
        raise ConfigError(f"The key {key_id!r} is not an unencrypted PEM RSA private key: "
                          f"{exc}", key=key_id) from None
    if not key.has_private():
        raise ConfigError(f"The key {key_id!r} is a public key: the key ring needs the "
                          f"private key", key=key_id)
    bits = key.size_in_bits()
    if bits < MIN_KEY_BITS:
        # checked here, not when the first segment is wrapped mid-upload: OAEP over
        # SHA3-512 cannot fit a data key under it (MIN_KEY_BITS)
        raise ConfigError(f"The RSA key {key_id!r} is {bits} bits: OAEP with SHA3-512 "
                          f"wraps a {DATA_KEY_SIZE}-byte data key only under a key of at "
                          f"least {MIN_KEY_BITS} bits; make one of "
                          f"{RECOMMENDED_KEY_BITS} bits or more (kafkastore tiered keygen)",
                          key=key_id, value=bits)
    return key


class KeyRing:
    """RSA key pairs by key id (the plugin's ``encryption.key.pairs`` and
    ``encryption.key.pair.id``). ``private_keys`` maps each id to PEM bytes (or text) or a
    file path; ``active_key_id`` wraps new data keys (default: the only key, if one)."""

    def __init__(self, private_keys: Mapping[str, bytes | str | os.PathLike] = (), *,
                 active_key_id: str | None = None) -> None:
        pems = {}
        for key_id, source in dict(private_keys).items():
            if not isinstance(key_id, str) or not key_id.strip() or ":" in key_id:
                raise ConfigError(f"Invalid key id {key_id!r}: a key id is not blank and "
                                  f"has no ':' (the manifest writes '<id>:<key>')",
                                  key=str(key_id))
            pems[key_id] = _load_pem(key_id, source)
        self._pems = pems
        self._keys = {key_id: _private_key(key_id, pem) for key_id, pem in pems.items()}
        if active_key_id is None and len(pems) == 1:
            active_key_id = next(iter(pems))
        if active_key_id is not None and active_key_id not in pems:
            raise ConfigError(f"The active key id {active_key_id!r} is not in the key ring "
                              f"({', '.join(sorted(pems)) or 'empty'})", key=active_key_id)
        self.active_key_id = active_key_id

    @classmethod
    def from_spec(cls, spec: str) -> KeyRing:
        """``"id=/path/key.pem,id2=/p2.pem[;active=id]"`` (CLI and Spark options)."""
        keys_part, _, rest = spec.partition(";")
        active = None
        if rest:
            name, eq, value = rest.partition("=")
            if name.strip() != "active" or not eq or not value.strip():
                raise ConfigError(f"Invalid key ring {spec!r}: after ';' comes 'active=<id>'",
                                  value=spec)
            active = value.strip()
        keys = {}
        for item in filter(None, (part.strip() for part in keys_part.split(","))):
            key_id, eq, path = item.partition("=")
            if not eq or not key_id.strip() or not path.strip():
                raise ConfigError(f"Invalid key ring entry {item!r}: expected <id>=<pem path>",
                                  value=spec)
            keys[key_id.strip()] = path.strip()
        if not keys:
            raise ConfigError(f"Invalid key ring {spec!r}: no key", value=spec)
        return cls(keys, active_key_id=active)

    @staticmethod
    def generate(key_id: str, bits: int = RECOMMENDED_KEY_BITS) -> tuple[KeyRing, bytes]:
        """A new RSA key pair (tests, the CLI): the ring holding it and its PKCS#8 PEM."""
        key = _pycryptodome().RSA.generate(bits, e=65537)
        pem = key.export_key(format="PEM", pkcs=8) + b"\n"   # a file's last line ends
        return KeyRing({key_id: pem}, active_key_id=key_id), pem

    @property
    def key_ids(self) -> list[str]:
        return sorted(self._pems)

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._keys

    def public_key_pem(self, key_id: str) -> bytes:
        """The X.509 SubjectPublicKeyInfo PEM of ``key_id`` (the plugin's public key file)."""
        # pycryptodome ends the PEM without a newline; openssl and the JDK end it with one
        return self._keys[key_id].public_key().export_key(format="PEM") + b"\n"

    def wrap(self, data_key: bytes) -> tuple[str, bytes]:
        """``(active key id, RSA-OAEP ciphertext of data_key)``."""
        if self.active_key_id is None:
            raise ConfigError("The key ring has no active key to encrypt with "
                              "(give active_key_id)", key="active")
        key = self._keys[self.active_key_id]
        cipher = _oaep(key.public_key())
        try:
            return self.active_key_id, cipher.encrypt(bytes(data_key))
        except ValueError:
            # OAEP over SHA3-512 takes at most k - 130 bytes: a 32-byte key needs a modulus
            # of 162 bytes (1296 bits); a 1024-bit key cannot wrap one
            raise ConfigError(f"The RSA key {self.active_key_id!r} ({key.size_in_bits()} "
                              f"bits) is too small to wrap a {len(data_key)}-byte data key "
                              f"with OAEP over SHA3-512", key=self.active_key_id) from None

    def unwrap(self, key_id: str, blob: bytes, *, path: str) -> bytes:
        """The data key wrapped in ``blob`` with ``key_id``: MissingKeyError if the ring
        lacks the key, CorruptManifestError if it does not decrypt to an AES key."""
        key = self._keys.get(key_id)
        if key is None:
            have = ", ".join(sorted(self._keys)) or "no keys"
            raise MissingKeyError(f"{path}: the segment's data key is encrypted with RSA key "
                                  f"{key_id!r}, which is not in the key ring ({have})",
                                  key_id=key_id, path=path)
        cipher = _oaep(key)   # outside the try: a missing pycryptodome is no corrupt manifest
        try:
            data_key = cipher.decrypt(bytes(blob))
        except ValueError:
            raise CorruptManifestError(
                f"{path}: the data key does not decrypt with RSA key {key_id!r} (a different "
                f"key under the same id, or a damaged manifest)", path=path) from None
        if len(data_key) not in (16, 24, 32):
            raise CorruptManifestError(f"{path}: the data key is {len(data_key)} bytes, not "
                                       f"an AES key", path=path)
        return data_key

    def __getstate__(self):
        return {"pems": self._pems, "active": self.active_key_id}

    def __setstate__(self, state) -> None:
        self.__init__(state["pems"], active_key_id=state["active"])

    def __repr__(self) -> str:
        return f"KeyRing(keys={self.key_ids}, active={self.active_key_id!r})"
