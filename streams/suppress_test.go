package streams

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// keyFor returns a key of the form prefix-N that the default partitioner
// sends to partition p of a topic of n partitions.
func keyFor(topic, prefix string, p, n int) string {
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		if part.Partition(&kgo.Record{Key: []byte(k)}, n) == p {
			return k
		}
	}
}

// TestSuppressedWindowCountEmitsOnce: a tumbling count (5 s windows,
// grace 2 s) suppressed until its windows close, exactly once, on two
// partitions. The input comes in two phases with the instance killed
// between them (nothing committed or flushed) and started again with its
// state directory wiped, so that the suppression buffer of the windows
// still open comes back from its changelog alone; phase two only touches
// later windows, and a record far ahead on each partition closes them
// all. A read_committed consumer of the output sees each window of the
// reference exactly once, with its final count, and no window still
// open. The count store purges the closed windows (retention size +
// grace), with tombstones in its changelog.
func TestSuppressedWindowCountEmitsOnce(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "events", 2, nil)
		createTopic(t, addr, "final-counts", 2, nil)
		w := TimeWindows{Size: 5 * time.Second, Grace: 2 * time.Second}
		base := int64(1_700_000_000_000) / 5000 * 5000
		keys := []string{"a", "b", "c", "d"}
		// Seconds after base, out of order within the grace. Phase one
		// ends near 28 s (stream time is per partition): the earlier
		// windows have closed, the last ones are open and never written
		// again.
		phase1 := []int64{1, 3, 0, 6, 4, 9, 12, 11, 16, 14, 21, 19, 18, 24, 26, 23, 28, 25}
		phase2 := []int64{31, 30, 36, 34, 41, 39, 47, 45, 52}
		rec := func(i int, s int64) *kgo.Record {
			return &kgo.Record{Topic: "events", Key: []byte(keys[i%len(keys)]), Value: []byte("x"), Timestamp: time.UnixMilli(base + s*1000)}
		}
		want := map[string]int64{}
		var rs1, rs2 []*kgo.Record
		for i, s := range phase1 {
			rs1 = append(rs1, rec(i, s))
		}
		for i, s := range phase2 {
			rs2 = append(rs2, rec(i, s))
		}
		for _, r := range append(append([]*kgo.Record(nil), rs1...), rs2...) {
			start := r.Timestamp.UnixMilli() / 5000 * 5000
			want[string(windowKey(r.Key, start))]++
		}
		var closers []*kgo.Record
		for p := range 2 {
			closers = append(closers, &kgo.Record{Topic: "events", Key: []byte(keyFor("events", "closer", p, 2)),
				Value: []byte("x"), Timestamp: time.UnixMilli(base + 3600_000)})
		}

		b := NewBuilder()
		events := Source(b, []string{"events"}, String, String)
		counts := WindowedCount(WindowedBy(GroupByKey(events), w), Named("window-counts"))
		Suppress(counts, UntilWindowCloses(), Named("final")).ToStream().To("final-counts")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		state := t.TempDir()
		cfg := Config{ApplicationID: "suppress", Brokers: []string{addr}, StateDir: state, Guarantee: ExactlyOnce, InstanceID: "one"}
		prod := newClient(t, addr)
		if err := prod.ProduceSync(context.Background(), rs1...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, cfg)
		// Wait for phase one's closed windows to be emitted (committed),
		// then kill the instance and lose its local state.
		part := kgo.StickyKeyPartitioner(nil).ForTopic("events")
		streamTime := map[int]int64{}
		for _, r := range rs1 {
			p := part.Partition(r, 2)
			streamTime[p] = max(streamTime[p], r.Timestamp.UnixMilli())
		}
		closed1 := map[string]int64{}
		for _, r := range rs1 {
			if start := r.Timestamp.UnixMilli() / 5000 * 5000; start+5000+2000 <= streamTime[part.Partition(r, 2)] {
				closed1[string(windowKey(r.Key, start))] = want[string(windowKey(r.Key, start))]
			}
		}
		if len(closed1) == 0 || len(closed1) == len(want) {
			t.Fatalf("phase one closes %d windows of %d: want some, not all", len(closed1), len(want))
		}
		readCounts(t, addr, "final-counts", closed1, kgo.ReadCommitted(), 15*time.Second)
		time.Sleep(300 * time.Millisecond)
		a.kill()
		if err := removeAll(state); err != nil {
			t.Fatal(err)
		}
		a = startApp(t, topo, cfg)
		if err := prod.ProduceSync(context.Background(), append(rs2, closers...)...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		got := readCounts(t, addr, "final-counts", want, kgo.ReadCommitted(), 20*time.Second)
		time.Sleep(500 * time.Millisecond) // a duplicate or an open window would come after
		got = readCounts(t, addr, "final-counts", want, kgo.ReadCommitted(), 2*time.Second)
		for k, n := range want {
			if u := got[k]; len(u) != 1 || u[0] != n {
				w, _ := WindowedSerde(String, w.Size).Deserialize("", []byte(k))
				t.Errorf("window %s@%ds: emitted %v, want [%d] once", w.Key, (w.Window.Start.UnixMilli()-base)/1000, u, n)
			}
		}
		for k, u := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("window %x emitted %v: not closed or not in the input", k, u)
			}
		}

		// Retention: the closed windows are gone from the count store and
		// tombstoned in its changelog.
		q, err := Query[Windowed[string], int64](a, "window-counts")
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for k := range want {
			wk, _ := WindowedSerde(String, w.Size).Deserialize("", []byte(k))
			for {
				v, ok, err := q.Get(wk)
				if err == nil && !ok {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("window %v still in the store: %d, %v, %v", wk, v, ok, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		cl := newClient(t, addr, kgo.ConsumeTopics("suppress-window-counts-changelog"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		last := map[string][]byte{}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			done := len(last) >= len(want)
			for k := range want {
				if v, ok := last[k]; !ok || v != nil {
					done = false
				}
			}
			if done {
				break
			}
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("changelog: the closed windows' last records are not all tombstones: %d of %d seen", len(last), len(want))
			}
			fs.EachRecord(func(r *kgo.Record) { last[string(r.Key)] = r.Value })
		}
	})
}
