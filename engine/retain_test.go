package engine

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestAppendDoesNotKeepRecords: once an append is answered, the engine
// holds nothing of the caller's bytes (a produce request's frame, which
// netpoll recycles or the collector takes): the shard's completion list,
// reused from round to round, kept the last round's ops, and through them
// the requests and their frames, until the next round (three 16 MiB frames
// of an idle broker). Each I/O path, buffered writes (the op writes from
// the caller's bytes) and direct ones.
func TestAppendDoesNotKeepRecords(t *testing.T) {
	for _, mode := range modes() {
		for _, w := range []Writes{WritesBuffered, WritesDirect} {
			t.Run(string(mode)+"/"+string(w), func(t *testing.T) {
				e, err := OpenCore(Config{Dir: t.TempDir(), Shards: 1, IO: mode, Writes: w})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				if _, err := e.CreateTopic("r", 1, 1, nil, false); err != nil {
					t.Fatal(err)
				}
				tp := TP{Topic: "r", Partition: 0}
				var collected atomic.Bool
				func() {
					b := mkBatch(t, 10, "v", 1000, -1, 0, 0)
					records := append(make([]byte, 0, len(b)), b...)
					runtime.SetFinalizer(&records[0], func(*byte) { collected.Store(true) })
					if _, err := appendSync(e, tp, records); err != nil {
						t.Fatal(err)
					}
				}()
				deadline := time.Now().Add(5 * time.Second)
				for !collected.Load() {
					if time.Now().After(deadline) {
						t.Fatal("the appended records are still referenced after the append was answered")
					}
					runtime.GC()
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	}
}
