"""The sink refuses an object-store URI at plan time (issue 17).

Before, ``df.write.format("kafkastore")...save("s3://bucket/logs")`` reported success and
wrote a local directory named ``s3:/bucket/logs`` under the working directory. Now the
driver refuses the write when Spark plans it: no task runs (a UDF in the plan would
leave a marker file) and no directory is made anywhere.
"""

from __future__ import annotations

import os

import pytest


@pytest.mark.parametrize("uri", ["s3://bucket/logs", "gs://bucket/logs"])
def test_sink_refuses_an_object_store_uri_before_any_task(spark, tmp_path, monkeypatch, uri):
    from pyspark.sql.functions import udf

    monkeypatch.chdir(tmp_path)
    markers = tmp_path / "markers"
    markers.mkdir()

    # useArrow=False: a plain pickled UDF, so the test needs no pandas (CI has none).
    @udf("string", useArrow=False)
    def touched(v):
        # runs only if a task runs: leaves a file behind
        open(os.path.join(str(markers), f"task-{os.getpid()}-{v}"), "w").close()
        return v

    df = spark.range(20).selectExpr("CAST(id AS STRING) AS value").select(
        touched("value").alias("value"))
    with pytest.raises(Exception) as err:
        df.write.format("kafkastore").option("topic", "orders").mode("append").save(uri)
    text = str(err.value)
    assert "cannot write to " + uri in text and "POSIX" in text
    assert os.listdir(markers) == [], "a task ran before the write was refused"
    assert sorted(os.listdir(tmp_path)) == ["markers"], "something was created locally"


def test_streaming_sink_refuses_an_object_store_uri(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stream = spark.readStream.format("rate").option("rowsPerSecond", 1).load() \
        .selectExpr("CAST(value AS STRING) AS value")
    with pytest.raises(Exception) as err:
        q = (stream.writeStream.format("kafkastore").option("topic", "orders")
             .option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(availableNow=True).start("s3://bucket/logs"))
        try:
            q.awaitTermination(60)
        finally:
            q.stop()
    assert "cannot write to s3://bucket/logs" in str(err.value)
    assert not any(name.startswith("s3") for name in os.listdir(tmp_path))
