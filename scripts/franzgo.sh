#!/usr/bin/env bash
# franz-go's whole pkg/kgo test suite (the version go.mod requires, built
# from the module cache) against the ringlog binary: its SASL tests
# (SCRAM-SHA-256/512, OAUTHBEARER) on a SASL_PLAINTEXT listener and every
# other test over an SSL listener that requires a client certificate
# (KGO_SEEDS, KGO_TEST_TLS), but TestIssue769
# (cmd/ringlog/franzgo_test.go says why). go test ./... runs the SASL
# tests and a ten-test TLS subset in seconds (TestFranzGoSecurity); this
# takes minutes. The whole output goes to $LOG, a summary to the terminal.
#
#   KGO_TEST_RECORDS  records each ETL test moves (franz-go's default is
#                     500000; the 20000 here take about 2 minutes on 2 cores)
#
# With -cluster, the whole suite runs instead against three controller-only
# and three broker-only processes (process.roles), topics with 3 replicas
# (TestFranzGoRolesCluster; KGO_TEST_RF=3), in plaintext.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"
export KGO_TEST_RECORDS="${KGO_TEST_RECORDS:-20000}"
LOG="${LOG:-${TMPDIR:-/tmp}/ringlog-franzgo.log}"
if [ "${1:-}" = "-cluster" ]; then
	go test -count=1 -timeout 70m -run '^TestFranzGoRolesCluster$' -v ./cmd/ringlog -args -franzgo.cluster >"$LOG" 2>&1
else
	go test -count=1 -timeout 70m -run '^TestFranzGoSecurity$' -v ./cmd/ringlog -args -franzgo.full >"$LOG" 2>&1
fi
rc=$?
grep -E 'franzgo_test.go:[0-9]+: (skipped:|franz-go)|^\s+--- FAIL|^(--- |ok|FAIL)' "$LOG"
echo "whole output: $LOG"
exit $rc
