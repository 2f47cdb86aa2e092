"""docs/server.rst's API table (with the coordinators' pages, issue 30) is the versions
the server advertises; the config tables list every broker key."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "server.rst"
#: the coordinators' pages (issue 30) carry their own APIs' and configs' tables
DOCS = (DOC, DOC.parent / "groups.rst", DOC.parent / "transactions.rst")
ROW = re.compile(r"^([A-Z][A-Za-z]+)\s+(\d+)\s+(\d+)-(\d+)(\s|$)")


def section(text: str, title: str) -> str:
    """The section ``title`` of an rst page, up to the next heading of its level."""
    lines = text.splitlines()
    start = lines.index(title)
    underline = lines[start + 1][0]
    for i in range(start + 2, len(lines) - 1):
        if lines[i + 1] and set(lines[i + 1]) == {underline} and lines[i]:
            return "\n".join(lines[start:i])
    return "\n".join(lines[start:])


def doc_table(paths=(DOC,)):
    rows = {}
    for path in paths:
        if not path.exists():
            continue
        for line in section(path.read_text(), "The APIs").splitlines():
            m = ROW.match(line)
            if m:
                rows[int(m[2])] = (m[1], int(m[3]), int(m[4]))
    return rows


def test_api_table_matches_supported_apis():
    from kafkastore.server import protocol

    table = doc_table(DOCS)
    assert {k: (lo, hi) for k, (_, lo, hi) in table.items()} == \
        {k: tuple(v) for k, v in protocol.SUPPORTED_APIS.items()}
    assert {k: name for k, (name, _, _) in table.items()} == \
        {k: protocol.API_NAMES[k] for k in protocol.SUPPORTED_APIS}


def test_api_table_parses():
    # the parser above sees every row of the table (a row it skipped would hide a change)
    assert len(doc_table()) == 14


def test_config_table_lists_every_broker_key():
    from kafkastore.server.config import DEFAULTS

    documented = set()
    for path in DOCS:
        if path.exists():
            documented |= set(re.findall(r"``([a-z][a-z.]+)``",
                                         section(path.read_text(), "Configuration")))
    missing = [k for k in DEFAULTS if k not in documented]
    assert not missing, f"the config tables of {[p.name for p in DOCS]} leave out {missing}"


def test_pytest_fixture_example_runs(tmp_path):
    """The docs' pytest fixture example, as written, passes under pytest."""
    import os
    import subprocess
    import sys

    import pytest

    pytest.importorskip("confluent_kafka", reason="the example uses confluent-kafka")
    text = DOC.read_text()
    start = text.index(".. code-block:: python", text.index("A pytest fixture\n"))
    end = text.index("\n\n``KafkaServer.start()``", start)
    code = "\n".join(line[4:] for line in text[start:end].splitlines()[1:])
    (tmp_path / "test_example.py").write_text(code)
    import kafkastore

    # the kafkastore under test (the installed wheel in CI), not the source tree's
    env = dict(os.environ, PYTHONPATH=str(Path(kafkastore.__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path / "test_example.py")], capture_output=True,
                          text=True, timeout=180, env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
