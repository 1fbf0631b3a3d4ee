package mirror

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
)

// chainBrokerProps keeps a broker process's start short: Kafka's 50
// partitions of __consumer_offsets and __transaction_state would be most
// of it.
const chainBrokerProps = "offsets.topic.num.partitions=4\ntransaction.state.log.num.partitions=4\ngroup.initial.rebalance.delay.ms=0\n"

// brokerProc is one single-node ringlog cluster: the binary in a process
// of its own, as in production.
type brokerProc struct {
	addr string
	cmd  *exec.Cmd
	out  *testkit.Buffer
	done chan error
}

// launch starts the binary on a free port; wait waits until it serves.
func launchBroker(t *testing.T, bin, props string) *brokerProc {
	t.Helper()
	b := &brokerProc{addr: testkit.FreeAddr(t), out: &testkit.Buffer{}, done: make(chan error, 1)}
	args := append(testbroker.NetArgs(t), "-config", props, "-listen", b.addr, "-data-dir", t.TempDir())
	b.cmd = exec.Command(bin, args...)
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	t.Cleanup(func() {
		b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// served waits until the broker says it listens on its port; false when
// it exited because another process took the port first.
func (b *brokerProc) served(t *testing.T) bool {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(b.out.String(), `msg="ringlog started" listen=`+b.addr+" ") {
		select {
		case err := <-b.done:
			b.done <- err
			if strings.Contains(b.out.String(), "address already in use") {
				return false
			}
			t.Fatalf("broker exited (%v) without serving:\n%s", err, b.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker not serving after 20 s:\n%s", b.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	testbroker.CheckNetLog(t, b.out.String())
	return true
}

// startBrokerProcs starts n single-node clusters at once (their starts
// overlap) and returns their addresses once each serves.
func startBrokerProcs(t *testing.T, bin string, n int) []string {
	t.Helper()
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte(chainBrokerProps), 0o644); err != nil {
		t.Fatal(err)
	}
	bs := make([]*brokerProc, n)
	for i := range bs {
		bs[i] = launchBroker(t, bin, props)
	}
	addrs := make([]string, n)
	for i, b := range bs {
		for attempt := 0; !b.served(t); attempt++ {
			if attempt == 2 {
				t.Fatalf("three starts found their port taken:\n%s", b.out)
			}
			b = launchBroker(t, bin, props)
		}
		addrs[i] = b.addr
	}
	return addrs
}

// mirrorProc is one `ringlog mirror` process running one flow from a
// properties file; it can be SIGKILLed and started again.
type mirrorProc struct {
	t      *testing.T
	bin    string
	config string
	name   string
	cmd    *exec.Cmd
	out    testkit.Buffer
}

func newMirrorProc(t *testing.T, bin, name string, props map[string]string) *mirrorProc {
	t.Helper()
	var sb strings.Builder
	for k, v := range props {
		fmt.Fprintf(&sb, "%s = %s\n", k, v)
	}
	m := &mirrorProc{t: t, bin: bin, name: name, config: filepath.Join(t.TempDir(), "mm2.properties")}
	if err := os.WriteFile(m.config, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if m.cmd != nil {
			m.cmd.Process.Signal(syscall.SIGTERM)
			m.cmd.Wait()
		}
	})
	return m
}

func (m *mirrorProc) start() {
	m.t.Helper()
	m.cmd = exec.Command(m.bin, "mirror", "-config", m.config, "-progress", "0")
	m.cmd.Stdout, m.cmd.Stderr = &m.out, &m.out
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
}

func (m *mirrorProc) kill() {
	m.t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		m.t.Fatal(err)
	}
	m.cmd.Wait()
	fmt.Fprintf(&m.out, "---- SIGKILL ----\n")
}

// chainSent is a record a source cluster acknowledged.
type chainSent struct {
	key, value string
	header     string
	ts         time.Time
}

// TestMirrorChain is issue 16's picture with real processes: four
// single-node ringlog clusters (A, B, agg, C), A->agg and B->agg feeding
// the aggregate, agg->C mirroring it on to C, each flow a `ringlog
// mirror` process of its own. Idempotent acks=all producers write keyed
// records with headers and timestamps to A and B while the mirror
// processes are SIGKILLed in turn and started again. C then holds, in
// agg.A.t and agg.B.t read read_committed, every record A and B
// acknowledged exactly once, in order per source partition, with its
// key, header and timestamp. Killed in a transaction, a mirror leaves it
// open; its next life fences it and resumes from the offsets the target
// committed with the records, at each of the two hops.
func TestMirrorChain(t *testing.T) {
	t.Parallel()
	bin := testkit.Binary(t)
	kills, maxRecords := 6, 6000 // per source cluster
	if testing.Short() {
		kills, maxRecords = 3, 1500
	}
	addrs := startBrokerProcs(t, bin, 4)
	clusters := map[string]string{"A": addrs[0], "B": addrs[1], "agg": addrs[2], "C": addrs[3]}
	const partitions = 3
	for _, src := range []string{"A", "B"} {
		createTopic(t, kadm.NewClient(client(t, clusters[src])), "t", partitions, nil)
	}

	mirrors := make([]*mirrorProc, 0, 3)
	for _, f := range []struct{ src, dst, topics string }{{"A", "agg", "t"}, {"B", "agg", "t"}, {"agg", "C", ".*"}} {
		name := f.src + "->" + f.dst
		mirrors = append(mirrors, newMirrorProc(t, bin, name, map[string]string{
			"clusters":                         f.src + ", " + f.dst,
			f.src + ".bootstrap.servers":       clusters[f.src],
			f.dst + ".bootstrap.servers":       clusters[f.dst],
			name + ".enabled":                  "true",
			name + ".topics":                   f.topics,
			"refresh.topics.interval.seconds":  "0.5",
			"emit.heartbeats.interval.seconds": "0.5",
			"emit.checkpoints.enabled":         "false",
		}))
	}
	for _, m := range mirrors {
		m.start()
	}

	// The producers: kgo's defaults are idempotent and acks=all. Records
	// are keyed (the key picks the partition), carry a header and a
	// timestamp of their own, and are kept per partition in the order
	// the promises run, which is their offset order.
	base := time.UnixMilli(1_700_000_000_000)
	var (
		mu    sync.Mutex
		acked = map[string]map[int32][]chainSent{"A": {}, "B": {}}
		perr  error
	)
	stop := make(chan struct{})
	var producers sync.WaitGroup
	for _, src := range []string{"A", "B"} {
		prod := client(t, clusters[src], kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond))
		producers.Go(func() {
			ctx := context.Background()
			defer func() {
				if err := prod.Flush(ctx); err != nil {
					mu.Lock()
					perr = err
					mu.Unlock()
				}
			}()
			for i := range maxRecords {
				select {
				case <-stop:
					return
				default:
				}
				s := chainSent{key: fmt.Sprintf("key-%d", i%37), value: fmt.Sprintf("%s-%d", src, i),
					header: fmt.Sprintf("h-%s-%d", src, i), ts: base.Add(time.Duration(i) * time.Millisecond)}
				r := &kgo.Record{Topic: "t", Key: []byte(s.key), Value: []byte(s.value), Timestamp: s.ts,
					Headers: []kgo.RecordHeader{{Key: "origin", Value: []byte(s.header)}}}
				prod.Produce(ctx, r, func(r *kgo.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						perr = err
						return
					}
					acked[src][r.Partition] = append(acked[src][r.Partition], s)
				})
				// About 2000 records/s: the producers write through all
				// the kills, up to maxRecords.
				if i%20 == 19 {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}

	// The kills, in turn over the three mirrors, each while the others
	// run, each after a random time of the mirror's life.
	for k := range kills {
		m := mirrors[k%len(mirrors)]
		time.Sleep(time.Duration(250+rand.IntN(400)) * time.Millisecond)
		m.kill()
		m.start()
	}
	close(stop)
	producers.Wait()
	if perr != nil {
		t.Fatalf("produce: %v", perr)
	}

	defer func() {
		if t.Failed() {
			for _, m := range mirrors {
				out := m.out.String()
				t.Logf("mirror %s, last lines:\n%s", m.name, out[max(0, len(out)-6000):])
			}
		}
	}()
	total := 0
	for _, src := range []string{"A", "B"} {
		n := 0
		for _, s := range acked[src] {
			n += len(s)
		}
		total += n
		topic := "agg." + src + ".t"
		got := readAllQuiet(t, clusters["C"], topic, n, 60*time.Second, 500*time.Millisecond)
		for p := range int32(partitions) {
			want, have := acked[src][p], got[p]
			if len(have) != len(want) {
				t.Errorf("%s/%d on C holds %d records, %s acknowledged %d", topic, p, len(have), src, len(want))
			}
			for i := range min(len(have), len(want)) {
				r, w := have[i], want[i]
				if string(r.Value) != w.value {
					t.Errorf("%s/%d at %d: %s, want %s (a duplicate, a gap or a reordering)", topic, p, i, r.Value, w.value)
					break
				}
				if string(r.Key) != w.key || !r.Timestamp.Equal(w.ts) || len(r.Headers) != 1 ||
					r.Headers[0].Key != "origin" || string(r.Headers[0].Value) != w.header {
					t.Errorf("%s/%d at %d: key %q ts %v headers %v, want %q %v origin=%s", topic, p, i, r.Key, r.Timestamp, r.Headers, w.key, w.ts, w.header)
					break
				}
			}
		}
	}
	t.Logf("%d records from A and B on C across %d SIGKILLs of the three mirrors", total, kills)
}

// readAllQuiet is readAll that then polls on for quiet: records arriving
// after the n expected ones (duplicates) are counted in too.
func readAllQuiet(t *testing.T, addr, topic string, n int, d, quiet time.Duration) map[int32][]*kgo.Record {
	t.Helper()
	cl := client(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.MetadataMaxAge(200*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out := map[int32][]*kgo.Record{}
	got := 0
	var quietEnd time.Time
	for {
		if got >= n {
			if quietEnd.IsZero() {
				quietEnd = time.Now().Add(quiet)
			}
			if time.Now().After(quietEnd) {
				return out
			}
		}
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatalf("%s: %d records after %v, want %d", topic, got, d, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			got++
		})
	}
}
