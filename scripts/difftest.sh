#!/usr/bin/env bash
# The differential tests against Apache Kafka, all of them: the fast scenarios
# that `go test ./...` runs, and the slow parts (session and rebalance
# timeouts, long polls, the transaction coordinator) that -full adds. Kafka
# 4.4.0 is fetched with Maven the first time (internal/kafkaref); Java 17 and
# Maven must be on PATH, or the tests fail saying so. Arguments go to go test
# (e.g. -run TestClassicGroup -v); DUMP=1 logs both brokers' answers to every
# step. What the tests compare, and the differences written down, are in
# internal/difftest/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
args=(-full)
if [[ -n "${DUMP:-}" ]]; then
	args+=(-dump)
fi
exec go test ./internal/difftest -count=1 -timeout 20m "$@" -args "${args[@]}"
