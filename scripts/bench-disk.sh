#!/usr/bin/env bash
# This machine's disk limits and ringlog's append path, measured in the same
# run, with the ratios the storage targets are stated in:
#   io_uring append (flush never, 64 KiB rounds)  vs  fio buffered sequential write
#   append with flush always (64 KiB rounds)      vs  fio write + fdatasync every 64 KiB
# fio is installed when missing. BENCH_DIR chooses the file system (default:
# a temporary directory under TMPDIR).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
if ! command -v fio >/dev/null 2>&1; then
	apt-get update -qq && apt-get install -y -qq fio
fi
dir=${BENCH_DIR:-$(mktemp -d -p "${TMPDIR:-/tmp}" ringlog-bench.XXXXXX)}
mkdir -p "$dir"
trap 'rm -rf "$dir"/fio.* "$dir"/go' EXIT

# fio_mbs ARGS...: write bandwidth in MB/s (terse v3 field 48 is KiB/s).
fio_mbs() {
	fio --name=fio --filename="$dir/fio.$RANDOM" --ioengine=psync --rw=write --output-format=terse --terse-version=3 "$@" |
		awk -F';' '{printf "%.1f", $48 * 1024 / 1e6}'
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r), $(df -T "$dir" | awk 'NR==2 {print $2}') at $dir"
buffered=$(fio_mbs --bs=64k --size=2g)
sync16=$(fio_mbs --bs=16k --size=64m --fdatasync=1)
sync64=$(fio_mbs --bs=64k --size=256m --fdatasync=1)
echo "fio buffered sequential write (64 KiB):   $buffered MB/s"
echo "fio write + fdatasync every 16 KiB:       $sync16 MB/s"
echo "fio write + fdatasync every 64 KiB:       $sync64 MB/s"

mkdir -p "$dir/go"
out=$(TMPDIR="$dir/go" go test -run '^$' -bench 'Append|OffsetLookup' -benchtime "${BENCHTIME:-3s}" ./segment/)
echo "$out" | grep -E '^Benchmark'
mbs() { echo "$out" | awk -v n="$1" '$1 ~ n {for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") print $i}' | head -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2fx", a / b; else print "n/a"}'; }
echo
printf '%-58s %10s %10s\n' "ratio" "ringlog" "ratio"
for kind in uring portable; do
	for bs in 1 64; do
		v=$(mbs "BenchmarkAppend/$kind/batch=${bs}KiB/flush=never")
		printf '%-58s %10s %10s\n' "$kind ${bs} KiB batches, never / fio buffered" "$v" "$(ratio "$v" "$buffered")"
		v=$(mbs "BenchmarkAppend/$kind/batch=${bs}KiB/flush=always")
		printf '%-58s %10s %10s\n' "$kind ${bs} KiB batches, always / fio fdatasync 64 KiB" "$v" "$(ratio "$v" "$sync64")"
	done
done
