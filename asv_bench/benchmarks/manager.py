"""The LogManager: opening a cleanly closed store and a retention pass, beside a listing.

Store: 100 partitions (topic ``bench``, partitions 0-99) of 10 segments each, 1,000
segments in all, each segment holding one batch of 10 records of the records workload
(16-byte keys, 100-byte JSON-like values), closed cleanly (checkpoints and the
clean-shutdown marker written). Built once per asv run, in ``setup_cache``.

Baseline, measured in the same process on the same directory:

``scandir``
    ``os.scandir`` of the log directory and of every partition directory in it, touching
    each entry's name (the issue's peer for opening the store: the listing every open
    must do anyway).

``../compare_log.py`` prints the ratio table against the issue's bars (open <= 20x the
listing, a retention pass with nothing to delete < 1 ms per partition).
"""

from __future__ import annotations

import os

from . import BASE_TIMESTAMP, make_workload

PARTITIONS = 100
SEGMENTS_PER_PARTITION = 10
RECORDS_PER_SEGMENT = 10
TOPIC = "bench"
#: "now" for the retention pass: an hour after the store's newest record, so that with
#: Kafka's default retention.ms (7 days) and retention.bytes (unlimited) nothing is due.
RETENTION_NOW = BASE_TIMESTAMP + 3_600_000


def build_store(directory, partitions=PARTITIONS, segments=SEGMENTS_PER_PARTITION,
                per_segment=RECORDS_PER_SEGMENT):
    """A cleanly closed store of ``partitions`` logs of ``segments`` segments each."""
    from kafkastore.manager import LogManager

    keys, values = make_workload(partitions * segments * per_segment)
    records = list(zip(keys, values))
    i = 0
    with LogManager(directory, background=False) as manager:
        for p in range(partitions):
            log = manager.get_or_create(TOPIC, p)
            for s in range(segments):
                log.append(records[i:i + per_segment], timestamp=BASE_TIMESTAMP + s)
                i += per_segment
                if s < segments - 1:
                    log.roll()


def open_manager(directory):
    from kafkastore.manager import LogManager

    return LogManager(directory, background=False)


def open_close(directory):
    open_manager(directory).close()


def scandir_store(directory):
    """List the log directory and every partition directory, as an open must."""
    names = 0
    with os.scandir(directory) as top:
        for entry in top:
            if entry.is_dir():
                with os.scandir(entry.path) as files:
                    for f in files:
                        names += len(f.name)
    return names


def retention_pass(manager):
    return manager.cleanup_logs(RETENTION_NOW)


# -- asv -------------------------------------------------------------------------------------


class _StoreBenchmark:
    number = 1
    repeat = (3, 20, 30.0)
    timeout = 600

    def setup_cache(self):
        # asv runs setup_cache in a temporary directory of its own and removes it after
        directory = os.path.abspath("store")
        build_store(directory)
        return directory


class ManagerOpen(_StoreBenchmark):
    """Open a cleanly closed store of 100 partitions, 1,000 segments (close not timed)
    vs ``os.scandir`` of the same directories."""

    params = (["kafkastore", "scandir"],)
    param_names = ["impl"]

    def setup(self, directory, impl):
        self.manager = None

    def teardown(self, directory, impl):
        if self.manager is not None:
            self.manager.close()

    def time_open(self, directory, impl):
        if impl == "kafkastore":
            self.manager = open_manager(directory)
        else:
            scandir_store(directory)


class ManagerOpenClose(_StoreBenchmark):
    """Open and cleanly close the store (checkpoints and marker written, fsynced)."""

    def time_open_close(self, directory):
        open_close(directory)


class ManagerRetentionPass(_StoreBenchmark):
    """One ``cleanup_logs`` pass over the 100 partitions with nothing to delete."""

    number = 20

    def setup(self, directory):
        self.manager = open_manager(directory)
        retention_pass(self.manager)   # first pass loads the time indexes it reads

    def teardown(self, directory):
        self.manager.close()

    def time_retention_pass(self, directory):
        retention_pass(self.manager)

    def track_segments(self, directory):
        return sum(len(log.segments) for log in self.manager.logs().values())
