//go:build linux

package main

// The data directories' disks and file systems: which block device holds
// a directory (through partitions, device-mapper and md, loop files), its
// I/O scheduler, and whether the file system takes buffered io_uring
// writes inline.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"ringlog/ioring"
)

// mount is one line of /proc/self/mountinfo.
type mount struct {
	major, minor uint32
	point        string
	fstype       string
	source       string
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountOf finds the mount holding path: the longest mount point that
// contains it, the last such line winning (a mount over another).
func mountOf(path string) (mount, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return mount{}, err
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return mount{}, err
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return mount{}, err
	}
	var best mount
	found := false
	for _, ln := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(ln, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 2 {
			continue
		}
		m := mount{point: unescapeMount(f[4]), fstype: g[0], source: unescapeMount(g[1])}
		maj, min, _ := strings.Cut(f[2], ":")
		a, _ := strconv.ParseUint(maj, 10, 32)
		c, _ := strconv.ParseUint(min, 10, 32)
		m.major, m.minor = uint32(a), uint32(c)
		inside := m.point == "/" || real == m.point || strings.HasPrefix(real, m.point+"/")
		if inside && (!found || len(m.point) >= len(best.point)) {
			best, found = m, true
		}
	}
	if !found {
		return mount{}, fmt.Errorf("no mount holds %s", real)
	}
	return best, nil
}

// blockDisks resolves the disks under a directory: the names in
// /sys/block whose queue/scheduler decides how its I/O reaches the
// hardware. why explains when there are none (tmpfs, overlay, a network
// file system) or how they were found.
func blockDisks(dir string, depth int) (disks []string, why string) {
	m, err := mountOf(dir)
	if err != nil {
		return nil, err.Error()
	}
	major, minor := m.major, m.minor
	if major == 0 {
		// btrfs and other file systems give their files an anonymous
		// device number; the mount's source names the real one.
		var st unix.Stat_t
		if !strings.HasPrefix(m.source, "/dev/") || unix.Stat(m.source, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
			return nil, fmt.Sprintf("%s on %s (mounted from %s) has no block device", m.fstype, m.point, m.source)
		}
		major, minor = unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))
	}
	sys, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", major, minor))
	if err != nil {
		return nil, fmt.Sprintf("%s on %s: device %d:%d is not in /sys/dev/block", m.fstype, m.point, major, minor)
	}
	return diskNames(sys, depth)
}

// diskNames walks from a block device's sysfs directory to the disks
// below it: a partition's parent, a device-mapper or md device's slaves,
// a loop device's backing file's own disks.
func diskNames(sys string, depth int) ([]string, string) {
	name := filepath.Base(sys)
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		return diskNames(filepath.Dir(sys), depth)
	}
	if slaves, _ := os.ReadDir(filepath.Join(sys, "slaves")); len(slaves) > 0 {
		var all []string
		var whys []string
		for _, s := range slaves {
			d, why := diskNames(filepath.Join(sys, "slaves", s.Name()), depth)
			all = append(all, d...)
			if why != "" {
				whys = append(whys, why)
			}
		}
		return all, fmt.Sprintf("%s stacks on %s", name, strings.Join(all, ", ")) + joinWhy(whys)
	}
	if b, err := os.ReadFile(filepath.Join(sys, "loop", "backing_file")); err == nil {
		back := strings.TrimSpace(string(b))
		if depth >= 3 {
			return nil, fmt.Sprintf("%s is backed by %s, loops too deep to follow", name, back)
		}
		d, why := blockDisks(filepath.Dir(back), depth+1)
		if why != "" {
			why = " (" + why + ")"
		}
		return d, fmt.Sprintf("%s is a loop device backed by %s%s", name, back, why)
	}
	return []string{name}, ""
}

func joinWhy(whys []string) string {
	if len(whys) == 0 {
		return ""
	}
	return "; " + strings.Join(whys, "; ")
}

// schedulerItems checks the I/O scheduler of every disk under dir: none
// for solid-state disks (the device's own queues order better than the
// kernel can, and a scheduler costs CPU per request), mq-deadline for
// spinning ones (it bounds how long a write can starve a read).
func schedulerItems(dir string) []tuneItem {
	disks, why := blockDisks(dir, 0)
	if len(disks) == 0 {
		return []tuneItem{{Key: "scheduler:" + dir, Found: "no disk", Want: "none or mq-deadline on the disk holding it", Status: statusUnknown,
			Why: "cannot tell which disk holds " + dir + ": " + why}}
	}
	var items []tuneItem
	for _, d := range disks {
		path := "/sys/block/" + d + "/queue/scheduler"
		want, kind := "none", "solid-state"
		if b, err := os.ReadFile("/sys/block/" + d + "/queue/rotational"); err == nil && strings.TrimSpace(string(b)) == "1" {
			want, kind = "mq-deadline", "rotational (as the device reports it; virtual disks often claim to be)"
		}
		w := fmt.Sprintf("the disk holding %s is %s: ", dir, kind)
		if want == "none" {
			w += "its own queues order requests better than the kernel can, and a scheduler costs CPU on every request; "
		} else {
			w += "mq-deadline bounds how long the broker's writes can starve fetches' reads; "
		}
		if why != "" {
			w += why + "; "
		}
		w += "a change lasts until reboot: persist it with a udev rule (docs/tuning.md)"
		it := choiceItem("scheduler:"+d, path, func(v string) bool { return v == want }, want, w)
		if it.Status == statusUnknown && it.Err != nil && strings.Contains(it.Err.Error(), "offers") {
			// A device without that scheduler (dm, some virtual disks)
			// keeps what it has: there is nothing to choose.
			it.Status, it.Err = statusOK, nil
			it.Why += "; this device offers no " + want
		}
		items = append(items, it)
	}
	return items
}

// nowaitWriteFS are the file systems whose regular files take buffered
// writes with IOCB_NOWAIT on Linux 6.18 (FOP_BUFFER_WASYNC in their
// file_operations): io_uring completes such a write in the submitting
// call. Every other one (ext4, tmpfs, f2fs, NFS, FUSE) gets -EAGAIN from
// io_write before the file system is called, and the write is handed to
// an io-wq worker thread.
var nowaitWriteFS = map[string]bool{"xfs": true, "btrfs": true}

// fsItem reports whether dir's file system takes buffered io_uring
// writes inline, measured: writes through ioring with WritesInRing to a
// scratch file in dir, each checked for a completion already posted when
// the submitting io_uring_enter returned and for io-wq worker threads of
// the submitting thread (iou-wrk-TID) that ran.
func fsItem(dir string) tuneItem {
	it := tuneItem{Key: "fs:" + dir, Want: "inline (XFS)", Status: statusAdvice,
		Why: "ext4 and tmpfs have no non-blocking buffered write (no FOP_BUFFER_WASYNC), so io_uring hands every buffered write to an io-wq thread, a thread switch per write; " +
			"XFS and btrfs have one, but a write that must update the file's mtime (the first after each timestamp tick) still punts, and btrfs punts copy-on-write files' writes; " +
			"ringlog therefore copies writes with pwritev on the shard and leaves only the fsync to the ring (ioring.WritesInline, the default): nothing to apply, this says what writing in the ring would cost here"}
	fstype := "unknown"
	if m, err := mountOf(dir); err == nil {
		fstype = m.fstype
	}
	inline, detail, err := probeInlineWrites(dir, probeWrites, 0)
	if err != nil {
		it.Found, it.Status, it.Err = fstype, statusUnknown, err
		return it
	}
	verdict := "punted to io-wq"
	switch {
	case inline == probeWrites:
		verdict = "inline"
		it.Status = statusOK
	case inline > 0:
		verdict = "partly inline"
	}
	it.Found = fmt.Sprintf("%s, buffered io_uring writes %s (%s)", fstype, verdict, detail)
	if (inline > 0) != nowaitWriteFS[fstype] {
		it.Found += fmt.Sprintf("; unlike what this kernel's source says of %s", fstype)
	}
	return it
}

// probeWrites is how many appends the probe makes, back to back.
const probeWrites = 8

// probeInlineWrites measures, on a scratch file in dir, how many of
// probeWrites buffered writes through io_uring complete inline, gap apart.
// It runs on a thread of its own that exits after it (a goroutine locked
// to its thread to the end takes the thread with it), so that io-wq
// workers left by an earlier probe cannot blur this one's count.
func probeInlineWrites(dir string, writes int, gap time.Duration) (inline int, detail string, err error) {
	type result struct {
		inline int
		detail string
		err    error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		var r result
		r.inline, r.detail, r.err = probeOnThread(dir, writes, gap)
		ch <- r
	}()
	r := <-ch
	return r.inline, r.detail, r.err
}

// probeOnThread appends writes 4 KiB blocks through a new ring, one at a
// time, and counts a write as inline when no io-wq worker of this thread
// (iou-wrk-TID) appeared or was scheduled while it ran.
func probeOnThread(dir string, writes int, gap time.Duration) (int, string, error) {
	f, err := os.CreateTemp(dir, ".ringlog-tune-*")
	if err != nil {
		return 0, "", fmt.Errorf("scratch file: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	io, _, err := ioring.Open(ioring.ModeUring, ioring.Config{Entries: 8, Writes: ioring.WritesInRing})
	if err != nil {
		return 0, "", err
	}
	defer io.Close()
	tid := unix.Gettid()
	buf := make([]byte, 4096)
	inline := 0
	for i := range writes {
		if i > 0 && gap > 0 {
			time.Sleep(gap)
		}
		before := workerRuns(tid)
		op := &ioring.Op{Kind: ioring.OpWrite, File: f, Offset: int64(i) * 4096, Bufs: [][]byte{buf}}
		if err := io.Submit(op); err != nil {
			return 0, "", err
		}
		// Whether the completion was already posted when Submit returned
		// says nothing: a worker on another core often beats the return
		// (measured here, 14 of 16 punted ext4 writes). The workers are
		// the evidence.
		if _, err := io.Wait(nil, 1, 5*time.Second); err != nil {
			return 0, "", err
		}
		if op.Err != nil {
			return 0, "", op.Err
		}
		if after := workerRuns(tid); after == before {
			inline++
		}
	}
	detail := fmt.Sprintf("%d of %d 4 KiB appends through ioring ran inline, the others on an io-wq worker", inline, writes)
	return inline, detail, nil
}

// workerStats counts the io-wq worker threads of thread tid (named
// iou-wrk-TID) and the times they were scheduled.
type workerStats struct {
	workers int
	runs    int64
}

func workerRuns(tid int) workerStats {
	var s workerStats
	name := fmt.Sprintf("iou-wrk-%d", tid)
	ents, _ := os.ReadDir("/proc/self/task")
	for _, e := range ents {
		comm, err := os.ReadFile(filepath.Join("/proc/self/task", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue
		}
		s.workers++
		st, _ := os.ReadFile(filepath.Join("/proc/self/task", e.Name(), "status"))
		for _, ln := range strings.Split(string(st), "\n") {
			if k, v, ok := strings.Cut(ln, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				s.runs += n
			}
		}
	}
	return s
}
