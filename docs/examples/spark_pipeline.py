"""Example pipeline: ingest events into Kafka topics, aggregate them, write results back.

Run it with a log directory (created if missing)::

    python docs/examples/spark_pipeline.py /tmp/pipeline-logs

1. ingest: 30,000 order events (customer, amount, event time) become records of the
   topic ``orders`` (3 partitions, keys placed by Kafka's murmur2 partitioner, zstd);
2. aggregate: read ``orders`` back, parse the JSON values, sum the amounts per customer
   and per one-minute window of the record timestamps;
3. write back: the results go to the topic ``order-stats`` (key = customer, value =
   JSON), then are read once more and the busiest windows printed.

The same code runs against a broker's log directory; only the path changes.
"""

from __future__ import annotations

import os
import sys


def main(log_dir: str, spark=None) -> list:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kafkastore.spark

    own = spark is None
    if own:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        spark = (SparkSession.builder.master("local[2]")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.session.timeZone", "UTC")
                 .config("spark.sql.shuffle.partitions", "2")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    kafkastore.spark.register(spark)
    try:
        # 1. ingest ------------------------------------------------------------------
        t0 = 1_700_000_000_000
        events = (spark.range(30_000)
                  .select(F.concat(F.lit("customer-"), (F.col("id") % 97).cast("string"))
                          .alias("customer"),
                          ((F.col("id") * 7919) % 10_000 / 100).alias("amount"),
                          F.timestamp_millis(F.lit(t0) + F.col("id") * 20).alias("ts")))
        (events.select(F.col("customer").alias("key"),
                       F.to_json(F.struct("customer", "amount")).alias("value"),
                       F.col("ts").alias("timestamp"))
         .write.format("kafkastore")
         .option("topic", "orders").option("partitions", "3")
         .option("compression", "zstd")
         .mode("append").save(log_dir))

        # 2. aggregate -----------------------------------------------------------------
        orders = (spark.read.format("kafkastore")
                  .option("subscribe", "orders")
                  .load(log_dir))
        schema = "customer string, amount double"
        stats = (orders
                 .select(F.from_json(F.col("value").cast("string"), schema).alias("o"),
                         "timestamp")
                 .groupBy(F.window("timestamp", "1 minute"), "o.customer")
                 .agg(F.count("*").alias("orders"), F.round(F.sum("o.amount"), 2)
                      .alias("total")))

        # 3. write back ----------------------------------------------------------------
        (stats.select(F.col("customer").alias("key"),
                      F.to_json(F.struct(F.col("window.start").alias("window"),
                                         "orders", "total")).alias("value"),
                      F.col("window.end").alias("timestamp"))
         .write.format("kafkastore").option("topic", "order-stats")
         .mode("append").save(log_dir))

        result = (spark.read.format("kafkastore").option("subscribe", "order-stats")
                  .load(log_dir)
                  .select(F.col("key").cast("string").alias("customer"),
                          F.from_json(F.col("value").cast("string"),
                                      "window timestamp, orders long, total double")
                          .alias("s"))
                  .select("customer", "s.*")
                  .orderBy(F.desc("total"), "customer", "window"))
        top = result.limit(5).collect()
        for row in top:
            print(f"{row.customer:12} {row.window:%H:%M} {row.orders:4d} orders "
                  f"{row.total:10.2f}")
        return top
    finally:
        if own:
            spark.stop()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kafkastore-pipeline")
