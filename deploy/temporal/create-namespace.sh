#!/bin/sh
# The one-shot job that makes the namespace tgs uses (temporalio/server, unlike the deprecated auto-setup image, makes
# none). Runs once the server is healthy; does nothing when the namespace exists.
set -eu
ns="${TEMPORAL_NAMESPACE:-default}"
if temporal operator namespace describe --address "$TEMPORAL_ADDRESS" -n "$ns" >/dev/null 2>&1; then
  echo "namespace $ns exists"
else
  temporal operator namespace create --address "$TEMPORAL_ADDRESS" -n "$ns" --retention 72h
  echo "namespace $ns created"
fi
