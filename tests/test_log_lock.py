"""One writer per partition directory (issue 18, defect 9).

Two ``Log`` objects on one directory both appended at offset 0 and overwrote each
other. The second open is now refused by a ``flock`` on the directory itself, which
leaves no file behind.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import pytest

from _logtools import T0, open_log, read_all
from kafkastore.errors import LogDirectoryLockedError
from kafkastore.log import Log


def test_second_log_on_one_directory_is_refused(tmp_path):
    path = tmp_path / "t-0"
    first = open_log(path)
    first.append([(b"k", b"first", T0)])
    for spelling in (str(path), str(path) + "/", str(path) + "/./"):
        with pytest.raises(LogDirectoryLockedError, match="already open for writing") as info:
            Log.open(spelling)
        assert info.value.path == str(path)
    link = tmp_path / "link"
    os.symlink(path, link)
    with pytest.raises(LogDirectoryLockedError):
        Log.open(str(link))
    first.append([(b"k", b"second", T0)])   # the first writer is unharmed
    first.close()
    again = open_log(path)
    assert [r.value for r in read_all(again)] == [b"first", b"second"]
    again.close()


def test_the_lock_leaves_no_file(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path)
    log.append([(b"k", b"v", T0)])
    names = sorted(os.listdir(path))
    # (no lock file; the empty leader-epoch-checkpoint is Kafka's, made by the open, and
    # so is the new partition's partition.metadata)
    assert names == ["00000000000000000000.index", "00000000000000000000.log",
                     "00000000000000000000.timeindex", "leader-epoch-checkpoint",
                     "partition.metadata"]
    log.close()


def test_a_dropped_log_releases_its_directory(tmp_path):
    path = tmp_path / "t-0"
    log = open_log(path)
    log.append([(b"k", b"v", T0)])
    log.flush()
    del log
    gc.collect()
    again = open_log(path)
    assert again.log_end_offset == 1
    again.close()


def test_a_log_in_another_process_is_refused_until_that_process_dies(tmp_path):
    path = tmp_path / "t-0"
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from kafkastore.log import Log
            log = Log.open({str(path)!r})
            log.append([(b"k", b"child", 1)])
            log.flush()
            print("open", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "open"
        with pytest.raises(LogDirectoryLockedError):
            Log.open(str(path))
    finally:
        child.kill()   # kill -9: the kernel drops the lock
        child.wait()
        child.stdout.close()
    log = Log.open(str(path))
    assert [r.value for r in read_all(log)] == [b"child"]
    log.close()
