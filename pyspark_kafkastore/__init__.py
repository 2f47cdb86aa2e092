"""Lets Spark find the ``kafkastore`` format without a register call.

PySpark discovers Python data sources in top-level modules named ``pyspark_*``
that export ``DefaultSource``. Filter pushdown still needs
``spark.sql.python.filterPushdown.enabled=true`` (``kafkastore.spark.register``
sets it).
"""

from kafkastore.spark.source import KafkaStoreDataSource as DefaultSource

__all__ = ["DefaultSource"]
