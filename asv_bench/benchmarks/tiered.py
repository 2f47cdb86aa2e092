"""Tiered-storage copies read by kafkastore's tiered reader, beside their peers.

The workload, the copies and the operations are :mod:`kafkastore.bench.tiered`, whose
docstring describes each: a partition of ``N_RECORDS`` records in 4 segments written with
``Log`` and uploaded by ``upload_partition`` (Aiven plain, LocalTieredStorage, zstd with
4 MiB and 64 KiB chunks, AES-GCM). The ``copy`` parameter names the copy (``local`` is
the partition directory itself, the peer of the plain copies); ``impl`` of the
transformed copies is the tiered read or the transform ``alone`` on the same chunks in
memory. ``TieredFetch`` tracks bytes fetched per query over the bytes of the chunks the
answers need (the issue's bar: at most 1.05).

``../compare_tiered.py`` prints the ratio table against the issue's bars.
"""

from __future__ import annotations

import os

from kafkastore.bench import tiered

from . import make_workload

N_RECORDS = 200_000


def _build(name: str, specs) -> tiered.TieredFixture:
    # asv runs setup_cache in a temporary directory of its own and removes it after
    root = os.path.abspath(name)
    os.makedirs(root)
    keys, values = make_workload(N_RECORDS)
    fx = tiered.build_fixture(root, keys, values, copies=specs)
    fx.close()   # what is returned is pickled: no open views
    return fx


class _Tiered:
    number = 1
    repeat = (3, 10, 60.0)
    timeout = 600

    def teardown(self, fx, *args):
        fx.close()


class TieredRead(_Tiered):
    """Whole-partition ``records()`` and ``columns()``, and 100 random-offset ``read()``
    of one batch, on the plain copies and on the partition directory."""

    params = (["local", tiered.PLAIN.name, tiered.LOCAL_TIERED.name],
              ["records", "columns", "read"])
    param_names = ["copy", "op"]

    def setup_cache(self):
        return _build("tiered-plain", (tiered.PLAIN, tiered.LOCAL_TIERED))

    def setup(self, fx, copy, op):
        self.log = fx.view(copy)
        local = fx.view("local")
        self.offsets = tiered.random_offsets(local, 100)
        self.size = local.read(local.log_start_offset, 1).size

    def time_read(self, fx, copy, op):
        if op == "records":
            tiered.records_count(self.log)
        elif op == "columns":
            tiered.columns_count(self.log)
        else:
            tiered.read_offsets(self.log, self.offsets, self.size)


class TieredTransformed(_Tiered):
    """``columns()`` and the raw read of the original bytes of the transformed copies,
    and their transform alone on the same chunks in memory (``zstandard``,
    ``cryptography``'s AESGCM); ``track_original_bytes`` is the bytes a call makes."""

    params = ([tiered.ZSTD.name, tiered.ZSTD_SMALL.name, tiered.AES.name],
              ["columns", "raw", "alone"])
    param_names = ["copy", "impl"]

    def setup_cache(self):
        return _build("tiered-transformed", (tiered.ZSTD, tiered.ZSTD_SMALL, tiered.AES))

    def setup(self, fx, copy, impl):
        if copy not in fx.copies:
            raise NotImplementedError(fx.missing.get(copy, f"no copy {copy}"))
        self.log = fx.view(copy)
        self.copy = fx.copy(copy)
        if impl == "alone":
            self.chunks = tiered.transformed_chunks(self.copy, fx.tp)
            self.keys = tiered.data_keys(fx, self.copy, fx.tp) \
                if fx.specs[copy].encrypted else None

    def time_read(self, fx, copy, impl):
        if impl == "columns":
            tiered.columns_count(self.log)
        elif impl == "raw":
            tiered.raw_read(self.copy, self.log)
        elif self.keys is None:
            tiered.zstd_alone(self.chunks)
        else:
            tiered.aesgcm_alone(self.chunks, self.keys)

    def track_original_bytes(self, fx, copy, impl):
        return fx.original_bytes

    track_original_bytes.unit = "bytes"


class TieredFetch:
    """Bytes fetched by 20 random queries of a kind on a zstd copy over the transformed
    bytes of the chunks holding the answers' batches (bar: at most 1.05)."""

    params = ([tiered.ZSTD.name, tiered.ZSTD_SMALL.name], list(tiered.QUERY_KINDS))
    param_names = ["copy", "query"]
    timeout = 600

    def setup_cache(self):
        return _build("tiered-fetch", (tiered.ZSTD, tiered.ZSTD_SMALL))

    def track_fetched_over_needed(self, fx, copy, query):
        (result,) = tiered.measure_fetches(fx, copy, kinds=[query], queries=20)
        return result.ratio

    track_fetched_over_needed.unit = "ratio"


class TieredCrypto:
    """The encryption of encrypted copies alone (:func:`kafkastore.bench.tiered.crypto_cases`):
    a data key's RSA-OAEP (SHA3-512) unwrap with a 2048-bit key, one AES-GCM chunk of
    4 MiB and of 64 KiB decrypted; ``impl`` ``kafkastore`` is the library's path, the
    others the peers alone. ``../compare_crypto.py`` prints the ratio table."""

    params = (["unwrap 2048", "aes-gcm 4 MiB", "aes-gcm 64 KiB"],
              ["kafkastore", "pycryptodome", "cryptography"])
    param_names = ["case", "impl"]

    def setup(self, case, impl):
        # a timer maker that hands back the call itself: asv does the timing
        if case.startswith("unwrap"):
            (c,) = tiered.crypto_cases(lambda fn: fn, rsa_bits=(2048,), chunk_sizes=())
        else:
            size = 4 << 20 if case.endswith("4 MiB") else 64 << 10
            (c,) = tiered.crypto_cases(lambda fn: fn, rsa_bits=(), chunk_sizes=(size,))
        if impl == "kafkastore":
            self.call = c.ours()
            return
        (make,) = [m for name, m in c.peers.items() if name.startswith(impl)]
        self.call = make()   # NotImplementedError (absent, refused) skips

    def time_crypto(self, case, impl):
        self.call()
