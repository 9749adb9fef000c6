#!/bin/sh
# The merge step (merge-job.yaml), once every shard's pod has completed: one report from the
# folder of shard logs.  A repeated record, label sets or oracle rules that differ between
# shards, or logs of runs that selected different items are refused (exit 2, no report); logs
# that hold no record at all (every pod wrote nothing) likewise.  A missing shard, or a shard
# with fewer records than it selected (a pod killed part way), makes the report "incomplete",
# names what is missing, and fails the job (exit 1) with the report written all the same.
set -eu
: "${RECORDS:?folder of the shards' record logs}"
status=0
tooleffect report "$RECORDS" --json > "$RECORDS/report.json.tmp" || status=$?
if [ -s "$RECORDS/report.json.tmp" ]; then
  mv "$RECORDS/report.json.tmp" "$RECORDS/report.json"
else
  rm -f "$RECORDS/report.json.tmp"
fi
tooleffect report "$RECORDS" || true   # the table in the pod's log; the status is the first command's
exit "$status"
