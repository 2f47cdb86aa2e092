#!/usr/bin/env bash
# 1. An S3 emulator on 127.0.0.1: moto's server (pip install "moto[server]"; the test
#    extra has it). Any key and secret are accepted; the walkthrough uses "testing".
set -euo pipefail
. "$(dirname "$0")/env.sh"
nohup "$PYSPARK_PYTHON" -m moto.server -H 127.0.0.1 -p "$S3_PORT" > "$TRY_DIR/s3.log" 2>&1 &
echo $! > "$TRY_DIR/s3.pid"
wait_for "$S3_PORT" && echo "S3 at $S3_ENDPOINT"
