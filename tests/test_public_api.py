"""The public API: what ``kafkastore`` and ``kafkastore.records`` export.

The log, segment, manager and cleaner names are loaded on first use (PEP 562), so these
tests check both that they resolve and that ``import kafkastore`` alone does not load
those layers.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import kafkastore
from kafkastore import records

LOG_API = ("Log", "LogConfig", "LogManager", "LogSegment", "clean", "CleanerConfig")
HOME = {"Log": "kafkastore.log", "LogConfig": "kafkastore.config",
        "LogManager": "kafkastore.manager", "LogSegment": "kafkastore.segment",
        "clean": "kafkastore.cleaner", "CleanerConfig": "kafkastore.cleaner"}


def test_the_log_api_imports_from_the_package():
    from kafkastore import CleanerConfig, Log, LogConfig, LogManager, LogSegment, clean

    imported = dict(zip(LOG_API, (Log, LogConfig, LogManager, LogSegment, clean,
                                  CleanerConfig)))
    for name, value in imported.items():
        assert value is getattr(sys.modules[HOME[name]], name)
        assert name in kafkastore.__all__
        assert name in dir(kafkastore)


@pytest.mark.parametrize("module", [kafkastore, records], ids=lambda m: m.__name__)
def test_every_exported_name_resolves(module):
    assert len(module.__all__) == len(set(module.__all__))
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Logg'"):
        kafkastore.Logg  # noqa: B018
    with pytest.raises(ImportError):
        from kafkastore import Logg  # noqa: F401


@pytest.mark.parametrize("name", ["assemble_batch_v2", "encode_varint", "encode_varlong",
                                  "decode_varint", "decode_varlong", "size_of_varint",
                                  "size_of_varlong", "V2_HEADER", "control_marker"])
def test_records_plumbing_is_importable_but_not_exported(name):
    assert name not in records.__all__
    assert getattr(records, name) is not None


def test_importing_the_package_does_not_load_the_log_layers():
    code = ("import sys, kafkastore; "
            "print(sorted(m for m in sys.modules if m in {'kafkastore.log', "
            "'kafkastore.segment', 'kafkastore.manager', 'kafkastore.cleaner', "
            "'kafkastore.config', 'kafkastore.log_view'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
