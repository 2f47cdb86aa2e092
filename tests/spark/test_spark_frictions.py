"""Issue 28, the Spark frictions a new user met on a cluster (items 5, 7, 13, 14, 17).

* 5: a relative ``load()`` path is made absolute where the driver plans, so executors
  with another working directory read the same directory; a local segment missing on
  another host than the planning one is reported as a path the executors do not share,
  not as a deletion by retention.
* 7: ``register``'s check of the executors' Python imports ``kafkastore.spark``, which a
  directory named ``kafkastore`` in the working directory (a namespace package) fails.
* 13: ``register`` leaves a format Spark registered statically (the
  ``pyspark_kafkastore`` module) in place instead of replacing it (and logging so).
* 14: a write in another mode than append is refused with kafkastore's ConfigError
  naming ``mode("append")``, not Spark's hint at "Append or Overwrite".
* 17: the user pages of the docs do not send users to the project's CI script.
"""

from __future__ import annotations

import pathlib
import shutil
import socket
import sysconfig
import venv

import pytest

from kafkastore.errors import ConfigError, StorageFileNotFoundError
from kafkastore.manager import LogManager

T0 = 1_700_000_000_000
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _write_log(root, n=17):
    with LogManager(str(root), background=False) as m:
        m.get_or_create("t", 0).append([(b"k", b"v%d" % i, T0 + i) for i in range(n)])


def _source(options):
    pytest.importorskip("pyspark", reason="pyspark is not installed (the spark extra)")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (the spark extra)")
    from kafkastore.spark.source import KafkaStoreDataSource

    return KafkaStoreDataSource(options)


def _rows(reader, partitions):
    return sum(b.num_rows for p in partitions for b in reader.read(p))


# -- item 5: relative paths, and the "deleted" message -----------------------------------


def test_relative_paths_are_absolute_in_the_parsed_options(tmp_path, monkeypatch):
    from kafkastore.spark.options import parse_read_options, parse_write_options

    monkeypatch.chdir(tmp_path)
    read = parse_read_options({"path": "logs", "subscribe": "t",
                               "tieredStorage": "copy"}, streaming=False)
    assert read.path == str(tmp_path / "logs")
    assert read.tiered.uri == str(tmp_path / "copy")
    write = parse_write_options({"path": "out", "topic": "t"}, streaming=False)
    assert write.path == str(tmp_path / "out")
    # URIs and absolute paths are kept as given
    uri = parse_read_options({"path": "s3://bucket/logs", "subscribe": "t"},
                             streaming=False)
    assert uri.path == "s3://bucket/logs"
    assert parse_read_options({"path": "/data/logs", "subscribe": "t"},
                              streaming=False).path == "/data/logs"


def test_a_relative_load_path_reads_the_planning_directory_from_another_cwd(
        tmp_path, monkeypatch):
    planned, elsewhere = tmp_path / "driver", tmp_path / "executor"
    elsewhere.mkdir()
    _write_log(planned / "logs")
    monkeypatch.chdir(planned)            # the driver plans here ...
    reader = _source({"path": "logs", "subscribe": "t"}).reader(None)
    partitions = reader.partitions()
    monkeypatch.chdir(elsewhere)          # ... an executor reads from its work directory
    assert _rows(reader, partitions) == 17


def test_a_segment_missing_on_another_host_is_not_called_deleted(tmp_path):
    from kafkastore.spark.source import KafkaStorePartition

    _write_log(tmp_path / "logs")
    reader = _source({"path": str(tmp_path / "logs"), "subscribe": "t"}).reader(None)
    [planned] = reader.partitions()
    assert planned.planned_on == socket.gethostname()
    shutil.rmtree(tmp_path / "logs" / "t-0")   # not there where the task runs
    here = socket.gethostname()
    other = KafkaStorePartition(planned.value, planned_on=f"not-{here}")
    with pytest.raises(StorageFileNotFoundError) as info:
        _rows(reader, [other])
    msg = str(info.value)
    assert f"is not there on host {here}" in msg
    assert f"planned on host not-{here}" in msg
    assert "deleted" not in msg and "every executor" in msg
    # planned on this very host: the file was listed here and is gone, so it was deleted
    with pytest.raises(StorageFileNotFoundError, match="was deleted .* after the query"):
        _rows(reader, [planned])


# -- item 7: the executors' Python ---------------------------------------------------------


def _venv(where, pth_lines=()):
    venv.create(where, with_pip=False, symlinks=True)
    if pth_lines:
        [site] = (where / "lib").glob("python*/site-packages")
        (site / "kafkastore-test.pth").write_text("\n".join(pth_lines) + "\n")
    return str(where / "bin" / "python")


def test_the_python_check_refuses_a_namespace_directory_named_kafkastore(
        tmp_path, monkeypatch):
    from kafkastore.spark import _check_python

    bare = _venv(tmp_path / "bare")
    (tmp_path / "parent" / "kafkastore").mkdir(parents=True)   # a clone, from its parent
    monkeypatch.chdir(tmp_path / "parent")
    # the probe inherits this environment, as Spark's workers do; the spark session fixture
    # (tests/spark/conftest.py) puts the installed kafkastore on PYTHONPATH, which would
    # make the bare Python see it
    monkeypatch.delenv("PYTHONPATH", raising=False)
    with pytest.raises(ConfigError, match="kafkastore is not installed") as info:
        _check_python(bare, configured=True)
    assert "namespace package" in str(info.value)
    assert "kafkastore.spark" in str(info.value)


def test_the_python_check_accepts_a_python_that_imports_kafkastore_spark(
        tmp_path, monkeypatch):
    from kafkastore.spark import _check_python

    # a venv that sees this checkout and the dependencies, not this interpreter itself
    ok = _venv(tmp_path / "ok", [str(ROOT), sysconfig.get_paths()["purelib"]])
    (tmp_path / "kafkastore").mkdir()   # a namespace directory does not mask the real one
    monkeypatch.chdir(tmp_path)
    _check_python(ok, configured=True)


# -- item 13: no second registration -------------------------------------------------------


def _builder(session):
    manager = session._jsparkSession.sessionState().dataSourceManager()
    if not manager.dataSourceExists("kafkastore"):
        return None
    found = manager.lookupDataSource("kafkastore")
    return session.sparkContext._jvm.java.lang.System.identityHashCode(found)


def test_register_keeps_the_statically_registered_source(spark):
    import kafkastore.spark

    fresh = spark.newSession()   # a session state of its own: only Spark's static lookup
    static = _builder(fresh)
    if static is None:
        pytest.skip("Spark's data source lookup did not find pyspark_kafkastore here")
    kafkastore.spark.register(fresh)
    assert _builder(fresh) == static      # not replaced (Spark would log a WARN)
    assert fresh.conf.get(kafkastore.spark.PUSHDOWN_CONF) == "true"
    # registered for another Python than the session's: register would replace it
    assert kafkastore.spark._registered(fresh)
    assert not kafkastore.spark._registered(fresh, python="/elsewhere/bin/python3")


# -- item 14: save modes -------------------------------------------------------------------


@pytest.mark.parametrize("mode", [None, "overwrite", "ignore", "error"])
def test_a_write_in_another_mode_than_append_names_mode_append(spark, tmp_path, mode):
    root = tmp_path / "logs"
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    writer = df.write.format("kafkastore").option("topic", "t")
    if mode is not None:
        writer = writer.mode(mode)
    with pytest.raises(ConfigError, match=r'append-only: write with mode\("append"\)') as info:
        writer.save(str(root))
    assert "Append or Overwrite" not in str(info.value)
    assert info.value.key == "mode"
    assert not (root / "t-0").exists()


# -- item 17: user pages speak of what users run -------------------------------------------


def _user_guide():
    """The pages of the index's "User guide" toctree (the "Project" one is for
    contributors), and the README."""
    lines = (ROOT / "docs" / "index.rst").read_text(encoding="utf-8").splitlines()
    start = lines.index("   :caption: User guide")
    pages = []
    for line in lines[start + 1:]:
        if line.startswith(".. "):
            break
        if line.strip() and not line.strip().startswith(":"):
            pages.append(ROOT / "docs" / f"{line.strip()}.rst")
    return pages + [ROOT / "README.md"]


def test_user_pages_do_not_send_users_to_the_ci_script():
    pages = _user_guide()
    assert ROOT / "docs" / "spark.rst" in pages and len(pages) > 5
    offenders = [p.name for p in pages if ".ci/run" in p.read_text(encoding="utf-8")]
    assert offenders == []
