#!/usr/bin/env bash
# The whole test suite, runnable on a fresh machine: installs what the tests
# need when it is missing, then vets, tests (both I/O paths run inside the
# tests; the kafka package again on the uring and portable network paths,
# and the cross builds of the portable path for darwin and windows, beside
# them), and races the packages that share memory between goroutines.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"

# Each step says when it began, in seconds since the suite did: the
# suite is held under 15 minutes, and this shows where they go.
step() { printf '\n== %s (%ds)\n' "$*" "$SECONDS"; }

step "toolchain"
go version
# Debian packages the tests use, as command:package (kcat: librdkafka's
# client, for the kafka package's client tests; fuse3: fusermount3, which
# go-fuse falls back on when it cannot mount and unmount powerfs, the
# power-loss file system, by itself; redis-tools: redis-cli, the client
# examples/redis-streams is driven with; java, javac and mvn: Apache Kafka,
# the reference the differential and Java client tests run beside ringlog,
# needs Java 17, the Java tests are compiled with javac, and Kafka's jars
# come from Maven Central; perf: linux-perf, which counts the brokers'
# system calls in bench's TestQuickReport; systemd: systemd-analyze, which
# verifies the packaged unit in internal/pkgbuild's install test); each is
# installed only when its command is missing.
tools=(kcat:kcat fio:fio fusermount3:fuse3 redis-cli:redis-tools java:openjdk-17-jdk-headless javac:openjdk-17-jdk-headless mvn:maven perf:linux-perf systemd-analyze:systemd)
missing=()
for tool in "${tools[@]}"; do
	command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
	step "installing ${missing[*]}"
	apt-get update -qq && apt-get install -y -qq "${missing[@]}"
fi
# kafka-python, the Python client the SSL client-certificate test drives,
# from PyPI when it is missing.
if ! python3 -m pip show -q kafka-python >/dev/null 2>&1; then
	step "installing kafka-python"
	python3 -m pip install -q kafka-python
fi
# confluent-kafka (librdkafka's Python binding, wheels with librdkafka
# inside), the second client family of the transaction tests.
if ! python3 -m pip show -q confluent-kafka >/dev/null 2>&1; then
	step "installing confluent-kafka"
	python3 -m pip install -q confluent-kafka
fi

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

# Apache Kafka's jars, fetched once with Maven into the user's cache
# folder before the packages that start Kafka run side by side.
step "kafka reference jars"
go test -count=1 -run '^TestJars$' ./internal/kafkaref

# The kafka package again on the other network paths (netpoll's own tests
# run on all of them in go test ./..., whose brokers serve on the default,
# io_uring with the connections on the shards' rings since 2026-12-06
# (io_uring loops of netpoll's own from 2026-12-04); RINGLOG_TEST_NET picks every test
# broker's path, and a broker that does not serve on the path asked for
# fails its test: no silent fallback from uring to gnet there; unset, a
# kernel without what the uring path needs serves go test ./... on gnet,
# as the binary would, and netpoll's own uring tests fail). The whole
# package once more per path would cost about as much as its run in
# go test ./...
# (230-300 s on each path here; its tests mostly wait on timers, client
# back-offs and processes, not on the CPU), too much for the 15 minutes
# the suite is held under, so:
#   - gnet, the epoll loops (the default before): everything a client drives
#     through one broker's network (kcat, kgo, the bad-input suite, the
#     fuzz seeds, produce, fetch by sendfile, groups, SASL, admin,
#     transactions on the wire), but the tests that spawn clusters of
#     binaries (TestCluster*: replication and quorum, 40% of the
#     package's time), the group churn tests (rebalance timers, 40 s),
#     the transaction coordinator's tests (TestTxn*: its timers and
#     restarts, 17 s; TestTransactionsOnTheWire stays), SASL
#     re-authentication (a session's expiry) and the process kill of
#     TestDurabilityAcrossKill;
#   - portable, which already serves every TLS listener and the tests'
#     "portable" variants above: the client-facing core (kcat, kgo
#     produce and consume, the bad-input suite, the fuzz seeds, produce,
#     fetch, long polls);
#   - uring-loops (io_uring loops of netpoll's own, the uring path's
#     second mode and the default before): the same client-facing core as
#     portable, and the moves between log directories (TestJBOD), with the
#     brokers' appends written with O_DIRECT (-writes auto, the default,
#     on the io_uring disk path).
# The gnet subset runs with buffered appends (RINGLOG_TEST_WRITES=
# buffered, through the page cache, as Kafka): go test ./... runs the
# default, direct writes on this machine's io_uring path, and portable
# writes through the page cache by default.
# Both run beside the whole package run of go test ./... (which keeps two
# packages going at once), and so do the cross builds of the portable
# path for darwin and windows (a compile, about 40 s of CPU): the kafka
# subsets wait far more than they compute, and run after go test ./...
# they took 107 s of a suite held under 15 minutes.
step "go test, with the kafka package on gnet, uring-loops and portable and the cross builds beside it"
cross_log=$(mktemp)
(
	for os in darwin windows; do
		echo "GOOS=$os"
		# Without optimisations or inlining (-N -l): the cross builds
		# check that the portable path compiles and vets, no binary is
		# run, and on a cold build cache (CI's) they compile the whole
		# dependency tree twice more, the tail of this step: windows's
		# build from a cold cache took 207 s of CPU, 145 s with -N -l.
		# vet reuses what the build compiled with the same flags.
		GOOS=$os GOARCH=amd64 go build -gcflags=all='-N -l' ./... && GOOS=$os GOARCH=amd64 go vet -gcflags=all='-N -l' ./... || exit 1
	done
) >"$cross_log" 2>&1 &
cross_pid=$!
portable_log=$(mktemp)
RINGLOG_TEST_NET=portable go test -count=1 -timeout 15m \
	-run '^(TestBadInput|FuzzRequest|TestFetch|TestProduce|TestKcat|TestMetadataKcat|TestConsume|TestLongPoll)' ./kafka/ >"$portable_log" 2>&1 &
portable_pid=$!
loops_log=$(mktemp)
RINGLOG_TEST_NET=uring-loops go test -count=1 -timeout 15m \
	-run '^(TestBadInput|FuzzRequest|TestFetch|TestProduce|TestKcat|TestMetadataKcat|TestConsume|TestLongPoll|TestJBOD)' ./kafka/ >"$loops_log" 2>&1 &
loops_pid=$!
gnet_log=$(mktemp)
RINGLOG_TEST_NET=gnet RINGLOG_TEST_WRITES=buffered go test -count=1 -timeout 15m \
	-skip '^(TestCluster|TestGroupChurn|TestTxn|TestSASLReauthentication$|TestDurabilityAcrossKill$)' ./kafka/ >"$gnet_log" 2>&1 &
gnet_pid=$!
all_rc=0
# Three packages at once and four parallel tests in each (go test's
# defaults are the core count, two here): the long packages wait on
# processes, timers and clients far more than they compute. Measured
# with /usr/bin/time (load 2 to 5): kafka 279 s of wall time for 59 s
# of CPU, cmd/ringlog 257 s for 142 s, bench 222 s for 219 s (its quick
# benchmark is the one that computes). The tests marked parallel are
# those that start broker processes and wait on them.
go test -count=1 -p 3 -parallel 4 -timeout 20m ./... || all_rc=$?
gnet_rc=0
wait "$gnet_pid" || gnet_rc=$?
echo "gnet, buffered writes:"; cat "$gnet_log"; rm -f "$gnet_log"
loops_rc=0
wait "$loops_pid" || loops_rc=$?
echo "uring-loops (direct writes):"; cat "$loops_log"; rm -f "$loops_log"
portable_rc=0
wait "$portable_pid" || portable_rc=$?
echo "portable:"; cat "$portable_log"; rm -f "$portable_log"
cross_rc=0
wait "$cross_pid" || cross_rc=$?
echo "cross builds:"; cat "$cross_log"; rm -f "$cross_log"
if [ "$all_rc" -ne 0 ] || [ "$gnet_rc" -ne 0 ] || [ "$loops_rc" -ne 0 ] || [ "$portable_rc" -ne 0 ] || [ "$cross_rc" -ne 0 ]; then
	echo "go test failed ($all_rc), or the kafka package on gnet ($gnet_rc), uring-loops ($loops_rc) or portable ($portable_rc), or a cross build ($cross_rc)"; exit 1
fi

# The packages whose memory is shared between goroutines (readers of a log
# while its owner appends). -short keeps the long crash matrix out of the
# slower race build; it runs in full above. Of internal/, the harnesses
# that drive Apache Kafka (kafkaref, difftest, admincli's tests) are left
# out: what they race is a JVM's start, not shared memory of ours, and
# their Kafka nodes cost the race step about a minute and a half. Nor
# pkgbuild: its test drives dpkg and one broker process, and would add the
# packaging library's race build.
step "go test -race"
internal=$(go list ./internal/... | grep -v -e /internal/kafkaref -e /internal/difftest -e /internal/admincli -e /internal/pkgbuild)
go test -count=1 -race -short -timeout 20m ./segment/... ./ioring/... ./netpoll/... ./engine/... ./kafka/... ./replication/... \
	$internal ./broker/... ./mirror/... ./streams/... ./examples/...

step "ok"
