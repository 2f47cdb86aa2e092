#!/usr/bin/env bash
# 5. Spark reads the bucket: an application on the standalone cluster, then a client of
#    the Connect server (read.py is on this page too).
set -euo pipefail
. "$(dirname "$0")/env.sh"
"$PYSPARK_PYTHON" "$(dirname "$0")/read.py" "spark://127.0.0.1:$SPARK_MASTER_PORT"
"$PYSPARK_PYTHON" "$(dirname "$0")/read.py" "sc://127.0.0.1:$CONNECT_PORT"
