package engine

import (
	"sync"
	"testing"

	"ringlog/ioring"
	"ringlog/segment/batch"
)

// TestShardHooks: a service runs on the shard owning its partition, appends
// from there (also from inside a done callback) and replays the partition.
func TestShardHooks(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, ioring.ModeAuto)
	if _, err := e.CreateTopic("__svc", 3, -1, map[string]string{"cleanup.policy": "compact"}, false); err != nil {
		t.Fatal(err)
	}
	tp := TP{"__svc", 1}
	var wg sync.WaitGroup
	wg.Add(2)
	var offsets []int64
	err := e.OnShard(tp, func() {
		e.AppendOnShard(tp, mkBatch(t, 1, "first", 1, -1, 0, 0), AppendOptions{}, func(r AppendResult, err error) {
			if err != nil {
				t.Error(err)
			}
			offsets = append(offsets, r.BaseOffset)
			// A follow-up written from the callback, on the same goroutine.
			e.AppendOnShard(tp, mkBatch(t, 2, "second", 1, -1, 0, 0), AppendOptions{}, func(r AppendResult, err error) {
				if err != nil {
					t.Error(err)
				}
				offsets = append(offsets, r.BaseOffset)
				wg.Done()
			})
			wg.Done()
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(offsets) != 2 || offsets[0] != 0 || offsets[1] != 1 {
		t.Fatalf("offsets %v", offsets)
	}
	e.Close()
	e = openEngine(t, dir, ioring.ModeAuto)
	defer e.Close()
	var seen []int64
	if err := e.ReadAll(tp, func(b []byte) error {
		h, err := batch.Validate(b, batch.Stored)
		seen = append(seen, h.BaseOffset)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[1] != 1 {
		t.Fatalf("replayed %v", seen)
	}
	if err := e.OnShard(TP{"nope", 0}, func() {}); err == nil {
		t.Fatal("OnShard on an unknown partition")
	}
}
