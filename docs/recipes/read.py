"""Read s3://demo/logs with Spark: ``python read.py spark://HOST:PORT`` (an application
on a standalone cluster) or ``python read.py sc://HOST:PORT`` (a Spark Connect client)."""

import os
import sys

from pyspark.sql import SparkSession

import kafkastore.spark

where = sys.argv[1]
if where.startswith("sc://"):
    spark = SparkSession.builder.remote(where).getOrCreate()
else:
    spark = (SparkSession.builder.master(where).appName("kafkastore-try")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.cores.max", "1").config("spark.executor.memory", "512m")
             .getOrCreate())
kafkastore.spark.register(spark)

orders = (spark.read.format("kafkastore")
          .option("subscribe", "orders").option("startingOffsets", "earliest")
          # storage.<name>: the object store's options, as the CLI's --storage-option
          .option("storage.endpoint_override", f"http://127.0.0.1:{os.environ['S3_PORT']}")
          .option("storage.region", "us-east-1")
          .option("storage.access_key", "testing").option("storage.secret_key", "testing")
          .load("s3://demo/logs"))
orders.groupBy("partition").count().orderBy("partition").show()
print(f"{where}: {orders.count()} records")
spark.stop()
