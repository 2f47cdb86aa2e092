# The settings every step reads (each step sources this file). Everything listens on
# 127.0.0.1; export a variable before the first step to change it.
export TRY_DIR="${TRY_DIR:-$PWD/try-kafkastore}"        # data, logs and pid files
export S3_PORT="${S3_PORT:-5555}"                       # moto's S3 server
export SPARK_MASTER_PORT="${SPARK_MASTER_PORT:-7077}"   # Spark's own names for these
export SPARK_MASTER_WEBUI_PORT="${SPARK_MASTER_WEBUI_PORT:-8080}"
export SPARK_WORKER_WEBUI_PORT="${SPARK_WORKER_WEBUI_PORT:-8081}"
export CONNECT_PORT="${CONNECT_PORT:-15002}"            # the Spark Connect server
export RECORDS="${RECORDS:-300}"                        # records the data step writes

# The Python that has kafkastore (and the spark, remote, connect and test extras); the
# executors run it too.
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$(command -v python3)}"
export PYSPARK_DRIVER_PYTHON="$PYSPARK_PYTHON"
export SPARK_HOME="${SPARK_HOME:-$("$PYSPARK_PYTHON" -c \
    'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}"
export SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_HOSTNAME=127.0.0.1   # loopback only
export SPARK_LOG_DIR="$TRY_DIR" SPARK_PID_DIR="$TRY_DIR"
S3_ENDPOINT="http://127.0.0.1:$S3_PORT"                  # http://: moto speaks plain HTTP
mkdir -p "$TRY_DIR"

# wait_for PORT: until something accepts connections on 127.0.0.1:PORT (5 minutes at most)
wait_for() {
    for _ in $(seq 600); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.5
    done
    echo "nothing listens on 127.0.0.1:$1; see the logs in $TRY_DIR" >&2
    return 1
}
