#!/usr/bin/env bash
# A local cluster of three ringlog brokers on loopback, for kcat and kgo.
#
#   scripts/cluster.sh [start] [-d DIR] [-p PORT] [-c FILE]
#   scripts/cluster.sh stop    [-d DIR]
#   scripts/cluster.sh status  [-d DIR]
#
# start builds cmd/ringlog once (into DIR/bin) and starts the brokers that
# are not running yet, so that running it again after a broker died brings
# that one back. Broker N (1, 2, 3) keeps its data in DIR/N, its log in
# DIR/logs/N.log and its pid in DIR/run/N.pid; it serves Kafka on
# 127.0.0.1:PORT+2(N-1) (9092, 9094, 9096) and runs the metadata quorum's
# voter on the port above that (9093, 9095, 9097). The three share one
# cluster id, drawn at the cluster's first start and kept in DIR/cluster.id
# (Kafka's kafka-storage random-uuid and format): every broker reports it,
# and refuses a data directory of another cluster.
#
#   -d DIR   where everything goes (default ./data/cluster)
#   -p PORT  the first Kafka port (default 9092; a cluster keeps the ports
#            it was made with, written in DIR/port)
#   -c FILE  Kafka server.properties lines added to the generated ones
#
# stop sends SIGTERM to every broker and waits for each to exit (the logs
# are closed cleanly, so the next start opens them without recovery).
# status lists the brokers, and fails when none is running. Remove DIR to
# start afresh.
set -euo pipefail

export PATH="$PATH:/usr/local/go/bin"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
host=127.0.0.1
ids=(1 2 3)
stop_wait=60 # seconds a broker has to stop after SIGTERM
start_wait=60

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit 2
}

cmd=start
case "${1:-}" in
start | stop | status)
	cmd=$1
	shift
	;;
-h | --help | help) usage ;;
esac

dir=./data/cluster
port=
extra=
while getopts "d:p:c:h" opt; do
	case $opt in
	d) dir=$OPTARG ;;
	p) port=$OPTARG ;;
	c) extra=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
run=$dir/run

# The ports belong to the data: the metadata quorum keeps its voters'
# addresses in its log, so a cluster restarted on other ports would look
# for its voters where they no longer are.
if [ -f "$dir/port" ]; then
	made=$(<"$dir/port")
	if [ -n "$port" ] && [ "$port" != "$made" ]; then
		echo "cluster.sh: the cluster in $dir was made with ports from $made (its quorum keeps the voters' addresses); use -p $made, or -d for another cluster" >&2
		exit 1
	fi
	port=$made
fi
port=${port:-9092}
if ! [[ $port =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65530 ]; then
	echo "cluster.sh: -p $port: not a port" >&2
	exit 2
fi

kafka_port() { echo $((port + 2 * ($1 - 1))); }
controller_port() { echo $((port + 2 * ($1 - 1) + 1)); }

# pid_of prints broker N's pid if that process is running ringlog, and
# fails otherwise (no pid file, process gone or dead, pid reused by another
# program).
pid_of() {
	local f=$run/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	# A zombie (state Z: dead, not yet reaped by init) is not running.
	case "$(ps -p "$pid" -o stat=,comm= 2>/dev/null)" in
	Z* | "") return 1 ;;
	*" ringlog") echo "$pid" ;;
	*) return 1 ;;
	esac
}

# listening tells whether something accepts TCP connections on port.
listening() {
	(exec 3<>"/dev/tcp/$host/$1") 2>/dev/null
}

bootstrap() {
	local s="" n
	for n in "${ids[@]}"; do
		s+="${s:+,}$host:$(kafka_port "$n")"
	done
	echo "$s"
}

status() {
	local n pid up=0
	for n in "${ids[@]}"; do
		if pid=$(pid_of "$n"); then
			echo "broker $n: running (pid $pid), Kafka $host:$(kafka_port "$n"), log $dir/logs/$n.log"
			up=$((up + 1))
		else
			echo "broker $n: stopped"
		fi
	done
	[ "$up" -gt 0 ]
}

# cluster_id prints the cluster's id: the one in DIR/cluster.id, or a new
# one for a cluster that starts for the first time. It belongs to the data
# like the ports: each broker recorded it in its meta.properties at first
# start and refuses to start with another.
cluster_id() {
	local id=-
	if [ -f "$dir/cluster.id" ]; then
		cat "$dir/cluster.id"
		return
	fi
	if [ -e "$dir/1/meta.properties" ]; then
		echo "cluster.sh: the cluster in $dir predates $dir/cluster.id (its brokers recorded different cluster ids); remove $dir to start afresh" >&2
		return 1
	fi
	# Kafka's Uuid form: 16 random bytes in unpadded base64url, not
	# starting with '-' (a command line would take it for a flag).
	while [ "${id:0:1}" = - ]; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
	done
	echo "$id"
}

start() {
	local cluster_id
	cluster_id=$(cluster_id)
	mkdir -p "$dir/bin" "$dir/logs" "$run"
	echo "$port" >"$dir/port"
	echo "$cluster_id" >"$dir/cluster.id"

	echo "building cmd/ringlog"
	(cd "$repo" && go build -o "$dir/bin/ringlog" ./cmd/ringlog)

	local voters="" n
	for n in "${ids[@]}"; do
		voters+="${voters:+,}$n@$host:$(controller_port "$n")"
	done
	{
		echo "# Written by scripts/cluster.sh at every start."
		echo "default.replication.factor=3"
		echo "min.insync.replicas=2"
		if [ -n "$extra" ]; then
			cat "$extra"
		fi
	} >"$dir/server.properties"

	local started=()
	for n in "${ids[@]}"; do
		if pid=$(pid_of "$n"); then
			echo "broker $n: already running (pid $pid)"
			continue
		fi
		local p
		for p in "$(kafka_port "$n")" "$(controller_port "$n")"; do
			if listening "$p"; then
				echo "cluster.sh: port $p (broker $n) is taken by another program" >&2
				exit 1
			fi
		done
		mkdir -p "$dir/$n"
		nohup "$dir/bin/ringlog" -node-id "$n" -listen "$host:$(kafka_port "$n")" \
			-controller-voters "$voters" -cluster-id "$cluster_id" -data-dir "$dir/$n" -config "$dir/server.properties" \
			>>"$dir/logs/$n.log" 2>&1 </dev/null &
		echo $! >"$run/$n.pid"
		started+=("$n")
		echo "broker $n: started (pid $!), log $dir/logs/$n.log"
	done

	# A broker listens for Kafka clients once it caught up with the
	# metadata quorum, which needs two of the three voters.
	local deadline=$((SECONDS + start_wait))
	for n in "${started[@]}"; do
		until listening "$(kafka_port "$n")"; do
			if ! pid_of "$n" >/dev/null; then
				echo "cluster.sh: broker $n exited; the end of its log:" >&2
				tail -n 20 "$dir/logs/$n.log" >&2
				echo "cluster.sh: '$0 stop -d $dir' stops the others" >&2
				exit 1
			fi
			if [ "$SECONDS" -ge "$deadline" ]; then
				echo "cluster.sh: broker $n does not listen on $(kafka_port "$n") after ${start_wait}s; the end of its log:" >&2
				tail -n 20 "$dir/logs/$n.log" >&2
				echo "cluster.sh: '$0 stop -d $dir' stops them" >&2
				exit 1
			fi
			sleep 0.1
		done
	done

	echo
	echo "cluster id: $cluster_id"
	echo "bootstrap: $(bootstrap)"
	echo "  kcat -b $(bootstrap) -L"
	echo "  echo hello | kcat -b $(bootstrap) -P -t test -X acks=all"
	echo "  kcat -b $(bootstrap) -C -t test -o beginning -e"
	echo "stop:  $0 stop -d $dir"
}

stop() {
	local n pid pids=()
	for n in "${ids[@]}"; do
		if pid=$(pid_of "$n"); then
			kill -TERM "$pid"
			pids+=("$n:$pid")
		else
			rm -f "$run/$n.pid"
		fi
	done
	if [ ${#pids[@]} -eq 0 ]; then
		echo "no broker running in $dir"
		return 0
	fi
	local deadline=$((SECONDS + stop_wait)) np
	for np in "${pids[@]}"; do
		n=${np%%:*}
		pid=${np#*:}
		while kill -0 "$pid" 2>/dev/null; do
			if [ "$SECONDS" -ge "$deadline" ]; then
				echo "cluster.sh: broker $n (pid $pid) still running ${stop_wait}s after SIGTERM; kill -KILL $pid forces it" >&2
				exit 1
			fi
			sleep 0.1
		done
		rm -f "$run/$n.pid"
		echo "broker $n: stopped"
	done
}

"$cmd"
