package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ringlog/engine"
	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
	"ringlog/kafka"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The consume path end to end, with franz-go's kgo producing and consuming
// over real sockets, on both I/O paths.

// e2ePaths runs fn once per I/O path: the default (io_uring and gnet where
// the machine has them) and the portable one.
func e2ePaths(t *testing.T, fn func(t *testing.T, opts brokerOpts)) {
	for _, p := range []struct {
		name string
		opts brokerOpts
	}{{"default", brokerOpts{}}, {"portable", brokerOpts{Portable: true}}} {
		t.Run(p.name, func(t *testing.T) { fn(t, p.opts) })
	}
}

func e2eCreateTopic(t testing.TB, b *testBroker, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.admin().CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// e2eValue encodes (partition, sequence) so that a consumer can check
// content and per-partition order.
func e2eValue(partition int32, seq int, size int) []byte {
	v := make([]byte, max(size, 12))
	binary.BigEndian.PutUint32(v, uint32(partition))
	binary.BigEndian.PutUint64(v[4:], uint64(seq))
	for i := 12; i < len(v); i++ {
		v[i] = byte(seq + i)
	}
	return v
}

// e2eProduce produces n records per partition with sequence numbers from
// `from`, partitions chosen explicitly, and waits for every acknowledgement.
func e2eProduce(t testing.TB, cl *kgo.Client, topic string, partitions int32, from, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	for seq := from; seq < from+n; seq++ {
		for p := range partitions {
			r := &kgo.Record{Topic: topic, Partition: p, Value: e2eValue(p, seq, size)}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err != nil {
					select {
					case errc <- fmt.Errorf("produce %s/%d: %w", r.Topic, r.Partition, err):
					default:
					}
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
}

// e2eConsumeAll polls until want records arrived, and checks that each
// partition's records come in order, with consecutive offsets from
// firstOffset and sequence numbers from firstSeq.
func e2eConsumeAll(t testing.TB, cl *kgo.Client, partitions int32, want int, firstOffset, firstSeq int64, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nextOff := make([]int64, partitions)
	nextSeq := make([]int64, partitions)
	for p := range nextOff {
		nextOff[p], nextSeq[p] = firstOffset, firstSeq
	}
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, want, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s/%d: %v", topic, p, err)
		})
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if bad != nil {
				return
			}
			p := r.Partition
			want := e2eValue(p, int(nextSeq[p]), size)
			switch {
			case r.Offset != nextOff[p]:
				bad = fmt.Errorf("partition %d: offset %d, want %d", p, r.Offset, nextOff[p])
			case string(r.Value) != string(want):
				bad = fmt.Errorf("partition %d offset %d: value %x, want %x", p, r.Offset, r.Value[:12], want[:12])
			}
			nextOff[p]++
			nextSeq[p]++
			got++
		})
		if bad != nil {
			t.Fatal(bad)
		}
	}
	if got != want {
		t.Fatalf("consumed %d records, want %d", got, want)
	}
}

// TestConsumeMatchesProduce produces 200,000 records over 8 partitions with
// an idempotent producer (kgo's default) and consumes them all back:
// content, offsets and per-partition order must match.
func TestConsumeMatchesProduce(t *testing.T) {
	total := 200_000
	if testing.Short() {
		total = 16_000
	}
	e2ePaths(t, func(t *testing.T, opts brokerOpts) {
		b := startBroker(t, opts)
		const parts = 8
		e2eCreateTopic(t, b, "many", parts, nil)
		prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
		e2eProduce(t, prod, "many", parts, 0, total/parts, 20)
		cons := b.client(kgo.ConsumeTopics("many"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		e2eConsumeAll(t, cons, parts, total, 0, 0, 20)
		// The records went out as file regions (zero-copy), not bytes
		// read into the response. With direct writes they are in no page
		// cache: the tail cache's memory serves them (segment/tail.go),
		// as bytes.
		st := b.Net.Stats()
		t.Logf("%s: %d records; fetched region bytes: %d by sendfile, %d copied", b.Net.IO(), total, st.SendfileBytes, st.CopiedBytes)
		if b.Engine.Writes() != string(engine.WritesBuffered) {
			return
		}
		if st.SendfileBytes+st.CopiedBytes < int64(total)*2 {
			t.Errorf("only %d bytes of file regions sent for %d records", st.SendfileBytes+st.CopiedBytes, total)
		}
		if runtime.GOOS == "linux" && st.SendfileBytes == 0 {
			t.Errorf("no byte sent with sendfile on Linux")
		}
	})
}

// TestLongPollWakesOnAppend has a consumer wait on an empty partition with a
// long max_wait_ms; a record produced later must reach it before the wait
// expires (an append wakes the fetch), and the idle consumer must not poll
// meanwhile (one fetch parked, hardly any requests).
func TestLongPollWakesOnAppend(t *testing.T) {
	e2ePaths(t, func(t *testing.T, opts brokerOpts) {
		b := startBroker(t, opts)
		e2eCreateTopic(t, b, "idle", 1, nil)
		const maxWait = 20 * time.Second
		cons := b.client(kgo.ConsumeTopics("idle"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(maxWait))
		got := make(chan *kgo.Record, 1)
		polled := make(chan time.Time, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*maxWait)
			defer cancel()
			for {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					close(got)
					return
				}
				if rs := fs.Records(); len(rs) > 0 {
					polled <- time.Now()
					got <- rs[0]
					return
				}
			}
		}()
		// Wait until the consumer's fetch is parked in the broker.
		deadline := time.Now().Add(10 * time.Second)
		for kafka.LongPolls(b.Server) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the consumer's fetch never started waiting")
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Idle for a while: a long poll costs no requests.
		before := b.Net.Stats().Frames
		time.Sleep(300 * time.Millisecond)
		idleFrames := b.Net.Stats().Frames - before
		if idleFrames > 3 {
			t.Errorf("%d requests while the consumer waited on an empty partition: it is polling, not long-polling", idleFrames)
		}
		if n := kafka.LongPolls(b.Server); n != 1 {
			t.Errorf("%d fetches waiting, want 1", n)
		}
		produced := time.Now()
		prod := b.client()
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "idle", Value: []byte("wake")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		r, ok := <-got
		if !ok {
			t.Fatal("no record reached the consumer")
		}
		at := <-polled
		if string(r.Value) != "wake" {
			t.Fatalf("got %q", r.Value)
		}
		// Not a speed assertion: the record must come from the waiting
		// fetch woken by the append, not from a fetch after max_wait_ms.
		if waited := at.Sub(produced); waited >= maxWait {
			t.Fatalf("record arrived %v after the produce: the append did not wake the fetch", waited)
		}
	})
}

// TestConsumeOutOfRangeResets starts a consumer past the end and one before
// the log start (after DeleteRecords): the broker answers
// OFFSET_OUT_OF_RANGE and kgo resets per its ConsumeResetOffset policy.
func TestConsumeOutOfRangeResets(t *testing.T) {
	e2ePaths(t, func(t *testing.T, opts brokerOpts) {
		b := startBroker(t, opts)
		e2eCreateTopic(t, b, "oor", 1, nil)
		prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
		e2eProduce(t, prod, "oor", 1, 0, 100, 16)

		// Past the end, reset to the start.
		cons := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"oor": {0: kgo.NewOffset().At(1000)}}),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		e2eConsumeAll(t, cons, 1, 100, 0, 0, 16)

		// DeleteRecords moves the log start to 60; a consumer at 10 is
		// below it and resets to the new start.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		offs := kadm.Offsets{}
		offs.Add(kadm.Offset{Topic: "oor", Partition: 0, At: 60})
		dr, err := b.admin().DeleteRecords(ctx, offs)
		if err == nil {
			err = dr.Error()
		}
		if err != nil {
			t.Fatalf("delete records: %v", err)
		}
		cons2 := b.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"oor": {0: kgo.NewOffset().At(10)}}),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		e2eConsumeAll(t, cons2, 1, 40, 60, 60, 16)

		// A consumer from the start after DeleteRecords sees only what is left.
		cons3 := b.client(kgo.ConsumeTopics("oor"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		e2eConsumeAll(t, cons3, 1, 40, 60, 60, 16)
	})
}

// TestConsumeWithSmallFetchLimits consumes records larger than the
// client's fetch limits: KIP-74 hands out the first batch whole, so the
// consumer still gets everything in order.
func TestConsumeWithSmallFetchLimits(t *testing.T) {
	e2ePaths(t, func(t *testing.T, opts brokerOpts) {
		b := startBroker(t, opts)
		e2eCreateTopic(t, b, "big", 3, nil)
		prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20))
		e2eProduce(t, prod, "big", 3, 0, 20, 40_000)
		cons := b.client(kgo.ConsumeTopics("big"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxBytes(50_000), kgo.FetchMaxPartitionBytes(10_000))
		e2eConsumeAll(t, cons, 3, 60, 0, 0, 40_000)
	})
}

// ringlogProc is cmd/ringlog running as a separate process, for what only a
// real process shows: SIGKILL and SIGTERM.
type ringlogProc struct {
	t    *testing.T
	bin  string
	addr string
	dir  string
	cmd  *exec.Cmd
	out  *e2eLog
	done chan error
	// served is set once the binary has answered Kafka requests: from then
	// on a start that fails is a failure, not a binary still to come.
	served bool
}

type e2eLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *e2eLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *e2eLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs the broker and waits until it answers a metadata request; a
// broker that does not start or does not answer fails the test (it never
// skips: a broker that crashes at start must show red). The port is
// chosen free and then handed to the broker, so another process may take
// it in between: a start that fails on "address already in use" is tried
// again on a new port.
func (p *ringlogProc) start(extra ...string) {
	p.t.Helper()
	for attempt := 1; ; attempt++ {
		if p.startOnce(extra...) {
			return
		}
		if attempt == 3 {
			p.t.Fatalf("three starts found their port taken:\n%s", p.out)
		}
		p.t.Logf("port %s was taken before the broker bound it; starting again on another", p.addr)
	}
}

// startOnce is one attempt of start; false when the port was taken.
func (p *ringlogProc) startOnce(extra ...string) bool {
	t := p.t
	t.Helper()
	// A new port for every start: the gnet listener does not set
	// SO_REUSEADDR (yet), so the port of a killed broker stays taken while
	// its connections sit in TIME_WAIT.
	p.addr = testkit.FreeAddr(t)
	// The network path RINGLOG_TEST_NET asks for first: a test's own -net
	// comes later and wins.
	args := append(append(testbroker.NetArgs(t), "-listen", p.addr, "-data-dir", p.dir), extra...)
	p.cmd = exec.Command(p.bin, args...)
	p.out = &e2eLog{}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done = make(chan error, 1)
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		cancel()
		// The answer counts once this broker says it listens there: a
		// broker of another test package running alongside may hold the
		// port (then this one exits, "address already in use") and
		// answer in its place, and a broker in a cluster listens only
		// after it caught up with the metadata quorum.
		if err == nil && strings.Contains(p.out.String(), `msg="ringlog started" listen=`+p.addr+" ") {
			testbroker.CheckNetLog(t, p.out.String())
			p.served = true
			return true
		}
		select {
		case werr := <-p.done:
			p.done <- werr
			if strings.Contains(p.out.String(), "address already in use") {
				return false
			}
			t.Fatalf("cmd/ringlog %v exited (%v) without serving Kafka:\n%s", args, werr, p.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("cmd/ringlog %v does not answer a metadata request after 10 s (%v):\n%s", args, err, p.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signal sends sig and waits for the process to exit.
func (p *ringlogProc) signal(sig os.Signal) error {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.done:
		return err
	case <-time.After(60 * time.Second):
		p.t.Fatalf("broker still running 60 s after %v:\n%s", sig, p.out)
		return nil
	}
}

// logsOpened returns the counts of the engine's start-up line
// `msg="logs opened" clean=N recovered=M`: logs opened after a clean
// shutdown (no recovery scan) and logs recovered.
func (p *ringlogProc) logsOpened() (clean, recovered int) {
	p.t.Helper()
	m := regexp.MustCompile(`msg="logs opened" clean=(\d+) recovered=(\d+)`).FindStringSubmatch(p.out.String())
	if m == nil {
		p.t.Fatalf("no `logs opened clean=N recovered=M` line in the broker's log:\n%s", p.out)
	}
	clean, _ = strconv.Atoi(m[1])
	recovered, _ = strconv.Atoi(m[2])
	return clean, recovered
}

// countLogDirs counts the partition directories (topic-N) in a data
// directory.
func countLogDirs(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		i := strings.LastIndexByte(e.Name(), '-')
		if i <= 0 {
			continue
		}
		if _, err := strconv.Atoi(e.Name()[i+1:]); err == nil {
			n++
		}
	}
	return n
}

// TestDurabilityAcrossKill runs the broker binary with flush policy always
// and produces until SIGKILL: every record acknowledged before the kill must
// be there after the restart, at the offset the broker acknowledged. Then a
// SIGTERM stops it cleanly, and the next start opens every log without a
// recovery scan.
func TestDurabilityAcrossKill(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	p := &ringlogProc{t: t, bin: testkit.Binary(t), dir: t.TempDir()}
	p.start("-flush", "always")
	const topic, parts = "durable", 4

	type acked struct {
		offset int64
		value  string
	}
	var mu sync.Mutex
	ackedRecs := map[int32][]acked{}
	func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(time.Millisecond), kgo.RecordRetries(1), kgo.RequestRetries(1))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		// Produce continuously; kill the broker once enough records are
		// acknowledged, with more in flight.
		killAt := 3000
		var n int
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: []byte(fmt.Sprintf("v-%d", i))}
				cl.Produce(ctx, r, func(r *kgo.Record, err error) {
					if err != nil {
						return
					}
					mu.Lock()
					ackedRecs[r.Partition] = append(ackedRecs[r.Partition], acked{r.Offset, string(r.Value)})
					n++
					mu.Unlock()
				})
			}
		}()
		for {
			mu.Lock()
			done := n >= killAt
			mu.Unlock()
			if done {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("only %d records acknowledged", n)
			}
			time.Sleep(time.Millisecond)
		}
		p.signal(syscall.SIGKILL)
		close(stop)
		wg.Wait()
		// What is acknowledged is now fixed: the broker is gone.
		mu.Lock()
		n0 := n
		mu.Unlock()
		t.Logf("%d records acknowledged before SIGKILL", n0)
	}()

	p.start("-flush", "always")
	if _, recovered := p.logsOpened(); recovered == 0 {
		t.Errorf("after SIGKILL no log was recovered (no recovery scan ran):\n%s", p.out)
	}
	checkAcked := func() {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		have := map[int32]map[int64]string{}
		want := 0
		ends.Each(func(o kadm.ListedOffset) {
			have[o.Partition] = map[int64]string{}
			want += int(o.Offset)
		})
		for got := 0; got < want; {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("consumed %d of %d records after the restart", got, want)
			}
			fs.EachRecord(func(r *kgo.Record) {
				have[r.Partition][r.Offset] = string(r.Value)
				got++
			})
		}
		for part, rs := range ackedRecs {
			for _, a := range rs {
				if v, ok := have[part][a.offset]; !ok || v != a.value {
					t.Fatalf("partition %d offset %d: acknowledged %q, after the restart %q (present: %v)", part, a.offset, a.value, v, ok)
				}
			}
		}
	}
	checkAcked()

	// SIGTERM: a clean stop, and a start without recovery.
	if err := p.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: exit %v\n%s", err, p.out)
	}
	// Every partition directory in the data directory is a log: the
	// topic's, and __consumer_offsets's, which the coordinator creates.
	logs := countLogDirs(t, p.dir)
	if logs < parts {
		t.Fatalf("%d partition directories in %s, want at least the topic's %d", logs, p.dir, parts)
	}
	p.start("-flush", "always")
	if clean, recovered := p.logsOpened(); recovered != 0 || clean != logs {
		t.Errorf("after SIGTERM: %d logs opened clean, %d recovered; want %d and 0:\n%s", clean, recovered, logs, p.out)
	}
	checkAcked()
}

// TestConsumerAcrossRestart restarts the broker under a consumer whose
// fetch is long-polling: the graceful stop must not wait out max_wait_ms
// (StopLongPolls answers the fetch), and the consumer, reconnecting, gets
// what is produced after the restart.
func TestConsumerAcrossRestart(t *testing.T) {
	e2ePaths(t, func(t *testing.T, opts brokerOpts) {
		b := startBroker(t, opts)
		e2eCreateTopic(t, b, "restart", 1, nil)
		prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
		e2eProduce(t, prod, "restart", 1, 0, 10, 16)
		cons := b.client(kgo.ConsumeTopics("restart"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(60*time.Second))
		e2eConsumeAll(t, cons, 1, 10, 0, 0, 16)
		// The next poll parks a fetch in the broker.
		polled := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for {
				fs := cons.PollFetches(ctx)
				if ctx.Err() != nil {
					polled <- ctx.Err()
					return
				}
				if fs.NumRecords() > 0 {
					var bad error
					fs.EachRecord(func(r *kgo.Record) {
						if want := e2eValue(0, 10, 16); r.Offset != 10 || string(r.Value) != string(want) {
							bad = fmt.Errorf("after the restart: offset %d value %x", r.Offset, r.Value)
						}
					})
					polled <- bad
					return
				}
			}
		}()
		waitLongPolls(t, b, 1)
		b.Restart() // Stop fails the test if the close times out
		e2eProduce(t, prod, "restart", 1, 10, 1, 16)
		if err := <-polled; err != nil {
			t.Fatal(err)
		}
	})
}
