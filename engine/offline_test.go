package engine

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"ringlog/internal/testkit"
	"ringlog/ioring"
	"ringlog/segment"
)

// dirBytes returns every file of dir with its content, to check that an
// offline partition's files are left untouched.
func dirBytes(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func fillPartitions(t testing.TB, e *Core, topic string, n int32, batches int) {
	t.Helper()
	for p := range n {
		for i := range batches {
			if _, err := appendSync(e, TP{topic, p}, mkBatch(t, 3, "v", 1000+int64(i), -1, 0, 0)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCorruptPartitionOfflineAtOpen: a partition whose segment is
// corrupted in its middle no longer stops OpenCore: it is kept offline
// (ErrStorage from every call, no panic, its files untouched), the others
// serve, and once its folder is removed it opens again, empty.
func TestCorruptPartitionOfflineAtOpen(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			e := openEngine(t, dir, mode)
			if _, err := e.CreateTopic("t", 3, -1, nil, false); err != nil {
				t.Fatal(err)
			}
			fillPartitions(t, e, "t", 3, 5)
			mustOK(t, e.Close())
			bad := TP{"t", 1}
			badDir := filepath.Join(dir, "t-1")
			testkit.CorruptSegment(t, badDir)
			before := dirBytes(t, badDir)

			e = openEngine(t, dir, mode)
			err := e.Offline(bad)
			if !errors.Is(err, ErrStorage) || !errors.Is(err, segment.ErrCorrupt) {
				t.Fatalf("Offline(t-1) = %v, want ErrStorage wrapping segment.ErrCorrupt", err)
			}
			if off := e.OfflinePartitions(); len(off) != 1 || off[0].TP != bad {
				t.Fatalf("OfflinePartitions = %v, want t-1 alone", off)
			}
			if n := e.opensOffline.Load(); n != 1 {
				t.Fatalf("%d logs counted offline at open, want 1", n)
			}
			// The others serve.
			for _, p := range []int32{0, 2} {
				tp := TP{"t", p}
				if e.Offline(tp) != nil {
					t.Fatalf("%v offline", tp)
				}
				if _, err := appendSync(e, tp, mkBatch(t, 2, "w", 2000, -1, 0, 0)); err != nil {
					t.Fatalf("append to %v: %v", tp, err)
				}
				if got := len(readAll(t, e, tp)); got != 6 {
					t.Fatalf("%v holds %d batches, want 6", tp, got)
				}
			}
			callEverything(t, e, bad, TP{"t", 0})
			mustOK(t, e.Close())
			if after := dirBytes(t, badDir); !mapsEqualBytes(before, after) {
				t.Fatalf("the offline partition's files changed: %v -> %v", keys(before), keys(after))
			}

			// Repaired by removing the folder: the partition opens again.
			mustOK(t, os.RemoveAll(badDir))
			e = openEngine(t, dir, mode)
			defer e.Close()
			if err := e.Offline(bad); err != nil {
				t.Fatalf("after the repair: %v", err)
			}
			if _, err := appendSync(e, bad, mkBatch(t, 1, "x", 3000, -1, 0, 0)); err != nil {
				t.Fatalf("append after the repair: %v", err)
			}
			if got := len(readAll(t, e, TP{"t", 0})); got != 7 {
				t.Fatalf("t-0 holds %d batches after restarts, want 7 (6 and AppendBatch's)", got)
			}
		})
	}
}

func mapsEqualBytes(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// callEverything calls every Core method that takes a partition on tp,
// which is offline: each answers ErrStorage (or, for those that answer
// nothing, does not panic).
func callEverything(t *testing.T, e *Core, tp, online TP) {
	t.Helper()
	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrStorage) {
			t.Errorf("%s on an offline partition: %v, want ErrStorage", what, err)
		}
	}
	_, err := appendSync(e, tp, mkBatch(t, 1, "v", 1, -1, 0, 0))
	want("Append", err)
	var wg sync.WaitGroup
	wg.Add(2)
	var errs [2]error
	e.AppendBatch([]AppendItem{
		{TP: tp, Records: mkBatch(t, 1, "v", 1, -1, 0, 0), Done: func(_ AppendResult, err error) { errs[0] = err; wg.Done() }},
		{TP: online, Records: mkBatch(t, 1, "v", 1, -1, 0, 0), Done: func(_ AppendResult, err error) { errs[1] = err; wg.Done() }},
	}, AppendOptions{})
	wg.Wait()
	want("AppendBatch", errs[0])
	if errs[1] != nil {
		t.Errorf("AppendBatch's item for a partition online: %v", errs[1])
	}
	_, err = e.State(tp)
	want("State", err)
	_, err = e.Read(tp, 0, 1<<20, true, ReadUncommitted)
	want("Read", err)
	_, err = e.ReadReplica(tp, 0, 1<<20, true)
	want("ReadReplica", err)
	for _, ts := range []int64{LatestTimestamp, EarliestTimestamp, MaxTimestamp, EarliestLocalTimestamp, 5} {
		_, _, _, err = e.ListOffset(tp, ts, ReadUncommitted)
		want("ListOffset", err)
	}
	_, _, err = e.EndOffsetForEpoch(tp, 0)
	want("EndOffsetForEpoch", err)
	_, err = e.DeleteRecords(tp, -1)
	want("DeleteRecords", err)
	_, err = e.LeaderEpochs(tp)
	want("LeaderEpochs", err)
	want("BecomeLeader", e.BecomeLeader(tp, 5))
	want("BecomeFollower", e.BecomeFollower(tp, 5))
	want("Truncate", e.Truncate(tp, 0))
	want("TruncateFullyAndStartAt", e.TruncateFullyAndStartAt(tp, 0))
	want("SetHW", e.SetHW(tp, 3))
	want("SetISR", e.SetISR(tp, 1, 1))
	ch := make(chan error, 1)
	e.AppendReplica(tp, mkBatch(t, 1, "v", 1, -1, 0, 0), func(_ int64, err error) { ch <- err })
	want("AppendReplica", <-ch)
	want("OnShard", e.OnShard(tp, func() {}))
	want("ReadAll", e.ReadAll(tp, func([]byte) error { return nil }))
	want("ReadAllToLEO", e.ReadAllToLEO(tp, func([]byte) error { return nil }))
	w := e.NewWaiter([]TP{tp, online})
	w.Stop()
	_ = e.Sizes()
	_ = e.Partitions()
	emb := &Engine{core: e}
	_, err = emb.Fetch(context.Background(), tp, 0, 10)
	want("Engine.Fetch", err)
	// Topic changes go on around it.
	if err := e.AlterTopicConfig(tp.Topic, map[string]string{"retention.ms": "3600000"}, false); err != nil {
		t.Errorf("AlterTopicConfig of a topic with an offline partition: %v", err)
	}
	info, _ := e.Topic(tp.Topic)
	if err := e.CreatePartitions(tp.Topic, info.Partitions+1, false); err != nil {
		t.Errorf("CreatePartitions of a topic with an offline partition: %v", err)
	}
	if _, err := e.State(TP{tp.Topic, info.Partitions}); err != nil {
		t.Errorf("a new partition beside an offline one: %v", err)
	}
	if !errors.Is(e.Offline(tp), ErrStorage) {
		t.Errorf("the partition came back online after topic changes: %v", e.Offline(tp))
	}
}

// TestDeleteTopicWithOfflinePartition: deleting a topic removes an
// offline partition's folder too.
func TestDeleteTopicWithOfflinePartition(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, ioring.ModePortable)
	if _, err := e.CreateTopic("t", 2, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	fillPartitions(t, e, "t", 2, 5)
	mustOK(t, e.Close())
	testkit.CorruptSegment(t, filepath.Join(dir, "t-0"))
	e = openEngine(t, dir, ioring.ModePortable)
	defer e.Close()
	if e.Offline(TP{"t", 0}) == nil {
		t.Fatal("t-0 not offline")
	}
	mustOK(t, e.DeleteTopic("t"))
	if _, err := os.Stat(filepath.Join(dir, "t-0")); !os.IsNotExist(err) {
		t.Fatalf("t-0's folder after the deletion: %v", err)
	}
	if _, err := e.CreateTopic("t", 2, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := appendSync(e, TP{"t", 0}, mkBatch(t, 1, "v", 1, -1, 0, 0)); err != nil {
		t.Fatalf("append to the topic created again: %v", err)
	}
}

// TestOfflinePartitionKeepsCheckpointedHW: a replicated engine's offline
// partition keeps its high watermark in the checkpoint, so that it is
// not lost (nor reset) while the partition waits for an operator.
func TestOfflinePartitionKeepsCheckpointedHW(t *testing.T) {
	dir := t.TempDir()
	e := openReplicated(t, dir, ioring.ModePortable, func(TP, int64) {})
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	tp := TP{"t", 0}
	mustOK(t, e.BecomeLeader(tp, 1))
	for i := range 5 {
		if _, err := appendSync(e, tp, mkBatch(t, 3, "v", int64(i), -1, 0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	mustOK(t, e.SetHW(tp, 9))
	mustOK(t, e.Close())
	testkit.CorruptSegment(t, filepath.Join(dir, "t-0"))
	e = openReplicated(t, dir, ioring.ModePortable, func(TP, int64) {})
	if e.Offline(tp) == nil {
		t.Fatal("t-0 not offline")
	}
	mustOK(t, e.Close())
	hws, err := loadHWCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if hws[tp] != 9 {
		t.Fatalf("checkpointed high watermark of the offline partition: %d, want 9", hws[tp])
	}
}

// faultIO fails the ops on files under dir while armed: as a failed
// write (nothing written, EIO) or as a failed sync (the write reached the
// file, its sync failed: fsyncgate).
type faultIO struct {
	ioring.IO
	dir    string
	armed  *atomic.Int32 // 0 off, 1 write fails, 2 sync fails
	failed []*ioring.Op
}

const (
	faultOff int32 = iota
	faultWrite
	faultSync
)

func (f *faultIO) Submit(ops ...*ioring.Op) error {
	mode := f.armed.Load()
	var pass []*ioring.Op
	for _, op := range ops {
		if mode != faultOff && op.File != nil && strings.HasPrefix(op.File.Name(), f.dir+string(filepath.Separator)) {
			op.Err = syscall.EIO
			if mode == faultSync && op.Kind == ioring.OpWrite {
				op.N = op.Len()
			}
			f.failed = append(f.failed, op)
			continue
		}
		pass = append(pass, op)
	}
	if len(pass) == 0 {
		return nil
	}
	return f.IO.Submit(pass...)
}

func (f *faultIO) Wait(out []*ioring.Op, min int, timeout time.Duration) ([]*ioring.Op, error) {
	if len(f.failed) > 0 {
		out = append(out, f.failed...)
		min -= len(f.failed)
		f.failed = f.failed[:0]
		if min <= 0 || f.IO.InFlight() == 0 {
			return f.IO.Wait(out, 0, 0)
		}
	}
	return f.IO.Wait(out, min, timeout)
}

func (f *faultIO) InFlight() int { return f.IO.InFlight() + len(f.failed) }

// TestDiskFailureTakesPartitionOffline: a write that fails with EIO, and a
// write whose sync fails, take the partition offline at run time: the
// append fails, OnOffline is told, later calls answer ErrStorage, a
// pending acks=all append fails, the other partitions serve on, the log
// is closed without its clean-shutdown marker, and the next start
// recovers it and serves it again.
func TestDiskFailureTakesPartitionOffline(t *testing.T) {
	for _, fault := range []int32{faultWrite, faultSync} {
		name := map[int32]string{faultWrite: "write-EIO", faultSync: "fsync-EIO"}[fault]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			armed := &atomic.Int32{}
			var offlineMu sync.Mutex
			var told []TP
			cfg := Config{Dir: dir, Shards: 2, IO: ioring.ModePortable, Topic: DefaultTopicConfig(),
				OnAppended: func(TP, int64) {},
				OnOffline: func(tp TP, err error) {
					if !errors.Is(err, ErrStorage) {
						t.Errorf("OnOffline(%v, %v): want ErrStorage", tp, err)
					}
					offlineMu.Lock()
					told = append(told, tp)
					offlineMu.Unlock()
				},
				WrapIO: func(io ioring.IO) ioring.IO {
					return &faultIO{IO: io, dir: filepath.Join(dir, "t-0"), armed: armed}
				}}
			cfg.Topic.Log.Flush = segment.FlushAlways
			e, err := OpenCore(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.CreateTopic("t", 2, -1, nil, false); err != nil {
				t.Fatal(err)
			}
			bad, good := TP{"t", 0}, TP{"t", 1}
			for _, tp := range []TP{bad, good} {
				mustOK(t, e.BecomeLeader(tp, 1))
				mustOK(t, e.SetISR(tp, 1, 2))
			}
			if _, err := appendSync(e, bad, mkBatch(t, 2, "a", 1, -1, 0, 0)); err != nil {
				t.Fatal(err)
			}
			mustOK(t, e.SetHW(bad, 2))
			// An acks=all append written but waiting for the high
			// watermark when the partition goes offline.
			pending := make(chan error, 1)
			e.Append(bad, mkBatch(t, 1, "p", 2, -1, 0, 0), AppendOptions{RequireISR: true}, func(_ AppendResult, err error) { pending <- err })
			waitState(t, e, bad, func(st PartitionState) bool { return st.LEO == 3 })

			armed.Store(fault)
			_, err = appendSync(e, bad, mkBatch(t, 1, "b", 3, -1, 0, 0))
			if !errors.Is(err, ErrStorage) {
				t.Fatalf("the failing append: %v, want ErrStorage", err)
			}
			armed.Store(faultOff)
			select {
			case err := <-pending:
				if !errors.Is(err, ErrStorage) {
					t.Fatalf("pending acks=all append: %v, want ErrStorage", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the pending acks=all append of a partition gone offline is not answered")
			}
			if err := e.Offline(bad); !errors.Is(err, ErrStorage) {
				t.Fatalf("Offline after the disk failed: %v", err)
			}
			offlineMu.Lock()
			if !slices.Equal(told, []TP{bad}) {
				t.Fatalf("OnOffline told %v, want [%v]", told, bad)
			}
			offlineMu.Unlock()
			_, err = appendSync(e, bad, mkBatch(t, 1, "c", 4, -1, 0, 0))
			if !errors.Is(err, ErrStorage) {
				t.Fatalf("append once offline: %v, want ErrStorage", err)
			}
			callEverything(t, e, bad, good)
			if _, err := appendSync(e, good, mkBatch(t, 1, "g", 4, -1, 0, 0)); err != nil {
				t.Fatalf("the other partition: %v", err)
			}
			mustOK(t, e.Close())
			if _, err := os.Stat(filepath.Join(dir, "t-0", "clean-shutdown")); !os.IsNotExist(err) {
				t.Fatalf("clean-shutdown marker of the failed log: %v, want none", err)
			}

			cfg.WrapIO, cfg.OnOffline = nil, nil
			e, err = OpenCore(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if err := e.Offline(bad); err != nil {
				t.Fatalf("after a restart on a sound disk: %v", err)
			}
			mustOK(t, e.BecomeLeader(bad, 2))
			st, err := e.State(bad)
			mustOK(t, err)
			if st.LEO < 2 {
				t.Fatalf("LEO %d after the restart, want the 2 records acknowledged at least", st.LEO)
			}
			if _, err := appendSync(e, bad, mkBatch(t, 1, "d", 5, -1, 0, 0)); err != nil {
				t.Fatalf("append after the restart: %v", err)
			}
		})
	}
}

func waitState(t testing.TB, e *Core, tp TP, ok func(PartitionState) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := e.State(tp)
		if err == nil && ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: state %+v, %v", tp, st, err)
		}
		time.Sleep(time.Millisecond)
	}
}
