"""kafkastore as a PySpark data source: format ``kafkastore``.

Spark's Kafka source and sink, reading and writing log directories instead of
brokers, with the same schema and options, so a pipeline moves over by changing
``format("kafka")`` to ``format("kafkastore")`` and the bootstrap servers to a path::

    import kafkastore.spark
    kafkastore.spark.register(spark)
    df = (spark.read.format("kafkastore")
          .option("subscribe", "orders")
          .load("/data/kafka-logs"))

Needs the ``spark`` extra (pyspark 4.2 or newer, pyarrow). Importing this package
does not import pyspark; :func:`register` and :data:`KafkaStoreDataSource` do.
See ``docs/spark.rst``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register", "KafkaStoreDataSource", "PUSHDOWN_CONF"]

#: The SQL conf a Python data source with ``pushFilters`` needs (off by default).
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Register the ``kafkastore`` format with ``spark`` and turn filter pushdown on.

    Without this call Spark still finds the format through the ``pyspark_kafkastore``
    module, but reads fail until ``spark.sql.python.filterPushdown.enabled`` is true
    (or the read sets the option ``pushdown`` to ``false``).

    The Python that runs the source (the driver's planning worker and the executors'
    readers) is the one the registration names. pyspark takes it from
    ``PYSPARK_PYTHON`` as it was when the SparkContext started, else ``python3`` on the
    PATH, and ignores ``spark.pyspark.python``; so a session configured with
    ``spark.pyspark.python`` planned its reads in another Python and failed with
    ``ModuleNotFoundError: No module named 'kafkastore'``. Here
    ``spark.pyspark.python`` (``spark.pyspark.driver.python`` for the driver's
    worker, when set) is honoured, and a Python on this machine that cannot import
    kafkastore is refused with a :class:`~kafkastore.errors.ConfigError` that names
    it and says how to choose another (see ``docs/cluster.rst``). Spark Connect
    sessions are left to the server.

    Where Spark already has the format (the ``pyspark_kafkastore`` module, found in
    that same Python, or an earlier call) it is not registered again: Spark would log
    that a statically registered data source was replaced. A write in another mode than
    ``append`` is refused with a :class:`~kafkastore.errors.ConfigError` that says to
    write with ``mode("append")``, instead of Spark's hint at "Append or Overwrite".
    """
    from kafkastore.spark.source import KafkaStoreDataSource

    planner = _choose_python(spark)   # None: the session's own Python plans
    if not _registered(spark, planner):
        if planner is None:
            spark.dataSource.register(KafkaStoreDataSource)
        else:
            # The registration's Python runs the driver's planning workers
            # (PythonPlannerRunner takes the registered function's pythonExec); only this
            # registration gets the driver's Python, the context keeps its own.
            sc = spark.sparkContext
            saved, sc.pythonExec = sc.pythonExec, planner
            try:
                spark.dataSource.register(KafkaStoreDataSource)
            finally:
                sc.pythonExec = saved
    spark.conf.set(PUSHDOWN_CONF, "true")
    _refuse_other_save_modes(type(spark.range(0).write))


def _registered(spark: Any, python: str | None = None) -> bool:
    """Whether ``spark`` has the ``kafkastore`` format already, to run in ``python``
    (default: the session's). Spark registers it statically when its lookup finds
    ``pyspark_kafkastore`` (``DataSourceManager.dataSourceExists``), with the Python of
    that lookup, which may not be the one :func:`_choose_python` chose."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        if not manager.dataSourceExists("kafkastore"):
            return False
        found = manager.lookupDataSource("kafkastore").dataSourceCls().pythonExec()
        return found == (python or spark.sparkContext.pythonExec)
    except Exception:   # a Connect session, or a Spark without these: register
        return False


def _refused_mode(exc: BaseException) -> str | None:
    """The save mode ``exc`` refused a kafkastore write for, else None: Spark's own
    refusal of ErrorIfExists and Ignore before the source is asked
    (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``), or the source's refusal of Overwrite."""
    from kafkastore.spark.options import APPEND_ONLY

    condition = getattr(exc, "getCondition", None)
    try:
        condition = condition() if condition else None
        params = exc.getMessageParameters() or {}
    except Exception:
        return None
    if condition == "UNSUPPORTED_DATA_SOURCE_SAVE_MODE":
        if params.get("source", "").strip('"`').lower() == "kafkastore":
            return params.get("createMode", "").strip('"`') or "ErrorIfExists"
    elif condition == "PYTHON_DATA_SOURCE_ERROR" and APPEND_ONLY in str(exc):
        return "Overwrite"
    return None


def _refuse_other_save_modes(writer_class: type) -> None:
    """Make ``writer_class.save`` raise kafkastore's ConfigError for a refused save
    mode. Spark refuses ErrorIfExists (the default) and Ignore for a Python data source
    before the source sees the write, with a hint at Overwrite, which the source then
    refuses too; ``mode("append")`` is the one that works. Other errors pass as they
    are. Installed once per class."""
    import functools

    from kafkastore.errors import ConfigError
    from kafkastore.spark.options import APPEND_ONLY

    save = writer_class.save
    if getattr(save, "_kafkastore_modes", False):
        return

    @functools.wraps(save)
    def checked_save(self, *args, **kwargs):
        try:
            return save(self, *args, **kwargs)
        except Exception as exc:
            mode = _refused_mode(exc)
            if mode is None:
                raise
            raise ConfigError(f"{APPEND_ONLY} (this write's mode: {mode})",
                              key="mode", value=mode) from exc

    checked_save._kafkastore_modes = True
    writer_class.save = checked_save


#: The SQL conf that overrides, on executors, the Python of a registered function
#: (SQLConf.PYSPARK_WORKER_PYTHON_EXECUTABLE; the Arrow runners that read a Python data
#: source's partitions take it before the function's own pythonExec). The driver's
#: planning workers ignore it.
EXECUTOR_PYTHON_CONF = "spark.sql.execution.pyspark.python"


def _choose_python(spark: Any) -> str | None:
    """Choose the Pythons of the source; the driver's planning Python when it must
    differ from the executors' (else None: the context's, for both)."""
    try:
        sc = spark.sparkContext
        exec_ = sc.pythonExec
    except Exception:   # a Connect session has no SparkContext: the server chooses
        return None
    if exec_ is None:
        return None
    conf = sc.getConf()
    chosen = conf.get("spark.pyspark.python") or None
    if chosen and chosen != exec_:
        sc.pythonExec = exec_ = chosen
    if _local_path(exec_) is not None:
        _check_python(exec_, configured=chosen is not None)
        return None
    # A Python that is not on this machine: the executors' (./environment/bin/python
    # of an archive that spark.archives unpacks next to each executor). The driver's
    # planning worker would fail to start it ("Cannot run program"), so it runs the
    # driver's Python: spark.pyspark.driver.python when set, else this very one (the
    # one spark-submit started from PYSPARK_DRIVER_PYTHON, and it has kafkastore); the
    # executors keep the configured one through EXECUTOR_PYTHON_CONF.
    import sys

    planner = conf.get("spark.pyspark.driver.python") or sys.executable
    _check_python(planner, configured=True, key="spark.pyspark.driver.python")
    if not spark.conf.get(EXECUTOR_PYTHON_CONF, None):
        spark.conf.set(EXECUTOR_PYTHON_CONF, exec_)
    return planner


def _local_path(exec_: str) -> str | None:
    """Where ``exec_`` is on this machine (None: not here)."""
    import os
    import shutil

    path = shutil.which(exec_) if not os.path.isabs(exec_) else exec_
    return path if path is not None and os.path.exists(path) else None


def _check_python(exec_: str, *, configured: bool,
                  key: str = "spark.pyspark.python") -> None:
    """Raise ConfigError if ``exec_`` exists here and cannot import kafkastore."""
    import os
    import subprocess
    import sys

    from kafkastore.errors import ConfigError

    path = _local_path(exec_)
    if path is None:
        return   # a path valid only on the executors (a shipped archive): not checkable
    if os.path.abspath(path) == os.path.abspath(sys.executable):
        return   # this very Python (not merely the same binary: venvs share theirs)
    # import kafkastore.spark itself: find_spec("kafkastore") is satisfied by any
    # directory named kafkastore in the working directory (a clone, seen from its
    # parent), a namespace package without the library
    probe = ("import sys, kafkastore.spark; "
             "sys.exit(getattr(kafkastore.spark, '__file__', None) is None)")
    try:
        done = subprocess.run([path, "-c", probe], capture_output=True, timeout=60,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        why = str(exc)
    else:
        if done.returncode == 0:
            return
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        why = lines[-1] if lines else f"exit status {done.returncode}"
    source = (key if configured else
              "PYSPARK_PYTHON when the SparkContext started" if os.environ.get(
                  "PYSPARK_PYTHON") else
              "pyspark's default, as PYSPARK_PYTHON was not set when the SparkContext "
              "started")
    here = os.path.join(os.getcwd(), "kafkastore")
    if os.path.isdir(here) and not os.path.exists(os.path.join(here, "__init__.py")):
        why += (f"; the directory {here} is not an installation (a clone's root, or any "
                f"directory of that name, is only a namespace package)")
    raise ConfigError(
        f"kafkastore is not installed in the Python that Spark would run the kafkastore "
        f"source in: {exec_} ({path}; {source}; import kafkastore.spark: {why}). "
        f"Install kafkastore there, or choose a "
        f"Python that has it: export PYSPARK_PYTHON={sys.executable} before starting "
        f"the driver, or set spark.pyspark.python (on a cluster: a Python with "
        f"kafkastore on every node, or a packed environment through spark.archives; "
        f"see docs/cluster.rst)", key=key, value=exec_)


def __getattr__(name: str) -> Any:
    if name == "KafkaStoreDataSource":
        from kafkastore.spark.source import KafkaStoreDataSource
        return KafkaStoreDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
