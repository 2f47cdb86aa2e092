"""The tiered-storage workloads: reading a tiered copy beside the local log it came from.

Workload: the records workload of :mod:`kafkastore.bench.workload` appended 100 records a
call (one ~13 KB batch, one CreateTime per batch) to a partition ``bench-0`` written with
:class:`~kafkastore.log.Log`, cut into :data:`SEGMENTS` segments and rolled at the end (the
active segment is empty, so every segment with data is a rolled one). Its rolled segments
are uploaded by :func:`kafkastore.tiered.upload.upload_partition` into one copy per entry
of :data:`COPIES`:

======================= ==========================================================
``aiven plain``         Aiven layout, no transforms (the object is the segment)
``local tiered``        Kafka's LocalTieredStorage layout
``aiven zstd 4 MiB``    Aiven layout, zstd per chunk, the plugin's default chunk size
``aiven zstd 64 KiB``   the same with 64 KiB chunks
``aiven aes-gcm 4 MiB`` Aiven layout, AES-GCM per chunk (no compression), an RSA key
                        made for the run; absent without the ``tiered`` extra
======================= ==========================================================

Timed cases (:func:`timed_cases`; ``kafkastore`` is the tiered read, ratio = peer time /
tiered time as everywhere in the suite):

* plain copies beside the local partition directory read by
  :class:`~kafkastore.log_view.ReadOnlyLog` (peer ``local log directory``): the whole
  partition's ``records()`` and ``columns()``, and :data:`RANDOM_READS` random-offset
  ``read()`` of one batch (the issue's bar: ratio at least 0.9);
* transformed copies beside their transform alone on the same chunks held in memory
  (``zstandard`` alone: a ``ZstdDecompressor`` loop; ``AESGCM alone``:
  ``cryptography``'s AESGCM): ``columns()`` and a raw read of every segment's original
  bytes in 8 MiB windows (count: original bytes, so the rate is GB/s of original bytes);
  ``columns()`` also beside the local partition's ``columns()`` followed by the
  transform alone (``local columns() + ...``: 1.0 is a read that costs exactly its
  decoding and its decompression or decryption).

Fetches (:func:`measure_fetches`): random queries (``records(a, a + n)``,
``offset_for_timestamp``, ``read``) on a copy, each cold (:func:`cold`: no chunk left in
the copy's chunk cache from the query before); the real object bytes read by the
queries beside the transformed sizes of the chunks holding the byte ranges the queries
need (the batches of the answer), from the chunk index. What the copy reads once
(listing, manifests, every segment's ``.indexes``, the tail of the last segment for the
log end offset) is measured before the queries and reported apart.

Encryption alone (:func:`crypto_cases`, no copy): the RSA-OAEP unwrap of a data key
(SHA3-512 for OAEP and MGF1, as the plugin's keys are wrapped) by the key ring beside
pycryptodome's PKCS1_OAEP and ``cryptography``'s OAEP (skipped where OpenSSL refuses
SHA-3 in OAEP), and one chunk's AES-GCM decryption by the segment transform beside
``cryptography``'s AESGCM and pycryptodome's AES MODE_GCM (``asv_bench/compare_crypto.py``).

Used by ``kafkastore bench`` (workload ``tiered``), ``asv_bench/benchmarks/tiered.py`` and
``asv_bench/compare_tiered.py``. Thread-safety: none; a fixture is one thread's.
"""

from __future__ import annotations

import bisect
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafkastore.bench.workload import BASE_TIMESTAMP
from kafkastore.storage import RangeReader, ReadOnlyStorage

__all__ = ["TOPIC", "TOPIC_ID", "SEGMENTS", "PER_APPEND", "READ_WINDOW", "RANDOM_READS",
           "CopySpec", "PLAIN", "LOCAL_TIERED", "ZSTD", "ZSTD_SMALL", "AES", "COPIES",
           "TieredFixture", "Case", "LOCAL_PEER", "FetchResult", "QUERY_KINDS",
           "build_partition", "build_fixture", "warm", "cold", "timed_cases",
           "measure_fetches",
           "records_count", "columns_count", "random_offsets", "read_offsets", "raw_read",
           "transformed_chunks", "zstd_alone", "data_keys", "aesgcm_alone",
           "RSA_BITS", "GCM_CHUNK_SIZES", "crypto_cases"]

TOPIC = "bench"
#: A fixed topic id (Kafka's base64 form of 16 bytes), so copies are reproducible.
TOPIC_ID = "AAECAwQFBgcICQoLDA0ODw"
#: Segments the partition is cut into (plus the empty active one).
SEGMENTS = 4
#: Records a ``Log.append`` call (one batch).
PER_APPEND = 100
#: Window of the raw segment read (what ReadOnlyLog reads at a time).
READ_WINDOW = 8 << 20
#: Random-offset reads a timed ``read`` call does.
RANDOM_READS = 2000


@dataclass(frozen=True)
class CopySpec:
    """One tiered copy of the partition: ``upload_partition`` options."""

    name: str
    layout: str = "aiven"
    chunk_size: int = 4 << 20
    compression: bool = False
    encrypted: bool = False


PLAIN = CopySpec("aiven plain")
LOCAL_TIERED = CopySpec("local tiered", layout="local")
ZSTD = CopySpec("aiven zstd 4 MiB", compression=True)
ZSTD_SMALL = CopySpec("aiven zstd 64 KiB", chunk_size=64 << 10, compression=True)
AES = CopySpec("aiven aes-gcm 4 MiB", encrypted=True)
#: Every copy the fixture makes, in the order the rows come.
COPIES = (PLAIN, LOCAL_TIERED, ZSTD, ZSTD_SMALL, AES)


@dataclass
class TieredFixture:
    """The partition directory and its copies (see the module); :meth:`close` closes
    the views it opened. ``copies`` holds the copies that were made (the encrypted one is
    absent without the ``tiered`` extra; ``missing`` says why)."""

    root: str
    partition_dir: str
    copies: dict[str, str]
    specs: dict[str, CopySpec]
    key_ring: Any = None
    missing: dict[str, str] = field(default_factory=dict)
    original_bytes: int = 0
    segments: int = 0
    _open: dict[str, Any] = field(default_factory=dict)

    @property
    def tp(self):
        from kafkastore.topic import TopicPartition

        return TopicPartition(TOPIC, 0)

    def open_copy(self, name: str, storage_options=None, uri: str | None = None):
        """A new :class:`~kafkastore.tiered.TieredCopy` of copy ``name`` (``uri``: the
        same objects elsewhere, an S3 bucket)."""
        from kafkastore.tiered import open_tiered

        return open_tiered(uri or self.copies[name], layout=self.specs[name].layout,
                           storage_options=storage_options, key_ring=self.key_ring)

    def view(self, name: str):
        """The ReadOnlyLog of ``local`` (the partition directory) or of copy ``name``,
        opened once and kept, warm (:func:`warm`), as a reader's."""
        log = self._open.get(name)
        if log is None:
            if name == "local":
                from kafkastore.log_view import ReadOnlyLog

                log = ReadOnlyLog.open(self.partition_dir)
            else:
                copy = self.open_copy(name)
                self._open["copy:" + name] = copy
                log = copy.log(self.tp)
            warm(log)
            self._open[name] = log
        return log

    def copy(self, name: str):
        """The TieredCopy :meth:`view` opened for ``name``."""
        self.view(name)
        return self._open["copy:" + name]

    def close(self) -> None:
        for obj in self._open.values():
            obj.close()
        self._open.clear()


def build_partition(directory: str, keys: Sequence[bytes], values: Sequence[bytes], *,
                    segments: int = SEGMENTS) -> str:
    """Write the workload into ``directory/bench-0`` (``segments`` rolled segments and an
    empty active one); returns the partition directory."""
    from kafkastore.bench.log import chunks, log_config
    from kafkastore.log import Log

    path = os.path.join(directory, f"{TOPIC}-0")
    total = sum(len(k) + len(v) + 10 for k, v in zip(keys, values))
    config = log_config(**{"segment.bytes": max(total // segments + 1, 4096)})
    log = Log.open(path, config, topic_id=TOPIC_ID)
    try:
        for i, recs in enumerate(chunks(keys, values, PER_APPEND)):
            log.append(recs, timestamp=BASE_TIMESTAMP + i)
        log.roll()
    finally:
        log.close()
    return path


def _key_ring():
    """A key ring with one fresh RSA key, or the reason there is none."""
    from kafkastore.errors import ConfigError
    from kafkastore.tiered.crypto import KeyRing, new_aead

    try:
        new_aead(bytes(32))      # the chunks' library, before a key is made
        ring, _pem = KeyRing.generate("bench")
    except ConfigError as exc:   # the tiered extra is not installed
        return None, str(exc)
    return ring, None


def build_fixture(directory: str, keys: Sequence[bytes], values: Sequence[bytes], *,
                  copies: Sequence[CopySpec] = COPIES,
                  segments: int = SEGMENTS) -> TieredFixture:
    """The partition (:func:`build_partition`) and each of ``copies`` under ``directory``."""
    from kafkastore.tiered.upload import UploadOptions, upload_partition

    partition = build_partition(directory, keys, values, segments=segments)
    fx = TieredFixture(directory, partition, {}, {c.name: c for c in copies})
    if any(c.encrypted for c in copies):
        fx.key_ring, why = _key_ring()
    for spec in copies:
        if spec.encrypted and fx.key_ring is None:
            fx.missing[spec.name] = why
            continue
        dest = os.path.join(directory, "copies", spec.name.replace(" ", "-"))
        os.makedirs(dest)
        options = UploadOptions(layout=spec.layout, chunk_size=spec.chunk_size,
                                compression=spec.compression,
                                key_ring=fx.key_ring if spec.encrypted else None)
        uploaded = upload_partition(partition, dest, options=options, topic_id=TOPIC_ID)
        fx.copies[spec.name] = dest
        fx.segments = len(uploaded)
    local = fx.view("local")
    fx.original_bytes = sum(s.size for s in local.segments)
    return fx


def warm(log) -> None:
    """Read what a view reads once: the log end offset and every segment's offset and
    time index (then close its segment readers)."""
    log.log_end_offset
    for seg in log.segments:
        log.offset_index(seg)
        log.time_index(seg)
    log.close()


def cold(log, copy=None) -> None:
    """Close the view's segment readers and drop the decoded chunks the readers of
    ``copy`` share, so that the next read fetches and decodes what it needs again (the
    index views stay, as in a reader that has read them once)."""
    log.close()
    if copy is not None:
        copy.tiered_storage.chunk_cache.clear()


# -- what is timed -----------------------------------------------------------------------


def records_count(log) -> int:
    """Every record of the partition as objects (CRCs checked); the count."""
    n = 0
    for _ in log.records():
        n += 1
    return n


def columns_count(log) -> int:
    """The whole partition decoded to columns; the row count."""
    return len(log.columns())


def random_offsets(log, k: int = RANDOM_READS, seed: int = 1) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(log.log_start_offset, log.log_end_offset) for _ in range(k)]


def read_offsets(log, offsets: Sequence[int], size: int) -> None:
    """``log.read(o, size)`` of each offset, its bytes fetched (``to_bytes``)."""
    read = log.read
    for o in offsets:
        read(o, size, False).to_bytes()


def raw_read(copy, log, window: int = READ_WINDOW) -> int:
    """Every segment's original bytes through the copy's virtual files, ``window`` bytes
    a read; the bytes read."""
    storage = copy.tiered_storage
    n = 0
    for seg in log.segments:
        with storage.open(seg.path, seg.size) as reader:
            for position in range(0, seg.size, window):
                n += len(reader.read(position, window))
    return n


def transformed_chunks(copy, tp) -> list[tuple[Any, bytes, int]]:
    """``(segment, blob, original size)`` of every chunk of the copy's served segments,
    sliced out of the objects read whole through the copy's store (outside any timing)."""
    storage = copy.storage
    out = []
    for seg in copy.resolution(tp).segments:
        info = seg.objects.files["log"]
        data = storage.read_file(info.path, limit=1 << 40)
        for c in seg.manifest.chunk_index.chunks():
            a = c.transformed_position
            out.append((seg, data[a:a + c.transformed_size], c.original_size))
    return out


def zstd_alone(chunks: Sequence[tuple[Any, bytes, int]]) -> int:
    """``zstandard`` decompressing each chunk, nothing else; the bytes it made."""
    import zstandard

    decompress = zstandard.ZstdDecompressor().decompress
    n = 0
    for _seg, blob, size in chunks:
        n += len(decompress(blob, max_output_size=size))
    return n


def data_keys(fx: TieredFixture, copy, tp) -> dict[str, tuple[bytes, bytes]]:
    """``segment id -> (data key, aad)`` of an encrypted copy's segments, unwrapped with
    the fixture's key ring."""
    out = {}
    for seg in copy.resolution(tp).segments:
        enc = seg.manifest.encryption
        key = fx.key_ring.unwrap(enc.key_id, enc.encrypted_data_key, path=copy.uri)
        out[seg.segment_id] = (key, enc.aad)
    return out


def aesgcm_alone(chunks: Sequence[tuple[Any, bytes, int]],
                 keys: dict[str, tuple[bytes, bytes]]) -> int:
    """``cryptography``'s AESGCM decrypting each chunk (IV first, tag last), nothing
    else; the bytes it made."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from kafkastore.tiered.crypto import IV_SIZE

    ciphers = {sid: (AESGCM(key), aad) for sid, (key, aad) in keys.items()}
    n = 0
    for seg, blob, _size in chunks:
        cipher, aad = ciphers[seg.segment_id]
        n += len(cipher.decrypt(blob[:IV_SIZE], blob[IV_SIZE:], aad))
    return n


# -- the cases ---------------------------------------------------------------------------

#: A timer is a zero-argument callable returning the seconds of one measured run; a maker
#: builds one (raising NotImplementedError when what it needs is missing).
Timer = Callable[[], float]


@dataclass
class Case:
    """One timed comparison: ``ours`` (the tiered read) against each of ``peers``, both
    makers of timers; ``count`` ``unit`` are what one call does."""

    variant: str
    ours: Callable[[], Timer]
    peers: dict[str, Callable[[], Timer]]
    count: int
    unit: str


#: The peer of the plain reads (the bar's denominator).
LOCAL_PEER = "local log directory"


def timed_cases(fx: TieredFixture, timed: Callable[[Callable[[], object]], Timer]
                ) -> list[Case]:
    """The comparisons of the module's docstring, in order; ``timed(fn)`` makes a timer of
    ``fn``. Copies the fixture lacks give no case (:attr:`TieredFixture.missing`)."""
    tp = fx.tp
    local = fx.view("local")
    n_records = local.log_end_offset - local.log_start_offset
    size = local.read(local.log_start_offset, 1).size   # one batch
    offsets = random_offsets(local)
    cases = []

    def on(name: str, fn: Callable[[Any], object]) -> Callable[[], Timer]:
        def make() -> Timer:
            log = fx.view(name)   # opened (listed, manifests read) outside the timing
            copy = None if name == "local" else fx.copy(name)

            def run() -> object:
                # no call starts with chunks decoded by the one before
                cold(log, copy)
                return fn(log)
            return timed(run)
        return make

    for spec in (PLAIN, LOCAL_TIERED):
        if spec.name not in fx.copies:
            continue
        cases.append(Case(f"records(), {spec.name}", on(spec.name, records_count),
                          {LOCAL_PEER: on("local", records_count)}, n_records, "records"))
        cases.append(Case(f"columns(), {spec.name}", on(spec.name, columns_count),
                          {LOCAL_PEER: on("local", columns_count)}, n_records, "records"))

        def reads(log) -> None:
            read_offsets(log, offsets, size)
        cases.append(Case(f"random read() of {size} B, {spec.name}", on(spec.name, reads),
                          {LOCAL_PEER: on("local", reads)}, len(offsets), "reads"))

    for spec in (ZSTD, ZSTD_SMALL, AES):
        if spec.name not in fx.copies:
            continue
        name = spec.name
        if spec.compression:
            peer = "zstandard alone"

            def alone(name=name) -> Timer:
                chunks = transformed_chunks(fx.copy(name), tp)
                return timed(lambda: zstd_alone(chunks))
        else:
            peer = "AESGCM alone"

            def alone(name=name) -> Timer:
                copy = fx.copy(name)
                chunks = transformed_chunks(copy, tp)
                keys = data_keys(fx, copy, tp)
                return timed(lambda: aesgcm_alone(chunks, keys))

        def plus_local(alone=alone) -> Timer:
            # the floor of a columns() that is decompression-bound: the same columns()
            # of the local segments, then the transform alone, one after the other
            first, then = on("local", columns_count)(), alone()
            return lambda: first() + then()
        cases.append(Case(f"columns(), {name}", on(name, columns_count),
                          {peer: alone, f"local columns() + {peer}": plus_local},
                          fx.original_bytes, "bytes"))
        cases.append(Case(f"raw segment read, {name}",
                          on(name, lambda log, name=name: raw_read(fx.copy(name), log)),
                          {peer: alone}, fx.original_bytes, "bytes"))
    return cases


# -- the encryption primitives alone ------------------------------------------------------

#: RSA key sizes of the data-key unwrap cases (:func:`crypto_cases`).
RSA_BITS = (2048, 4096)
#: Chunk sizes of the AES-GCM cases: the plugin's default chunk and a small one.
GCM_CHUNK_SIZES = (4 << 20, 64 << 10)


def _checked(name: str, fn: Callable[[], bytes], expected: bytes,
             timed: Callable[[Callable[[], object]], Timer]) -> Timer:
    """A timer of ``fn`` after one call checked against ``expected`` (a peer that
    answers wrongly is an error, not a fast peer)."""
    if fn() != expected:
        raise AssertionError(f"{name} does not give the expected bytes")
    return timed(fn)


def _oaep_peers(pem: bytes, blob: bytes, data_key: bytes, timed) -> dict:
    """The independent unwraps of ``blob``: pycryptodome's PKCS1_OAEP and
    ``cryptography``'s OAEP, each with SHA3-512 for the label hash and MGF1 (a maker
    raises NotImplementedError when the library is absent or refuses the parameters)."""
    def pycryptodome() -> Timer:
        try:
            from Crypto.Cipher import PKCS1_OAEP
            from Crypto.Hash import SHA3_512
            from Crypto.PublicKey import RSA
            from Crypto.Signature.pss import MGF1
        except ImportError as exc:
            raise NotImplementedError(f"pycryptodome is not installed ({exc})") from None
        key = RSA.import_key(pem)
        return _checked("pycryptodome", lambda: PKCS1_OAEP.new(
            key, hashAlgo=SHA3_512, mgfunc=lambda x, y: MGF1(x, y, SHA3_512)).decrypt(blob),
            data_key, timed)

    def cryptography() -> Timer:
        try:
            import cryptography as lib
            from cryptography.exceptions import UnsupportedAlgorithm
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import padding
        except ImportError as exc:
            raise NotImplementedError(f"cryptography is not installed ({exc})") from None
        key = serialization.load_pem_private_key(pem, password=None)
        oaep = padding.OAEP(mgf=padding.MGF1(hashes.SHA3_512()),
                            algorithm=hashes.SHA3_512(), label=None)
        try:
            key.decrypt(blob, oaep)
        except UnsupportedAlgorithm as exc:
            raise NotImplementedError(f"cryptography {lib.__version__} refuses OAEP over "
                                      f"SHA3-512 ({exc})") from None
        return _checked("cryptography", lambda: key.decrypt(blob, oaep), data_key, timed)

    return {"pycryptodome PKCS1_OAEP": pycryptodome, "cryptography OAEP": cryptography}


def _gcm_peers(key: bytes, aad: bytes, blob: bytes, plain: bytes, timed) -> dict:
    """The independent AES-GCM decryptions of the chunk ``blob`` (``IV || ciphertext ||
    tag``): ``cryptography``'s AESGCM and pycryptodome's AES in MODE_GCM."""
    from kafkastore.tiered.crypto import IV_SIZE, TAG_SIZE

    view = memoryview(blob)
    iv, body, tag = bytes(view[:IV_SIZE]), view[IV_SIZE:-TAG_SIZE], bytes(view[-TAG_SIZE:])

    def cryptography() -> Timer:
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError as exc:
            raise NotImplementedError(f"cryptography is not installed ({exc})") from None
        aead = AESGCM(key)
        return _checked("AESGCM", lambda: aead.decrypt(iv, view[IV_SIZE:], aad), plain,
                        timed)

    def pycryptodome() -> Timer:
        try:
            from Crypto.Cipher import AES
        except ImportError as exc:
            raise NotImplementedError(f"pycryptodome is not installed ({exc})") from None

        def run() -> bytes:
            # a GCM cipher object serves one message: one per chunk, as a reader would
            cipher = AES.new(key, AES.MODE_GCM, nonce=iv, mac_len=TAG_SIZE)
            cipher.update(aad)
            return cipher.decrypt_and_verify(body, tag)
        return _checked("AES MODE_GCM", run, plain, timed)

    return {"cryptography AESGCM alone": cryptography, "pycryptodome AES MODE_GCM": pycryptodome}


def crypto_cases(timed: Callable[[Callable[[], object]], Timer], *,
                 rsa_bits: Sequence[int] = RSA_BITS,
                 chunk_sizes: Sequence[int] = GCM_CHUNK_SIZES) -> list[Case]:
    """The encryption of encrypted copies alone, no copy needed: a data key's RSA-OAEP
    unwrap (ours: :meth:`KeyRing.unwrap <kafkastore.tiered.crypto.KeyRing.unwrap>`) beside
    pycryptodome's PKCS1_OAEP and ``cryptography``'s OAEP, one key of each of
    ``rsa_bits``; one chunk's AES-GCM decryption (ours: the transform's
    ``detransform``) beside ``cryptography``'s AESGCM alone and pycryptodome's AES
    MODE_GCM, one chunk of each of ``chunk_sizes`` random bytes. A peer's first answer is
    checked; a missing or refusing peer is a skipped comparison."""
    from kafkastore.tiered.chunk_index import Chunk
    from kafkastore.tiered.crypto import KeyRing, new_data_key_and_aad
    from kafkastore.tiered.transform import ChunkTransform

    path = "bench://crypto"
    cases = []
    for bits in rsa_bits:
        ring, pem = KeyRing.generate("bench", bits=bits)
        data_key = new_data_key_and_aad()[0]
        key_id, blob = ring.wrap(data_key)

        def ours(ring=ring, key_id=key_id, blob=blob, data_key=data_key) -> Timer:
            return _checked("KeyRing.unwrap",
                            lambda: ring.unwrap(key_id, blob, path=path), data_key, timed)
        cases.append(Case(f"RSA-OAEP SHA3-512 unwrap, {bits}-bit key", ours,
                          _oaep_peers(pem, blob, data_key, timed), 1, "unwraps"))
    for size in chunk_sizes:
        key, aad = new_data_key_and_aad()
        transform = ChunkTransform(False, key, aad)
        plain = os.urandom(size)
        blob = transform.transform(plain)
        chunk = Chunk(0, 0, size, 0, len(blob))

        def ours(transform=transform, blob=blob, chunk=chunk, plain=plain) -> Timer:
            return _checked("detransform",
                            lambda: transform.detransform(blob, chunk, path=path), plain,
                            timed)
        cases.append(Case(f"AES-GCM chunk decrypt, {size >> 10} KiB", ours,
                          _gcm_peers(key, aad, blob, plain, timed), size, "bytes"))
    return cases


# -- bytes fetched per query -------------------------------------------------------------

#: The query kinds :func:`measure_fetches` runs.
QUERY_KINDS = ("records", "offset_for_timestamp", "read")


@dataclass(frozen=True)
class FetchResult:
    """What ``queries`` queries of one kind read from one copy's store.

    ``fetched``/``gets``: object bytes and ranged reads of the queries (each query cold:
    :func:`cold`); ``needed``: transformed bytes of the chunks holding the
    batches of the answers (the bar's denominator); ``asked``: transformed bytes of the
    chunks holding the byte ranges the log view asked its segment readers for (index
    slack included: what the chunk reader alone is responsible for); ``one_time``:
    bytes the copy read before the first query (manifests, ``.indexes``, the last
    segment's tail), not in ``fetched``.
    """

    copy: str
    query: str
    queries: int
    fetched: int
    gets: int
    needed: int
    asked: int
    one_time: int
    where: str = "local"

    @property
    def ratio(self) -> float:
        return self.fetched / self.needed if self.needed else float("nan")

    @property
    def ratio_asked(self) -> float:
        return self.fetched / self.asked if self.asked else float("nan")

    def as_dict(self) -> dict:
        return {"copy": self.copy, "query": self.query, "queries": self.queries,
                "fetched": self.fetched, "gets": self.gets, "needed": self.needed,
                "asked": self.asked, "one_time": self.one_time, "where": self.where,
                "ratio": self.ratio, "ratio_asked": self.ratio_asked}


class _Batches:
    """The batch table of the local partition: per segment (by base offset) positions,
    sizes, base and last offsets, max timestamps (one scan of each file)."""

    def __init__(self, partition_dir: str) -> None:
        from kafkastore.log_view import ReadOnlyLog
        from kafkastore.records import scan_batches

        log = ReadOnlyLog.open(partition_dir)
        self.bases = []
        self.scans = []
        self.sizes = []
        for seg in log.segments:
            if seg.size == 0:
                continue
            data = log.segment_records(seg).read(0, seg.size)
            self.bases.append(seg.base_offset)
            self.scans.append(scan_batches(data, validate=False))
            self.sizes.append(seg.size)
        log.close()
        #: the size of the first batch: what a ``read`` query asks for
        self.batch_size = int(self.scans[0].size[0])

    def segment_of(self, offset: int) -> int:
        return bisect.bisect_right(self.bases, offset) - 1

    def batch_of(self, offset: int) -> tuple[int, int]:
        """``(segment number, batch number)`` of the batch holding ``offset``."""
        import numpy as np

        s = self.segment_of(offset)
        b = int(np.searchsorted(self.scans[s].last_offset, offset, side="left"))
        return s, b

    def span(self, s: int, b0: int, b1: int) -> tuple[int, int, int]:
        """``(segment base, position, size)`` of batches ``b0..b1`` of segment ``s``."""
        scan = self.scans[s]
        start = int(scan.position[b0])
        end = int(scan.position[b1]) + int(scan.size[b1])
        return self.bases[s], start, end - start

    def records_ranges(self, a: int, b: int) -> list[tuple[int, int, int]]:
        s0, b0 = self.batch_of(a)
        s1, b1 = self.batch_of(b - 1)
        out = []
        for s in range(s0, s1 + 1):
            first = b0 if s == s0 else 0
            last = b1 if s == s1 else len(self.scans[s]) - 1
            out.append(self.span(s, first, last))
        return out

    def read_range(self, offset: int, max_bytes: int) -> tuple[int, int, int]:
        s, b = self.batch_of(offset)
        base, position, size = self.span(s, b, b)
        return base, position, min(max(size, max_bytes), self.sizes[s] - position)


def _chunk_bytes(indexes: dict[int, Any], ranges) -> int:
    """Transformed bytes of the distinct chunks holding ``(segment base, position,
    size)`` ranges, by the segments' chunk indexes."""
    seen = set()
    total = 0
    for base, position, size in ranges:
        if size <= 0:
            continue
        for c in indexes[base].chunks_for_range(position, size):
            if (base, c.id) not in seen:
                seen.add((base, c.id))
                total += c.transformed_size
    return total


class _RecordingReader(RangeReader):
    """A segment reader that appends ``(path, position, size)`` of each read to ``log``."""

    __slots__ = ("_inner", "_log")

    def __init__(self, storage, path: str, inner: RangeReader, log: list | None) -> None:
        super().__init__(storage, path, inner.size)
        self._inner = inner
        self._log = log

    def chunk_bounds(self, position: int) -> tuple[int, int] | None:
        return self._inner.chunk_bounds(position)

    def read(self, position: int, size: int) -> bytes:
        data = self._inner.read(position, size)
        if self._log is not None:
            self._log.append((self.path, position, len(data)))
        return data

    def close(self) -> None:
        self._inner.close()


class _RecordingStorage(ReadOnlyStorage):
    """The copy's virtual storage, recording the ranges a log view reads of ``.log``
    files (``ranges``): what the view asks of the chunk reader."""

    def __init__(self, inner: ReadOnlyStorage) -> None:
        super().__init__(inner.retry)
        self.inner = inner
        self.ranges: list[tuple[str, int, int]] = []

    def _list(self, path: str):
        return self.inner.list_dir(path)

    def _size(self, path: str):
        return self.inner.size(path) if self.inner.exists(path) else None

    def _is_dir(self, path: str) -> bool:
        return self.inner.is_dir(path)

    def _open(self, path: str, size: int | None = None) -> RangeReader:
        log = self.ranges if path.endswith(".log") else None
        return _RecordingReader(self, path, self.inner.open(path, size), log)

    def uri(self, path: str) -> str:
        return self.inner.uri(path)


def _queries(kind: str, batches: _Batches, start: int, end: int, k: int, n: int,
             seed: int):
    """``k`` queries of ``kind``: ``(run(log), needed ranges)`` pairs."""
    rng = random.Random(seed)
    out = []
    last_ts = BASE_TIMESTAMP + (end - 1) // PER_APPEND
    for _ in range(k):
        if kind == "records":
            a = rng.randrange(start, max(start + 1, end - n))
            b = min(a + n, end)
            out.append((lambda log, a=a, b=b: sum(1 for _ in log.records(a, b)),
                        batches.records_ranges(a, b)))
        elif kind == "read":
            o = rng.randrange(start, end)
            out.append((lambda log, o=o: log.read(o, batches.batch_size).to_bytes(),
                        [batches.read_range(o, batches.batch_size)]))
        else:
            ts = rng.randrange(BASE_TIMESTAMP, last_ts + 1)
            # the batch holding the answer: the first whose max timestamp reaches ts
            # (one timestamp a batch, batch i of the log at BASE_TIMESTAMP + i)
            offset = (ts - BASE_TIMESTAMP) * PER_APPEND
            s, b = batches.batch_of(max(offset, start))
            out.append((lambda log, ts=ts: log.offset_for_timestamp(ts),
                        [batches.span(s, b, b)]))
    return out


def measure_fetches(fx: TieredFixture, name: str, *, kinds: Sequence[str] = QUERY_KINDS,
                    queries: int = 20, records_per_query: int = 1000, seed: int = 7,
                    storage_options=None, uri: str | None = None,
                    where: str = "local") -> list[FetchResult]:
    """:class:`FetchResult` per query kind on copy ``name`` (an Aiven copy; ``uri`` and
    ``storage_options``: the same objects in another store, S3). A fresh copy is opened,
    so its one-time reads are counted."""
    from kafkastore.log_view import ReadOnlyLog

    tp = fx.tp
    batches = _Batches(fx.partition_dir)
    copy = fx.open_copy(name, storage_options=storage_options, uri=uri)
    try:
        stats = copy.storage.stats
        recording = _RecordingStorage(copy.tiered_storage)
        log = ReadOnlyLog.open(f"{tp.topic}-{tp.partition}", storage=recording)
        indexes = {s.start_offset: s.manifest.chunk_index
                   for s in copy.resolution(tp).segments}
        # what a reader reads once: manifests (above), indexes, the log end offset
        warm(log)
        cold(log, copy)
        start, end = log.log_start_offset, log.log_end_offset
        one_time = stats.bytes_read
        bases = {seg.path: seg.base_offset for seg in log.segments}
        out = []
        for i, kind in enumerate(kinds):
            fetched = gets = needed = asked = 0
            plan = _queries(kind, batches, start, end, queries, records_per_query, seed + i)
            for run, ranges in plan:
                recording.ranges.clear()
                bytes0, reads0 = stats.bytes_read, stats.reads
                run(log)
                cold(log, copy)   # each query on its own: no chunk carried over
                fetched += stats.bytes_read - bytes0
                gets += stats.reads - reads0
                needed += _chunk_bytes(indexes, ranges)
                asked += _chunk_bytes(indexes, [(bases[p], pos, size)
                                                for p, pos, size in recording.ranges])
            label = f"records(a, a+{records_per_query})" if kind == "records" else \
                f"{kind}()"
            out.append(FetchResult(name, label, queries, fetched, gets, needed, asked,
                                   one_time, where))
        return out
    finally:
        copy.close()
