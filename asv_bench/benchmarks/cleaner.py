"""The log cleaner (compaction) beside a naive compactor built on aiokafka's Cython codec.

The workload, both implementations and the memory measurement are
:mod:`kafkastore.bench.cleaner` (its docstring describes them in full); this module holds
the asv class and re-exports the helpers for ``../compare_log.py`` and the
pytest-benchmark tests.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from kafkastore.bench.cleaner import (
    AIOKAFKA_CODEC,
    CODECS,
    DEDUPE_BUFFER_SIZE,
    IMPLS,
    N_KEYS,
    N_KEYS_ISSUE,
    N_RECORDS,
    N_RECORDS_ISSUE,
    NAIVE_OUTPUT,
    SEGMENT_BYTES,
    NaiveResult,
    build_log,
    build_logs,
    clean_kafkastore,
    cleaner_config,
    copy_log,
    expected_latest,
    log_files,
    log_settings,
    make_cleaner_workload,
    measure_memory,
    memory_child,
    naive_compact,
    read_latest,
    require,
)

__all__ = [
    "N_RECORDS_ISSUE",
    "N_KEYS_ISSUE",
    "N_RECORDS",
    "N_KEYS",
    "CODECS",
    "AIOKAFKA_CODEC",
    "DEDUPE_BUFFER_SIZE",
    "SEGMENT_BYTES",
    "NAIVE_OUTPUT",
    "IMPLS",
    "make_cleaner_workload",
    "log_settings",
    "build_log",
    "copy_log",
    "log_files",
    "read_latest",
    "expected_latest",
    "require",
    "cleaner_config",
    "clean_kafkastore",
    "NaiveResult",
    "naive_compact",
    "build_logs",
    "memory_child",
    "measure_memory",
]


# -- asv ---------------------------------------------------------------------------------------


class CleanerClean:
    """Compact the whole log (all segments but the empty active one): kafkastore's cleaner
    vs the naive aiokafka compactor, on a fresh copy of the same log each repetition
    (copied in ``setup``; the log opened there too and closed in ``teardown``)."""

    params = (list(IMPLS), list(CODECS))
    param_names = ["impl", "codec"]
    number = 1
    repeat = (3, 10, 60.0)
    timeout = 600

    def setup_cache(self):
        # asv runs setup_cache in a temporary directory of its own and removes it after
        return build_logs(os.path.abspath("cleaner-logs"), N_RECORDS, N_KEYS)

    def setup(self, logs, impl, codec):
        require(impl)
        self.log = None
        self.tmp = tempfile.mkdtemp(prefix="ks-bench-clean-")
        self.dir = copy_log(logs[codec], os.path.join(self.tmp, "log"))
        if impl == "kafkastore":
            from kafkastore.cleaner import clean
            from kafkastore.log import Log

            self.clean = clean
            self.config = cleaner_config()
            self.log = Log.open(self.dir, log_settings(codec))

    def teardown(self, logs, impl, codec):
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def time_clean(self, logs, impl, codec):
        if impl == "kafkastore":
            self.clean(self.log, config=self.config)
        else:
            naive_compact(self.dir, os.path.join(self.tmp, NAIVE_OUTPUT), codec)

    def track_bytes_written(self, logs, impl, codec):
        """Bytes of the compacted output (the source batch layout vs 1,000 a batch)."""
        if impl == "kafkastore":
            return self.clean(self.log, config=self.config)[1].bytes_written
        return naive_compact(self.dir, os.path.join(self.tmp, NAIVE_OUTPUT), codec).bytes_written

    track_bytes_written.unit = "bytes"


class OffsetMapBuild:
    """Pass 1's kernel alone: a fresh 128 MiB ``SkimpyOffsetMap`` and ``put_keys`` of every
    batch of the workload (``N_RECORDS`` records, ``N_KEYS`` keys, 1,000 a batch), the map
    probing its whole table or a prefix sized for the records (``clear(expected_entries)``,
    what the cleaner does since issue 31). A fresh map's first touches are page faults:
    the sized table takes fewer of them."""

    params = (["whole table", "sized"],)
    param_names = ["table"]
    number = 1
    repeat = (5, 20, 30.0)

    def setup(self, table):
        from kafkastore.records import encode_batch

        keys, values = make_cleaner_workload(N_RECORDS, N_KEYS)
        self.sections = []
        for base in range(0, N_RECORDS, 1000):
            batch = encode_batch([(k, v, 0) for k, v in zip(keys[base:base + 1000],
                                                            values[base:base + 1000])],
                                 base_offset=base, timestamp=0)
            # the records section of an uncompressed v2 batch starts at byte 61
            self.sections.append((memoryview(batch)[61:], min(1000, N_RECORDS - base), base))
        self.expected = None if table == "whole table" else N_RECORDS

    def time_put_keys(self, table):
        from kafkastore.cleaner import SkimpyOffsetMap

        m = SkimpyOffsetMap(DEDUPE_BUFFER_SIZE, bytes(16))
        m.clear(expected_entries=self.expected)
        for section, count, base in self.sections:
            m.put_keys(section, count, base, 0, 1 << 40)
