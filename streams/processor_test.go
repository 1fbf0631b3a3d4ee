package streams

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sumProcessor keeps each key's running sum in store "sums" and forwards
// it; with tick > 0 it also forwards ("#tick", number of keys) every tick
// of stream time, and with wall > 0 ("#wall", punctuations so far) every
// wall of wall-clock time (written to the store too).
type sumProcessor struct {
	tick, wall time.Duration
	walls      *atomic.Int64
	ctx        *ProcessorContext[string, int64]
	sums       *KeyValueStore[string, int64]
	closed     *atomic.Int64
}

func (p *sumProcessor) Init(ctx *ProcessorContext[string, int64]) error {
	p.ctx = ctx
	var err error
	if p.sums, err = GetKeyValueStore[string, int64](ctx, "sums"); err != nil {
		return err
	}
	if p.tick > 0 {
		ctx.Schedule(p.tick, StreamTimePunctuation, func(ts time.Time) {
			var n int64
			if err := p.sums.Range(func(string, int64) bool { n++; return true }); err != nil {
				panic(err)
			}
			ctx.Forward(Record[string, int64]{Key: "#tick", Value: n, Timestamp: ts})
		})
	}
	if p.wall > 0 {
		ctx.Schedule(p.wall, WallClockPunctuation, func(ts time.Time) {
			n, _, err := p.sums.Get("#wall")
			if err != nil {
				panic(err)
			}
			n++
			if err := p.sums.Put("#wall", n); err != nil {
				panic(err)
			}
			p.walls.Add(1)
			ctx.Forward(Record[string, int64]{Key: "#wall", Value: n, Timestamp: ts})
		})
	}
	return nil
}

func (p *sumProcessor) Process(r Record[string, int64]) {
	old, _, err := p.sums.Get(r.Key)
	if err != nil {
		panic(err)
	}
	if err := p.sums.Put(r.Key, old+r.Value); err != nil {
		panic(err)
	}
	p.ctx.Forward(Record[string, int64]{Key: r.Key, Value: old + r.Value, Timestamp: r.Timestamp})
}

func (p *sumProcessor) Close() {
	if p.closed != nil {
		p.closed.Add(1)
	}
}

func sumTopology(t *testing.T, in, out string, mk func() *sumProcessor) *Topology {
	t.Helper()
	b := NewBuilder()
	AddKeyValueStore(b, "sums", String, Int64)
	s := Source(b, []string{in}, String, Int64)
	Process(s, func() Processor[string, int64, string, int64] { return mk() },
		Stores("sums"), Named("summer"), KeySerde(String), ValueSerde(Int64)).To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

type outRec struct {
	key string
	val int64
	ts  int64
}

func readOut(t *testing.T, addr, topic string, n int, iso kgo.IsolationLevel, wait time.Duration) []outRec {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var got []outRec
	for len(got) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			v, err := Int64.Deserialize(topic, r.Value)
			if err != nil {
				t.Errorf("value: %v", err)
			}
			got = append(got, outRec{string(r.Key), v, r.Timestamp.UnixMilli()})
		})
	}
	return got
}

// TestProcessorStreamTimePunctuation: a processor sums each key's values
// in its store and forwards the sums, and a stream-time punctuator
// forwards the number of keys every 10 s of event time. The output (one
// partition in and out, so in order) is exactly a reference model's:
// the first record fires the punctuation, then each record whose
// timestamp carries stream time to or past the next multiple of 10 s
// fires it once, with the stream time; records behind stream time fire
// nothing.
func TestProcessorStreamTimePunctuation(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "pin", 1, nil)
		createTopic(t, addr, "pout", 1, nil)
		var closed atomic.Int64
		topo := sumTopology(t, "pin", "pout", func() *sumProcessor {
			return &sumProcessor{tick: 10 * time.Second, closed: &closed}
		})
		if d := topo.Describe(); !strings.Contains(d, "Processor: summer (stores: [sums])") {
			t.Errorf("describe:\n%s", d)
		}
		// Event times: steps of 3 s, a jump of 47 s (several intervals
		// missed: one punctuation), records late by 20 s (no stream-time
		// advance).
		base := int64(1_700_000_000_000)
		var rs []*kgo.Record
		ts := base + 1_234
		for i := range 60 {
			switch {
			case i == 25:
				ts += 47_000
			case i%7 == 3:
				ts -= 20_000
			case i%7 == 4:
				ts += 20_000
			default:
				ts += 3_000
			}
			k := fmt.Sprintf("k%d", (i*7)%5+i/20)
			v := int64(i + 1)
			vb, _ := Int64.Serialize("pin", v)
			rs = append(rs, &kgo.Record{Topic: "pin", Key: []byte(k), Value: vb, Timestamp: time.UnixMilli(ts)})
		}
		// The reference.
		var want []outRec
		sums := map[string]int64{}
		var st, next int64
		for _, r := range rs {
			v, _ := Int64.Deserialize("pin", r.Value)
			k, ts := string(r.Key), r.Timestamp.UnixMilli()
			st = max(st, ts)
			sums[k] += v
			want = append(want, outRec{k, sums[k], ts})
			if st >= next {
				want = append(want, outRec{"#tick", int64(len(sums)), st})
				next = (st/10_000 + 1) * 10_000
			}
		}
		prod := newClient(t, addr)
		if err := prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "proc-st", Brokers: []string{addr}, StateDir: t.TempDir()})
		got := readOut(t, addr, "pout", len(want), kgo.ReadUncommitted(), 30*time.Second)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("output:\n got %v\nwant %v", got, want)
		}
		var ticks int64
		for _, w := range want {
			if w.key == "#tick" {
				ticks++
			}
		}
		st0 := a.Stats()
		if len(st0.Tasks) != 1 || st0.Tasks[0].Punctuations != ticks {
			t.Errorf("stats %+v, want %d punctuations", st0.Tasks, ticks)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(a.Collector())
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var metric float64 = -1
		for _, mf := range mfs {
			if mf.GetName() == "ringlog_streams_task_punctuations_total" {
				metric = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		if int64(metric) != ticks {
			t.Errorf("ringlog_streams_task_punctuations_total %v, want %d", metric, ticks)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if closed.Load() != 1 {
			t.Errorf("Close called %d times, want 1", closed.Load())
		}
	})
}

// TestProcessorWallClockPunctuation: with no input at all and a commit
// interval far longer than the test, a 100 ms wall-clock punctuator
// fires (the poll's wait is bounded by it), exactly once inside a
// transaction: its forwards and store writes commit with the close.
func TestProcessorWallClockPunctuation(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "win", 1, nil)
		createTopic(t, addr, "wout", 1, nil)
		var walls atomic.Int64
		topo := sumTopology(t, "win", "wout", func() *sumProcessor {
			return &sumProcessor{wall: 100 * time.Millisecond, walls: &walls}
		})
		a := startApp(t, topo, Config{ApplicationID: "proc-wall", Brokers: []string{addr}, StateDir: t.TempDir(),
			Guarantee: ExactlyOnce, InstanceID: "w", CommitInterval: time.Minute})
		// The punctuator starts with the task: joining the group may
		// take seconds on a loaded machine (a suite run saw none in 8 s
		// on kfake), so the 8 s count from the task's start.
		for joined := time.Now().Add(30 * time.Second); len(a.Stats().Tasks) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(joined) {
				t.Fatal("no task after 30 s")
			}
		}
		deadline := time.Now().Add(8 * time.Second)
		for walls.Load() < 3 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		n := walls.Load()
		if n < 3 {
			t.Fatalf("%d wall-clock punctuations in 8 s with no input, interval 100 ms", n)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		n = walls.Load()
		got := readOut(t, addr, "wout", int(n), kgo.ReadCommitted(), 15*time.Second)
		if int64(len(got)) != n {
			t.Fatalf("read committed %d records, want %d: %v", len(got), n, got)
		}
		for i, r := range got {
			if r.key != "#wall" || r.val != int64(i+1) {
				t.Fatalf("record %d: %+v, want #wall %d", i, r, i+1)
			}
		}
	})
}

// TestProcessorExactlyOnceRestore: an exactly-once processor summing in
// its store is killed after it committed, and restarted with the same
// instance id and an empty state directory: its store is restored from
// the changelog and the sums go on, each update seen once by a
// read_committed consumer.
func TestProcessorExactlyOnceRestore(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "ein", 2, nil)
		createTopic(t, addr, "eout", 1, nil)
		topo := sumTopology(t, "ein", "eout", func() *sumProcessor { return &sumProcessor{} })
		cfg := func() Config {
			return Config{ApplicationID: "proc-eos", Brokers: []string{addr}, StateDir: t.TempDir(),
				Guarantee: ExactlyOnce, InstanceID: "e", CommitInterval: 300 * time.Millisecond}
		}
		prod := newClient(t, addr)
		ref := map[string][]int64{}
		produce := func(from, to int) {
			var rs []*kgo.Record
			for i := from; i < to; i++ {
				k := fmt.Sprintf("k%d", i%6)
				v := int64(i%11 + 1)
				prev := int64(0)
				if l := ref[k]; len(l) > 0 {
					prev = l[len(l)-1]
				}
				ref[k] = append(ref[k], prev+v)
				vb, _ := Int64.Serialize("ein", v)
				rs = append(rs, &kgo.Record{Topic: "ein", Key: []byte(k), Value: vb})
			}
			if err := prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		a := startApp(t, topo, cfg())
		produce(0, 60)
		// Kill only after a transaction committed: something to restore.
		if got := readOut(t, addr, "eout", 1, kgo.ReadCommitted(), 20*time.Second); len(got) == 0 {
			t.Fatal("nothing committed")
		}
		produce(60, 90)
		a.kill()
		a = startApp(t, topo, cfg())
		produce(90, 150)
		total := 0
		for _, l := range ref {
			total += len(l)
		}
		got := readOut(t, addr, "eout", total, kgo.ReadCommitted(), 30*time.Second)
		byKey := map[string][]int64{}
		for _, r := range got {
			byKey[r.key] = append(byKey[r.key], r.val)
		}
		if fmt.Sprint(byKey) != fmt.Sprint(ref) {
			t.Errorf("sums per key:\n got %v\nwant %v", byKey, ref)
		}
		var restored int64
		for _, ts := range a.Stats().Tasks {
			restored += ts.Restored
		}
		if restored == 0 {
			t.Error("the restarted instance restored nothing (fresh state directory)")
		}
	})
}

// TestProcessorTopologyErrors: unknown, unused and doubly connected
// processor stores and a nil supplier are topology errors; a store of
// other types is ErrStoreMismatch at Init.
func TestProcessorTopologyErrors(t *testing.T) {
	sup := func() Processor[string, int64, string, int64] { return &sumProcessor{} }
	for name, build := range map[string]func(b *Builder){
		"unknown store": func(b *Builder) {
			Process(Source(b, []string{"in"}, String, Int64), sup, Stores("nope"))
		},
		"unused store": func(b *Builder) {
			AddKeyValueStore(b, "sums", String, Int64)
			Process(Source(b, []string{"in"}, String, Int64), sup)
		},
		"two processors": func(b *Builder) {
			AddKeyValueStore(b, "sums", String, Int64)
			s := Source(b, []string{"in"}, String, Int64)
			Process(s, sup, Stores("sums"))
			Process(s, sup, Stores("sums"))
		},
		"nil supplier": func(b *Builder) {
			Process[string, int64, string, int64](Source(b, []string{"in"}, String, Int64), nil)
		},
		"no serdes": func(b *Builder) {
			AddKeyValueStore[string, int64](b, "sums", nil, Int64)
			Process(Source(b, []string{"in"}, String, Int64), sup, Stores("sums"))
		},
	} {
		b := NewBuilder()
		build(b)
		if _, err := b.Build(); !errors.Is(err, ErrTopology) {
			t.Errorf("%s: Build: %v, want ErrTopology", name, err)
		}
	}
	ctx := &ProcessorContext[string, int64]{node: &node{name: "p"}, stores: map[string]*storeDef{"sums": newStoreDef("sums", String, Int64)}}
	if _, err := GetKeyValueStore[string, string](ctx, "sums"); !errors.Is(err, ErrStoreMismatch) {
		t.Errorf("typed as string/string: %v, want ErrStoreMismatch", err)
	}
	if _, err := GetKeyValueStore[string, int64](ctx, "other"); !errors.Is(err, ErrUnknownStore) {
		t.Errorf("other store: %v, want ErrUnknownStore", err)
	}
}

// TestPunctuationSchedule: the stream-time schedule as Kafka's
// PunctuationSchedule (first record fires, then each crossing of the
// next multiple of the interval fires once), rewound to its committed
// state as an aborted transaction rewinds stream time, and cancelled.
func TestPunctuationSchedule(t *testing.T) {
	tk := &task{}
	var fired []int64
	cancel := tk.schedule(10*time.Second, StreamTimePunctuation, func(ts time.Time) { fired = append(fired, ts.UnixMilli()) })
	for _, st := range []int64{5_000, 9_999, 10_000, 10_500, 47_000, 49_999, 50_000} {
		tk.punctuate(StreamTimePunctuation, st)
	}
	tk.punctuate(WallClockPunctuation, 1_000_000) // another type: nothing
	if fmt.Sprint(fired) != "[5000 10000 47000 50000]" {
		t.Fatalf("fired at %v", fired)
	}
	tk.punctuationsCommitted()
	fired = nil
	tk.punctuate(StreamTimePunctuation, 61_000)
	tk.punctuate(StreamTimePunctuation, 75_000)
	tk.rewindPunctuations() // aborted: the records since the commit come again
	tk.punctuate(StreamTimePunctuation, 61_000)
	tk.punctuate(StreamTimePunctuation, 75_000)
	if fmt.Sprint(fired) != "[61000 75000 61000 75000]" {
		t.Fatalf("after the rewind, fired at %v", fired)
	}
	if tk.punctuations.Load() != 8 {
		t.Errorf("counted %d punctuations, want 8", tk.punctuations.Load())
	}
	cancel()
	fired = nil
	tk.punctuate(StreamTimePunctuation, 1_000_000)
	if len(fired) != 0 || len(tk.puncts) != 0 {
		t.Errorf("cancelled, fired at %v, %d scheduled", fired, len(tk.puncts))
	}
}
