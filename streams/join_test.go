package streams

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// producePhased writes rs in runs of one topic, waiting after each run
// until the application has processed every record so far: a task then
// sees the records of its two input topics in the order of rs, which is
// what a reference computed from rs assumes.
func producePhased(t *testing.T, cl *kgo.Client, a *App, rs []*kgo.Record) {
	t.Helper()
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && rs[j].Topic == rs[i].Topic {
			j++
		}
		if err := cl.ProduceSync(context.Background(), rs[i:j]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		waitProcessed(t, a, int64(j))
		i = j
	}
}

func waitProcessed(t *testing.T, a *App, n int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var got int64
		for _, ts := range a.Stats().Tasks {
			got += ts.Processed
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processed %d records, want %d", got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// joined is an output record as the tests compare them: its partition,
// key, value and timestamp.
type joined struct {
	P          int32
	Key, Value string
	TS         int64
}

// partOf is the partition of a key among n, as Kafka's default
// partitioner (and the application's sinks) place it.
func partOf(key string, n int) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: []byte(key)}, n))
}

// readAll reads topic's committed records from its start to its end
// offsets (taken now).
func readAll(t *testing.T, addr, topic string) []joined {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	// Read committed, control records kept: a transaction's marker may
	// be the last offset.
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	var out []joined
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d partitions not read to their end", topic, len(left))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, joined{r.Partition, string(r.Key), string(r.Value), r.Timestamp.UnixMilli()})
			}
			if r.Offset+1 >= left[r.Partition] {
				delete(left, r.Partition)
			}
		})
	}
	return out
}

// checkJoined compares the records of each partition in order: a task's
// outputs follow the order it processed its inputs in, which the
// references replay.
func checkJoined(t *testing.T, what string, got, want []joined) {
	t.Helper()
	byP := func(a, b joined) int { return int(a.P - b.P) }
	slices.SortStableFunc(got, byP)
	slices.SortStableFunc(want, byP)
	if slices.Equal(got, want) {
		return
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("%s: record %d is %+v, want %+v", what, i, got[i], want[i])
			break
		}
	}
	t.Errorf("%s: %d records, want %d", what, len(got), len(want))
	g, w := map[joined]int{}, map[joined]int{}
	for _, j := range got {
		g[j]++
	}
	for _, j := range want {
		w[j]++
	}
	n := 0
	for j, c := range g {
		if c != w[j] && n < 10 {
			t.Errorf("%s: %+v %d times, want %d", what, j, c, w[j])
			n++
		}
	}
	for j, c := range w {
		if g[j] == 0 && n < 20 {
			t.Errorf("%s: %+v missing (want %d)", what, j, c)
			n++
		}
	}
}

// joinEvent is a record of the left or right stream.
type joinEvent struct {
	left  bool
	key   string
	ts    int64
	value string
}

// joinRefStats counts what the input exercised in a reference run.
type joinRefStats struct {
	outOfOrderJoins int // joins found by a record older than the one it joined
	closedEmits     int // unmatched records emitted when their window closed
	lateEmits       int // unmatched records emitted at once (window already closed)
	expired         int // records too old to enter their window store
}

// refStreamJoin computes a stream-stream join from the events in the
// order a task processes them, by the rules Kafka Streams applies
// (KStreamKStreamJoin with the spurious-result fix, InMemoryWindowStore's
// retention), over plain slices: per partition, stream time is the
// largest timestamp seen by the join; a record joins the other side's
// retained records of its key within the window; an unmatched record of
// an outer side is emitted at once if its window ended before stream
// time, else held until stream time passes its time + After (left) or
// Before (right) + Grace, checked when a record in order arrives; a
// record enters its own store unless it is at or before that store's
// largest timestamp minus retention.
func refStreamJoin(evs []joinEvent, w JoinWindows, leftOuter, rightOuter bool) ([]joined, joinRefStats) {
	before, after, grace := w.Before.Milliseconds(), w.After.Milliseconds(), w.Grace.Milliseconds()
	ret := before + after + grace
	type rec struct {
		key   string
		ts    int64
		value string
	}
	type held struct {
		side int
		rec
	}
	type state struct {
		time  int64
		obs   [2]int64
		store [2][]rec
		held  []held
	}
	states := map[int32]*state{}
	var out []joined
	var st joinRefStats
	val := func(side int, this, other string) string {
		if side == 0 {
			return this + "+" + other
		}
		return other + "+" + this
	}
	for _, e := range evs {
		p := partOf(e.key, 2)
		s := states[p]
		if s == nil {
			s = &state{time: -1, obs: [2]int64{-1, -1}}
			states[p] = s
		}
		side := 1
		if e.left {
			side = 0
		}
		s.time = max(s.time, e.ts)
		if leftOuter && e.ts == s.time {
			// Due records go out in the outer store's order: time,
			// side, key, then arrival.
			slices.SortStableFunc(s.held, func(a, b held) int {
				if a.ts != b.ts {
					return int(a.ts - b.ts)
				}
				if a.side != b.side {
					return a.side - b.side
				}
				return strings.Compare(a.key, b.key)
			})
			var keep []held
			for _, h := range s.held {
				lb := after
				if h.side == 1 {
					lb = before
				}
				if h.ts+lb+grace < s.time {
					out = append(out, joined{p, h.key, val(h.side, h.value, "-"), h.ts})
					st.closedEmits++
				} else {
					keep = append(keep, h)
				}
			}
			s.held = keep
		}
		b, a := before, after
		if side == 1 {
			b, a = after, before
		}
		from, to := max(0, e.ts-b), max(0, e.ts+a)
		lo := max(from, s.obs[1-side]-ret+1)
		matched := false
		// The window store returns a key's records in time order, then
		// arrival.
		other := slices.Clone(s.store[1-side])
		slices.SortStableFunc(other, func(a, b rec) int { return int(a.ts - b.ts) })
		for _, r := range other {
			if r.key != e.key || r.ts < lo || r.ts > to {
				continue
			}
			matched = true
			if r.ts > e.ts {
				st.outOfOrderJoins++
			}
			s.held = slices.DeleteFunc(s.held, func(h held) bool { return h.side == 1-side && h.key == e.key && h.ts == r.ts })
			out = append(out, joined{p, e.key, val(side, e.value, r.value), max(e.ts, r.ts)})
		}
		if !matched && (side == 0 && leftOuter || side == 1 && rightOuter) {
			if to < s.time {
				out = append(out, joined{p, e.key, val(side, e.value, "-"), e.ts})
				st.lateEmits++
			} else {
				s.held = append(s.held, held{side, rec{e.key, e.ts, e.value}})
			}
		}
		s.obs[side] = max(s.obs[side], e.ts)
		if e.ts <= s.obs[side]-ret {
			st.expired++
		} else {
			s.store[side] = append(s.store[side], rec{e.key, e.ts, e.value})
		}
	}
	return out, st
}

// TestStreamStreamJoin: inner, left and outer windowed joins of two
// streams (Before 2 s, After 3 s, Grace 1 s) in one application, over
// records out of order within the windows and late past them, each
// output equal to a reference computed from the same input by
// refStreamJoin. The input must exercise joins found by the older record
// of a pair, unmatched records emitted when their window closed and at
// once when late, and records too old for their store. Half way, the
// instance is replaced by one with an empty state directory, which
// restores the join's stores from their changelogs.
func TestStreamStreamJoin(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for _, tp := range []string{"clicks", "views", "inner", "left", "outer"} {
			createTopic(t, addr, tp, 2, nil)
		}
		w := JoinWindows{Before: 2 * time.Second, After: 3 * time.Second, Grace: time.Second}
		rng := rand.New(rand.NewSource(17))
		base := int64(1_700_000_000_000)
		cursor := base
		var evs []joinEvent
		var rs []*kgo.Record
		for i := 0; len(evs) < 180; i++ {
			left := rng.Intn(2) == 0
			for range 1 + rng.Intn(3) {
				cursor += int64(rng.Intn(1200))
				ts := cursor + int64(rng.Intn(400))
				switch x := rng.Intn(100); {
				case x < 10: // late: behind the windows and the grace
					ts = cursor - 5000 - int64(rng.Intn(9000))
				case x < 30: // out of order, inside the windows
					ts = cursor - int64(rng.Intn(3500))
				}
				e := joinEvent{left: left, key: fmt.Sprintf("k%d", rng.Intn(4)), ts: ts, value: fmt.Sprintf("%c%d", "RL"[b2i(left)], len(evs))}
				evs = append(evs, e)
				topic := "views"
				if left {
					topic = "clicks"
				}
				rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(e.key), Value: []byte(e.value), Timestamp: time.UnixMilli(ts)})
			}
		}

		b := NewBuilder()
		clicks := Source(b, []string{"clicks"}, String, String)
		views := Source(b, []string{"views"}, String, String)
		show := func(v string, ok bool) string {
			if !ok {
				return "-"
			}
			return v
		}
		Join(clicks, views, w, func(_ string, l, r string) string { return l + "+" + r }, ValueSerde(String), Named("ij")).To("inner")
		LeftJoin(clicks, views, w, func(_ string, l, r string, ok bool) string { return l + "+" + show(r, ok) }, ValueSerde(String), Named("lj")).To("left")
		OuterJoin(clicks, views, w, func(_ string, l string, okL bool, r string, okR bool) string {
			return show(l, okL) + "+" + show(r, okR)
		}, ValueSerde(String), Named("oj")).To("outer")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		// Half the input, then a new instance with an empty state
		// directory: its window and outer stores come back from their
		// changelogs, and the rest of the input finds them.
		cl := newClient(t, addr)
		half := len(rs) / 2
		a := startApp(t, topo, Config{ApplicationID: "ssj", Brokers: []string{addr}, StateDir: t.TempDir()})
		producePhased(t, cl, a, rs[:half])
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		a = startApp(t, topo, Config{ApplicationID: "ssj", Brokers: []string{addr}, StateDir: t.TempDir()})
		producePhased(t, cl, a, rs[half:])
		var restored int64
		for _, ts := range a.Stats().Tasks {
			restored += ts.Restored
		}
		if restored == 0 {
			t.Error("the second instance restored nothing from the changelogs")
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}

		for _, c := range []struct {
			topic             string
			leftOuter, rOuter bool
		}{{"inner", false, false}, {"left", true, false}, {"outer", true, true}} {
			want, st := refStreamJoin(evs, w, c.leftOuter, c.rOuter)
			if st.outOfOrderJoins == 0 || st.expired == 0 || c.leftOuter && (st.closedEmits == 0 || st.lateEmits == 0) {
				t.Fatalf("%s: the input does not exercise the join: %+v", c.topic, st)
			}
			t.Logf("%s: %d results, %+v", c.topic, len(want), st)
			checkJoined(t, c.topic, readAll(t, addr, c.topic), want)
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestStreamTableJoin: a stream of orders joined with a table of prices
// (inner and left), the table updated and deleted between orders; each
// order sees the price of its key as the table held it when the order
// was processed, as a reference replaying the input says. The orders are
// also joined with a global table of product names (inner: orders of
// products without a name are dropped).
func TestStreamTableJoin(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for _, tp := range []string{"orders", "prices", "priced", "priced-left", "names", "named"} {
			createTopic(t, addr, tp, 2, nil)
		}
		// A global table of names for p0..p2, written before the start
		// (so bootstrapped before any order is processed).
		var names []*kgo.Record
		for i := range 3 {
			names = append(names, &kgo.Record{Topic: "names", Key: []byte(fmt.Sprintf("p%d", i)), Value: []byte(fmt.Sprintf("product %d", i))})
		}
		if err := newClient(t, addr).ProduceSync(context.Background(), names...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(7))
		var rs []*kgo.Record
		var inner, left, named []joined
		price := map[string]string{}
		ts := int64(1_700_000_000_000)
		for len(rs) < 80 {
			table := rng.Intn(3) == 0
			for range 1 + rng.Intn(3) {
				ts += 10
				key := fmt.Sprintf("p%d", rng.Intn(5))
				if table {
					r := &kgo.Record{Topic: "prices", Key: []byte(key), Timestamp: time.UnixMilli(ts)}
					if rng.Intn(4) == 0 {
						delete(price, key) // a tombstone
					} else {
						price[key] = fmt.Sprint(rng.Intn(1000))
						r.Value = []byte(price[key])
					}
					rs = append(rs, r)
					continue
				}
				order := fmt.Sprintf("o%d", len(rs))
				if i := key[1] - '0'; i < 3 {
					named = append(named, joined{partOf(key, 2), key, fmt.Sprintf("%s of product %d", order, i), ts})
				}
				rs = append(rs, &kgo.Record{Topic: "orders", Key: []byte(key), Value: []byte(order), Timestamp: time.UnixMilli(ts)})
				if p, ok := price[key]; ok {
					inner = append(inner, joined{partOf(key, 2), key, order + "@" + p, ts})
					left = append(left, joined{partOf(key, 2), key, order + "@" + p, ts})
				} else {
					left = append(left, joined{partOf(key, 2), key, order + "@-", ts})
				}
			}
		}
		if len(inner) == 0 || len(inner) == len(left) {
			t.Fatalf("the input does not exercise the joins: %d inner, %d left", len(inner), len(left))
		}

		b := NewBuilder()
		orders := Source(b, []string{"orders"}, String, String)
		prices := TableFrom(b, "prices", String, String, Named("prices-store"))
		JoinWithTable(orders, prices, func(_, o, p string) string { return o + "@" + p }, ValueSerde(String)).To("priced")
		LeftJoinWithTable(orders, prices, func(_, o, p string, ok bool) string {
			if !ok {
				p = "-"
			}
			return o + "@" + p
		}, ValueSerde(String)).To("priced-left")
		g := NewGlobalTable(b, "names", String, String)
		JoinWithGlobalTable(orders, g, func(k, _ string) string { return k }, func(_, o, n string) string { return o + " of " + n }, ValueSerde(String)).To("named")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "stj", Brokers: []string{addr}, StateDir: t.TempDir()})
		producePhased(t, newClient(t, addr), a, rs)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		checkJoined(t, "inner", readAll(t, addr, "priced"), inner)
		checkJoined(t, "left", readAll(t, addr, "priced-left"), left)
		checkJoined(t, "global", readAll(t, addr, "named"), named)
	})
}

// TestJoinCopartition: the two sides of a join over topics with
// different partition counts stop Start with ErrCopartition naming the
// join and each side's topics; a side repartitioned after a key change
// is given the other side's count (here 2, though its writer reads 3
// partitions), so that join starts and joins.
func TestJoinCopartition(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "two", 2, nil)
		createTopic(t, addr, "three", 3, nil)
		createTopic(t, addr, "cp-out", 1, nil)
		b := NewBuilder()
		l := Source(b, []string{"two"}, String, String)
		JoinWithTable(l, TableFrom(b, "three", String, String), func(_, a, b string) string { return a + b }, Named("bad-join"))
		topo, err := b.Build()
		if err == nil {
			var a *App
			a, err = New(topo, Config{ApplicationID: "cp", Brokers: []string{addr}, StateDir: t.TempDir()})
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err = a.Start(ctx)
				cancel()
				if err == nil {
					a.Close()
				}
			}
		}
		if !errors.Is(err, ErrCopartition) || !strings.Contains(err.Error(), "bad-join") || !strings.Contains(err.Error(), "two=2") || !strings.Contains(err.Error(), "three=3") {
			t.Errorf("join over 2 and 3 partitions: %v", err)
		}

		b = NewBuilder()
		rekeyed := SelectKey(Source(b, []string{"three"}, String, String), func(_, v string) string { return v })
		tbl := TableFrom(b, "two", String, String)
		JoinWithTable(rekeyed, tbl, func(k, v, tv string) string { return v + "@" + tv }, ValueSerde(String), Named("rk")).To("cp-out")
		topo, err = b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "cp2", Brokers: []string{addr}, StateDir: t.TempDir()})
		cl := newClient(t, addr)
		var rs []*kgo.Record
		for i := range 6 {
			rs = append(rs, &kgo.Record{Topic: "two", Key: []byte(fmt.Sprintf("x%d", i)), Value: []byte(fmt.Sprint(i))})
		}
		producePhased(t, cl, a, rs)
		rs = rs[:0]
		var want []joined
		for i := range 6 {
			ts := time.UnixMilli(1_700_000_000_000 + int64(i))
			rs = append(rs, &kgo.Record{Topic: "three", Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("x%d", i)), Timestamp: ts})
			want = append(want, joined{0, fmt.Sprintf("x%d", i), fmt.Sprintf("x%d@%d", i, i), ts.UnixMilli()})
		}
		if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		waitProcessed(t, a, 18) // 6 table records, 6 read from "three", 6 from the repartition topic
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		// Two tasks write to the one partition of cp-out: compare in key
		// order.
		got := readAll(t, addr, "cp-out")
		byKey := func(a, b joined) int { return strings.Compare(a.Key, b.Key) }
		slices.SortFunc(got, byKey)
		slices.SortFunc(want, byKey)
		checkJoined(t, "rekeyed join", got, want)
		td, err := kadm.NewClient(cl).ListTopics(context.Background(), "cp2-rk-repartition")
		if err != nil {
			t.Fatal(err)
		}
		if n := len(td["cp2-rk-repartition"].Partitions); n != 2 {
			t.Errorf("cp2-rk-repartition has %d partitions, want 2 (the table's)", n)
		}
	})
}

// TestTableTableJoin: inner, left and outer joins of two tables updated
// (and deleted from) in turn; every update of either side is forwarded
// as the change of the joined row, old and new, as a reference replaying
// the updates on two maps computes it (Kafka's KTableKTable*Join: a row
// exists when both sides do, the left does, or either does).
func TestTableTableJoin(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for _, tp := range []string{"tl", "tr", "tt-inner", "tt-left", "tt-outer"} {
			createTopic(t, addr, tp, 2, nil)
		}
		rng := rand.New(rand.NewSource(3))
		var rs []*kgo.Record
		side := [2]map[string]string{{}, {}}
		want := map[string][]joined{}
		row := func(kind string, l, r string, hasL, hasR bool) (string, bool) {
			show := func(v string, ok bool) string {
				if !ok {
					return "-"
				}
				return v
			}
			switch kind {
			case "tt-outer":
				return show(l, hasL) + "+" + show(r, hasR), hasL || hasR
			case "tt-left":
				return l + "+" + show(r, hasR), hasL
			}
			return l + "+" + r, hasL && hasR
		}
		ts := int64(1_700_000_000_000)
		for len(rs) < 80 {
			s := rng.Intn(2)
			for range 1 + rng.Intn(3) {
				ts += 10
				key := fmt.Sprintf("k%d", rng.Intn(5))
				r := &kgo.Record{Topic: []string{"tl", "tr"}[s], Key: []byte(key), Timestamp: time.UnixMilli(ts)}
				old, hadOld := side[s][key]
				if rng.Intn(4) == 0 {
					if !hadOld {
						continue // a tombstone for nothing changes nothing
					}
					delete(side[s], key)
				} else {
					r.Value = []byte(fmt.Sprintf("%c%d", "LR"[s], len(rs)))
					side[s][key] = string(r.Value)
				}
				rs = append(rs, r)
				nv, hasNew := side[s][key]
				for _, kind := range []string{"tt-inner", "tt-left", "tt-outer"} {
					o, n := [2]string{}, [2]string{}
					oh, nh := [2]bool{}, [2]bool{}
					o[s], oh[s], n[s], nh[s] = old, hadOld, nv, hasNew
					o[1-s], oh[1-s] = side[1-s][key]
					n[1-s], nh[1-s] = o[1-s], oh[1-s]
					before, okB := row(kind, o[0], o[1], oh[0], oh[1])
					after, okA := row(kind, n[0], n[1], nh[0], nh[1])
					if !okB && !okA {
						continue
					}
					if !okB {
						before = "none"
					}
					if !okA {
						after = "none"
					}
					want[kind] = append(want[kind], joined{partOf(key, 2), key, before + ">" + after, ts})
				}
			}
		}
		b := NewBuilder()
		tl := TableFrom(b, "tl", String, String)
		tr := TableFrom(b, "tr", String, String)
		show := func(v string, ok bool) string {
			if !ok {
				return "-"
			}
			return v
		}
		out := func(tbl *Table[string, string], topic string) {
			MapValues(tbl.Changes(), func(c Change[string]) string {
				o, n := c.Old, c.New
				if !c.HasOld {
					o = "none"
				}
				if !c.HasNew {
					n = "none"
				}
				return o + ">" + n
			}, ValueSerde(String)).To(topic)
		}
		out(JoinTables(tl, tr, func(_, l, r string) string { return l + "+" + r }), "tt-inner")
		out(LeftJoinTables(tl, tr, func(_, l, r string, ok bool) string { return l + "+" + show(r, ok) }), "tt-left")
		out(OuterJoinTables(tl, tr, func(_, l string, okL bool, r string, okR bool) string { return show(l, okL) + "+" + show(r, okR) }), "tt-outer")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "ttj", Brokers: []string{addr}, StateDir: t.TempDir()})
		producePhased(t, newClient(t, addr), a, rs)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"tt-inner", "tt-left", "tt-outer"} {
			checkJoined(t, kind, readAll(t, addr, kind), want[kind])
		}
	})
}

// TestStreamJoinAfterAbort: exactly once, a transaction aborted after
// the join processed records drops their store writes and kgo rewinds
// the input, so they are processed again; the join's stream time must be
// read again from its stores, or the replay sees the time of records it
// has not processed yet. Here L1 at t and L2 at t+3.5 s are processed,
// the transaction aborted, then R1 at t+1 s arrives: replayed in order,
// L1 is held (its window, t+3 s plus 1 s of grace, is still open at
// t+3.5 s) and R1 joins it; with the stale stream time, L1 would be
// emitted at once as unmatched, then joined as well.
func TestStreamJoinAfterAbort(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for _, tp := range []string{"ab-l", "ab-r", "ab-out"} {
			createTopic(t, addr, tp, 1, nil)
		}
		w := JoinWindows{Before: 2 * time.Second, After: 3 * time.Second, Grace: time.Second}
		b := NewBuilder()
		LeftJoin(Source(b, []string{"ab-l"}, String, String), Source(b, []string{"ab-r"}, String, String), w,
			func(_, l, r string, ok bool) string {
				if !ok {
					r = "-"
				}
				return l + "+" + r
			}, ValueSerde(String)).To("ab-out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "ab", Brokers: []string{addr}, StateDir: t.TempDir(),
			Guarantee: ExactlyOnce, CommitInterval: time.Minute})
		base := int64(1_700_000_000_000)
		rec := func(topic, v string, at int64) *kgo.Record {
			return &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(v), Timestamp: time.UnixMilli(base + at)}
		}
		cl := newClient(t, addr)
		producePhased(t, cl, a, []*kgo.Record{rec("ab-l", "L1", 0), rec("ab-l", "L2", 3500)})
		// Abort as commitLocked does when its transaction fails.
		a.mu.Lock()
		if !a.inTxn {
			a.mu.Unlock()
			t.Fatal("no transaction open")
		}
		// The abort fails the records still buffered: their errors must
		// not abort the next transaction too (they did: L1+R1 was never
		// committed).
		if err := a.endTxnLocked(context.Background(), kgo.TryAbort); err != nil {
			a.mu.Unlock()
			t.Fatal(err)
		}
		a.mu.Unlock()
		waitProcessed(t, a, 4) // L1 and L2 again
		producePhased(t, cl, a, []*kgo.Record{rec("ab-r", "R1", 1000)})
		waitProcessed(t, a, 5)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		got := readAll(t, addr, "ab-out")
		checkJoined(t, "after abort", got[:min(len(got), 1)], []joined{{0, "k", "L1+R1", base + 1000}})
		if len(got) != 1 {
			t.Errorf("after abort: %+v, want only L1+R1", got)
		}
	})
}

// TestJoinBuildErrors: join mistakes Build reports before anything runs:
// windows that cannot hold a record, a side without a value serde for
// its window store, a repartitioned side without serdes.
func TestJoinBuildErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		build func(b *Builder)
		want  []string
	}{
		{"negative window", func(b *Builder) {
			l, r := Source(b, []string{"a"}, String, String), Source(b, []string{"b"}, String, String)
			Join(l, r, JoinWindows{Before: -2 * time.Second, After: time.Second}, func(_, a, b string) string { return a + b })
		}, []string{"join windows", "Before+After >= 0"}},
		{"no value serde", func(b *Builder) {
			l, r := Source(b, []string{"a"}, String, String), Source(b, []string{"b"}, String, String)
			lens := MapValues(l, func(v string) int { return len(v) })
			Join(lens, r, JoinTimeDifference(time.Second, 0), func(_ string, n int, s string) string { return s })
		}, []string{"window stores need", "value serdes"}},
		{"repartition without serdes", func(b *Builder) {
			l := Map(Source(b, []string{"a"}, String, String), func(k, v string) (int64, string) { return int64(len(k)), v })
			JoinWithTable(l, TableFrom(b, "t", Int64, String), func(_ int64, a, b string) string { return a + b }, Named("j"))
		}, []string{"j", "repartition", "serdes"}},
	}
	for _, c := range cases {
		b := NewBuilder()
		c.build(b)
		_, err := b.Build()
		if !errors.Is(err, ErrTopology) {
			t.Errorf("%s: Build() = %v, want ErrTopology", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}

// TestJoinWindowStoreRetention: a join's window store deletes what its
// retention (Before+After+Grace) no longer covers, within a purge
// interval (a minute here, Kafka's smallest segment interval), logging
// the deletions to its changelog: after records 10 s apart over 150 s
// with a retention of 2 s, the store keeps the newest and nothing a
// minute past expiry, and the changelog holds a tombstone per record
// deleted.
func TestJoinWindowStoreRetention(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for _, tp := range []string{"rt-l", "rt-r"} {
			createTopic(t, addr, tp, 1, nil)
		}
		b := NewBuilder()
		Join(Source(b, []string{"rt-l"}, String, String), Source(b, []string{"rt-r"}, String, String),
			JoinTimeDifference(time.Second, 0), func(_, l, r string) string { return l + r }, Named("rt"))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "rt", Brokers: []string{addr}, StateDir: t.TempDir()})
		base := int64(1_700_000_000_000)
		var rs []*kgo.Record
		for i := range 16 {
			rs = append(rs, &kgo.Record{Topic: "rt-l", Key: []byte("k"), Value: []byte(fmt.Sprint(i)), Timestamp: time.UnixMilli(base + int64(i)*10_000)})
		}
		producePhased(t, newClient(t, addr), a, rs)
		last := base + 150_000
		var held []int64
		deadline := time.Now().Add(10 * time.Second)
		for {
			held = held[:0]
			a.tasksMu.RLock()
			for _, tk := range a.tasks {
				err := rangeStore(tk.db.db, "rt-this-join-store", func(k, _ []byte) bool {
					held = append(held, int64(binary.BigEndian.Uint64(k[len(k)-12:])))
					return true
				})
				if err != nil {
					t.Error(err)
				}
			}
			a.tasksMu.RUnlock()
			if slices.Contains(held, last) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond) // until the commit wrote the store
		}
		if !slices.Contains(held, last) {
			t.Fatalf("the store holds %v, not the newest record", held)
		}
		for _, ts := range held {
			if ts <= last-2_000-60_000 {
				t.Errorf("the store still holds %d s, expired at %d s", (ts-base)/1000, (ts-base)/1000+2)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		tombstones := 0
		for _, r := range readAll(t, addr, "rt-rt-this-join-store-changelog") {
			if r.Value == "" {
				tombstones++
			}
		}
		if tombstones != 16-len(held) {
			t.Errorf("%d tombstones in the changelog, want %d (16 records, %d held)", tombstones, 16-len(held), len(held))
		}
	})
}
