#!/usr/bin/env bash
# The benchmark suite with its optional peers installed: kcat (librdkafka,
# the second Kafka client), fio (the disk's own limits) and perf (the
# brokers' system calls per request, issue 13's rows; linux-perf) come from
# the distribution when missing, and so do java and mvn (default-jdk-headless,
# maven): Apache Kafka is a peer when they are there, one node in every
# table and a 3-node cluster in the Replication section, its jars fetched
# with Maven once (internal/kafkaref). kfake and NATS are built into
# ringlog. Builds ringlog, then runs `ringlog bench` with the standard
# matrix (3 runs of everything: about 25 minutes on 2 cores without Kafka,
# whose node and cluster add their runs and starts to that) and any flags
# given, e.g.
#
#   scripts/bench.sh                                      # results in bench-results/<time>/
#   scripts/bench.sh -quick                               # the smoke run, 2-3 minutes with Kafka
#   scripts/bench.sh -out bench/results -readme README.md # refresh the README's Performance section
#
# Without kcat, fio, perf, java or mvn the suite still runs: the kcat and
# Kafka rows say why they are missing, the system call figures are "—" and
# the disk limit uses a built-in O_DIRECT writer.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

# Commands the suite looks for, and the Debian packages that bring them.
declare -A package=([kcat]=kcat [fio]=fio [perf]=linux-perf [java]=default-jdk-headless [mvn]=maven)
missing=()
for cmd in kcat fio perf java mvn; do
	command -v "$cmd" >/dev/null 2>&1 || missing+=("${package[$cmd]}")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "installing ${missing[*]}"
		apt-get update -qq && apt-get install -y -qq "${missing[@]}"
	else
		echo "not installed: ${missing[*]} (their rows will say so); install them as root to measure them" >&2
	fi
fi

bin=$(mktemp -d "${TMPDIR:-/tmp}/ringlog-bench-bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/ringlog" ./cmd/ringlog
"$bin/ringlog" bench "$@"
