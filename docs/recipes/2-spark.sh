#!/usr/bin/env bash
# 2. A Spark standalone master and one worker from pip's pyspark. It ships no
#    sbin/start-master.sh: bin/spark-class starts the daemons' classes directly.
set -euo pipefail
. "$(dirname "$0")/env.sh"
nohup "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
    --host 127.0.0.1 --port "$SPARK_MASTER_PORT" --webui-port "$SPARK_MASTER_WEBUI_PORT" \
    > "$TRY_DIR/master.log" 2>&1 &
echo $! > "$TRY_DIR/master.pid"
wait_for "$SPARK_MASTER_PORT"
# Two cores: the Connect server (step 3) and a batch application (step 5) take one each.
nohup "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
    "spark://127.0.0.1:$SPARK_MASTER_PORT" --host 127.0.0.1 --cores 2 --memory 2g \
    --webui-port "$SPARK_WORKER_WEBUI_PORT" --work-dir "$TRY_DIR/work" \
    > "$TRY_DIR/worker.log" 2>&1 &
echo $! > "$TRY_DIR/worker.pid"
wait_for "$SPARK_WORKER_WEBUI_PORT"
echo "master at spark://127.0.0.1:$SPARK_MASTER_PORT, UI http://127.0.0.1:$SPARK_MASTER_WEBUI_PORT"
