#!/usr/bin/env bash
# Saves the event histories of completed codegrep workflows as JSON under test/histories/ for the replay test
# (workflows/replay.test.ts). Usage: bash scripts/record-histories.sh <workflowId> …   (server at
# CODEGREP_TEMPORAL_ADDRESS, default localhost:7233). Record new histories whenever a workflow gains a stage and
# keep the old ones: they are what proves old runs still replay.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
temporal="$(bash "$root/scripts/ensure-temporal.sh")"
address="${CODEGREP_TEMPORAL_ADDRESS:-localhost:7233}"
namespace="${CODEGREP_NAMESPACE:-codegrep}"
mkdir -p "$root/test/histories"
for id in "$@"; do
  file="$root/test/histories/$(echo "$id" | tr -c 'A-Za-z0-9._\n-' '_').json"
  "$temporal" workflow show --address "$address" --namespace "$namespace" --workflow-id "$id" --output json > "$file"
  echo "$id -> $file"
done
