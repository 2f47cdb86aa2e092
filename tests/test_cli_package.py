"""The CLI package's seams: a family of commands is one module registered in
``kafkastore.cli.app.FAMILIES``; the read commands ask the families' readers before
reading a local directory; ``python -m kafkastore.cli`` is the command line."""

from __future__ import annotations

import subprocess
import sys
import types

from kafkastore import __version__
from kafkastore.cli import EXIT_OK, EXIT_USAGE, app, main


def _family(calls: list):
    """A family as a new module would be: one subcommand and a reader of ``hello://``."""

    def hello(args):
        print(f"hello {args.name}")
        return EXIT_OK

    def read(args, command):
        if command == "dump-log" or not args.directory.startswith("hello://"):
            return None
        calls.append((command, args.directory))
        return 7

    def register(cli):
        p = cli.command("hello", "say hello", "kafkastore hello world", hello)
        p.add_argument("name")
        cli.add_reader(read)

    return types.SimpleNamespace(register=register)


def test_a_family_adds_its_subcommand_and_its_reader(monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr(app, "FAMILIES", (_family(calls), *app.FAMILIES))
    assert main(["hello", "world"]) == EXIT_OK
    assert capsys.readouterr().out == "hello world\n"
    # its reader takes the read commands on its sources (first in FAMILIES, it is asked
    # before the uri family, which would refuse a scheme the storage seam does not serve)
    assert main(["describe", "hello://there"]) == 7
    assert main(["verify", "hello://there"]) == 7
    assert main(["consume", "hello://there", "orders"]) == 7
    assert calls == [("describe", "hello://there"), ("verify", "hello://there"),
                     ("consume", "hello://there")]
    # its subcommand is listed in its place in FAMILIES
    usage = app.build_parser().format_usage()
    assert "{hello,demo,dump-log," in usage


def test_a_local_directory_is_read_when_no_reader_takes_it(monkeypatch, tmp_path, capsys):
    calls: list = []
    monkeypatch.setattr(app, "FAMILIES", (*app.FAMILIES, _family(calls)))
    assert main(["describe", str(tmp_path)]) == EXIT_OK
    assert capsys.readouterr().out == f"{tmp_path}: no partitions\n"
    assert main(["describe", str(tmp_path / "missing")]) == EXIT_USAGE
    assert calls == []


def test_tiered_is_asked_before_uri(tmp_path, capsys):
    # --tiered decides before a URI's scheme: a missing tiered copy, not a missing
    # log directory; a tiered copy's option without --tiered is refused before either
    uri = (tmp_path / "missing").as_uri()
    assert main(["describe", uri, "--tiered"]) == EXIT_USAGE
    assert capsys.readouterr().err == f"kafkastore describe: {uri}: no such tiered copy\n"
    assert main(["describe", uri, "--layout", "aiven"]) == EXIT_USAGE
    assert "add --tiered" in capsys.readouterr().err
    assert main(["describe", uri]) == EXIT_USAGE
    assert capsys.readouterr().err == f"kafkastore describe: {uri}: no such log directory\n"


def test_python_m_kafkastore_cli_is_the_command_line():
    for module in ("kafkastore", "kafkastore.cli"):
        out = subprocess.run([sys.executable, "-m", module, "--version"], check=True,
                             capture_output=True, text=True).stdout
        assert out.startswith(f"kafkastore {__version__} (")
