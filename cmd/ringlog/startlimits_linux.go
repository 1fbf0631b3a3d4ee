//go:build linux

package main

// The start-up line that says which process limit binds first: how many
// partitions the open-files limit and vm.max_map_count leave room for,
// from what the broker holds once it has opened its logs (its descriptors
// and mappings counted in /proc/self, its segments in the data
// directories) and what each partition costs (fdsPerSegment,
// mapsPerSegment). `ringlog tune` sets the limits; this line tells an
// operator, at every start, which one the broker will run into.

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"ringlog/broker"
	"ringlog/engine"
)

// limitsReport is what the start-up line says.
type limitsReport struct {
	noFile, maxMapCount       int64
	fds, maps                 int64 // held now, in all
	use                       dataUse
	byFiles, byMaps           int64 // partitions each limit has room for
	memlock, ringBytes        int64 // RLIMIT_MEMLOCK and what the rings take, when charged
	arenaBytes                int64 // what the rings' fixed staging buffers take besides
	memlockCharged            bool
	maxPartitions             int
	filesBesides, mapsBesides int64
}

// measureLimits reads the limits and what the process holds now.
func measureLimits(dirs []string, shards, loops int) (limitsReport, error) {
	var r limitsReport
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return r, err
	}
	r.noFile = clampLimit(l.Cur)
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &l); err != nil {
		return r, err
	}
	r.memlock = clampLimit(l.Cur)
	var err error
	if r.maxMapCount, err = readSysctl("vm.max_map_count"); err != nil {
		return r, err
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return r, err
	}
	r.fds = int64(len(fds))
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return r, err
	}
	r.maps = int64(bytes.Count(maps, []byte("\n")))
	if r.use, err = countDataUse(dirs); err != nil {
		return r, err
	}
	// What the process holds besides its segments: the rings, listeners,
	// the quorum's files, the Go runtime's own mappings.
	r.filesBesides = max(0, r.fds-int64(r.use.Segments*fdsPerSegment))
	r.mapsBesides = max(0, r.maps-int64(r.use.Segments*mapsPerSegment))
	per := r.use.segmentsPerPartition()
	r.byFiles = partitionsFor(r.noFile, r.filesBesides, connectionsKept, fdsPerSegment, per)
	r.byMaps = partitionsFor(r.maxMapCount, r.mapsBesides, 0, mapsPerSegment, per)
	r.memlockCharged = !hasCapIPCLock()
	r.ringBytes = ringsMemlock(shards, loops)
	r.arenaBytes = arenaMemlock(shards)
	return r, nil
}

func clampLimit(v uint64) int64 {
	if v > 1<<62 {
		return 1 << 62
	}
	return int64(v)
}

// hasCapIPCLock reads the effective capabilities: with CAP_IPC_LOCK the
// kernel charges no io_uring memory to RLIMIT_MEMLOCK.
func hasCapIPCLock() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(ln, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<unix.CAP_IPC_LOCK) != 0
		}
	}
	return false
}

// headline names the limit that binds first.
func (r limitsReport) headline() string {
	if r.byFiles <= r.byMaps {
		return fmt.Sprintf("open files %d: enough for %d partitions", r.noFile, r.byFiles)
	}
	return fmt.Sprintf("vm.max_map_count %d: enough for %d partitions", r.maxMapCount, r.byMaps)
}

// logStartLimits logs, once the broker is up, which limit binds first;
// at WARN when the partitions held now already take most of it, or the
// rings' locked memory does not fit.
func logStartLimits(log *slog.Logger, cfg broker.Config) {
	dirs := append([]string{cfg.DataDir}, cfg.LogDirs...)
	shards, loops := cfg.Shards, cfg.NetworkLoops
	if shards <= 0 {
		shards = runtime.GOMAXPROCS(0)
	}
	if loops <= 0 {
		loops = runtime.GOMAXPROCS(0)
	}
	maxPartitions := cfg.MaxPartitions
	if maxPartitions == 0 {
		maxPartitions = engine.DefaultMaxPartitions
	}
	// Each shard has a disk ring and each network loop a ring (whichever
	// path each took: the estimate is for the rings a restart may open).
	r, err := measureLimits(dirs, shards, loops)
	if err != nil {
		log.Warn("limits: cannot tell which binds first", "err", err)
		return
	}
	level := slog.LevelInfo
	bound := min(r.byFiles, r.byMaps)
	if int64(r.use.Partitions) > bound*8/10 {
		level = slog.LevelWarn
	}
	attrs := []any{
		"partitions", r.use.Partitions, "segments", r.use.Segments,
		"open_files", r.noFile, "open_files_partitions", r.byFiles, "files_open", r.fds, "files_per_segment", fdsPerSegment, "connections_kept", connectionsKept,
		"max_map_count", r.maxMapCount, "max_map_count_partitions", r.byMaps, "maps", r.maps, "maps_per_segment", mapsPerSegment,
		"segments_per_partition", strconv.FormatFloat(r.use.segmentsPerPartition(), 'f', 1, 64),
	}
	if maxPartitions >= 0 {
		attrs = append(attrs, "max_partitions", maxPartitions)
	}
	if r.memlockCharged {
		attrs = append(attrs, "memlock", r.memlock, "rings_memlock", r.ringBytes, "arena_memlock", r.arenaBytes)
		switch {
		case r.memlock < r.ringBytes:
			level = slog.LevelWarn
			attrs = append(attrs, "memlock_short", "the io_uring rings may not fit RLIMIT_MEMLOCK (ringlog tune)")
		case r.memlock < r.ringBytes+r.arenaBytes:
			level = slog.LevelWarn
			attrs = append(attrs, "memlock_short", "the direct writes' staging arena may not fit RLIMIT_MEMLOCK beside the rings: writes would go without fixed buffers (ringlog tune)")
		}
	}
	log.Log(nil, level, "limits: "+r.headline(), attrs...)
}
