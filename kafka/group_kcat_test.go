package kafka_test

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// librdkafka's balanced consumer (kcat -G) against the coordinator, across
// broker restarts: a second, independent group client (C, its own
// rebalance state machine and commit logic).

// kcatGroup is a running `kcat -G` whose records arrive as "p:offset:value"
// lines.
type kcatGroup struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	stderr strings.Builder
	done   chan error
}

func startKcatGroup(t *testing.T, bin string, b *testBroker, groupID, topic string) *kcatGroup {
	t.Helper()
	// -E: carry on through non-fatal errors (all brokers down while the
	// broker restarts), as a long-running consumer does.
	cmd := exec.Command(bin, "-b", b.Addr, "-G", groupID, "-E", "-u", "-q", "-f", "%p:%o:%s\n",
		"-X", "auto.offset.reset=earliest", "-X", "auto.commit.interval.ms=100",
		"-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=300",
		"-X", "fetch.wait.max.ms=100", "-X", "reconnect.backoff.max.ms=200", topic)
	k := &kcatGroup{cmd: cmd, done: make(chan error, 1)}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &syncWriter{mu: &k.mu, b: &k.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			k.mu.Lock()
			k.lines = append(k.lines, sc.Text())
			k.mu.Unlock()
		}
		k.done <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return k
}

type syncWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (k *kcatGroup) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.lines)
}

// waitFor waits until kcat printed n lines.
func (k *kcatGroup) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for k.count() < n {
		if time.Now().After(deadline) {
			k.mu.Lock()
			defer k.mu.Unlock()
			t.Fatalf("kcat printed %d lines, want %d; stderr:\n%s", len(k.lines), n, k.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop interrupts kcat, which leaves the group after committing, and
// returns what it printed.
func (k *kcatGroup) stop(t *testing.T) []string {
	t.Helper()
	k.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-k.done:
	case <-time.After(20 * time.Second):
		t.Fatal("kcat did not stop on SIGINT")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.stderr.String(); strings.Contains(s, "ERROR") {
		t.Logf("kcat stderr:\n%s", s)
	}
	return k.lines
}

// waitCommitted waits until the group's committed offsets are want for
// every partition of topic.
func waitCommitted(t *testing.T, b *testBroker, groupID, topic string, parts int32, want int64) {
	t.Helper()
	adm := kadm.NewClient(b.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		offs, err := adm.FetchOffsets(ctx, groupID)
		if err == nil && committedAll(offs, topic, parts, want) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("committed offsets of %s: %v (%v), want %d everywhere", groupID, offs, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkKcatLines checks that lines hold each record of [from, to) of every
// partition: exactly once below again[p], at least once from there (a
// consumer re-reads what it consumed after its last commit).
func checkKcatLines(t *testing.T, lines []string, parts int32, from, to int, again map[int32]int64) {
	t.Helper()
	got := map[string]int{}
	for _, l := range lines {
		got[l]++
	}
	for p := range parts {
		for i := from; i < to; i++ {
			key := fmt.Sprintf("%d:%d:kcat-%d-%d", p, i, p, i)
			if n := got[key]; n == 0 || (n > 1 && int64(i) < again[p]) {
				t.Fatalf("record %s consumed %d times (re-reading allowed from offset %d)", key, n, again[p])
			}
			delete(got, key)
		}
	}
	if len(got) > 0 {
		t.Fatalf("unexpected records: %v", got)
	}
}

// committedNow returns the group's committed offsets for topic.
func committedNow(t *testing.T, b *testBroker, groupID, topic string) map[int32]int64 {
	t.Helper()
	offs, err := kadm.NewClient(b.client()).FetchOffsets(adminCtx(t), groupID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

func kcatGroupProduce(t *testing.T, b *testBroker, topic string, parts int32, from, to int) {
	t.Helper()
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for p := range parts {
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "kcat-%d-%d", p, i)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
}

// TestKcatGroupAcrossRestarts: kcat -G consumes and commits; a new kcat
// after a broker restart resumes at the committed offsets (nothing read
// twice, nothing lost); a kcat running while the broker restarts carries
// on once the broker is back.
func TestKcatGroupAcrossRestarts(t *testing.T) {
	bin := kcatBin(t)
	b := startBroker(t, brokerOpts{})
	const parts = 3
	topic, groupID := "kcat-group", "kcat-g"
	e2eCreateTopic(t, b, topic, parts, nil)

	kcatGroupProduce(t, b, topic, parts, 0, 200)
	k1 := startKcatGroup(t, bin, b, groupID, topic)
	k1.waitFor(t, parts*200)
	// An interrupted kcat commits what it consumed as it leaves.
	checkKcatLines(t, k1.stop(t), parts, 0, 200, nil)
	waitCommitted(t, b, groupID, topic, parts, 200)

	// The committed offsets survive the restart: a new consumer of the
	// group starts where the first one stopped, and reads nothing twice.
	b.Restart()
	kcatGroupProduce(t, b, topic, parts, 200, 300)
	k2 := startKcatGroup(t, bin, b, groupID, topic)
	k2.waitFor(t, parts*100)

	// The broker restarts under a running consumer: the group is replayed
	// with its generation and members, and the member carries on (its
	// heartbeats stay valid). Had it rebalanced, it would re-read from its
	// last commit at most.
	again := committedNow(t, b, groupID, topic)
	b.Restart()
	kcatGroupProduce(t, b, topic, parts, 300, 400)
	k2.waitFor(t, parts*200)
	// The running member commits what it consumed after the restart (its
	// auto-commit, every 5 s). Waited for before the stop: the commit kcat
	// makes as it closes races librdkafka's reconnection to a broker that
	// came back a moment ago, and is lost when kcat exits first.
	waitCommitted(t, b, groupID, topic, parts, 400)
	checkKcatLines(t, k2.stop(t), parts, 200, 400, again)
}
