package streams

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPartitionTimeEncoding: the committed metadata is Kafka's
// TopicPartitionMetadata (version 2, no processor metadata), so the
// strings are the ones a Java Kafka Streams application writes, and
// versions 1 and 2 (with processor metadata after the time) decode.
func TestPartitionTimeEncoding(t *testing.T) {
	if got := encodePartitionTime(5000); got != "AgAAAAAAABOI" { // 02 | 00..13 88
		t.Errorf("encode(5000) = %q, want AgAAAAAAABOI", got)
	}
	for _, c := range []struct {
		meta string
		want int64
		bad  bool
	}{
		{"", unknownTime, false},
		{"AgAAAAAAABOI", 5000, false},
		{"AQAAAAAAABOI", 5000, false}, // version 1
		// version 2 with processor metadata: 1 entry "k" -> 7
		{"AgAAAAAAABOIAAAAAQAAAAFrAAAAAAAAAAc=", 5000, false},
		{encodePartitionTime(-1), unknownTime, false},
		{"AwAAAAAAABOI", unknownTime, true}, // version 3
		{"consumer-1-6d3e", unknownTime, true},
		{"AgAA", unknownTime, true},
	} {
		got, err := decodePartitionTime(c.meta)
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("decode(%q) = %d, %v; want %d, error %v", c.meta, got, err, c.want, c.bad)
		}
	}
}

func FuzzDecodePartitionTime(f *testing.F) {
	f.Add("AgAAAAAAABOI")
	f.Add("AQAAAAAAABOI")
	f.Add("")
	f.Add("AgAAAAAAABOIAAAAAQAAAAFrAAAAAAAAAAc=")
	f.Fuzz(func(t *testing.T, meta string) {
		ts, err := decodePartitionTime(meta)
		if err != nil && ts != unknownTime {
			t.Fatalf("decode(%q) = %d with error %v", meta, ts, err)
		}
		if err == nil && ts >= 0 {
			if back, err := decodePartitionTime(encodePartitionTime(ts)); err != nil || back != ts {
				t.Fatalf("round trip of %d: %d, %v", ts, back, err)
			}
		}
	})
}

// TestStreamTimeAcrossRestart: a tumbling count (10 s windows, grace
// 5 s) behind a repartition topic, suppressed until its windows close.
// Phase one takes stream time to 17 s, which closes [0, 10) (emitted);
// the instance is closed and a new one (another instance id, an empty
// state directory: a task move) takes over. Phase two starts with a
// record at 4 s: late for the stream time before the restart, so it must
// be dropped and counted as late, and [0, 10)'s final result must not be
// emitted a second time; a record at 31 s then closes [10, 20). The
// output and the dropped count are compared with a reference computed
// over the whole input as if the application had never stopped. Without
// the partition times in the committed offsets' metadata, the new
// instance's stream time starts at 4 s, the late record is counted, and
// [0, 10) is emitted twice.
func TestStreamTimeAcrossRestart(t *testing.T) {
	for _, g := range []struct {
		name string
		g    Guarantee
	}{{"at-least-once", AtLeastOnce}, {"exactly-once", ExactlyOnce}} {
		t.Run(g.name, func(t *testing.T) {
			onClusters(t, func(t *testing.T, addr string) { streamTimeAcrossRestart(t, addr, g.g) })
		})
	}
}

func streamTimeAcrossRestart(t *testing.T, addr string, g Guarantee) {
	createTopic(t, addr, "events", 1, nil)
	createTopic(t, addr, "final", 1, nil)
	w := TimeWindows{Size: 10 * time.Second, Grace: 5 * time.Second}
	base := int64(1_700_000_000_000) / 10_000 * 10_000
	type ev struct {
		key string
		s   int64 // seconds after base
	}
	phase1 := []ev{{"a", 1}, {"a", 2}, {"b", 3}, {"a", 17}}
	phase2 := []ev{{"a", 4}, {"b", 12}, {"a", 31}}
	records := func(evs []ev) []*kgo.Record {
		var rs []*kgo.Record
		for i, e := range evs {
			// The input key is not the grouping key: the count reads a
			// repartition topic.
			rs = append(rs, &kgo.Record{Topic: "events", Key: []byte(fmt.Sprint(i)), Value: []byte(e.key),
				Timestamp: time.UnixMilli(base + e.s*1000)})
		}
		return rs
	}

	// The reference: the whole input in order, one stream time.
	size, grace := w.Size.Milliseconds(), w.Grace.Milliseconds()
	counts := map[string]int64{}
	var streamTime, dropped2 int64
	for i, e := range append(append([]ev(nil), phase1...), phase2...) {
		ts := base + e.s*1000
		streamTime = max(streamTime, ts)
		start := ts / size * size
		if start+size <= streamTime-grace {
			if i < len(phase1) {
				t.Fatalf("phase one drops %v", e)
			}
			dropped2++
			continue
		}
		counts[string(windowKey([]byte(e.key), start))]++
	}
	final := map[string]int64{} // the windows closed at the end, emitted once each
	for k, n := range counts {
		if start := int64(binary.BigEndian.Uint64([]byte(k[len(k)-8:]))); start+size+grace <= streamTime {
			final[k] = n
		}
	}
	if dropped2 != 1 || len(final) != 4 {
		t.Fatalf("reference: %d dropped, %d windows final; the test wants 1 and 4", dropped2, len(final))
	}
	first := map[string]int64{} // what phase one emits: [0, 10)
	for k, n := range final {
		if k[len(k)-8:] == string(windowKey(nil, base)) {
			first[k] = n
		}
	}

	b := NewBuilder()
	events := Source(b, []string{"events"}, String, String)
	byKey := GroupBy(events, func(_, v string) string { return v }, KeySerde(String), ValueSerde(String), Named("by-key"))
	wc := WindowedCount(WindowedBy(byKey, w), Named("window-counts"))
	Suppress(wc, UntilWindowCloses(), Named("final")).ToStream().To("final")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	iso := kgo.ReadUncommitted()
	if g == ExactlyOnce {
		iso = kgo.ReadCommitted()
	}
	prod := newClient(t, addr)
	if err := prod.ProduceSync(context.Background(), records(phase1)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, topo, Config{ApplicationID: "stime", Brokers: []string{addr}, StateDir: t.TempDir(), Guarantee: g, InstanceID: "one"})
	if got := readCounts(t, addr, "final", first, iso, 15*time.Second); !countsReached(got, first) {
		t.Fatalf("phase one emitted %v, want %v", got, first)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// The committed metadata of both input partitions (the source topic's
	// and the repartition topic's) is the partition time; asked stable,
	// as exactly once's last commit may still be writing its markers.
	offs, err := kadm.NewClient(newClient(t, addr)).FetchOffsets(kadm.RequireStable(context.Background()), "stime")
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"events", "stime-by-key-repartition"} {
		o, _ := offs.Lookup(topic, 0)
		if ts, err := decodePartitionTime(o.Metadata); err != nil || ts != base+17_000 {
			t.Errorf("%s/0 committed at %d with metadata %q: partition time %d, %v; want %d", topic, o.At, o.Metadata, ts, err, base+17_000)
		}
	}

	a = startApp(t, topo, Config{ApplicationID: "stime", Brokers: []string{addr}, StateDir: t.TempDir(), Guarantee: g, InstanceID: "two"})
	if err := prod.ProduceSync(context.Background(), records(phase2)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := readCounts(t, addr, "final", final, iso, 15*time.Second)
	if countsReached(got, final) {
		time.Sleep(300 * time.Millisecond) // a duplicate would come with the last ones
		got = readCounts(t, addr, "final", final, iso, time.Second)
	}
	for k, n := range final {
		if u := got[k]; len(u) != 1 || u[0] != n {
			wk, _ := WindowedSerde(String, w.Size).Deserialize("", []byte(k))
			t.Errorf("window %s@%ds: emitted %v, want [%d] once", wk.Key, (wk.Window.Start.UnixMilli()-base)/1000, u, n)
		}
	}
	for k, u := range got {
		if _, ok := final[k]; !ok {
			t.Errorf("window %x emitted %v: not closed", k, u)
		}
	}
	var drops int64
	for _, ts := range a.Stats().Tasks {
		drops += ts.Dropped
	}
	if drops != dropped2 {
		t.Errorf("the new instance dropped %d records as late, want %d (stats %+v)", drops, dropped2, a.Stats().Tasks)
	}
}

// TestStreamTimeRewindsWithAbort: exactly once, an aborted transaction
// makes kgo rewind the input to the committed offsets, and the task's
// partition times go back with them: the records are processed again
// at the stream time they first met. A count with 10 s windows and 5 s
// of grace processes a@4 s and a@31 s, the transaction is aborted, and
// the replay must count a@4 s again (stream time 4 s when it comes);
// with the stream time of the aborted run (31 s) its window would have
// closed and the record would be dropped as late.
func TestStreamTimeRewindsWithAbort(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "rw-in", 1, nil)
		createTopic(t, addr, "rw-out", 1, nil)
		w := TimeWindows{Size: 10 * time.Second, Grace: 5 * time.Second}
		b := NewBuilder()
		WindowedCount(WindowedBy(GroupByKey(Source(b, []string{"rw-in"}, String, String)), w), Named("rw-counts")).
			ToStream().To("rw-out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "rw", Brokers: []string{addr}, StateDir: t.TempDir(),
			Guarantee: ExactlyOnce, CommitInterval: time.Minute})
		base := int64(1_700_000_000_000) / 10_000 * 10_000
		rec := func(s int64) *kgo.Record {
			return &kgo.Record{Topic: "rw-in", Key: []byte("a"), Value: []byte("x"), Timestamp: time.UnixMilli(base + s*1000)}
		}
		producePhased(t, newClient(t, addr), a, []*kgo.Record{rec(4), rec(31)})
		a.mu.Lock()
		if !a.inTxn {
			a.mu.Unlock()
			t.Fatal("no transaction open")
		}
		if err := a.endTxnLocked(context.Background(), kgo.TryAbort); err != nil {
			a.mu.Unlock()
			t.Fatal(err)
		}
		a.mu.Unlock()
		waitProcessed(t, a, 4) // both again
		var drops int64
		for _, ts := range a.Stats().Tasks {
			drops += ts.Dropped
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if drops != 0 {
			t.Errorf("%d records dropped as late after the abort, want 0", drops)
		}
		one := string(binary.BigEndian.AppendUint64(nil, 1))
		checkJoined(t, "counts after abort", readAll(t, addr, "rw-out"), []joined{
			{0, string(windowKey([]byte("a"), base)), one, base + 4000},
			{0, string(windowKey([]byte("a"), base+30_000)), one, base + 31_000},
		})
	})
}
