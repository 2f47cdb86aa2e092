"""The ``kafkastore`` command line assembled: :func:`build_parser` and :func:`main`.

Each family of commands is a module with ``register(cli)``
(:class:`~kafkastore.cli.shared.CommandLine`): it adds its subcommands and, when it reads
sources other than a local directory, a reader of the read commands. A new family is one module and its entry in :data:`FAMILIES`.
"""

from __future__ import annotations

import argparse
import os
import sys

from kafkastore import __version__
from kafkastore._kernels import BACKEND
from kafkastore.cli import bench, demo, local, server, tiered, uri
from kafkastore.cli.shared import EXIT_USAGE, CommandLine, UsageError
from kafkastore.errors import KafkaStoreError

__all__ = ["FAMILIES", "build_parser", "main"]

#: The families, in the order ``kafkastore --help`` lists their subcommands; a read
#: command asks their readers in this order too (``--tiered`` decides before a URI's
#: scheme does), and reads a local directory itself when none takes the source.
FAMILIES = (demo, local, tiered, uri, bench, server)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkastore",
        description="Kafka-format log storage: write, read and inspect Kafka log segments.")
    parser.add_argument("--version", action="version",
                        version=f"kafkastore {__version__} ({BACKEND} kernels)")
    cli = CommandLine(parser.add_subparsers(dest="command", required=True), main)
    for family in FAMILIES:
        family.register(cli)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # the reader went away (``| head``): stop quietly, as Unix tools do; stdout goes
        # to /dev/null so the interpreter's final flush does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141   # 128 + SIGPIPE
    except UsageError as err:
        print(f"kafkastore {args.command}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KafkaStoreError as err:
        print(f"kafkastore {args.command}: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:
        print(f"kafkastore {args.command}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"kafkastore {args.command}: interrupted", file=sys.stderr)
        return 130
