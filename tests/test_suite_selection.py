"""Which tests the pure backend reruns (tests/_selection.py SAME_PYTHON, --kernel-tests-only;
docs/development.rst "Which tests the pure backend reruns").

The rule is an exclusion list keyed on paths: a test file not named there runs on both
backends, the named ones are deselected by --kernel-tests-only, and the deselection is
counted in pytest's summary, never a silent skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest
from _selection import SAME_PYTHON, TESTS, same_python_family


def test_every_same_python_entry_names_a_test_file_or_directory():
    # a file that moved leaves a stale entry: it would run on both backends again, and
    # the table would no longer say what the pure run leaves out
    for rel in SAME_PYTHON:
        path = TESTS / rel
        assert path.is_dir() or (path.is_file() and path.name.startswith("test_")), rel


@pytest.mark.parametrize("rel", [
    # new files run on both backends by default (issue 27's new test files among them)
    "test_kafka_exact_producer_state.py", "test_time_boundaries.py",
    "test_mutation_kills.py", "tiered/test_tiered_oaep.py", "cli/test_new_command.py",
    # kernel-decided families next to excluded ones
    "test_dump.py", "test_dump_txn_snapshot.py", "test_spark_plan.py",
    "test_spark_sink_unit.py", "test_storage_records.py", "test_log_view.py",
    "test_public_api.py", "reliability/test_corruption_sweep.py", "kernels/test_varint.py",
    "tiered/test_tiered_hostile.py", "server/test_fetch.py", "server/test_produce.py",
    "server/test_offsets.py", "server/test_groups_records.py",
    "server/test_transactions_coordinator.py", "server/test_protocol_librdkafka.py",
    "server/test_new_server_test.py",
])
def test_files_not_in_the_table_run_on_both_backends(rel):
    assert same_python_family(TESTS / rel) is None


@pytest.mark.parametrize("rel, family", [
    ("spark/test_spark_cluster.py", "Spark end to end"),
    ("spark/test_new_spark_test.py", "Spark end to end"),   # a directory covers new files
    ("test_cli_commands.py", "CLI end to end"),
    ("tiered/test_cli_tiered.py", "CLI end to end"),
    ("test_storage_faults.py", "object storage"),
    ("server/test_clients_confluent.py", "server end to end"),
    ("server/test_durability.py", "server end to end"),
    ("server/test_protocol.py", "no kernel"),
])
def test_the_table_marks_files_and_directories(rel, family):
    assert same_python_family(TESTS / rel) == family


def _pytest(*args) -> subprocess.CompletedProcess:
    """pytest in a child over this tests/ directory, run from outside the repository as
    scripts/test.sh runs it: from the repository root, ``python -m pytest`` would import
    ./kafkastore (no compiled kernels there; KAFKASTORE_REQUIRE_INSTALLED refuses it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir",
            str(TESTS.parent), "-c", str(TESTS.parent / "pyproject.toml"), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600,
                          cwd=tempfile.gettempdir())


def _collect(*args):
    done = _pytest("--collect-only", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, [line for line in done.stdout.splitlines() if "::" in line]


def test_kernel_impl_keeps_one_implementation_of_the_parametrised_tests():
    files = [str(TESTS / "kernels" / "test_entry_walk.py"),
             str(TESTS / "kernels" / "test_column_encode.py")]
    _, every = _collect(*files)
    out, compiled = _collect("--kernel-impl=cython", *files)
    pure = [i for i in every if "[python" in i or "-python]" in i or "-python-" in i]
    assert pure and compiled and set(compiled) == set(every) - set(pure)
    assert f"{len(pure)} deselected" in out


def test_kernel_tests_only_deselects_and_counts_them():
    """A collection of one excluded and one kept file: the excluded file's tests are
    deselected (pytest counts them) and the summary names the family."""
    files = [str(TESTS / "test_bench_tiered.py"), str(TESTS / "test_leader_epoch.py")]
    _, every = _collect(*files)
    out, kept = _collect("--kernel-tests-only", *files)
    bench = [i for i in every if "test_bench_tiered.py" in i]
    epoch = [i for i in every if "test_leader_epoch.py" in i]
    assert bench and epoch
    assert kept == epoch
    assert f"{len(bench)} same_python tests deselected ({len(bench)} bench)" in out
    assert f"{len(bench)} deselected" in out


def test_a_pure_run_of_same_python_tests_only_passes_with_nothing_left():
    """``scripts/test.sh tests/spark``: the pure run deselects everything; that is the
    selection working (exit 0), not pytest's "no tests collected" (exit 5)."""
    done = _pytest("--kernel-tests-only", str(TESTS / "test_bench_tiered.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "same_python tests deselected (" in done.stdout and " passed" not in done.stdout
