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
    """
    from kafkastore.spark.source import KafkaStoreDataSource

    spark.dataSource.register(KafkaStoreDataSource)
    spark.conf.set(PUSHDOWN_CONF, "true")


def __getattr__(name: str) -> Any:
    if name == "KafkaStoreDataSource":
        from kafkastore.spark.source import KafkaStoreDataSource
        return KafkaStoreDataSource
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
