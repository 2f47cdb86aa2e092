#!/usr/bin/env bash
# 3. A Spark Connect server, an application on the cluster, its gRPC port bound to
#    loopback (pip's pyspark ships sbin/start-connect-server.sh; it daemonizes and keeps
#    its pid in $SPARK_PID_DIR for sbin/stop-connect-server.sh).
set -euo pipefail
. "$(dirname "$0")/env.sh"
"$SPARK_HOME/sbin/start-connect-server.sh" \
    --master "spark://127.0.0.1:$SPARK_MASTER_PORT" \
    --conf spark.connect.grpc.binding.address=127.0.0.1 \
    --conf spark.connect.grpc.binding.port="$CONNECT_PORT" \
    --conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1 \
    --conf spark.cores.max=1 --conf spark.executor.memory=512m \
    --conf spark.pyspark.python="$PYSPARK_PYTHON"
wait_for "$CONNECT_PORT" && echo "Spark Connect at sc://127.0.0.1:$CONNECT_PORT"
