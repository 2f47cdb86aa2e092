"""Which tests the pure backend reruns: the ``same_python`` families.

Read by tests/conftest.py, which marks their tests ``same_python`` and, given
``--kernel-tests-only`` (the pure run of scripts/test.sh), deselects them; the reasons are
in docs/development.rst ("Which tests the pure backend reruns").
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent

# The pure run (KAFKASTORE_NO_EXTENSIONS=1) exists to check the pure twins of the kernels,
# so it reruns every test whose outcome the kernels can decide. The families below run
# the same Python on either backend: their outcome is decided by Spark, the storage seam,
# the command line's parsing and printing, or modules that import no kernel, and the
# kernel work under them is checked on both backends by the tests that stay. They are
# marked ``same_python`` and ``--kernel-tests-only`` (the pure run of scripts/test.sh)
# deselects them. This is an exclusion list on purpose: a test file not named here runs on
# both backends. Paths are relative to tests/; a directory covers everything under it.
# The reasons are docs/development.rst's ("Which tests the pure backend reruns").
SAME_PYTHON = {
    # Spark: a local session, a standalone cluster and a Connect server; the executors
    # decode with the kernels that test_spark_plan.py and the record tests check on both
    # backends, and what these tests decide is Spark's planning, retries and sinks.
    "spark": "Spark end to end",
    # docs/one-machine.rst's steps: S3, a standalone cluster, Connect, the CLI
    "test_docs_recipes.py": "Spark end to end",
    # the storage seam (fsspec, moto's S3, injected faults): ranged reads and retries
    "test_storage.py": "object storage",
    "test_storage_faults.py": "object storage",
    "test_write_refusals.py": "object storage",
    "test_storage_endpoints.py": "object storage",
    # the command line end to end: argument parsing, output format, exit codes, a real
    # process; what it prints comes from modules tested on both backends (the dump-log
    # output byte for byte in test_dump*.py, which stay)
    "test_cli.py": "CLI end to end",
    "test_cli_commands.py": "CLI end to end",
    "test_cli_uri.py": "CLI end to end",
    "tiered/test_cli_tiered.py": "CLI end to end",
    # kafkastore bench: that every workload runs and reports; the timings are not checked
    "test_bench_suite.py": "bench",
    "test_bench_tiered.py": "bench",
    "server/test_bench_server.py": "bench",
    # modules that import no kernel (kafkastore._kernels) at all. Not test_public_api.py:
    # whether every exported name resolves depends on the backend's kernels.
    "test_config.py": "no kernel",
    "test_checkpoint.py": "no kernel",
    "test_log_dir.py": "no kernel",
    "tiered/test_crypto.py": "no kernel",
    "tiered/test_manifest.py": "no kernel",
    "tiered/test_chunk_index.py": "no kernel",
}


def same_python_family(path: Path) -> str | None:
    """The SAME_PYTHON family of the test file ``path``, or None (both backends)."""
    try:
        rel = Path(path).resolve().relative_to(TESTS)
    except ValueError:
        return None
    for prefix in (rel, *rel.parents):
        family = SAME_PYTHON.get(prefix.as_posix())
        if family is not None:
            return family
    return None
