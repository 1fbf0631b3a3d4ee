package streams

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestHoppingWindowCount: a hopping windowed count (size 10 s, advance
// 5 s, grace 3 s) over events out of order and late, in one partition so
// that stream time advances in the order written. The counts per key and
// window, read from the store, and the number of records dropped as late
// equal a reference that applies Kafka's rule here: a record is counted
// in each window holding it that has not closed (stream time minus grace
// is still before the window's end).
func TestHoppingWindowCount(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		// Two partitions, keys placed by the default partitioner (which
		// interactive queries assume): stream time advances per partition
		// in the order written.
		createTopic(t, addr, "clicks", 2, nil)
		w := TimeWindows{Size: 10 * time.Second, Advance: 5 * time.Second, Grace: 3 * time.Second}
		base := int64(1_700_000_000_000) / 10000 * 10000
		// Seconds after base, in the order written: out of order within
		// the grace, then late past it.
		secs := []int64{1, 4, 12, 3, 17, 9, 30, 14, 26, 2, 33, 29, 41, 20, 38, 44}
		type wk struct {
			key   string
			start int64
		}
		want := map[wk]int64{}
		var dropped int64
		streamTime := map[int]int64{}
		part := kgo.StickyKeyPartitioner(nil).ForTopic("clicks")
		var rs []*kgo.Record
		for i, s := range secs {
			key := fmt.Sprintf("k%d", i%3)
			ts := base + s*1000
			r := &kgo.Record{Topic: "clicks", Key: []byte(key), Value: []byte("x"), Timestamp: time.UnixMilli(ts)}
			rs = append(rs, r)
			p := part.Partition(r, 2)
			streamTime[p] = max(streamTime[p], ts)
			for _, start := range w.windowsFor(ts) {
				if start+w.Size.Milliseconds() <= streamTime[p]-w.Grace.Milliseconds() {
					dropped++
					continue
				}
				want[wk{key, start}]++
			}
		}
		if dropped == 0 {
			t.Fatal("the input has no late record")
		}
		if err := newClient(t, addr).ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		b := NewBuilder()
		clicks := Source(b, []string{"clicks"}, String, String)
		// Every window is read at the end: kept past Kafka's default
		// retention (size + grace), which purges closed windows.
		WindowedCount(WindowedBy(GroupByKey(clicks), w), Named("clicks-per-window"), Retention(time.Hour))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "win", Brokers: []string{addr}, StateDir: t.TempDir()})
		q, err := Query[Windowed[string], int64](a, "clicks-per-window")
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for k, n := range want {
			for {
				v, ok, err := q.Get(Windowed[string]{Key: k.key, Window: Window{Start: time.UnixMilli(k.start)}})
				if err == nil && ok && v == n {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("window %s@%d: %d, %v, %v; want %d", k.key, (k.start-base)/1000, v, ok, err, n)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		var got int64
		for _, ts := range a.Stats().Tasks {
			got += ts.Dropped
		}
		if got != dropped {
			t.Errorf("dropped %d late records, want %d", got, dropped)
		}
	})
}
