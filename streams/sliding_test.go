package streams

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// slidingReference is the definition of Kafka's sliding windows over the
// records a task accepted (timestamps): for each record at t its left
// window [t-d, t] ([0, d] before d) and, when it holds records, its
// right window [t+1, t+1+d]; each window holds the records in it. It
// returns the timestamps per window start.
func slidingReference(accepted []int64, d int64) map[int64][]int64 {
	in := func(s int64) []int64 {
		var out []int64
		for _, ts := range accepted {
			if ts >= s && ts <= s+d {
				out = append(out, ts)
			}
		}
		slices.Sort(out)
		return out
	}
	want := map[int64][]int64{}
	for _, ts := range accepted {
		want[max(0, ts-d)] = in(max(0, ts-d))
		if r := in(ts + 1); len(r) > 0 {
			want[ts+1] = r
		}
	}
	return want
}

// slidingInput returns timestamps out of order, each either within the
// grace (every window holding it still open: t >= stream time - grace)
// or late past it (t + d < stream time - grace: dropped whole), and the
// accepted ones. A record between the two (some of its windows closed)
// is left out: its effect depends on the order of arrival, not on the
// set of records, so no order-free reference describes it.
func slidingInput(rng *rand.Rand, n int, d, grace, spread int64) (all, accepted []int64) {
	var streamTime int64 = -1 << 62
	for len(all) < n {
		ts := max(0, streamTime) + rng.Int63n(spread) - spread/2
		if ts < 0 {
			continue
		}
		st := max(streamTime, ts)
		switch {
		case ts >= st-grace:
			accepted = append(accepted, ts)
		case ts+d < st-grace:
		default:
			continue
		}
		streamTime = st
		all = append(all, ts)
	}
	return all, accepted
}

// TestSlidingPlanMatchesDefinition folds random records (out of order,
// late, early ones below d, equal timestamps) through slidingPlan with
// an aggregate that lists timestamps, and compares the windows with the
// definition.
func TestSlidingPlanMatchesDefinition(t *testing.T) {
	for seed := range int64(300) {
		rng := rand.New(rand.NewSource(seed))
		d, grace := 1+rng.Int63n(8), rng.Int63n(6)
		all, accepted := slidingInput(rng, 40, d, grace, 4*d+6)
		store := map[int64]slideWin{}
		aggs := map[int64][]int64{}
		var streamTime int64
		for _, ts := range all {
			streamTime = max(streamTime, ts)
			closeTime := streamTime - grace
			if ts+d < closeTime {
				continue
			}
			var wins []slideWin
			for s, w := range store {
				if s >= max(0, ts-2*d-1) && s <= ts+1 {
					wins = append(wins, w)
				}
			}
			slices.SortFunc(wins, func(a, b slideWin) int { return int(a.start - b.start) })
			next := map[int64][]int64{}
			for _, op := range slidingPlan(wins, ts, d, closeTime) {
				var cur []int64
				if op.base >= 0 {
					cur = slices.Clone(aggs[wins[op.base].start])
				}
				if op.add {
					cur = append(cur, ts)
				}
				next[op.start] = cur
				store[op.start] = slideWin{start: op.start, maxTs: op.maxTs}
			}
			for s, v := range next {
				slices.Sort(v)
				aggs[s] = v
			}
		}
		want := slidingReference(accepted, d)
		if fmt.Sprint(aggs) != fmt.Sprint(want) {
			t.Fatalf("seed %d, d %d, grace %d, input %v:\ngot  %v\nwant %v", seed, d, grace, all, aggs, want)
		}
	}
}

// windowedInput is out-of-order input for a windowed test over topic
// (partitions parts): n records of keys k0..k(keys-1), timestamps in
// seconds after base drawn around each partition's stream time (one in
// five far behind it), each
// either accepted whole (ok says so for its partition's stream time) or
// late. It returns the records and, per key, the accepted timestamps in
// the order written.
func windowedInput(seed int64, topic string, parts, n, keys int, base, spread int64, ok func(ts, streamTime int64) (accept, late bool)) ([]*kgo.Record, map[string][]int64, int64) {
	rng := rand.New(rand.NewSource(seed))
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	streamTime := map[int]int64{}
	accepted := map[string][]int64{}
	var rs []*kgo.Record
	var dropped int64
	for len(rs) < n {
		key := fmt.Sprintf("k%d", rng.Intn(keys))
		r := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte("x")}
		p := part.Partition(r, parts)
		st := max(streamTime[p], base)
		ts := st + (rng.Int63n(spread)-spread/3)*1000
		if rng.Intn(5) == 0 { // far behind: late, mostly
			ts = st - (spread+rng.Int63n(2*spread))*1000
		}
		accept, late := ok(ts, max(st, ts))
		if !accept && !late {
			continue
		}
		streamTime[p] = max(st, ts)
		r.Timestamp = time.UnixMilli(ts)
		rs = append(rs, r)
		if accept {
			accepted[key] = append(accepted[key], ts)
		} else {
			dropped++
		}
	}
	return rs, accepted, dropped
}

// TestSlidingWindowCount: a sliding windowed count (time difference
// 10 s, grace 3 s) over out-of-order and late events on two partitions.
// Every window written to the output (its last update) and read from the
// store equals the definition (slidingReference) over the records not
// late, and the late ones are counted as dropped.
func TestSlidingWindowCount(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "clicks", 2, nil)
		createTopic(t, addr, "sliding-out", 2, nil)
		w := SlidingWindows{TimeDifference: 10 * time.Second, Grace: 3 * time.Second}
		d, grace := w.TimeDifference.Milliseconds(), w.Grace.Milliseconds()
		base := int64(1_700_000_000_000)
		rs, accepted, dropped := windowedInput(7, "clicks", 2, 80, 3, base, 12, func(ts, st int64) (bool, bool) {
			return ts >= st-grace, ts+d < st-grace
		})
		if dropped == 0 {
			t.Fatal("the input has no late record")
		}
		want := map[string]int64{}
		var some Windowed[string]
		for key, tss := range accepted {
			for start, in := range slidingReference(tss, d) {
				want[string(windowKey([]byte(key), start))] = int64(len(in))
				some = Windowed[string]{Key: key, Window: Window{Start: time.UnixMilli(start)}}
			}
		}
		if err := newClient(t, addr).ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		b := NewBuilder()
		clicks := Source(b, []string{"clicks"}, String, String)
		WindowedCount(WindowedBy(GroupByKey(clicks), w), Named("sliding-counts"), Retention(time.Hour)).ToStream().To("sliding-out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "sliding", Brokers: []string{addr}, StateDir: t.TempDir()})
		got := readCounts(t, addr, "sliding-out", want, kgo.ReadUncommitted(), 15*time.Second)
		checkFinal(t, got, want)
		q, err := Query[Windowed[string], int64](a, "sliding-counts")
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			v, ok, err := q.Get(some)
			kb := string(windowKey([]byte(some.Key), some.Window.Start.UnixMilli()))
			if err == nil && ok && v == want[kb] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("store: %v = %d, %v, %v; want %d", some, v, ok, err, want[kb])
			}
			time.Sleep(50 * time.Millisecond)
		}
		var gotDropped int64
		for _, ts := range a.Stats().Tasks {
			gotDropped += ts.Dropped
		}
		if gotDropped != dropped {
			t.Errorf("dropped %d late records, want %d", gotDropped, dropped)
		}
	})
}
