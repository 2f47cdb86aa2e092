#!/usr/bin/env bash
# 4. A log directory (topic orders, 3 partitions), copied into the bucket "demo", read
#    back from there with the command line.
set -euo pipefail
. "$(dirname "$0")/env.sh"
seq 1 "$RECORDS" | sed 's/.*/user-&:order &/' \
    | "$PYSPARK_PYTHON" -m kafkastore produce "$TRY_DIR/logs" orders --key-separator : --partitions 3
# The copy with pyarrow (no AWS CLI needed); with the AWS CLI it is
#   aws --endpoint-url "$S3_ENDPOINT" s3 sync "$TRY_DIR/logs" s3://demo/logs
"$PYSPARK_PYTHON" -c '
import sys, pyarrow.fs as fs
s3 = fs.S3FileSystem(endpoint_override=sys.argv[2], scheme="http", region="us-east-1",
                     access_key="testing", secret_key="testing", allow_bucket_creation=True)
s3.create_dir("demo")
fs.copy_files(sys.argv[1], "demo/logs", destination_filesystem=s3)
' "$TRY_DIR/logs" "127.0.0.1:$S3_PORT"
"$PYSPARK_PYTHON" -m kafkastore describe s3://demo/logs \
    --storage-option endpoint_override="$S3_ENDPOINT" --storage-option region=us-east-1 \
    --storage-option access_key=testing --storage-option secret_key=testing
