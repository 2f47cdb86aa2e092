"""docs/server.rst's API table is the versions the server advertises."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "server.rst"
ROW = re.compile(r"^([A-Z][A-Za-z]+)\s+(\d+)\s+(\d+)-(\d+)(\s|$)")


def doc_table():
    text = DOC.read_text()
    section = text[text.index("The APIs\n"):text.index("Configuration\n")]
    rows = {}
    for line in section.splitlines():
        m = ROW.match(line)
        if m:
            rows[int(m[2])] = (m[1], int(m[3]), int(m[4]))
    return rows


def test_api_table_matches_supported_apis():
    from kafkastore.server import protocol

    table = doc_table()
    assert {k: (lo, hi) for k, (_, lo, hi) in table.items()} == \
        {k: tuple(v) for k, v in protocol.SUPPORTED_APIS.items()}
    assert {k: name for k, (name, _, _) in table.items()} == \
        {k: protocol.API_NAMES[k] for k in protocol.SUPPORTED_APIS}


def test_api_table_parses():
    # the parser above sees every row of the table (a row it skipped would hide a change)
    assert len(doc_table()) == 14


def test_config_table_lists_every_broker_key():
    from kafkastore.server.config import DEFAULTS

    text = DOC.read_text()
    section = text[text.index("Configuration\n"):text.index("Durability\n")]
    documented = set(re.findall(r"``([a-z][a-z.]+)``", section))
    missing = [k for k in DEFAULTS if k not in documented]
    assert not missing, f"docs/server.rst's config table leaves out {missing}"
