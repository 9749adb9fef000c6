#!/bin/sh
# The merge step (merge-job.yaml), once every shard's pod has completed: one report from the
# folder of shard logs.  A repeated record is refused; a missing shard makes the report
# "incomplete" and names the shard; label sets that differ between shards are refused; logs
# that hold no record at all (every pod wrote nothing) fail the merge (exit 2).
set -eu
: "${RECORDS:?folder of the shards' record logs}"
tooleffect report "$RECORDS" --json > "$RECORDS/report.json.tmp"
mv "$RECORDS/report.json.tmp" "$RECORDS/report.json"
tooleffect report "$RECORDS"
