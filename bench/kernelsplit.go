package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Issue 13 asks the report to split the broker's kernel CPU between its
// causes (copies, TCP, the page cache), so that a saving can be traced to
// where it came from. stime says how much; sampling the broker's kernel
// stacks during the same measured run says where: `perf record -e
// cpu-clock:k -g --kernel-callchains -p <broker>`, every thread, kernel
// samples only, each with its kernel call chain. Each sample goes to one
// cause (kernelCauseOf), and a cause's seconds are its share of the samples
// times the run's stime.

// kernelCause is where a kernel sample of the broker was spent.
type kernelCause int

const (
	// causeCopy: copying bytes between user memory, socket buffers and
	// the page cache, or zeroing pages (the sample's own function is a
	// copy or clear, whoever called it).
	causeCopy kernelCause = iota
	// causeNet: TCP, IP and sockets, loopback's delivery in the softirq
	// included (over loopback the broker's sends run the receiver's
	// side of TCP too).
	causeNet
	// causePageCache: the page cache and the file system (ext4, iomap,
	// sendfile's splice from the page cache, readahead).
	causePageCache
	// causeBlock: the block layer and the disk's driver (virtio's
	// notification of the device is a write the hypervisor traps).
	causeBlock
	// causeIOUring: io_uring's own work (submission, completion, its
	// task work) below which no other cause was found.
	causeIOUring
	// causeSched: sleeping, waking and switching threads (futex,
	// io_uring's wait for completions, nanosleep).
	causeSched
	// causeMemory: page faults, page and slab allocation, page pinning.
	causeMemory
	// causeOther: the rest (system call entry and exit, interrupts,
	// timers, signals).
	causeOther
	kernelCauses
)

// kernelCauseNames are the causes' names in the report's table.
var kernelCauseNames = [kernelCauses]string{
	causeCopy: "copies", causeNet: "TCP/IP, sockets", causePageCache: "page cache, file system",
	causeBlock: "block layer, disk driver", causeIOUring: "io_uring", causeSched: "scheduler, wake-ups",
	causeMemory: "memory (faults, allocation)", causeOther: "other",
}

// kernelCauseKeys are the causes' keys in results.json.
var kernelCauseKeys = [kernelCauses]string{
	causeCopy: "copies", causeNet: "net", causePageCache: "page_cache", causeBlock: "block",
	causeIOUring: "io_uring", causeSched: "sched", causeMemory: "memory", causeOther: "other",
}

// copyFuncs are the kernel's copy and clear functions: a sample in one of
// them is a copy, whoever called it.
var copyFuncs = prefixes("_copy_to_iter", "_copy_from_iter", "copy_user", "rep_movs", "rep_stos", "memcpy", "__memcpy",
	"memmove", "__memmove", "memset", "__memset", "copy_page", "copy_folio", "clear_page", "clear_user", "__copy_",
	"copy_to_user", "copy_from_user", "csum_partial_copy")

// causeFuncs name, for the causes found by walking a stack up from the
// sampled function, the functions that are theirs: the first frame that
// is one of them gives the sample's cause. Generic helpers (locks, slab
// frees) are in none, so they count for the subsystem that called them.
var causeFuncs = []struct {
	cause kernelCause
	funcs funcSet
}{
	{causeSched, prefixes("schedule", "__schedule", "finish_task_switch", "try_to_wake_up", "__wake_up", "wake_up",
		"futex_", "__futex", "do_futex", "__x64_sys_futex", "ttwu_", "enqueue_task", "dequeue_task", "pick_next",
		"select_task_rq", "sched_", "do_sched_yield", "io_cqring_wait", "do_nanosleep", "hrtimer_nanosleep")},
	{causeNet, prefixes("tcp_", "__tcp_", "ip_", "__ip_", "inet_", "__inet_", "sock_", "__sock_", "sk_", "__sk_", "skb_",
		"__skb_", "kfree_skb", "consume_skb", "__kfree_skb", "net_rx_action", "__netif_", "netif_", "napi_", "__napi_",
		"process_backlog", "__dev_queue_xmit", "dev_hard_start_xmit", "loopback_xmit", "__sys_sendmsg", "__sys_recvmsg",
		"____sys_sendmsg", "____sys_recvmsg", "release_sock", "lock_sock")},
	{causePageCache, prefixes("filemap_", "__filemap_", "folio_", "__folio_", "page_cache_", "ext4_", "__ext4_", "iomap_",
		"__iomap_", "jbd2_", "generic_perform_write", "generic_file_", "xas_", "find_get_", "mark_buffer", "splice_",
		"do_splice", "direct_splice_actor", "__splice", "vfs_", "do_sendfile", "force_page_cache_ra", "read_pages",
		"generic_fadvise", "ksys_fadvise")},
	{causeBlock, prefixes("blk_", "__blk_", "bio_", "__bio_", "submit_bio", "__submit_bio", "virtio", "vring_", "virtqueue_",
		"vp_notify", "iowrite16", "iowrite32", "nvme_", "scsi_", "dd_", "__dd_", "blkdev_")},
	{causeIOUring, prefixes("io_", "__io_", "__do_sys_io_uring_", "__x64_sys_io_uring_", "tctx_")},
}

// memoryFuncs are the memory management's functions: a stack with one of
// them and none of causeFuncs' is memory's.
var memoryFuncs = prefixes("handle_mm_fault", "__handle_mm_fault", "do_anonymous_page", "exc_page_fault",
	"do_user_addr_fault", "alloc_pages", "__alloc_pages", "__alloc_frozen", "get_page_from_freelist", "kmem_cache_",
	"__kmem_cache", "kmalloc", "__kmalloc", "kfree", "__free_pages", "__free_frozen_pages", "free_unref", "gup_",
	"pin_user_pages", "__gup", "folio_alloc", "__rmqueue", "rmqueue", "free_pcppages_bulk", "page_frag", "__page_frag",
	"do_madvise", "unmap_", "zap_", "tlb_")

// funcSet matches a kernel function name by its prefixes.
type funcSet []string

func prefixes(p ...string) funcSet { return p }

func (s funcSet) has(name string) bool {
	for _, p := range s {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// kernelCauseOf is the cause of a kernel sample whose stack is frames,
// the sampled function first.
func kernelCauseOf(frames []string) kernelCause {
	if len(frames) == 0 {
		return causeOther
	}
	if copyFuncs.has(frames[0]) {
		return causeCopy
	}
	memory := false
	for _, f := range frames {
		for _, c := range causeFuncs {
			if c.funcs.has(f) {
				return c.cause
			}
		}
		memory = memory || memoryFuncs.has(f)
	}
	if memory {
		return causeMemory
	}
	return causeOther
}

// kernelSplit counts a run's kernel samples by cause.
type kernelSplit [kernelCauses]float64

// total is the number of samples.
func (k *kernelSplit) total() float64 {
	var n float64
	for _, v := range k {
		n += v
	}
	return n
}

// parsePerfScript reads `perf script -F ip,sym` output: one block of
// frames ("<address> <function>+<offset>", the sampled one first) per
// sample, blocks apart by blank lines. Frames of user space (addresses
// below the kernel's half) end a block's kernel stack.
func parsePerfScript(r io.Reader) (kernelSplit, error) {
	var k kernelSplit
	var frames []string
	user := false
	flush := func() {
		if len(frames) > 0 {
			k[kernelCauseOf(frames)]++
		}
		frames, user = frames[:0], false
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" {
			flush()
			continue
		}
		addr, sym, ok := strings.Cut(l, " ")
		if !ok || user {
			continue
		}
		a, err := strconv.ParseUint(addr, 16, 64)
		if err != nil {
			continue // a sample's header line (perf script's -F asked for none)
		}
		if a < 1<<63 {
			user = true
			continue
		}
		sym, _, _ = strings.Cut(strings.TrimSpace(sym), " ")
		sym, _, _ = strings.Cut(sym, "+")
		frames = append(frames, sym)
	}
	flush()
	return k, sc.Err()
}

// kernelProfiler samples the broker's kernel stacks over one measured
// stretch, beside the system call counter and under the same rules: no
// perf, or no right to trace, and the split is absent.
type kernelProfiler struct {
	cmd  *exec.Cmd
	ctl  *os.File // perf's control pipe (startPerf)
	file string
}

// kernelSampleHz is the sampling rate: a few thousand samples in a run of
// the suite. Their cost is charged to the broker as kernel time, the same
// on every path; measured against a kernel-bound process (dd from
// /dev/zero to /dev/null, five pairs alternating), it was below this
// machine kind's run-to-run spread.
const kernelSampleHz = 999

// startKernelProfiler starts perf record on pid and returns once it has
// attached (startPerf), or without a profile when it could not.
func startKernelProfiler(ctx context.Context, pid int) *kernelProfiler {
	k := &kernelProfiler{}
	path, err := exec.LookPath("perf")
	if err != nil {
		return k
	}
	f, err := os.CreateTemp("", "ringlog-bench-kernel-*.data")
	if err != nil {
		return k
	}
	f.Close()
	k.file = f.Name()
	k.cmd, k.ctl, err = startPerf(ctx, path, []string{"record", "-q", "-e", "cpu-clock:k", "-F", strconv.Itoa(kernelSampleHz), "-g",
		"--kernel-callchains", "-o", k.file, "-p", strconv.Itoa(pid)}, io.Discard, io.Discard)
	if err != nil {
		k.cmd = nil
		os.Remove(k.file)
	}
	return k
}

// stop ends perf record (SIGINT makes it write its file) and reads the
// samples back with perf script.
func (k *kernelProfiler) stop(ctx context.Context) (kernelSplit, bool) {
	if k.cmd == nil {
		return kernelSplit{}, false
	}
	defer os.Remove(k.file)
	ended := interrupt(k.cmd, 10*time.Second)
	k.ctl.Close()
	if !ended {
		return kernelSplit{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	script := exec.CommandContext(ctx, k.cmd.Path, "script", "-i", k.file, "-F", "ip,sym")
	var out bytes.Buffer
	script.Stdout, script.Stderr = &out, io.Discard
	if err := script.Run(); err != nil {
		return kernelSplit{}, false
	}
	split, err := parsePerfScript(&out)
	if err != nil || split.total() == 0 {
		return kernelSplit{}, false
	}
	return split, true
}

// metricKernelCause is the broker's kernel CPU of cause c in a run, in
// seconds: its share of the run's kernel samples times stime.
func metricKernelCause(c kernelCause) metric {
	return func(s sample) (float64, bool) {
		n := s.kernel.total()
		if !s.kernelOK || !s.cpuOK || n == 0 {
			return 0, false
		}
		return s.cpuSys.Seconds() * s.kernel[c] / n, true
	}
}

// metricKernelSamples is the number of kernel samples of a run.
var metricKernelSamples = func(s sample) (float64, bool) { return s.kernel.total(), s.kernelOK }

// writeKernelSplit prints the kernel CPU of each network path by cause, in
// the tables of writeNetPaths.
func (s *suite) writeKernelSplit(w io.Writer) {
	fmt.Fprint(w, "**The kernel's share by cause.** ")
	fmt.Fprintf(w, "Where the broker's kernel time went, in the same runs: `perf record -e cpu-clock:k -F %d -g "+
		"--kernel-callchains -p <broker>` samples every thread's kernel stacks while the load runs, and each sample "+
		"counts for one cause: a copy or clear function sampled is a copy whoever called it (the socket's receive, a "+
		"write into the page cache, the staging of a direct write is user space's); otherwise the first function up "+
		"the stack that belongs to the scheduler (sleeps, wake-ups, switches), TCP/IP and sockets (loopback's delivery "+
		"to the other end in the softirq included), the page cache and file system (ext4, iomap, sendfile's splice), "+
		"the block layer and disk driver, or io_uring's own work; memory (faults, allocation, pinning) when only its "+
		"functions are found; other (system call entry and exit, interrupts, timers) for the rest. Seconds are a "+
		"cause's share of the run's samples times its kernel CPU (stime), so each row adds up to the kernel column "+
		"above. Work the kernel does for the broker in threads of its own is in neither: the page cache's writeback "+
		"(the portable path's disk writes, by the flusher's kworkers) and the conversion of a direct write's blocks "+
		"at its completion (a kworker); io_uring's io-wq workers are the broker's threads, and are. Sampling's own "+
		"cost is the broker's kernel time too, the same on every path (below this machine kind's run-to-run spread "+
		"when measured against a kernel-bound process).\n\n",
		kernelSampleHz)
	header := "| measurement | peer | samples |"
	rule := "|---|---|--:|"
	for _, name := range kernelCauseNames {
		header += " " + name + " (s) |"
		rule += "--:|"
	}
	fmt.Fprint(w, header+"\n"+rule+"\n")
	cols := []column{{"", metricKernelSamples, fmtCount}}
	for c := range kernelCauses {
		cols = append(cols, column{"", metricKernelCause(c), fmtSeconds})
	}
	s.writeNetPathRows(w, cols)
	fmt.Fprint(w, "\nA \"—\" means perf was not there, could not attach, or took no kernel sample of the broker.\n\n")
}

// kernelByCause is a run's kernel seconds by cause for results.json, nil
// where the run has no split.
func kernelByCause(smp sample) map[string]float64 {
	var m map[string]float64
	for c := range kernelCauses {
		if v, ok := metricKernelCause(c)(smp); ok {
			if m == nil {
				m = map[string]float64{}
			}
			m[kernelCauseKeys[c]] = v
		}
	}
	return m
}
