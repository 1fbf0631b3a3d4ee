package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKernelSplitOfPerfScript reads kernel stacks perf recorded of a
// broker on this machine kind (`perf record -e cpu-clock:k -g` of
// `ringlog -io uring -net uring` under two kgo producers, `perf script -F
// ip,sym`, one sample of each kind kept) and checks the cause each is
// given.
func TestKernelSplitOfPerfScript(t *testing.T) {
	f, err := os.Open("testdata/perf-script-kernel.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := parsePerfScript(f)
	if err != nil {
		t.Fatal(err)
	}
	want := kernelSplit{
		// _copy_to_iter under tcp_recvmsg, and clear_page_erms under a
		// page fault taken in a copy to user space.
		causeCopy: 2,
		// tcp_data_queue in the softirq, and a spin unlock under
		// tcp_write_xmit.
		causeNet: 2,
		// ext4's block allocation under fallocate, and a lookup of the
		// extent tree's block (ext4 mapping an io-wq worker's direct
		// write).
		causePageCache: 2,
		// a slab allocation for a bio in an io-wq worker's direct write,
		// and virtio's notification of the disk.
		causeBlock: 2,
		// __io_issue_sqe and io_submit_sqes themselves.
		causeIOUring: 2,
		// finish_task_switch under nanosleep.
		causeSched: 1,
		// irqentry_exit_to_user_mode, twice (the second sample goes on
		// into user space, whose frames are not the kernel's).
		causeOther: 2,
	}
	if got != want {
		for c := range kernelCauses {
			if got[c] != want[c] {
				t.Errorf("%s: %v samples, want %v", kernelCauseNames[c], got[c], want[c])
			}
		}
	}
}

// TestKernelCauseOf checks the rules the real stacks above do not reach:
// memory when only its functions are found, the first cause up the stack
// winning over one further up, a copy only when it is the sampled
// function.
func TestKernelCauseOf(t *testing.T) {
	for _, c := range []struct {
		stack string
		want  kernelCause
	}{
		{"do_anonymous_page __handle_mm_fault handle_mm_fault exc_page_fault asm_exc_page_fault", causeMemory},
		{"try_to_wake_up sock_def_readable tcp_data_queue", causeSched},
		{"tcp_sendmsg_locked tcp_sendmsg io_send io_issue_sqe", causeNet},
		{"memcpy_orig filemap_read", causeCopy},
		{"filemap_read memcpy_orig", causePageCache},
		{"iowrite16 vp_notify virtqueue_notify blk_mq_flush_plug_list io_submit_sqes", causeBlock},
		{"entry_SYSCALL_64_after_hwframe", causeOther},
		{"", causeOther},
	} {
		if got := kernelCauseOf(strings.Fields(c.stack)); got != c.want {
			t.Errorf("%q: %s, want %s", c.stack, kernelCauseNames[got], kernelCauseNames[c.want])
		}
	}
}

// TestPerfCountsFromItsReturn: startPerf returns once perf has attached
// with its events enabled, so the system calls this process makes right
// after it are counted (a perf whose events stayed disabled, or that
// attached late, counts none or few of them); and perf record started the
// same way records kernel samples of a busy stretch.
func TestPerfCountsFromItsReturn(t *testing.T) {
	path, err := exec.LookPath("perf")
	if err != nil {
		t.Fatalf("perf is needed (scripts/test.sh installs linux-perf): %v", err)
	}
	ctx := context.Background()
	c := startSyscallCounter(ctx, os.Getpid())
	if c.err != nil {
		t.Fatal(c.err)
	}
	const calls = 2000
	for range calls {
		syscall.Getppid()
	}
	n, ok := c.stop()
	if !ok || n < calls {
		t.Fatalf("perf stat counted %v system calls (ok %v) of at least %d made after it started:\n%s", n, ok, calls, c.out.String())
	}

	k := startKernelProfiler(ctx, os.Getpid())
	if k.cmd == nil {
		t.Fatalf("perf record (%s) did not start", path)
	}
	// A quarter of a second of kernel work: reading /dev/zero.
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	buf := make([]byte, 1<<20)
	for end := time.Now().Add(250 * time.Millisecond); time.Now().Before(end); {
		zero.Read(buf)
	}
	split, ok := k.stop(ctx)
	if !ok || split.total() == 0 {
		t.Fatalf("perf record took no kernel samples of 250 ms of reads from /dev/zero: %v", split)
	}
}
