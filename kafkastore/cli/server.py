"""``kafkastore serve LOGDIR``: a single-node Kafka broker over a log directory.

Listens on ``--listen HOST:PORT`` (default ``127.0.0.1:9092``; port 0 picks a free one),
with the broker configuration of ``--config-file server.properties`` and ``--config
key=value`` over it (Kafka's broker names: ``num.partitions``,
``auto.create.topics.enable``, ``log.retention.hours``, ...). Once bound it prints one
line on stdout, flushed::

    kafkastore serve: listening on 127.0.0.1:PORT (log dir LOGDIR)

SIGTERM or SIGINT: the requests in flight are answered, the connections and the logs
closed (the clean-shutdown marker written), exit 0. An address other than loopback is
refused unless ``--allow-non-loopback``: there is no TLS, SASL or ACL here.
"""

from __future__ import annotations

import argparse
import logging
import sys

from kafkastore.cli.shared import EXIT_OK, CommandLine, UsageError, parse_settings

__all__ = ["register"]


def register(cli: CommandLine) -> None:
    """``kafkastore serve``."""
    p = cli.command(
        "serve", "serve a log directory over Kafka's wire protocol (a single-node broker "
        "for every Kafka client: librdkafka, kcat, kafka-python, aiokafka, Java)",
        "kafkastore serve ./logs --listen 127.0.0.1:9092 --config num.partitions=3",
        _cmd_serve)
    p.add_argument("directory", help="the log directory (created if missing)")
    p.add_argument("--listen", default=None, metavar="HOST:PORT",
                   help="where to listen (default: the listeners of the config, else "
                   "127.0.0.1:9092; port 0 picks a free port)")
    p.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a broker setting, Kafka's server.properties name (repeatable)")
    p.add_argument("--config-file", metavar="server.properties",
                   help="a server.properties-style file of broker settings")
    p.add_argument("--allow-non-loopback", action="store_true",
                   help="listen on an address other than loopback (no TLS, SASL or ACLs: "
                   "whoever reaches the port reads and writes every topic)")
    p.add_argument("--event-loop", choices=("asyncio", "uvloop"), default="asyncio",
                   help="the event loop (uvloop needs the uvloop package)")


def _parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen expects HOST:PORT, not {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _cmd_serve(args: argparse.Namespace) -> int:
    from kafkastore.server import KafkaServer, ServerConfig

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = parse_settings(args.config)
    config = (ServerConfig.from_file(args.config_file, overrides) if args.config_file
              else ServerConfig(overrides))
    host, port = _parse_listen(args.listen) if args.listen else (None, None)
    if args.event_loop == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            raise UsageError("--event-loop uvloop needs the uvloop package "
                             "(pip install uvloop)") from None
    server = KafkaServer(args.directory, config, host=host, port=port,
                         allow_non_loopback=args.allow_non_loopback,
                         event_loop=args.event_loop)

    def listening(s: KafkaServer) -> None:
        print(f"kafkastore serve: listening on {s.bootstrap_servers} (log dir "
              f"{args.directory})", flush=True)

    server.serve(on_listening=listening)
    return EXIT_OK
