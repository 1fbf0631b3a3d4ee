package streams

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
)

var (
	wordcountOnce sync.Once
	wordcountPath string
	wordcountErr  error
)

// wordcountBinary builds examples/wordcount once per test binary, as
// testkit.Binary builds the broker. A build that fails fails the test.
func wordcountBinary(t *testing.T) string {
	t.Helper()
	wordcountOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ringlog-wordcount")
		if err != nil {
			wordcountErr = err
			return
		}
		wordcountPath = filepath.Join(dir, "wordcount")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		out, err := exec.CommandContext(ctx, goBin, "build", "-o", wordcountPath, "ringlog/examples/wordcount").CombinedOutput()
		if err != nil {
			wordcountErr = fmt.Errorf("go build ringlog/examples/wordcount: %v\n%s", err, out)
		}
	})
	if wordcountErr != nil {
		t.Fatal(wordcountErr)
	}
	return wordcountPath
}

// wcProc is one life of a wordcount process.
type wcProc struct {
	cmd    *exec.Cmd
	out    testkit.Buffer
	exited chan struct{}
	err    error // set before exited closes
}

func startWordcount(t *testing.T, bin string, args ...string) *wcProc {
	t.Helper()
	p := &wcProc{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p
}

func (p *wcProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// sigkill kills the process with SIGKILL, as the kernel's OOM killer or a
// power cut would end it: no commit, no flush, no leave, the open
// transaction left open.
func (p *wcProc) sigkill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// TestExactlyOnceKill9: the word count of examples/wordcount, run as two
// OS processes with -eos against a ringlog broker, while the test writes
// lines; every so often one of them is SIGKILLed and started again with
// the same instance id (every third time with its state directory
// deleted), 10 times in all (4 under -short). A read_committed consumer
// of the output then sees, for each word, strictly increasing counts
// ending at n, the count of the word in the reference computed here: the
// final counts are exact and no update is repeated. The example runs
// with the record cache on (Kafka's 10 MiB), so a word's updates between
// two commits are merged and the counts skip values; with -cache 0 they
// are 1, 2, ..., n. At least once, the replays after the kills count
// words twice (TestExactlyOnceKill9 with -eos removed fails so).
func TestExactlyOnceKill9(t *testing.T) {
	t.Parallel()
	built := time.Now()
	bin := wordcountBinary(t)
	t.Logf("wordcount built in %v", time.Since(built).Round(time.Millisecond))
	cfg := testbroker.Config(t.TempDir())
	// A killed member leaves no LeaveGroup: the group notices it when its
	// session times out, which Kafka bounds below by 6 s
	// (group.min.session.timeout.ms); the instances ask for 1.5 s.
	cfg.Groups.MinSessionTimeout = 500 * time.Millisecond
	addr := testbroker.StartBroker(t, cfg).Addr
	createTopic(t, addr, "lines", 4, nil)
	createTopic(t, addr, "counts-out", 4, nil)

	kills, run := 10, 10*time.Second
	if testing.Short() {
		kills, run = 4, 5*time.Second
	}
	states := []string{t.TempDir(), t.TempDir()}
	args := func(i int) []string {
		return []string{"-brokers", addr, "-app", "kill9", "-in", "lines", "-out", "counts-out",
			"-state", states[i], "-instance", []string{"a", "b"}[i], "-eos",
			"-session-timeout", "1500ms", "-commit-interval", "100ms"}
	}
	var mu sync.Mutex
	procs := []*wcProc{startWordcount(t, bin, args(0)...), startWordcount(t, bin, args(1)...)}
	var logs []string // of the lives that ended
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range procs {
			p.sigkill()
		}
		if t.Failed() {
			for i, l := range append(logs, procs[0].out.String(), procs[1].out.String()) {
				t.Logf("wordcount life %d:\n%s", i, l)
			}
		}
	})

	// The lines go in throughout the run, in small batches; the kills
	// fall between batches, at a steady pace, alternating instances.
	prod := newClient(t, addr)
	ref := map[string]int64{}
	start := time.Now()
	killEvery := run / time.Duration(kills+1)
	nextKill := start.Add(killEvery)
	killed, batch := 0, 0
	for time.Since(start) < run || killed < kills {
		ls, rr := lines(int64(1000+batch), 20)
		produceLines(t, prod, "lines", ls)
		addRef(ref, rr)
		batch++
		if killed < kills && time.Now().After(nextKill) {
			i := killed % 2
			mu.Lock()
			p := procs[i]
			if !p.alive() {
				mu.Unlock()
				t.Fatalf("instance %d exited by itself before kill %d: %v\n%s", i, killed, p.err, p.out.String())
			}
			p.sigkill()
			logs = append(logs, p.out.String())
			if killed%3 == 2 {
				// The restart restores every store from its changelog.
				if err := os.RemoveAll(states[i]); err != nil {
					mu.Unlock()
					t.Fatal(err)
				}
			}
			procs[i] = startWordcount(t, bin, args(i)...)
			mu.Unlock()
			killed++
			nextKill = nextKill.Add(killEvery)
		}
		time.Sleep(50 * time.Millisecond)
	}
	total := int64(0)
	for _, n := range ref {
		total += n
	}
	t.Logf("%d lines (%d words) in %v, %d kills", batch*20, total, time.Since(start).Round(time.Millisecond), killed)

	got := readCountsSettled(t, addr, "counts-out", ref, 45*time.Second)
	t.Logf("output read in %v", time.Since(start).Round(time.Millisecond))
	bad := 0
	for w, n := range ref {
		u := got[w]
		for i, v := range u {
			if v <= 0 || i > 0 && v <= u[i-1] {
				t.Errorf("%s: update %d of %d is %d after %v: want strictly increasing counts up to %d, each once", w, i, len(u), v, u[max(0, i-3):i], n)
				bad++
				break
			}
		}
		if (len(u) == 0 || u[len(u)-1] != n) && bad < 5 {
			t.Errorf("%s: %d updates, the last %v: want the last %d", w, len(u), u[max(0, len(u)-3):], n)
			bad++
		}
		if bad >= 5 {
			t.Fatalf("and maybe more")
		}
	}
	for w := range got {
		if _, ok := ref[w]; !ok {
			t.Errorf("count of %q: not in the input", w)
		}
	}
	mu.Lock()
	for i, p := range procs {
		if !p.alive() {
			t.Errorf("instance %d exited by itself: %v", i, p.err)
		}
	}
	mu.Unlock()
}

// readCountsSettled reads topic read_committed from the start as
// readCounts does, and goes on once every word reached its count until
// nothing more comes for a second and a half (fifteen commit intervals):
// a repeated update after the last one is seen too.
func readCountsSettled(t *testing.T, addr, topic string, want map[string]int64, wait time.Duration) map[string][]int64 {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	got := map[string][]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var quietSince time.Time
	for {
		pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			return got
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			v, err := Int64.Deserialize(topic, r.Value)
			if err != nil {
				t.Errorf("%s: %v", topic, err)
				return
			}
			got[string(r.Key)] = append(got[string(r.Key)], v)
		})
		switch {
		case !countsReached(got, want):
			quietSince = time.Time{}
		case n > 0 || quietSince.IsZero():
			quietSince = time.Now()
		case time.Since(quietSince) > 1500*time.Millisecond:
			return got
		}
	}
}
