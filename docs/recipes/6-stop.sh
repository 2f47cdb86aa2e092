#!/usr/bin/env bash
# 6. Stop everything the steps started (the data stays in $TRY_DIR).
set -uo pipefail
. "$(dirname "$0")/env.sh"
"$SPARK_HOME/sbin/stop-connect-server.sh"
for name in worker master s3; do
    if [ -f "$TRY_DIR/$name.pid" ]; then
        kill "$(cat "$TRY_DIR/$name.pid")" 2>/dev/null && echo "stopped $name"
        rm -f "$TRY_DIR/$name.pid"
    fi
done
