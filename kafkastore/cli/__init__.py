"""The ``kafkastore`` command line.

``kafkastore demo [DIR]`` is a tour of the commands on a local log directory: it runs
them one after the other as a user would type them (produce, describe, consume,
dump-log, verify, a simulated torn write and its repair, compact) and prints each with
its output. ``dump-log`` prints files as Kafka's ``kafka-dump-log.sh`` does
(:mod:`kafkastore.dump`); ``describe``, ``produce``, ``consume``, ``verify``
(``--repair``), ``compact`` and ``retention`` work on a log directory; ``bench`` runs the
benchmark suite's workloads beside the peers. ``kafkastore COMMAND --help`` shows each
one's options and an example; ``docs/cli.rst`` describes them all.

The read-only commands (``describe``, ``consume``, ``dump-log``, ``verify`` without
``--repair``) also take URIs (``s3://bucket/prefix``, ``gs://``, ``abfs://``,
``hdfs://``, ``file://``, fsspec schemes), with ``--storage-option NAME=VALUE`` for the
store. With ``--tiered`` they read a tiered-storage (KIP-405) copy instead, and
``kafkastore tiered export|upload`` restore and write one.

``main(argv=None) -> int`` is the entry point, so the CLI can be driven from tests and
from Python; :data:`EXIT_OK`, :data:`EXIT_PROBLEM` and :data:`EXIT_USAGE` are its exit
codes (0, 1, 2).

The package is one module per family of commands (``local``, ``uri``, ``tiered``,
``demo``, ``bench``) over ``shared``, what they share, under ``app``, which assembles them;
no family imports another. ``docs/development.rst`` ("The command line") maps it.
"""

from kafkastore.cli.app import main
from kafkastore.cli.shared import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE

__all__ = ["main", "EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE"]
