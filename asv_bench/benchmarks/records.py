"""RecordBatch v2 encode, decode, columnar decode and scan: kafkastore beside its peers.

The workload is the issue's (see ``benchmarks/__init__.py``): 16-byte keys, 100-byte
JSON-like values, 1000 records a batch, CreateTime, no headers. ``n`` is 100,000 records
by default (so ``asv run --quick`` is quick) and the issue's 1,000,000, which
``ASV_SKIP_SLOW=1`` skips.

Implementations, the ``impl`` parameter:

``kafkastore``
    ``kafkastore.records``, with ``(key, value)`` tuples per batch built in ``setup``.
``kafkastore_zip``
    the same, but the tuples are built inside the timed call (encode only).
``kafkastore_nocrc``
    kafkastore's decoders without CRC checks (decode only).
``aiokafka_c``
    aiokafka's Cython ``DefaultRecordBatchBuilder`` / ``MemoryRecords`` (skipped if the
    extension is missing; its pure-Python fallback is never measured under this name).
``aiokafka_c_crc``
    the same decoder calling ``validate_crc()`` on each batch first, as aiokafka's
    consumer does with ``check_crcs=True``, its default (decode only): the like-for-like
    peer of ``kafkastore``, which checks CRCs by default.
``kafka_python``
    kafka-python's pure-Python builder and ``MemoryRecords``.

asv reports times, not ratios: compare the ``impl`` rows of one run
(``asv compare`` / the HTML page), or use ``../compare_peers.py`` for the ratio table
against the issue's bars.
"""

from __future__ import annotations

from . import (
    CODECS,
    N_RECORDS,
    N_RECORDS_SLOW,
    batch_tuples,
    encode_blob,
    load_impl,
    make_workload,
    skip_slow,
)

SIZES = [N_RECORDS, N_RECORDS_SLOW]


class _RecordsBenchmark:
    """Shared attributes; asv only collects classes that define benchmark methods."""

    # kafka-python decodes 1M records in several seconds; asv's default 60 s is too tight.
    timeout = 600
    # Each sample is one full call (tens of ms to seconds): few, large samples.
    number = 1
    repeat = (3, 10, 60.0)

    def _setup_common(self, impl: str, codec: str, n: int) -> None:
        if n > N_RECORDS:
            skip_slow()
        self.impl = load_impl(impl)
        self.codec = codec
        self.keys, self.values = make_workload(n, seed=0)


class EncodeBatch(_RecordsBenchmark):
    """Encode the workload into 1000-record batches (one ``bytes`` per batch, no join).

    Each implementation at its default codec level: kafkastore and kafka-python use the
    fast LZ4 compressor, aiokafka LZ4 HC (level 9 via cramjam), so lz4 compares levels as
    much as code; ``track_encoded_bytes`` shows the size each one writes. zstd is level 3
    everywhere.
    """

    params = [["kafkastore", "kafkastore_zip", "aiokafka_c", "kafka_python"], list(CODECS),
              SIZES]
    param_names = ["impl", "codec", "n"]

    def setup(self, impl, codec, n):
        self._setup_common(impl, codec, n)
        self.batches = batch_tuples(self.keys, self.values) if impl == "kafkastore" else None

    def time_encode(self, impl, codec, n):
        self.impl.encode(self.keys, self.values, self.codec, self.batches)

    def track_encoded_bytes(self, impl, codec, n):
        return sum(len(b) for b in self.impl.encode(self.keys, self.values, self.codec,
                                                    self.batches))

    track_encoded_bytes.unit = "bytes"


class DecodeRecords(_RecordsBenchmark):
    """Decode every record to an object and touch its offset, timestamp, key and value.

    All implementations read the same blob, encoded once by kafkastore per codec.
    ``kafkastore`` and ``aiokafka_c_crc`` check every batch CRC on the way (each one's
    default); ``kafkastore_nocrc``, ``aiokafka_c`` and ``kafka_python`` do not.
    """

    params = [["kafkastore", "kafkastore_nocrc", "aiokafka_c", "aiokafka_c_crc",
               "kafka_python"], list(CODECS), SIZES]
    param_names = ["impl", "codec", "n"]

    def setup(self, impl, codec, n):
        self._setup_common(impl, codec, n)
        self.blob = encode_blob(self.keys, self.values, codec)
        del self.keys, self.values

    def time_decode(self, impl, codec, n):
        self.impl.decode(self.blob)


class DecodeRecordObjects:
    """kafkastore's decode to record objects in the shapes its record recycling (issue 31)
    treats differently: records dropped as they are read (each one reuses the bytes
    objects of the one freed before it when the lengths match) or all kept in a list
    (nothing to reuse), over fixed-size values (the workload's) or values of varying
    length. None of these may get slower than a decoder allocating every object."""

    params = [["dropped", "kept"], ["fixed", "varying"]]
    param_names = ["records", "values"]
    number = 1
    repeat = (3, 10, 20.0)

    def setup(self, records, values):
        from kafkastore.records import iter_batches

        keys, vals = make_workload(N_RECORDS, seed=0)
        if values == "varying":
            vals = [v[:60 + i % 41] for i, v in enumerate(vals)]
        self.blob = encode_blob(keys, vals)
        self.iter_batches = iter_batches

    def time_decode(self, records, values):
        if records == "kept":
            return [r.value for b in self.iter_batches(self.blob) for r in b]
        n = 0
        for b in self.iter_batches(self.blob):
            for r in b:
                r.key
                r.value
                n += 1
        return n


class DecodeColumns(_RecordsBenchmark):
    """``kafkastore.decode_columns``: every record into numpy arrays, no object per record.

    Only kafkastore has a columnar decoder; the peers' rows are skipped. Compare with
    ``DecodeRecords`` (the issue's bar is columnar >= 10x aiokafka's decode to objects,
    ``kafkastore`` against ``aiokafka_c_crc``, ``kafkastore_nocrc`` against ``aiokafka_c``).
    ``time_decode_columns`` is the copying layout (the default), ``time_decode_columns_view``
    the view layout (``copy=False``: issue 31's bar, >= 20x aiokafka_c_crc uncompressed).
    """

    params = [["kafkastore", "kafkastore_nocrc", "aiokafka_c", "kafka_python"], list(CODECS),
              SIZES]
    param_names = ["impl", "codec", "n"]

    def setup(self, impl, codec, n):
        if not impl.startswith("kafkastore"):
            raise NotImplementedError(f"{impl} has no columnar decoder")
        self._setup_common(impl, codec, n)
        self.blob = encode_blob(self.keys, self.values, codec)
        del self.keys, self.values

    def time_decode_columns(self, impl, codec, n):
        # the copying layout (decode_columns' default), as this benchmark always measured
        self.impl.columns(self.blob, copy=True)

    def time_decode_columns_view(self, impl, codec, n):
        # the view layout (copy=False): keys and values left in the blob, what
        # ``kafkastore bench``'s columns row measures; its limit is the CRC alone
        self.impl.columns(self.blob, copy=False)


class ScanBatches(_RecordsBenchmark):
    """Walk the batch headers and check every CRC, without decoding records.

    ``crc32c`` is the physical reference: one ``crc32c.crc32c`` call over the whole blob
    (the issue's bar: kafkastore's ``scan_batches(validate=True)`` reaches at least half
    its throughput). The peers walk ``MemoryRecords`` and call ``validate_crc()``.
    """

    params = [["kafkastore", "crc32c", "aiokafka_c", "kafka_python"], list(CODECS), SIZES]
    param_names = ["impl", "codec", "n"]

    def setup(self, impl, codec, n):
        if n > N_RECORDS:
            skip_slow()
        keys, values = make_workload(n, seed=0)
        self.blob = encode_blob(keys, values, codec)
        if impl == "crc32c":
            import crc32c

            self.scan = crc32c.crc32c
        else:
            self.scan = load_impl(impl).scan

    # A scan takes about a millisecond per 100,000 records: let asv choose how many calls
    # make a sample, instead of the one call per sample the decoders use.
    number = 0
    repeat = 0

    def time_scan(self, impl, codec, n):
        self.scan(self.blob)



class ColumnsItem:
    """``RecordColumns.key(i)`` and ``value(i)`` of 10,000 records, in the copy and the
    view layout: the one ``_item`` both layouts share (issue 36 folded ``_view_item``
    into it)."""

    params = (["copy", "view"],)
    param_names = ["layout"]

    def setup(self, layout):
        from kafkastore.records import decode_columns

        keys, values = make_workload(10_000)
        self.cols = decode_columns(encode_blob(keys, values, "none"), copy=layout == "copy")

    def time_key_and_value(self, layout):
        cols = self.cols
        key, value = cols.key, cols.value
        for i in range(len(cols)):
            key(i)
            value(i)
