#!/usr/bin/env bash
# This machine's disk limits and ringlog's append path, measured in the same
# run, interleaved, with the ratios the storage targets are stated in:
#   io_uring append (flush never, 64 KiB rounds)  vs  fio buffered sequential write
#   append with flush always (64 KiB rounds)      vs  fio write + fdatasync every 64 KiB
# Every measurement starts after a sync (no dirty pages left by the one
# before) and writes the same volume as its fio counterpart; ROUNDS rounds
# (default 5) are run and the median, min and max of each are printed.
# fio is installed when missing. BENCH_DIR chooses the file system.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
if ! command -v fio >/dev/null 2>&1; then
	apt-get update -qq && apt-get install -y -qq fio
fi
rounds=${ROUNDS:-5}
dir=${BENCH_DIR:-$(mktemp -d -p "${TMPDIR:-/tmp}" ringlog-bench.XXXXXX)}
mkdir -p "$dir/go"
results=$(mktemp)
trap 'rm -rf "$dir" "$results"' EXIT
go test -c -o "$dir/segment.test" ./segment/

buffered_mib=1024 # volume of the buffered runs
synced_mib=64     # volume of the fdatasync runs

# fio_mbs ARGS...: write bandwidth in MB/s (terse v3 field 48 is KiB/s).
fio_mbs() {
	fio --name=fio --filename="$dir/fio.data" --ioengine=psync --rw=write --output-format=terse --terse-version=3 "$@" |
		awk -F';' '{printf "%.1f", $48 * 1024 / 1e6}'
	rm -f "$dir/fio.data"
}

# go_mbs NAME ROUNDS64K: MB/s of one append benchmark writing ROUNDS64K rounds of 64 KiB.
go_mbs() {
	(cd "$dir/go" && TMPDIR="$dir/go" "$dir/segment.test" -test.run '^$' -test.bench "^BenchmarkAppend/$1\$" -test.benchtime "$2x") |
		awk '{for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") print $i}'
}

record() { # NAME VALUE
	echo "$1 $2" >>"$results"
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r), $(df -T "$dir" | awk 'NR==2 {print $2}') at $dir; $rounds rounds"
for r in $(seq "$rounds"); do
	echo "round $r/$rounds"
	sync; record fio-buffered "$(fio_mbs --bs=64k --size=${buffered_mib}m)"
	for kind in uring uring-ring portable; do
		for bs in 64 1; do
			sync; record "$kind/${bs}KiB/never" "$(go_mbs "$kind/batch=${bs}KiB/flush=never" $((buffered_mib * 16)))"
		done
	done
	sync; record fio-fdatasync-64k "$(fio_mbs --bs=64k --size=${synced_mib}m --fdatasync=1)"
	sync; record fio-fdatasync-16k "$(fio_mbs --bs=16k --size=$((synced_mib / 4))m --fdatasync=1)"
	for kind in uring uring-ring portable; do
		for bs in 64 1; do
			sync; record "$kind/${bs}KiB/always" "$(go_mbs "$kind/batch=${bs}KiB/flush=always" $((synced_mib * 16)))"
		done
	done
done

median() { # NAME -> "median min max"
	awk -v n="$1" '$1 == n {print $2}' "$results" | sort -g | awk '{v[NR] = $1} END {printf "%s %s %s", v[int((NR + 1) / 2)], v[1], v[NR]}'
}
echo
printf '%-22s %10s %10s %10s\n' "MB/s" median min max
for n in fio-buffered uring/64KiB/never uring/1KiB/never uring-ring/64KiB/never uring-ring/1KiB/never portable/64KiB/never portable/1KiB/never \
	fio-fdatasync-64k fio-fdatasync-16k uring/64KiB/always uring/1KiB/always uring-ring/64KiB/always uring-ring/1KiB/always portable/64KiB/always portable/1KiB/always; do
	printf '%-22s %10s %10s %10s\n' "$n" $(median "$n")
done
ratio() { awk -v a="$(median "$1" | cut -d' ' -f1)" -v b="$(median "$2" | cut -d' ' -f1)" 'BEGIN {printf "%.2fx", a / b}'; }
echo
echo "ratios of medians (appends in 64 KiB rounds: one writev, plus one fdatasync under 'always';"
echo "uring copies the data inline and syncs through the ring, uring-ring submits the write too):"
for kind in uring uring-ring portable; do
	for bs in 64 1; do
		echo "  $kind ${bs} KiB batches, flush never  / fio buffered write:      $(ratio "$kind/${bs}KiB/never" fio-buffered)"
		echo "  $kind ${bs} KiB batches, flush always / fio fdatasync every 64 KiB: $(ratio "$kind/${bs}KiB/always" fio-fdatasync-64k)"
	done
done
echo
echo "a shard's round: 16 logs x 4 KiB in one submission (median of 3):"
for kind in uring uring-ring portable; do
	for p in never always; do
		for i in 1 2 3; do
			sync
			(cd "$dir/go" && TMPDIR="$dir/go" "$dir/segment.test" -test.run '^$' -test.bench "^BenchmarkAppendRound/$kind/flush=$p\$" -test.benchtime 1000x) |
				awk '{for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") print $i}'
		done | sort -g | awk -v n="$kind/$p" 'NR == 2 {printf "  %-22s %8s MB/s\n", n, $1}'
	done
done
echo
(cd "$dir/go" && TMPDIR="$dir/go" "$dir/segment.test" -test.run '^$' -test.bench 'OffsetLookup' -test.benchtime 200000x) | grep -E '^Benchmark'
