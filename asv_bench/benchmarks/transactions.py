"""Producer state and transactions: what an idempotent or transactional producer costs an
append, and what read_committed costs a read, beside the plain operation in the same run.

* ``LogAppendProducer``: ``Log.append`` of the workload 100 records a call, as no producer
  (``plain``), one idempotent producer (sequence checks, retry detection), or two
  transactional producers with a marker pair every 20 batches (``transactional``).
* ``ReadCommitted``: ``ReadOnlyLog.columns`` of a log where a quarter of the transactions
  were aborted, ``read_uncommitted`` vs ``read_committed`` (the aborted-batch scan and
  the row mask).
* ``UncleanOpen``: an unclean ``Log.open`` of a transactional log (every segment
  recovered, its ``.txnindex`` rebuilt, the producer state replayed) with its snapshots
  kept or deleted.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from kafkastore.bench.log import chunks, log_config

from . import make_workload

N_RECORDS = 100_000


def _write(directory: str, kind: str, per_append: int = 100) -> None:
    from kafkastore.log import Log

    keys, values = make_workload(N_RECORDS)
    log = Log.open(directory, log_config())
    try:
        append(log, chunks(keys, values, per_append), kind)
    finally:
        log.close()


def append(log, batches, kind: str) -> None:
    """Append ``batches`` as ``kind`` (plain, idempotent, transactional)."""
    if kind == "plain":
        for recs in batches:
            log.append(recs)
        return
    seq = {1: 0, 2: 0}
    for i, recs in enumerate(batches):
        pid = 1 if kind == "idempotent" else 1 + i % 2
        log.append(recs, producer_id=pid, producer_epoch=0, base_sequence=seq[pid],
                   is_transactional=kind == "transactional")
        seq[pid] += len(recs)
        if kind == "transactional" and i % 20 == 19:
            for p in (1, 2):
                aborted = p == 1 and (i // 20) % 2 == 0
                log.append_end_txn_marker(p, 0, "ABORT" if aborted else "COMMIT")


class _Dir:
    timeout = 300

    def teardown(self, *args):
        shutil.rmtree(getattr(self, "tmp", ""), ignore_errors=True)


class LogAppendProducer(_Dir):
    params = (["plain", "idempotent", "transactional"],)
    param_names = ["producer"]
    number = 1
    repeat = (3, 10, 60.0)

    def setup(self, producer):
        from kafkastore.log import Log

        keys, values = make_workload(N_RECORDS)
        self.batches = chunks(keys, values, 100)
        self.tmp = tempfile.mkdtemp(prefix="ks-bench-")
        self.log = Log.open(self.tmp, log_config())

    def teardown(self, producer):
        self.log.close()
        super().teardown()

    def time_append(self, producer):
        append(self.log, self.batches, producer)


class _TransactionalLog(_Dir):
    """A transactional log written once per benchmark (setup, untimed)."""

    number = 1
    repeat = (3, 10, 60.0)

    def setup(self, *params):
        self.tmp = tempfile.mkdtemp(prefix="ks-bench-")
        _write(self.tmp, "transactional")


class ReadCommitted(_TransactionalLog):
    params = (["read_uncommitted", "read_committed"],)
    param_names = ["isolation_level"]

    def time_columns(self, isolation_level):
        from kafkastore.log_view import ReadOnlyLog

        with ReadOnlyLog.open(self.tmp) as view:
            view.columns(isolation_level=isolation_level)


class UncleanOpen(_TransactionalLog):
    params = ([True, False],)
    param_names = ["snapshots_kept"]

    def time_open(self, snapshots_kept):
        from kafkastore.log import CLEAN_SHUTDOWN_FILE, Log

        for name in os.listdir(self.tmp):
            if name == CLEAN_SHUTDOWN_FILE or (not snapshots_kept and name.endswith(".snapshot")):
                os.unlink(os.path.join(self.tmp, name))
        log = Log.open(self.tmp, log_config())
        log.close_handlers()
