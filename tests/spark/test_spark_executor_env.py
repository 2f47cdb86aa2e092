"""Credentials that reach the driver but not the executors (issue 28, item 6).

The driver plans (lists the directory, reads the indexes) and the tasks read the
segments, each with its own process's credentials. When the store refuses a task's
reads, the error the user sees says that an executor on host X read, and that the
driver's environment does not travel to executors, naming the ways that do. The store's
refusal is a 403 for the segments' ranged reads (tests/_faultproxy.py in front of
moto's S3 server): planning works, every task fails, as in the issue.
"""

from __future__ import annotations

import socket

import pytest
from test_spark_source import make_logs


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("env-logs") / "logs"
    make_logs(root, partitions=2, batches=4)
    return str(root)


def test_a_refused_task_read_names_the_executor_and_the_fix(spark, s3_server, fault_proxy,
                                                             logs):
    uri = s3_server.upload_dir(logs, s3_server.new_bucket("env"), "kafka-logs")
    options = {**s3_server.spark_options(), "storage.endpoint_override": fault_proxy.endpoint,
               "subscribe": "orders"}
    fault_proxy.inject("403", contains=".log", ranged=True, times=1000)
    with pytest.raises(Exception) as info:
        spark.read.format("kafkastore").options(**options).load(uri).collect()
    text = str(info.value)
    host = socket.gethostname()
    assert "StorageAccessDeniedError" in text, text[-3000:]
    assert f"read by an executor on host {host}, task " in text, text[-3000:]
    assert "the driver's environment" in text and "does not travel to executors" in text
    for fix in ("spark.executorEnv.", "conf/spark-env.sh", "storage.*"):
        assert fix in text, fix
    # planning listed and read the indexes: only the tasks' segment reads were refused
    assert any(r.fired for r in fault_proxy.rules)
    assert not [s for s in fault_proxy.seen if s.status == 403 and ".log" not in s.path]
