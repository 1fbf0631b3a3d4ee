package main

// `ringlog tune`: the host settings a broker's partitions, mappings and
// rings run into, checked against what this broker needs and, with
// -apply, set (the way Redpanda's `rpk redpanda tune` does). The checks and
// the writes are Linux's (tune_linux.go); this file holds what every OS
// shares: the flags, the per-partition cost model, the recommendations as
// pure functions and the report.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"ringlog/engine"
	"ringlog/ioring"
)

// What one partition costs the process, from segment/: every segment of a
// log stays open while it is in the log (segment.openSegment), as three
// descriptors (.log, .index, .timeindex; the .txnindex is opened only
// while it is written) and two shared mappings (the two indexes,
// segment.openMapFile). The active segment is one of them, so a partition
// costs at least one segment's worth.
const (
	fdsPerSegment  = 3
	mapsPerSegment = 2
	// connectionsKept is the descriptors the start-up line keeps aside
	// for clients and followers (one per connection) before it counts
	// partitions: a broker whose every descriptor went to segments could
	// accept nobody.
	connectionsKept = 100
	// segmentsPerPartitionAssumed is the segments per partition assumed
	// when no data directory tells (a partition past its first roll holds
	// two: the one rolled and the active one, until retention).
	segmentsPerPartitionAssumed = 2
)

// dataUse is what a data directory holds now: partition directories
// (topic-N) and the segments in them.
type dataUse struct {
	Partitions int
	Segments   int
}

// segmentsPerPartition is the average, at least 1 (an empty directory
// still has an active segment per partition once one exists).
func (u dataUse) segmentsPerPartition() float64 {
	if u.Partitions == 0 || u.Segments < u.Partitions {
		return 1
	}
	return float64(u.Segments) / float64(u.Partitions)
}

// partitionDir matches Kafka's partition directory names: topic-N, where
// a topic name is [a-zA-Z0-9._-]+. Directories of partitions being
// deleted or moved (topic-N.<id>-delete, -future) hold open files too
// while they exist, and match as well.
var partitionDir = regexp.MustCompile(`^[a-zA-Z0-9._-]+-[0-9]+(\.[0-9a-f]+-(delete|future))?$`)

// segmentFile matches a segment's log file: the base offset in 20 digits.
var segmentFile = regexp.MustCompile(`^[0-9]{20}\.log$`)

// countDataUse walks dirs (log.dirs) one partition level deep.
func countDataUse(dirs []string) (dataUse, error) {
	var u dataUse
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return u, fmt.Errorf("data directory %s: %w", dir, err)
		}
		for _, e := range ents {
			if !e.IsDir() || !partitionDir.MatchString(e.Name()) {
				continue
			}
			segs, err := os.ReadDir(filepath.Join(dir, e.Name()))
			if err != nil {
				return u, fmt.Errorf("partition directory %s: %w", e.Name(), err)
			}
			u.Partitions++
			for _, s := range segs {
				if segmentFile.MatchString(s.Name()) {
					u.Segments++
				}
			}
		}
	}
	return u, nil
}

// partitionsFor is how many partitions of segsPer segments fit in what
// limit leaves after used (what the process holds besides segments) and
// kept: each partition costs per x segsPer.
func partitionsFor(limit, used, kept int64, per int, segsPer float64) int64 {
	left := limit - used - kept
	if left <= 0 {
		return 0
	}
	return int64(float64(left) / (float64(per) * segsPer))
}

// tuneNeeds is what the broker this host is tuned for will hold: the
// partitions and segments (counted in -data, else -partitions of
// segmentsPerPartitionAssumed segments) and the connections.
type tuneNeeds struct {
	Partitions  int
	Segments    int
	Connections int
	Shards      int
	Counted     bool // from a data directory, not assumed
}

func (n tuneNeeds) describe() string {
	if n.Counted {
		return fmt.Sprintf("%d partitions holding %d segments counted in the data directories, %d connections", n.Partitions, n.Segments, n.Connections)
	}
	return fmt.Sprintf("%d partitions of %d segments assumed (no -data given), %d connections", n.Partitions, segmentsPerPartitionAssumed, n.Connections)
}

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }

// wantNoFile is the open-files limit to recommend: every segment's three
// descriptors and every connection, twice over for growth (partitions
// added, segments not yet deleted by retention), and never below the
// 65536 Kafka's and Redpanda's service units set.
func wantNoFile(n tuneNeeds) int64 {
	need := int64(n.Segments*fdsPerSegment+n.Connections) + 1024
	return max(65536, roundUp(2*need, 4096))
}

// wantMaxMapCount is vm.max_map_count to recommend: two mappings per
// segment, plus the process's own (the Go heap, stacks, the binary: about
// a thousand), twice over for growth; never below 262144, the value
// Elasticsearch and OpenSearch ask of the same kernel for the same reason.
func wantMaxMapCount(n tuneNeeds) int64 {
	need := int64(n.Segments*mapsPerSegment) + 1024
	return max(262144, roundUp(2*need, 65536))
}

// Locked memory per ring, when the kernel charges io_uring's rings to
// RLIMIT_MEMLOCK (Linux 6.18 does for a process without CAP_IPC_LOCK, as
// a service user is), measured here with the broker under prlimit and
// CAP_IPC_LOCK dropped: a shard's disk ring (256 SQEs) failed to set up
// at 32 KiB and fit in 40 KiB; a network loop's ring (1024 SQEs, 8192
// CQEs) with its provided-buffer ring fell back to gnet at 128 KiB and
// fit in 256 KiB.
const (
	diskRingBytes = 40 << 10
	netRingBytes  = 256 << 10
)

// ringsMemlock is what shards disk rings and loops network rings take.
func ringsMemlock(shards, loops int) int64 {
	return int64(shards)*diskRingBytes + int64(loops)*netRingBytes
}

// arenaMemlock is what shards disk rings take when each registers the
// direct writes' staging arena as fixed buffers (ioring.StageArenaBytes,
// charged to every ring that registers it).
func arenaMemlock(shards int) int64 {
	return int64(shards) * ioring.StageArenaBytes
}

// wantMemlock is RLIMIT_MEMLOCK to recommend for shards disk rings and
// loops network rings, four times over (a ring reopened is charged before
// the old one is freed, and the estimate is a measurement on one kernel),
// and the staging arena registered by each shard's ring, never below 64
// MiB.
func wantMemlock(shards, loops int) int64 {
	return max(64<<20, roundUp(4*ringsMemlock(shards, loops)+arenaMemlock(shards), 1<<20))
}

// itemStatus is where an item stands.
type itemStatus string

const (
	statusOK      itemStatus = "ok"
	statusChange  itemStatus = "would change"
	statusChanged itemStatus = "changed"
	statusFailed  itemStatus = "FAILED"
	statusAdvice  itemStatus = "advice"
	statusUnknown itemStatus = "cannot tell"
)

// tuneItem is one line of the report.
type tuneItem struct {
	Key    string // stable name: a sysctl's, or nofile, memlock, thp.enabled, scheduler:<dev>, fs:<dir>
	Found  string // what the host has now, as read
	Want   string // the recommended value
	Status itemStatus
	Why    string
	// Action says what -apply does (or did), empty when nothing; apply
	// does it.
	Action string
	apply  func() error
	Err    error
}

// tuneOptions are the flags of `ringlog tune`.
type tuneOptions struct {
	Apply       bool
	DataDirs    []string
	Partitions  int
	Connections int
	Shards      int
	Limits      string // systemd or pam
	Unit        string
	User        string
	Only        []string // item keys to check (and apply) alone; empty: all
}

func parseTuneFlags(args []string, stderr io.Writer) (tuneOptions, error) {
	o := tuneOptions{}
	fs := flag.NewFlagSet("ringlog tune", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ringlog tune [-apply] [-data DIR[,DIR]] [-partitions N] [-connections N] [-shards N] [-limits systemd|pam] [-unit NAME] [-user NAME] [-only KEY,...]")
		fmt.Fprintln(stderr, "Checks the host settings a broker needs (docs/tuning.md); changes nothing without -apply.")
		fs.PrintDefaults()
	}
	fs.BoolVar(&o.Apply, "apply", false, "set what is not as recommended (sysctls in /proc/sys, THP and the I/O scheduler in /sys, limits in a systemd drop-in or limits.d file)")
	only := fs.String("only", "", "check (and apply) only these items, comma-separated keys as the report prints them (vm.swappiness, nofile, scheduler, fs, ...)")
	data := fs.String("data", "", "the broker's log.dirs, comma-separated: partitions and segments are counted there, and their disks and file systems checked")
	fs.IntVar(&o.Partitions, "partitions", engine.DefaultMaxPartitions, "partitions to plan for when -data is not given (ringlog.max.partitions' default)")
	fs.IntVar(&o.Connections, "connections", 10000, "client and follower connections to plan for (max.connections; netpoll's default bound)")
	fs.IntVar(&o.Shards, "shards", 0, "shards and network loops to plan rings for; 0: this machine's CPUs")
	fs.StringVar(&o.Limits, "limits", "systemd", "where -apply persists open files and locked memory: systemd (a drop-in for -unit) or pam (/etc/security/limits.d for -user)")
	fs.StringVar(&o.Unit, "unit", "ringlog.service", "the broker's systemd unit (with -limits systemd)")
	fs.StringVar(&o.User, "user", "ringlog", "the user the broker runs as (with -limits pam)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("tune: unexpected arguments %q", fs.Args())
	}
	for _, d := range strings.Split(*data, ",") {
		if d = strings.TrimSpace(d); d != "" {
			o.DataDirs = append(o.DataDirs, d)
		}
	}
	for _, k := range strings.Split(*only, ",") {
		if k = strings.TrimSpace(k); k != "" {
			o.Only = append(o.Only, k)
		}
	}
	if o.Limits != "systemd" && o.Limits != "pam" {
		return o, fmt.Errorf("tune: -limits %q: want systemd or pam", o.Limits)
	}
	return o, nil
}

// needsFor counts the data directories, or assumes -partitions.
func needsFor(o tuneOptions, cpus int) (tuneNeeds, error) {
	n := tuneNeeds{Connections: o.Connections, Shards: o.Shards}
	if n.Shards <= 0 {
		n.Shards = cpus
	}
	if len(o.DataDirs) == 0 {
		n.Partitions = o.Partitions
		n.Segments = o.Partitions * segmentsPerPartitionAssumed
		return n, nil
	}
	u, err := countDataUse(o.DataDirs)
	if err != nil {
		return n, err
	}
	n.Partitions, n.Segments, n.Counted = u.Partitions, u.Segments, true
	return n, nil
}

// errNotApplied is returned (and the exit code is 1) when -apply could
// not set everything.
var errNotApplied = errors.New("tune: some settings could not be applied")

// runItems applies (with apply) and prints the report. It returns
// errNotApplied if an item failed.
func runItems(w io.Writer, items []tuneItem, apply bool) error {
	failed := 0
	for i := range items {
		it := &items[i]
		if apply && it.Status == statusChange && it.apply != nil {
			if err := it.apply(); err != nil {
				it.Status, it.Err = statusFailed, err
				failed++
			} else {
				it.Status = statusChanged
			}
		}
		fmt.Fprintf(w, "%s: found %s; recommend %s; %s", it.Key, it.Found, it.Want, it.Status)
		if it.Err != nil {
			fmt.Fprintf(w, ": %v", it.Err)
		}
		fmt.Fprintln(w)
		if it.Action != "" && it.Status != statusOK {
			verb := "apply"
			if it.Status == statusChanged {
				verb = "applied"
			}
			fmt.Fprintf(w, "    %s: %s\n", verb, it.Action)
		}
		fmt.Fprintf(w, "    why: %s\n", it.Why)
	}
	switch {
	case failed > 0:
		fmt.Fprintf(w, "%d setting(s) could not be applied (see FAILED above)\n", failed)
		return errNotApplied
	case !apply:
		n := 0
		for _, it := range items {
			if it.Status == statusChange {
				n++
			}
		}
		fmt.Fprintf(w, "%d setting(s) differ from the recommendation; nothing was changed (run with -apply to set them)\n", n)
	}
	return nil
}

// tuneMain runs `ringlog tune`.
func tuneMain(args []string, stdout, stderr io.Writer) error {
	o, err := parseTuneFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	items, err := tuneItems(o)
	if err != nil {
		return err
	}
	return runItems(stdout, items, o.Apply)
}
