//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
)

// memlockCharged is held by the tests whose brokers run without
// CAP_IPC_LOCK, for as long as their broker runs: io_uring charges a ring's
// locked memory (and its registered buffers) to the user's count, one for
// every process of uid 0, and checks it against each process's own
// RLIMIT_MEMLOCK, so the rings of one such broker count against another's
// limit. TestStartFailsWhenALaterShardHasNoRing's first ring did not fit
// its 64 KiB while TestDirectWritesUnderMemlock's broker ran beside it.
var memlockCharged sync.Mutex

// chargeMemlockAlone holds memlockCharged until t and its cleanups (the
// broker's end among them, registered after) are done.
func chargeMemlockAlone(t *testing.T) {
	memlockCharged.Lock()
	t.Cleanup(memlockCharged.Unlock)
}

// startUnderNoFile runs the broker binary with RLIMIT_NOFILE set to n
// (soft and hard) by prlimit before it execs the broker.
func startUnderNoFile(t *testing.T, n int, args ...string) *proc {
	t.Helper()
	return startWrapped(t, []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", n, n), "--"}, args...)
}

// startWrapped runs the broker binary with args through wrap, a command
// (util-linux's prlimit, setpriv) that execs the rest of its arguments.
func startWrapped(t *testing.T, wrap []string, args ...string) *proc {
	t.Helper()
	args = append(append(wrap[1:len(wrap):len(wrap)], testkit.Binary(t)), append(testbroker.NetArgs(t), args...)...)
	p := &proc{cmd: exec.Command(wrap[0], args...), out: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s (util-linux): %v", wrap[0], err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	})
	return p
}

var limitsLineRe = regexp.MustCompile(`level=(\w+) msg="limits: open files (\d+): enough for (\d+) partitions"(.*)`)

// attr reads key=value from a log line's attributes.
func attr(t *testing.T, attrs, key string) int64 {
	t.Helper()
	m := regexp.MustCompile(` ` + key + `=(\d+)`).FindStringSubmatch(attrs)
	if m == nil {
		t.Fatalf("no %s in %q", key, attrs)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// TestStartLogsBindingLimit starts a broker holding 80 partitions under
// an open-files limit of 400: the start-up line names that limit as the
// one that binds first, with the partitions it leaves room for computed
// from what the process holds and three descriptors per segment, and
// warns because the 80 partitions take most of it.
func TestStartLogsBindingLimit(t *testing.T) {
	dir := t.TempDir()
	addr := testkit.FreeAddr(t)
	p := start(t, "-listen", addr, "-data-dir", dir)
	p.waitFor(t, "ringlog started")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const parts = 80
	res, err := kadm.NewClient(cl).CreateTopics(ctx, parts, 1, nil, "wide")
	if err == nil {
		err = res.Error()
	}
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.out.String())
	}

	// What is on disk, counted here: partition directories and segments.
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "[0-9]*.log"))
	partDirs := map[string]bool{}
	for _, l := range logs {
		partDirs[filepath.Dir(l)] = true
	}
	if len(partDirs) < parts {
		t.Fatalf("%d partition directories with segments on disk, want at least %d", len(partDirs), parts)
	}

	const nofile = 400
	p = startUnderNoFile(t, nofile, "-listen", addr, "-data-dir", dir)
	p.waitFor(t, "ringlog started")
	p.waitFor(t, `msg="limits: `)
	// The limit the broker runs under, read from the kernel.
	lim, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`Max open files\s+400\s+400`).Match(lim) {
		t.Fatalf("the broker does not run under nofile 400:\n%s", lim)
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	out := p.out.String()
	m := limitsLineRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no start-up line naming open files as the binding limit:\n%s", out)
	}
	t.Logf("%s", m[0])
	level, limit, room, attrs := m[1], m[2], m[3], m[4]
	if limit != strconv.Itoa(nofile) {
		t.Errorf("the line names open files %s, the broker runs under %d", limit, nofile)
	}
	if got := attr(t, attrs, "partitions"); got != int64(len(partDirs)) {
		t.Errorf("partitions=%d, the data directory holds %d", got, len(partDirs))
	}
	segs := attr(t, attrs, "segments")
	if segs != int64(len(logs)) {
		t.Errorf("segments=%d, the data directory holds %d", segs, len(logs))
	}
	open := attr(t, attrs, "files_open")
	if d := open - int64(len(fds)); d < -20 || d > 20 {
		t.Errorf("files_open=%d, /proc/%d/fd lists %d", open, p.cmd.Process.Pid, len(fds))
	}
	// The arithmetic: what is left after the descriptors held besides the
	// segments and those kept for connections, three per segment.
	besides := open - segs*fdsPerSegment
	perPart := float64(segs) / float64(len(partDirs))
	want := int64(float64(nofile-besides-connectionsKept) / (fdsPerSegment * perPart))
	if room != strconv.FormatInt(want, 10) {
		t.Errorf("enough for %s partitions, want %d (%d held besides %d segments, %d kept for connections)", room, want, besides, segs, connectionsKept)
	}
	if want >= parts*10/8 || level != "WARN" {
		t.Errorf("level %s for %d partitions with room for %d: want WARN", level, len(partDirs), want)
	}
	if !strings.Contains(attrs, "max_map_count_partitions=") {
		t.Errorf("the line does not say what vm.max_map_count leaves room for: %s", attrs)
	}
}

// TestStartFailsWhenALaterShardHasNoRing: the broker of four io_uring
// shards under a locked-memory limit that holds the first ring but not
// all four (CAP_IPC_LOCK dropped, so the limit applies to root too) must
// exit with an error naming the shard and the limit. It used to hang for
// ever: the shards made before the failing one were stopped through
// loops that had not started.
func TestStartFailsWhenALaterShardHasNoRing(t *testing.T) {
	t.Parallel()
	chargeMemlockAlone(t)
	// A broker that ran without CAP_IPC_LOCK just before (this test's
	// -count, TestDirectWritesUnderMemlock) may still be charged for its
	// rings: the kernel frees a ring, and gives back its locked memory, in
	// a work item after the process exits. So a first ring that does not
	// fit is tried again, for up to 5 s.
	var log string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		log = startFourShardsUnder64KiB(t)
		if !strings.Contains(log, "shard 0:") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first ring did not fit in 64 KiB, so a later shard's failure is not what ran:\n%s", log)
		}
		t.Logf("the first ring did not fit in 64 KiB (a ring of a broker before it not freed yet?): again")
	}
	if !regexp.MustCompile(`engine: shard [1-3]: .*RLIMIT_MEMLOCK`).MatchString(log) {
		t.Fatalf("the error names neither the shard nor the limit:\n%s", log)
	}
}

// startFourShardsUnder64KiB runs the broker of four io_uring shards under
// a 64 KiB locked-memory limit without CAP_IPC_LOCK and returns its output
// once it exited, failing t if it exited 0 or did not exit in 20 s.
func startFourShardsUnder64KiB(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("setpriv", "--bounding-set=-ipc_lock", "prlimit", "--memlock=65536:65536", "--",
		testkit.Binary(t), "-data-dir", t.TempDir(), "-listen", "127.0.0.1:0", "-io", "uring", "-shards", "4")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("setpriv and prlimit (util-linux): %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the broker exited 0 under a 64 KiB locked-memory limit:\n%s", out.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the broker neither started nor exited in 20 s:\n%s", out.String())
	}
	return out.String()
}

// TestDirectWritesUnderMemlock: a broker whose RLIMIT_MEMLOCK has room for
// its io_uring rings but not for one chunk of the staging arena
// (CAP_IPC_LOCK dropped, so that the limit applies to root too; 4 MiB
// against 8 MiB chunks) warns at start that the arena does not fit,
// writes directly from plain buffers only (ringlog_ioring_direct_writes_total)
// and reads back every record it acknowledged; the same broker without
// the limit writes from fixed buffers.
func TestDirectWritesUnderMemlock(t *testing.T) {
	t.Parallel()
	const limit = 4 << 20
	for _, tc := range []struct {
		name    string
		wrap    []string
		limited bool
	}{
		{"memlock 4 MiB", []string{"setpriv", "--bounding-set=-ipc_lock", "prlimit", fmt.Sprintf("--memlock=%d:%d", limit, limit), "--"}, true},
		{"CAP_IPC_LOCK", []string{"prlimit", "--"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.limited {
				chargeMemlockAlone(t)
			}
			addr, admin := testkit.FreeAddr(t), testkit.FreeAddr(t)
			p := startWrapped(t, tc.wrap, "-listen", addr, "-admin", admin, "-data-dir", t.TempDir(), "-io", "uring", "-writes", "direct", "-shards", "2")
			p.waitFor(t, "ringlog started")
			p.waitFor(t, `msg="limits: `)
			warned := strings.Contains(p.out.String(), "memlock_short=\"the direct writes' staging arena may not fit")
			if warned != tc.limited {
				t.Errorf("the start-up line warns that the arena may not fit: %v, want %v:\n%s", warned, tc.limited, p.out.String())
			}

			const n = 200
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("pinned"), kgo.AllowAutoTopicCreation(),
				kgo.ConsumeTopics("pinned"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			value := func(i int) string { return fmt.Sprintf("%d:%s", i, strings.Repeat("m", 1000)) }
			for i := range n {
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value(i))}).FirstErr(); err != nil {
					t.Fatalf("record %d: %v\n%s", i, err, p.out.String())
				}
			}
			for got := 0; got < n; {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Fatalf("%d of %d records read back", got, n)
				}
				fs.EachRecord(func(r *kgo.Record) {
					if string(r.Value) != value(got) {
						t.Fatalf("record %d: %.12q..., want %.12q...", got, r.Value, value(got))
					}
					got++
				})
			}

			url := "http://" + admin + "/metrics"
			fixed, okF := scrapeSeries(t, url, `ringlog_ioring_direct_writes_total{buffer="fixed"}`)
			plain, okP := scrapeSeries(t, url, `ringlog_ioring_direct_writes_total{buffer="plain"}`)
			if !okF || !okP {
				t.Fatalf("no ringlog_ioring_direct_writes_total series on %s", url)
			}
			t.Logf("direct writes: %v fixed, %v plain", fixed, plain)
			switch {
			case tc.limited && (fixed != 0 || plain < 1):
				t.Errorf("under a %d-byte memlock limit, %v fixed and %v plain direct writes: want only plain", limit, fixed, plain)
			case !tc.limited && fixed < 1:
				t.Errorf("with CAP_IPC_LOCK, %v fixed and %v plain direct writes: want fixed", fixed, plain)
			}
		})
	}
}
