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
    "test_bench_limits.py": "bench",
    # kafkastore serve end to end: real Kafka clients (librdkafka, kafka-python, aiokafka,
    # kcat), server processes killed and restarted, sockets, shutdown. What these decide
    # is the server's side (the wire, the coordinators, sessions, acks, closing); the
    # record work under them (produce validation, fetch reads and read_committed,
    # the coordinators' records, recovery) is what test_produce.py, test_fetch.py,
    # test_offsets.py, test_*_records.py, test_*_coordinator.py and the log tests check
    # on both backends, and those stay.
    "server/test_clients_aiokafka.py": "server end to end",
    "server/test_clients_confluent.py": "server end to end",
    "server/test_clients_kafka_python.py": "server end to end",
    "server/test_clients_kcat.py": "server end to end",
    "server/test_groups_clients.py": "server end to end",
    "server/test_transactions_clients.py": "server end to end",
    "server/test_durability.py": "server end to end",
    "server/test_hostile.py": "server end to end",
    "server/test_shutdown_sockets.py": "server end to end",
    "server/test_shutdown_parked.py": "server end to end",
    "server/test_connection.py": "server end to end",
    "server/test_connection_loose_ends.py": "server end to end",
    "server/test_cli_serve.py": "server end to end",
    "server/test_docs_server.py": "server end to end",
    "server/test_groups_bench.py": "bench",
    "server/test_transactions_bench.py": "bench",
    "server/test_bench_server_cpu.py": "bench",
    # the test tooling itself: which tests a run selects (pytest in a child process)
    "test_suite_selection.py": "test tooling",
    # modules that import no kernel (kafkastore._kernels) at all. Not test_public_api.py:
    # whether every exported name resolves depends on the backend's kernels.
    "test_config.py": "no kernel",
    "test_checkpoint.py": "no kernel",
    "test_log_dir.py": "no kernel",
    "tiered/test_crypto.py": "no kernel",
    "tiered/test_manifest.py": "no kernel",
    "tiered/test_chunk_index.py": "no kernel",
    # the wire codec (kafkastore.server.protocol imports only kafkastore.errors)
    "server/test_protocol.py": "no kernel",
    "server/test_protocol_hostile.py": "no kernel",
    "server/test_protocol_oracles.py": "no kernel",
    "server/test_protocol_schema.py": "no kernel",
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
