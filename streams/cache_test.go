package streams

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// waitWords waits until the tasks of subtopology 1 (the counting one)
// processed words records.
func waitWords(t *testing.T, a *App, words int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int64
		for _, ts := range a.Stats().Tasks {
			if strings.HasPrefix(ts.Task, "1_") {
				n += ts.Processed
			}
		}
		if n >= words {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d words processed", n, words)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func total(ref map[string]int64) (n int64) {
	for _, v := range ref {
		n += v
	}
	return n
}

// TestRecordCache: with the record cache on (KIP-63), each word, counted
// about 150 times between two commits, reaches the output topic and the
// store's changelog once per commit with its latest count; a restarted
// instance reads its counts back through the cache from its store and
// goes on from them. With a cache too small for the 40 words, evictions forward
// intermediate counts: each word's updates still only grow and end at
// the reference. With the cache off (Config's zero value) every update
// is forwarded, which TestWordCount checks.
func TestRecordCache(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 4, nil)
		createTopic(t, addr, "counts-out", 4, nil)
		cl := newClient(t, addr)
		state := t.TempDir()
		cfg := Config{ApplicationID: "wc", Brokers: []string{addr}, StateDir: state,
			CommitInterval: time.Hour, CacheMaxBytes: DefaultCacheMaxBytes}

		// Phase 1: one commit (Close), everything cached until then.
		ls1, ref1 := lines(7, 2000)
		produceLines(t, cl, "lines", ls1)
		a := startApp(t, wordCount("lines", "counts-out"), cfg)
		waitWords(t, a, total(ref1))
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		for _, topic := range []string{"counts-out", "wc-counts-changelog"} {
			got := readCounts(t, addr, topic, ref1, kgo.ReadUncommitted(), 10*time.Second)
			checkFinal(t, got, ref1)
			for w, u := range got {
				if len(u) != 1 {
					t.Errorf("%s: %s: updates %v for %d occurrences in one commit, want one", topic, w, u, ref1[w])
				}
			}
		}

		// Phase 2: a cache of a few entries (the counts store's keys are
		// 3 bytes, values 8): least recently used words are evicted,
		// written and forwarded between commits.
		ls2, ref2 := lines(8, 2000)
		produceLines(t, cl, "lines", ls2)
		ref := map[string]int64{}
		addRef(ref, ref1)
		addRef(ref, ref2)
		cfg.CacheMaxBytes = 4 * (3 + 8 + cacheEntryOverhead)
		a = startApp(t, wordCount("lines", "counts-out"), cfg)
		waitWords(t, a, total(ref2))
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		got := readCounts(t, addr, "counts-out", ref, kgo.ReadUncommitted(), 10*time.Second)
		checkFinal(t, got, ref)
		var updates, evicted int
		for w, u := range got {
			if u[0] != ref1[w] {
				t.Errorf("%s: first update %d, want %d (phase 1's)", w, u[0], ref1[w])
			}
			for i := 1; i < len(u); i++ {
				if u[i] <= u[i-1] {
					t.Errorf("%s: updates %v not strictly increasing", w, u)
					break
				}
			}
			updates += len(u) - 1
			if len(u) > 2 {
				evicted++
			}
		}
		if words := int(total(ref2)); updates >= words || evicted == 0 {
			t.Errorf("phase 2: %d updates for %d words, %d words updated more than once: want fewer updates than words, and evictions", updates, words, evicted)
		}
		checkFinal(t, readCounts(t, addr, "wc-counts-changelog", ref, kgo.ReadUncommitted(), 10*time.Second), ref)
	})
}

// TestRecordCacheExactlyOnce: exactly once, the cache is flushed into
// each transaction before it commits: a read_committed consumer sees
// each word's counts only grow, end at the reference, and fewer updates
// than words (merged between commits).
func TestRecordCacheExactlyOnce(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 4, nil)
		createTopic(t, addr, "counts-out", 4, nil)
		ls, ref := lines(9, 2000)
		produceLines(t, newClient(t, addr), "lines", ls)
		a := startApp(t, wordCount("lines", "counts-out"), Config{ApplicationID: "wc", Brokers: []string{addr},
			StateDir: t.TempDir(), Guarantee: ExactlyOnce, CommitInterval: 300 * time.Millisecond, CacheMaxBytes: DefaultCacheMaxBytes})
		got := readCounts(t, addr, "counts-out", ref, kgo.ReadCommitted(), 20*time.Second)
		checkFinal(t, got, ref)
		updates := 0
		for w, u := range got {
			updates += len(u)
			for i := 1; i < len(u); i++ {
				if u[i] <= u[i-1] {
					t.Errorf("%s: updates %v not strictly increasing", w, u)
					break
				}
			}
		}
		if words := int(total(ref)); updates >= words {
			t.Errorf("%d updates for %d words: the cache merged none", updates, words)
		}
		checkStore(t, ref, a)
	})
}

// TestWindowedCache: a tumbling count (10 s windows, no grace) with the
// record cache on, on one partition, written out as it is and suppressed
// until its windows close. Window [0,10) of "a" is flushed (2) by a
// commit; then one fetch brings b@3 (dirtied first), a@4 and c@15, which
// closes the window. The cache forwards [0,10) before stream time moves
// past its end: the suppression buffer holds a's last count when it
// emits the window, once. Flushed only at the commit (b's entry first,
// the window already closed by then), the suppression emitted a's stale
// 2 and then its 3. Unsuppressed, each window's updates are merged (fewer
// than its records) and end at its count.
func TestWindowedCache(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "wc-events", 1, nil)
		createTopic(t, addr, "wc-updates", 1, nil)
		createTopic(t, addr, "wc-final", 1, nil)
		base := int64(1_700_000_000_000) / 10_000 * 10_000
		rec := func(key string, s int64) *kgo.Record {
			return &kgo.Record{Topic: "wc-events", Key: []byte(key), Value: []byte("x"), Timestamp: time.UnixMilli(base + s*1000)}
		}
		b := NewBuilder()
		counts := WindowedCount(WindowedBy(GroupByKey(Source(b, []string{"wc-events"}, String, String)), TimeWindows{Size: 10 * time.Second}), Named("wcounts"))
		counts.ToStream().To("wc-updates")
		Suppress(counts, UntilWindowCloses(), Named("final")).ToStream().To("wc-final")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		prod := newClient(t, addr)
		produce := func(rs ...*kgo.Record) {
			t.Helper()
			if err := prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		produce(rec("a", 1), rec("a", 2))
		startApp(t, topo, Config{ApplicationID: "wcache", Brokers: []string{addr}, StateDir: t.TempDir(),
			CommitInterval: 200 * time.Millisecond, CacheMaxBytes: DefaultCacheMaxBytes})
		newKeyedInput(t, addr, "wc-events", "wcache").waitCommitted(2, 20*time.Second)
		produce(rec("b", 3), rec("a", 4), rec("c", 15))
		produce(rec("d", 35)) // closes [10,20)
		w0, w1 := base, base+10_000
		want := map[string]int64{
			string(windowKey([]byte("a"), w0)): 3,
			string(windowKey([]byte("b"), w0)): 1,
			string(windowKey([]byte("c"), w1)): 1,
		}
		readCounts(t, addr, "wc-final", want, kgo.ReadUncommitted(), 20*time.Second)
		time.Sleep(500 * time.Millisecond) // a duplicate would come after
		got := readCounts(t, addr, "wc-final", want, kgo.ReadUncommitted(), 2*time.Second)
		for k, n := range want {
			if u := got[k]; len(u) != 1 || u[0] != n {
				t.Errorf("window %q: emitted %v, want [%d] once", k, u, n)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d windows emitted, want %d: %v", len(got), len(want), got)
		}
		want[string(windowKey([]byte("d"), base+30_000))] = 1
		updates := readCounts(t, addr, "wc-updates", want, kgo.ReadUncommitted(), 20*time.Second)
		checkFinal(t, updates, want)
		if u := updates[string(windowKey([]byte("a"), w0))]; len(u) >= 3 {
			t.Errorf("a's window: updates %v for 3 records: the cache merged none", u)
		}
	})
}

// TestTableFromCache: a table read from a topic, with the record cache
// on and one commit per run (Close): its updates downstream are merged
// per key (k1's a is never forwarded, only b, as new), a key put and deleted
// between two flushes forwards nothing (k2), a stream joined with the
// table reads the cached, not yet flushed, value (o1 meets b), and in a
// second run the delete of a stored key is forwarded as a tombstone.
func TestTableFromCache(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for _, tp := range []string{"tc-table", "tc-out", "tc-orders", "tc-joined"} {
			createTopic(t, addr, tp, 1, nil)
		}
		b := NewBuilder()
		tbl := TableFrom(b, "tc-table", String, String, Named("tbl"))
		// Each change as "old>new", "-" for none.
		MapValues(tbl.Changes(), func(c Change[string]) string {
			o, n := "-", "-"
			if c.HasOld {
				o = c.Old
			}
			if c.HasNew {
				n = c.New
			}
			return o + ">" + n
		}, ValueSerde(String)).To("tc-out")
		orders := Source(b, []string{"tc-orders"}, String, String)
		JoinWithTable(orders, tbl, func(_ string, o, v string) string { return o + "/" + v }, ValueSerde(String)).To("tc-joined")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		prod := newClient(t, addr)
		ts := int64(1_700_000_000_000)
		rec := func(topic, key, value string) *kgo.Record {
			ts++
			r := &kgo.Record{Topic: topic, Key: []byte(key), Timestamp: time.UnixMilli(ts)}
			if value != "" {
				r.Value = []byte(value)
			}
			return r
		}
		produce := func(rs ...*kgo.Record) {
			t.Helper()
			if err := prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		cfg := Config{ApplicationID: "tcache", Brokers: []string{addr}, StateDir: t.TempDir(),
			CommitInterval: time.Hour, CacheMaxBytes: DefaultCacheMaxBytes}
		rows := func(topic string) map[string][]string {
			out := map[string][]string{}
			for _, r := range readAll(t, addr, topic) {
				out[r.Key] = append(out[r.Key], r.Value)
			}
			return out
		}

		produce(rec("tc-table", "k1", "a"), rec("tc-table", "k1", "b"), rec("tc-table", "k2", "x"), rec("tc-table", "k2", ""), rec("tc-table", "k3", "c"))
		a := startApp(t, topo, cfg)
		waitProcessed(t, a, 5)
		produce(rec("tc-orders", "k1", "o1"), rec("tc-orders", "k2", "o2"))
		waitProcessed(t, a, 7)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(rows("tc-out")), fmt.Sprint(map[string][]string{"k1": {"->b"}, "k3": {"->c"}}); got != want {
			t.Errorf("table updates %s, want %s", got, want)
		}
		if got, want := fmt.Sprint(rows("tc-joined")), fmt.Sprint(map[string][]string{"k1": {"o1/b"}}); got != want {
			t.Errorf("joined %s, want %s", got, want)
		}

		produce(rec("tc-table", "k3", ""), rec("tc-table", "k1", "d"))
		a = startApp(t, topo, cfg)
		waitProcessed(t, a, 2)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(rows("tc-out")), fmt.Sprint(map[string][]string{"k1": {"->b", "b>d"}, "k3": {"->c", "c>-"}}); got != want {
			t.Errorf("table updates after the second run %s, want %s", got, want)
		}
	})
}
