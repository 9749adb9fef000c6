#!/bin/sh
# One shard of the run, in a pod of the Indexed Job (shards-job.yaml): Kubernetes sets
# JOB_COMPLETION_INDEX (0..N-1); the shard is its index + 1 of SHARDS.  Records and the shard's
# report go to RECORDS (the shared volume), one file per shard, so a re-run pod overwrites its own.
# pytest's exit status 1 means some decisions failed: that is the finding, not a broken pod.
set -u
: "${JOB_COMPLETION_INDEX:?set by Kubernetes for an Indexed Job}"
: "${SHARDS:?number of shards, equal to the Job's completions}"
: "${RECORDS:?folder of the shards' record logs}"
: "${RATE_BACKEND:?redis://HOST:PORT/DB#NAME of the run-wide rate limit}"
i=$((JOB_COMPLETION_INDEX + 1))
mkdir -p "$RECORDS"
# POLICY_ARGS is split into words on purpose (several options)
# shellcheck disable=SC2086
pytest "${CASES:-cases/}" -q -p no:cacheprovider --tooleffect-shard="$i/$SHARDS" \
  --tooleffect-records="$RECORDS/shard-$i.jsonl" --tooleffect-report="$RECORDS/shard-$i.json" \
  -o tooleffect_rate_backend="$RATE_BACKEND" ${POLICY_ARGS:-}
rc=$?
[ "$rc" -le 1 ] || exit "$rc"
exit 0
