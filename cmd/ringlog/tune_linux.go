//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"ringlog/ioring"
)

// tuneItems reads the host and builds the report's items, in the order
// they print. Nothing is changed here.
func tuneItems(o tuneOptions) ([]tuneItem, error) {
	n, err := needsFor(o, runtime.NumCPU())
	if err != nil {
		return nil, err
	}
	var items []tuneItem
	items = append(items, noFileItem(o, n), memlockItem(o, n))
	items = append(items,
		sysctlAtLeast("vm.max_map_count", wantMaxMapCount(n),
			fmt.Sprintf("each segment maps its two indexes (.index, .timeindex) for as long as it is in the log; for %s that is %d mappings besides the process's own, and an mmap past the limit fails with ENOMEM, which takes the partition offline", n.describe(), n.Segments*mapsPerSegment)),
		sysctlAtMost("vm.swappiness", 1,
			"the broker's working set (index mappings, the Go heap, the page cache it serves fetches from) should stay in memory; 1 rather than 0 still lets the kernel swap before the OOM killer runs, as Kafka's documentation advises"),
	)
	items = append(items, dirtyItems()...)
	items = append(items, thpItems()...)
	items = append(items,
		sysctlAtLeast("net.core.somaxconn", 4096,
			"the broker listens with Go's net package, which takes its listen backlog from net.core.somaxconn when it starts ("+backlogNow()+"): after a broker restart every client reconnects at once, and connections past the backlog are dropped and retried by clients after a second or more; a raised value counts from the broker's next start"),
		ioUringDisabledItem(),
	)
	disks := map[string]bool{}
	for _, d := range o.DataDirs {
		// Directories on one disk check its scheduler once.
		for _, it := range schedulerItems(d) {
			if !disks[it.Key] {
				disks[it.Key] = true
				items = append(items, it)
			}
		}
		items = append(items, fsItem(d))
	}
	if len(o.Only) > 0 {
		var kept []tuneItem
		for _, it := range items {
			for _, k := range o.Only {
				if it.Key == k || strings.HasPrefix(it.Key, k+":") {
					kept = append(kept, it)
					break
				}
			}
		}
		if len(kept) == 0 {
			return nil, fmt.Errorf("tune: -only %s matches no item", strings.Join(o.Only, ","))
		}
		items = kept
	}
	return items, nil
}

// sysctlPath is the /proc/sys file of a dotted sysctl name.
func sysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

func readSysctl(name string) (int64, error) {
	b, err := os.ReadFile(sysctlPath(name))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// writeSysctl writes v and reads it back: a write the kernel clamps or
// ignores is a failure, not a change.
func writeSysctl(name string, v int64) error {
	p := sysctlPath(name)
	if err := os.WriteFile(p, []byte(strconv.FormatInt(v, 10)+"\n"), 0); err != nil {
		if errors.Is(err, unix.EROFS) || errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("write %s: %w (a container's /proc/sys is often read-only: set it on the host)", p, err)
		}
		return fmt.Errorf("write %s: %w", p, err)
	}
	got, err := readSysctl(name)
	if err != nil {
		return fmt.Errorf("read back %s: %w", p, err)
	}
	if got != v {
		return fmt.Errorf("wrote %d to %s, it reads %d", v, p, got)
	}
	return nil
}

func sysctlItem(name string, ok func(int64) bool, want int64, wantText, why string) tuneItem {
	it := tuneItem{Key: name, Want: wantText, Why: why}
	v, err := readSysctl(name)
	if err != nil {
		it.Found, it.Status, it.Err = "unreadable", statusUnknown, err
		return it
	}
	it.Found = strconv.FormatInt(v, 10)
	if ok(v) {
		it.Status = statusOK
		return it
	}
	it.Status = statusChange
	it.Action = fmt.Sprintf("write %d to %s (until reboot; persist it in /etc/sysctl.d/, docs/tuning.md)", want, sysctlPath(name))
	it.apply = func() error { return writeSysctl(name, want) }
	return it
}

func sysctlAtLeast(name string, want int64, why string) tuneItem {
	return sysctlItem(name, func(v int64) bool { return v >= want }, want, fmt.Sprintf("at least %d", want), why)
}

func sysctlAtMost(name string, want int64, why string) tuneItem {
	return sysctlItem(name, func(v int64) bool { return v <= want }, want, fmt.Sprintf("at most %d", want), why)
}

// dirtyItems checks the dirty-page thresholds. When the _bytes forms are
// set the kernel ignores the ratios (and reads back 0 for them): those
// are reported and left alone.
func dirtyItems() []tuneItem {
	bg, _ := readSysctl("vm.dirty_background_bytes")
	hard, _ := readSysctl("vm.dirty_bytes")
	if bg > 0 || hard > 0 {
		why := "the _bytes forms are set, so the kernel ignores the ratios; ringlog leaves an explicit choice alone"
		return []tuneItem{
			{Key: "vm.dirty_background_bytes", Found: strconv.FormatInt(bg, 10), Want: "as set", Status: statusOK, Why: why},
			{Key: "vm.dirty_bytes", Found: strconv.FormatInt(hard, 10), Want: "as set", Status: statusOK, Why: why},
		}
	}
	return []tuneItem{
		sysctlAtMost("vm.dirty_background_ratio", 5,
			"background writeback should start early and run steadily: with flush=never (Kafka's default) durability comes from replication and the page cache is written back by the kernel, and a large backlog of dirty pages written at once stalls the disk that fetches read from"),
		sysctlAtLeast("vm.dirty_ratio", 60,
			"the point where a writing thread is made to write back itself: a shard's pwritev that blocks there stalls every partition of the shard; Kafka's documentation raises it (60 to 80) for the same reason"),
	}
}

// thpPath is the sysfs directory of transparent huge pages.
const thpPath = "/sys/kernel/mm/transparent_hugepage/"

// sysfsChoice reads a sysfs file listing choices with the current one in
// brackets ("always [madvise] never"): the current one and the choices.
func sysfsChoice(path string) (string, []string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	var cur string
	var all []string
	for _, f := range strings.Fields(string(b)) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			f = strings.Trim(f, "[]")
			cur = f
		}
		all = append(all, f)
	}
	if cur == "" && len(all) == 1 {
		cur = all[0]
	}
	return cur, all, nil
}

// writeSysfsChoice writes v to path and reads it back.
func writeSysfsChoice(path, v string) error {
	if err := os.WriteFile(path, []byte(v), 0); err != nil {
		if errors.Is(err, unix.EROFS) || errors.Is(err, os.ErrPermission) {
			return fmt.Errorf("write %s: %w (sysfs is read-only here, as in most containers: set it on the host)", path, err)
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	cur, _, err := sysfsChoice(path)
	if err != nil {
		return fmt.Errorf("read back %s: %w", path, err)
	}
	if cur != v {
		return fmt.Errorf("wrote %s to %s, it reads %s", v, path, cur)
	}
	return nil
}

func choiceItem(key, path string, ok func(string) bool, want, why string) tuneItem {
	it := tuneItem{Key: key, Want: want, Why: why}
	cur, all, err := sysfsChoice(path)
	if err != nil {
		it.Found, it.Status, it.Err = "unreadable", statusUnknown, err
		return it
	}
	it.Found = cur
	if ok(cur) {
		it.Status = statusOK
		return it
	}
	if !contains(all, want) {
		it.Status, it.Err = statusUnknown, fmt.Errorf("%s offers %v, not %s", path, all, want)
		return it
	}
	it.Status = statusChange
	it.Action = fmt.Sprintf("write %s to %s (until reboot)", want, path)
	it.apply = func() error { return writeSysfsChoice(path, want) }
	return it
}

func contains(all []string, v string) bool {
	for _, a := range all {
		if a == v {
			return true
		}
	}
	return false
}

func thpItems() []tuneItem {
	return []tuneItem{
		choiceItem("thp.enabled", thpPath+"enabled", func(v string) bool { return v == "madvise" || v == "never" }, "madvise",
			"with always, every large anonymous mapping is backed by huge pages: the Go heap's memory use grows, and khugepaged's collapsing takes CPU from the shards' threads; madvise leaves huge pages to programs that ask (Go's runtime asks only where it helps)"),
		choiceItem("thp.defrag", thpPath+"defrag", func(v string) bool { return v != "always" }, "madvise",
			"with always, a page fault waits for memory compaction to make a huge page: latency spikes of milliseconds on the shards' threads"),
	}
}

// backlogNow says what a process started now gets as its listen backlog.
func backlogNow() string {
	v, err := readSysctl("net.core.somaxconn")
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return fmt.Sprintf("a broker started now listens with a backlog of %d", min(v, 1<<32-1))
}

func ioUringDisabledItem() tuneItem {
	it := tuneItem{Key: "kernel.io_uring_disabled", Want: "0",
		Why: "1 limits io_uring to kernel.io_uring_group and 2 disables it: the broker then falls back to the portable path (pwrite and fsync, one syscall per write) and says so in its start-up line; this is a security setting, so tune reports it and does not change it"}
	v, err := readSysctl("kernel.io_uring_disabled")
	switch {
	case errors.Is(err, os.ErrNotExist):
		it.Found, it.Status = "absent (kernel older than 6.6: io_uring is on unless seccomp blocks it)", statusOK
	case err != nil:
		it.Found, it.Status, it.Err = "unreadable", statusUnknown, err
	case v == 0:
		it.Found, it.Status = "0", statusOK
	default:
		it.Found, it.Status = strconv.FormatInt(v, 10), statusAdvice
		it.Action = "none (write 0 to /proc/sys/kernel/io_uring_disabled yourself if the host's policy allows)"
	}
	return it
}

// rlimitText prints a limit, "unlimited" for RLIM_INFINITY.
func rlimitText(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}

// limitsTarget is where -apply persists a process limit: a process cannot
// raise another's limits, so tune writes what the broker's next start
// reads. With systemd (the packaged service) that is a drop-in for the
// unit (pam_limits does not apply to services); with pam it is a
// limits.d file, read at login, for a broker started from a shell.
type limitsTarget struct {
	o    tuneOptions
	path string
}

func newLimitsTarget(o tuneOptions) limitsTarget {
	if o.Limits == "pam" {
		return limitsTarget{o, "/etc/security/limits.d/90-ringlog.conf"}
	}
	return limitsTarget{o, filepath.Join("/etc/systemd/system", o.Unit+".d", "90-ringlog-tune.conf")}
}

// systemdKey and pamItem name a limit in each form.
func systemdKey(resource int) string {
	if resource == unix.RLIMIT_MEMLOCK {
		return "LimitMEMLOCK"
	}
	return "LimitNOFILE"
}

func pamItem(resource int) string {
	if resource == unix.RLIMIT_MEMLOCK {
		return "memlock"
	}
	return "nofile"
}

// current returns the value the target's configuration gives resource
// (in bytes for memlock), where it comes from, and whether any was found.
func (l limitsTarget) current(resource int) (uint64, string, bool) {
	if l.o.Limits == "pam" {
		return pamLimit(l.o.User, pamItem(resource))
	}
	return unitLimit(l.o.Unit, systemdKey(resource))
}

// set writes v (bytes for memlock) for resource into the target file,
// replacing the line that set it before and keeping the others.
func (l limitsTarget) set(resource int, v uint64) error {
	var lines []string
	if b, err := os.ReadFile(l.path); err == nil {
		lines = strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if l.o.Limits == "pam" {
		item := pamItem(resource)
		val := strconv.FormatUint(v, 10)
		if resource == unix.RLIMIT_MEMLOCK {
			val = strconv.FormatUint(v/1024, 10) // limits.conf counts memlock in KiB
		}
		var kept []string
		for _, ln := range lines {
			f := strings.Fields(ln)
			if len(f) == 4 && f[0] == l.o.User && f[2] == item {
				continue
			}
			kept = append(kept, ln)
		}
		if len(kept) == 0 {
			kept = append(kept, "# Written by `ringlog tune -apply -limits pam`: read at login by pam_limits (docs/tuning.md).")
		}
		lines = append(kept, fmt.Sprintf("%s soft %s %s", l.o.User, item, val), fmt.Sprintf("%s hard %s %s", l.o.User, item, val))
	} else {
		key := systemdKey(resource)
		var kept []string
		for _, ln := range lines {
			if strings.HasPrefix(strings.TrimSpace(ln), key+"=") {
				continue
			}
			kept = append(kept, ln)
		}
		if len(kept) == 0 {
			kept = append(kept, "# Written by `ringlog tune -apply`: limits for the broker's service (docs/tuning.md).",
				"# Takes effect after `systemctl daemon-reload` and a restart of the service.", "[Service]")
		}
		lines = append(kept, fmt.Sprintf("%s=%d", key, v))
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, l.path)
}

// unitLimit finds key in the unit file and its drop-ins, as systemd reads
// them: /etc before /run before /usr/lib and /lib for the unit, drop-ins
// of every directory in the order of their file names, the last
// assignment winning.
func unitLimit(unit, key string) (uint64, string, bool) {
	var val uint64
	var from string
	found := false
	read := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		for _, ln := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(ln), "=")
			if !ok || strings.TrimSpace(k) != key {
				continue
			}
			v = strings.TrimSpace(v)
			if soft, hard, two := strings.Cut(v, ":"); two {
				v = hard // soft:hard; Go raises soft to hard at start
				_ = soft
			}
			if n, ok := parseLimitValue(v); ok {
				val, from, found = n, path, true
			}
		}
	}
	dirs := []string{"/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, unit)); err == nil {
			read(filepath.Join(d, unit))
			break
		}
	}
	byName := map[string]string{}
	for _, d := range dirs {
		ents, _ := os.ReadDir(filepath.Join(d, unit+".d"))
		for _, e := range ents {
			if _, seen := byName[e.Name()]; !seen && strings.HasSuffix(e.Name(), ".conf") {
				byName[e.Name()] = filepath.Join(d, unit+".d", e.Name())
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		read(byName[n])
	}
	return val, from, found
}

// parseLimitValue reads a systemd limit: a number with an optional K, M,
// G suffix (base 1024), or infinity.
func parseLimitValue(v string) (uint64, bool) {
	if v == "infinity" || v == "unlimited" {
		return unix.RLIM_INFINITY, true
	}
	mult := uint64(1)
	switch {
	case strings.HasSuffix(v, "K"):
		mult, v = 1<<10, strings.TrimSuffix(v, "K")
	case strings.HasSuffix(v, "M"):
		mult, v = 1<<20, strings.TrimSuffix(v, "M")
	case strings.HasSuffix(v, "G"):
		mult, v = 1<<30, strings.TrimSuffix(v, "G")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return n * mult, true
}

// pamLimit finds the hard limit for user (or *) in limits.conf and the
// limits.d files, later lines winning; memlock is in KiB there.
func pamLimit(user, item string) (uint64, string, bool) {
	files := []string{"/etc/security/limits.conf"}
	ents, _ := os.ReadDir("/etc/security/limits.d")
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".conf") {
			files = append(files, filepath.Join("/etc/security/limits.d", e.Name()))
		}
	}
	var val uint64
	var from string
	found := false
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, ln := range strings.Split(string(b), "\n") {
			f := strings.Fields(ln)
			if len(f) != 4 || strings.HasPrefix(f[0], "#") || (f[0] != user && f[0] != "*") || f[2] != item || f[1] == "soft" {
				continue
			}
			n, ok := parseLimitValue(f[3])
			if !ok {
				continue
			}
			if item == "memlock" && n != unix.RLIM_INFINITY {
				n *= 1024
			}
			val, from, found = n, path, true
		}
	}
	return val, from, found
}

// limitItem checks one process limit: the one this process has and the
// one the broker's next start gets from the target file.
func limitItem(o tuneOptions, key string, resource int, want uint64, unitText func(uint64) string, why string) tuneItem {
	t := newLimitsTarget(o)
	it := tuneItem{Key: key, Want: fmt.Sprintf("at least %s", unitText(want)), Why: why}
	var l unix.Rlimit
	here := "unreadable"
	if err := unix.Getrlimit(resource, &l); err == nil {
		here = fmt.Sprintf("soft %s, hard %s", unitText(l.Cur), unitText(l.Max))
	}
	cur, from, ok := t.current(resource)
	switch {
	case ok:
		it.Found = fmt.Sprintf("%s in %s (this shell: %s)", unitText(cur), from, here)
	case o.Limits == "pam":
		it.Found = fmt.Sprintf("none for user %s in /etc/security/limits* (this shell: %s)", o.User, here)
	default:
		it.Found = fmt.Sprintf("none in %s or its drop-ins (this shell: %s)", o.Unit, here)
	}
	if ok && cur >= want {
		it.Status = statusOK
		return it
	}
	it.Status = statusChange
	it.Action = fmt.Sprintf("set %s to %s in %s", key, unitText(want), t.path)
	if o.Limits == "systemd" {
		it.Action += "; then systemctl daemon-reload and restart the broker"
	} else {
		it.Action += "; then log in again and restart the broker"
	}
	it.apply = func() error { return t.set(resource, want) }
	return it
}

func noFileItem(o tuneOptions, n tuneNeeds) tuneItem {
	want := uint64(wantNoFile(n))
	why := fmt.Sprintf("a segment holds %d descriptors (.log, .index, .timeindex) while it is in the log and a connection one; for %s the broker holds about %d; "+
		"Go raises a process's soft limit to its hard limit at start, so the hard limit is the one that counts; fs.nr_open (%s) caps it",
		fdsPerSegment, n.describe(), n.Segments*fdsPerSegment+n.Connections, sysctlText("fs.nr_open"))
	return limitItem(o, "nofile", unix.RLIMIT_NOFILE, want, rlimitText, why)
}

func memlockItem(o tuneOptions, n tuneNeeds) tuneItem {
	want := uint64(wantMemlock(n.Shards, n.Shards))
	why := fmt.Sprintf("Linux 6.18 charges io_uring's rings (and provided-buffer rings) to RLIMIT_MEMLOCK of a process without CAP_IPC_LOCK, as a service user is: "+
		"%d shards' disk rings and as many network loops' rings take about %s (measured: 40 KiB and 256 KiB a ring), and each shard's ring registers the direct writes' staging arena, up to %s, as fixed buffers; with too little for the rings, -io=uring fails to start and -net=uring falls back to gnet, with too little for the arena, direct writes go without fixed buffers (the kernel pins their pages at every write)",
		n.Shards, bytesText(uint64(ringsMemlock(n.Shards, n.Shards))), bytesText(uint64(ioring.StageArenaBytes)))
	return limitItem(o, "memlock", unix.RLIMIT_MEMLOCK, want, bytesText, why)
}

func sysctlText(name string) string {
	v, err := readSysctl(name)
	if err != nil {
		return "unreadable"
	}
	return strconv.FormatInt(v, 10)
}

// bytesText prints a byte count in the largest binary unit that divides
// it.
func bytesText(v uint64) string {
	switch {
	case v == unix.RLIM_INFINITY:
		return "unlimited"
	case v >= 1<<30 && v%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", v>>30)
	case v >= 1<<20 && v%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", v>>20)
	case v >= 1<<10 && v%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", v>>10)
	}
	return fmt.Sprintf("%d bytes", v)
}
