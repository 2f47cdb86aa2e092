"""Sphinx directive ``kafkastore-config-table``: the settings table of a configuration class.

``.. kafkastore-config-table:: kafkastore.config.LogConfig`` renders one row per
``ConfigKey`` of the class's ``CONFIG_KEYS`` (Kafka's name, the Python attribute, Kafka's
type, the default as Kafka writes it, the valid values and the meaning), so the tables in
the documentation are the tables the code parses and checks with, never a copy of them.
The rows are built as reStructuredText and parsed in place: nothing is written to the
source tree, which matters because the CI builds the docs against the installed wheel.
"""

from __future__ import annotations

import importlib

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList

_LONG_MAX = str(2**63 - 1)


def _literal(text: str) -> str:
    return f"``{text}``" if text else ""


def _default(text: str) -> str:
    # Kafka's "never": spelled as Kafka's documentation spells it
    return "Long.MAX_VALUE" if text == _LONG_MAX else _literal(text)


def table_lines(cls: type) -> list[str]:
    """The ``list-table`` of ``cls`` (a ``kafkastore.config.ConfigBase`` subclass)."""
    defaults = cls().to_dict()
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 26 26 8 14 14 40",
        "",
        "   * - Kafka name",
        "     - Python attribute",
        "     - Type",
        "     - Default",
        "     - Valid values",
        "     - Meaning",
    ]
    for key in cls.CONFIG_KEYS:
        lines += [
            f"   * - {_literal(key.name)}",
            f"     - {_literal(key.attr)}",
            f"     - {key.kafka_type}",
            f"     - {_default(defaults[key.name])}",
            f"     - {_literal(key.valid)}",
            f"     - {key.doc}",
        ]
    return lines


class ConfigTable(Directive):
    required_arguments = 1  # the class, as module.Class

    def run(self) -> list[nodes.Node]:
        module, _, name = self.arguments[0].rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        container = nodes.container()
        source = self.state_machine.get_source(self.lineno)
        self.state.nested_parse(StringList(table_lines(cls), source), self.content_offset,
                                container)
        return container.children


def setup(app):
    app.add_directive("kafkastore-config-table", ConfigTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
