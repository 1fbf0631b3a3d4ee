package streams

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// refSession is a session of the reference: [start, end], its count and
// the sum of its timestamps.
type refSession struct{ start, end, n, sum int64 }

// sessionReference applies Kafka's session rules to one key's records in
// the order written: a record joins every session within gap of it (end
// >= ts-gap, start <= ts+gap), which merge into one; it is dropped when
// the merged session ends before stream time - grace - gap. It returns
// the sessions left, every session that existed (to check that merged
// ones were removed) and the records dropped.
func sessionReference(tss, streamTimes []int64, gap, grace int64) (final []refSession, ever []refSession, dropped int64) {
	for i, ts := range tss {
		s := refSession{ts, ts, 1, ts}
		var keep []refSession
		for _, o := range final {
			if o.end >= ts-gap && o.start <= ts+gap {
				s = refSession{min(s.start, o.start), max(s.end, o.end), s.n + o.n, s.sum + o.sum}
			} else {
				keep = append(keep, o)
			}
		}
		if s.end < streamTimes[i]-grace-gap {
			dropped++
			continue
		}
		final = append(keep, s)
		ever = append(ever, s)
	}
	return final, ever, dropped
}

// TestSessionWindowCount: a session count (gap 5 s, grace 2 s) over
// out-of-order and late events on two partitions, whose records bridge
// sessions and merge them. The store holds exactly the reference's
// sessions with their counts (merged-away sessions are gone, in Kafka's
// key layout: key, end, start), the output's last update of each final
// session is its count, and the late records are counted as dropped.
// Beside the count, on the same sessions, a SessionAggregate sums the
// records' timestamps (carried in their values; the merger adds merged
// sessions' sums) and a SessionReduce keeps the latest timestamp, which
// is the session's end.
func TestSessionWindowCount(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "visits", 2, nil)
		createTopic(t, addr, "sessions-out", 2, nil)
		w := SessionWindows{Gap: 5 * time.Second, Grace: 2 * time.Second}
		gap, grace := w.Gap.Milliseconds(), w.Grace.Milliseconds()
		base := int64(1_700_000_000_000)
		// Every record is kept for the reference to judge: ok accepts
		// all, and the reference replays each partition's stream time.
		rs, _, _ := windowedInput(11, "visits", 2, 90, 3, base, 20, func(int64, int64) (bool, bool) { return true, false })
		for _, r := range rs {
			r.Value = []byte(fmt.Sprintf("%020d", r.Timestamp.UnixMilli()))
		}
		part := kgo.StickyKeyPartitioner(nil).ForTopic("visits")
		streamTime := map[int]int64{}
		tss, sts := map[string][]int64{}, map[string][]int64{}
		for _, r := range rs {
			p := part.Partition(r, 2)
			ts := r.Timestamp.UnixMilli()
			streamTime[p] = max(streamTime[p], ts)
			tss[string(r.Key)] = append(tss[string(r.Key)], ts)
			sts[string(r.Key)] = append(sts[string(r.Key)], streamTime[p])
		}
		want := map[string]int64{}
		gone := map[Windowed[string]]bool{}
		final := map[Windowed[string]]refSession{}
		var dropped, merges int64
		for key := range tss {
			fin, ever, drop := sessionReference(tss[key], sts[key], gap, grace)
			dropped += drop
			merges += int64(len(ever) - len(fin))
			for _, s := range ever {
				gone[Windowed[string]{Key: key, Window: Window{Start: time.UnixMilli(s.start), End: time.UnixMilli(s.end)}}] = true
			}
			for _, s := range fin {
				wk := Windowed[string]{Key: key, Window: Window{Start: time.UnixMilli(s.start), End: time.UnixMilli(s.end)}}
				delete(gone, wk)
				final[wk] = s
				want[string(sessionKey([]byte(key), s.end, s.start))] = s.n
			}
		}
		if dropped == 0 || merges == 0 {
			t.Fatalf("the input has %d late records and %d merged sessions: want some of each", dropped, merges)
		}
		if err := newClient(t, addr).ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		b := NewBuilder()
		visits := Source(b, []string{"visits"}, String, String)
		sessions := SessionWindowedBy(GroupByKey(visits), w)
		SessionCount(sessions, Named("session-counts"), Retention(time.Hour)).ToStream().To("sessions-out")
		SessionAggregate(sessions, func() int64 { return 0 }, func(_, v string, sum int64) int64 {
			ts, _ := strconv.ParseInt(v, 10, 64)
			return sum + ts
		}, func(_ string, a, b int64) int64 { return a + b }, Named("session-sums"), ValueSerde(Int64), Retention(time.Hour))
		SessionReduce(sessions, func(a, b string) string { return max(a, b) }, Named("session-latest"), Retention(time.Hour))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "sessions", Brokers: []string{addr}, StateDir: t.TempDir()})
		// The output also holds sessions merged away later (ToStream
		// forwards no deletes): only the final ones are checked there.
		got := readCounts(t, addr, "sessions-out", want, kgo.ReadUncommitted(), 15*time.Second)
		for k, n := range want {
			if u := got[k]; len(u) == 0 || u[len(u)-1] != n {
				t.Errorf("output of session %x: updates %v, want last %d", k, u, n)
			}
		}
		q, err := Query[Windowed[string], int64](a, "session-counts")
		if err != nil {
			t.Fatal(err)
		}
		qs, err := Query[Windowed[string], int64](a, "session-sums")
		if err != nil {
			t.Fatal(err)
		}
		ql, err := Query[Windowed[string], string](a, "session-latest")
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			var bad []string
			for wk, s := range final {
				if v, ok, err := q.Get(wk); err != nil || !ok || v != s.n {
					bad = append(bad, fmt.Sprintf("%v: %d, %v, %v; want %d", wk, v, ok, err, s.n))
				}
				if v, ok, err := qs.Get(wk); err != nil || !ok || v != s.sum {
					bad = append(bad, fmt.Sprintf("%v sum: %d, %v, %v; want %d", wk, v, ok, err, s.sum))
				}
				if v, ok, err := ql.Get(wk); err != nil || !ok || v != fmt.Sprintf("%020d", s.end) {
					bad = append(bad, fmt.Sprintf("%v latest: %s, %v, %v; want %d", wk, v, ok, err, s.end))
				}
			}
			for wk := range gone {
				if v, ok, err := q.Get(wk); err != nil || ok {
					bad = append(bad, fmt.Sprintf("%v merged away: %d, %v, %v", wk, v, ok, err))
				}
			}
			if len(bad) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("store: %v", bad)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var gotDropped int64
		for _, ts := range a.Stats().Tasks {
			gotDropped += ts.Dropped
		}
		// Each of the three aggregations drops each late record: Kafka's
		// task-level dropped-records counts once per processor too.
		if gotDropped != 3*dropped {
			t.Errorf("dropped %d late records, want 3 x %d", gotDropped, dropped)
		}
	})
}
