package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"ringlog/internal/testkit"
	"slices"
	"strings"
	"testing"
	"time"

	"ringlog/ioring"
	"ringlog/segment"
	"ringlog/segment/batch"
)

// txnBatch is a producer batch of n records inside a transaction.
func txnBatch(t testing.TB, n int, ts int64, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), Key: []byte("k"), Value: fmt.Appendf(nil, "txn-%d-%d", pid, i)}
	}
	h := batch.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: pid,
		ProducerEpoch: epoch, BaseSequence: seq, Attributes: batch.AttrTransactional}
	b, err := batch.Build(nil, h, batch.None, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func markerSync(e *Core, tp TP, m Marker) (AppendResult, error) {
	type res struct {
		r   AppendResult
		err error
	}
	ch := make(chan res, 1)
	e.AppendMarker(tp, m, AppendOptions{}, func(r AppendResult, err error) { ch <- res{r, err} })
	r := <-ch
	return r.r, r.err
}

func mustAppend(t testing.TB, e *Core, tp TP, b []byte) int64 {
	t.Helper()
	r, err := appendSync(e, tp, b)
	if err != nil {
		t.Fatal(err)
	}
	return r.BaseOffset
}

func mustMarker(t testing.TB, e *Core, tp TP, m Marker) int64 {
	t.Helper()
	r, err := markerSync(e, tp, m)
	if err != nil {
		t.Fatal(err)
	}
	return r.BaseOffset
}

func mustState(t testing.TB, e *Core, tp TP) PartitionState {
	t.Helper()
	st, err := e.State(tp)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// readIso reads tp from offset 0 at isolation iso and returns the batch
// headers read and the aborted transactions reported.
func readIso(t testing.TB, e *Core, tp TP, iso Isolation) ([]batch.Header, []segment.AbortedTxn) {
	t.Helper()
	res, err := e.Read(tp, mustState(t, e, tp).LogStartOffset, 1<<20, true, iso)
	if err != nil {
		t.Fatal(err)
	}
	aborted := res.Aborted
	var hs []batch.Header
	it := batch.Split(regionBytes(t, res))
	for it.Next() {
		h, err := batch.Validate(it.Batch(), batch.Stored)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	return hs, aborted
}

func lastOffsetRead(hs []batch.Header) int64 {
	if len(hs) == 0 {
		return -1
	}
	return hs[len(hs)-1].LastOffset()
}

// TestTxnOpenCommitAbort: the LSO stays at an open transaction's first
// offset while the HW moves past it; read_committed reads and
// ListOffsets latest stop there; a COMMIT moves it; an ABORT moves it and
// is reported to read_committed readers; all of it survives a restart.
func TestTxnOpenCommitAbort(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			e := openEngine(t, dir, mode)
			defer func() { e.Close() }()
			tp := TP{"t", 0}
			if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
				t.Fatal(err)
			}
			// Producer 1 opens a transaction at 0; a plain batch follows.
			mustAppend(t, e, tp, txnBatch(t, 2, 1, 1, 0, 0))
			mustAppend(t, e, tp, mkBatch(t, 1, "plain", 1, -1, 0, 0))
			st := mustState(t, e, tp)
			if st.HW != 3 || st.LSO != 0 {
				t.Fatalf("open transaction: HW %d LSO %d, want 3 and 0", st.HW, st.LSO)
			}
			if hs, _ := readIso(t, e, tp, ReadCommitted); len(hs) != 0 {
				t.Fatalf("read_committed read %d batches below an LSO of 0", len(hs))
			}
			if hs, _ := readIso(t, e, tp, ReadUncommitted); lastOffsetRead(hs) != 2 {
				t.Fatalf("read_uncommitted read up to %d, want 2", lastOffsetRead(hs))
			}
			for iso, want := range map[Isolation]int64{ReadUncommitted: 3, ReadCommitted: 0} {
				if off, _, _, err := e.ListOffset(tp, LatestTimestamp, iso); err != nil || off != want {
					t.Fatalf("ListOffset latest at %d: %d %v, want %d", iso, off, err, want)
				}
			}

			// A long poll of a read_committed reader wakes when the
			// commit moves the LSO.
			w := e.NewWaiter([]TP{tp})
			defer w.Stop()
			if off := mustMarker(t, e, tp, Marker{ProducerID: 1, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 5}); off != 3 {
				t.Fatalf("commit marker at %d, want 3", off)
			}
			select {
			case <-w.C:
			case <-time.After(5 * time.Second):
				t.Fatal("waiter not woken by the commit")
			}
			if st := mustState(t, e, tp); st.LSO != 4 || st.HW != 4 {
				t.Fatalf("after commit: HW %d LSO %d, want 4 and 4", st.HW, st.LSO)
			}

			// Producer 2 writes and aborts; producer 1 opens another.
			mustAppend(t, e, tp, txnBatch(t, 1, 2, 2, 0, 0))
			mustAppend(t, e, tp, txnBatch(t, 1, 2, 1, 0, 2))
			if st := mustState(t, e, tp); st.LSO != 4 {
				t.Fatalf("two open transactions: LSO %d, want 4", st.LSO)
			}
			abortAt := mustMarker(t, e, tp, Marker{ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: 5})
			if st := mustState(t, e, tp); st.LSO != 5 {
				t.Fatalf("producer 1 still open at 5: LSO %d", st.LSO)
			}
			mustMarker(t, e, tp, Marker{ProducerID: 1, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 5})
			hs, aborted := readIso(t, e, tp, ReadCommitted)
			want := []segment.AbortedTxn{{ProducerID: 2, FirstOffset: 4, LastOffset: abortAt, LastStableOffset: 5}}
			if !slices.Equal(aborted, want) {
				t.Fatalf("aborted %+v, want %+v", aborted, want)
			}
			if lastOffsetRead(hs) != 7 {
				t.Fatalf("read_committed read up to %d, want 7", lastOffsetRead(hs))
			}
			if _, aborted := readIso(t, e, tp, ReadUncommitted); aborted != nil {
				t.Fatalf("read_uncommitted told of aborted transactions %v", aborted)
			}

			// Producer 1 opens a third one; it is open after a restart.
			first := mustAppend(t, e, tp, txnBatch(t, 1, 3, 1, 0, 3))
			mustOK(t, e.Close())
			e = openEngine(t, dir, mode)
			if st := mustState(t, e, tp); st.LSO != first || st.HW != first+1 {
				t.Fatalf("after restart: HW %d LSO %d, want %d and %d", st.HW, st.LSO, first+1, first)
			}
			if _, aborted := readIso(t, e, tp, ReadCommitted); !slices.Equal(aborted, want) {
				t.Fatalf("after restart: aborted %+v, want %+v", aborted, want)
			}
			// And a plain batch from it while it is open is refused.
			if _, err := appendSync(e, tp, mkBatch(t, 1, "x", 3, 1, 0, 4)); !errors.Is(err, ErrInvalidTxnState) {
				t.Fatalf("plain batch inside an open transaction: %v", err)
			}
		})
	}
}

// TestTxnMarkerFencing: markers of an older producer epoch or an older
// coordinator epoch are refused and write nothing; a producer's data of an
// older epoch is fenced after a marker of a newer one.
func TestTxnMarkerFencing(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	tp := TP{"f", 0}
	if _, err := e.CreateTopic("f", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, e, tp, txnBatch(t, 1, 1, 9, 3, 0))
	mustMarker(t, e, tp, Marker{ProducerID: 9, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 4})
	leo := mustState(t, e, tp).LEO
	if _, err := markerSync(e, tp, Marker{ProducerID: 9, ProducerEpoch: 2, CoordinatorEpoch: 4}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("older producer epoch: %v", err)
	}
	if _, err := markerSync(e, tp, Marker{ProducerID: 9, ProducerEpoch: 3, CoordinatorEpoch: 3}); !errors.Is(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("older coordinator epoch: %v", err)
	}
	if st := mustState(t, e, tp); st.LEO != leo {
		t.Fatalf("a refused marker was written: LEO %d, was %d", st.LEO, leo)
	}
	// The coordinator aborts with a bumped epoch (a timed-out
	// transaction): the producer's old epoch is fenced from then on.
	mustMarker(t, e, tp, Marker{ProducerID: 9, ProducerEpoch: 4, CoordinatorEpoch: 4})
	if _, err := appendSync(e, tp, txnBatch(t, 1, 1, 9, 3, 1)); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("data of the fenced epoch: %v", err)
	}
	if _, err := markerSync(e, tp, Marker{ProducerID: -1}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("marker without a producer: %v", err)
	}
}

// TestTxnEpochBumpedByMarkerStartsAtSequenceZero: with transactions v2
// (KIP-890) every end bumps the producer's epoch and the marker is
// written at the new epoch, which leaves the producer's entry with that
// epoch and no batches. The epoch's first batch must then be sequence 0,
// as Kafka requires: any sequence was taken, so a producer's second
// pipelined request (sequence 5, say) was appended when its first was
// refused, and the retry of the first was out of order, which franz-go
// takes as fatal (its TestTxnEtl against three brokers).
func TestTxnEpochBumpedByMarkerStartsAtSequenceZero(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	tp := TP{"bump", 0}
	if _, err := e.CreateTopic("bump", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, e, tp, txnBatch(t, 5, 1, 9, 0, 0))
	mustMarker(t, e, tp, Marker{ProducerID: 9, ProducerEpoch: 1, Commit: true, CoordinatorEpoch: 0, TransactionVersion: 2})
	leo := mustState(t, e, tp).LEO
	if _, err := appendSync(e, tp, txnBatch(t, 5, 1, 9, 1, 5)); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("the bumped epoch's first batch at sequence 5: %v, want ErrOutOfOrderSequence", err)
	}
	if st := mustState(t, e, tp); st.LEO != leo {
		t.Fatalf("the out-of-order batch was written: LEO %d, was %d", st.LEO, leo)
	}
	mustAppend(t, e, tp, txnBatch(t, 5, 1, 9, 1, 0))
	mustAppend(t, e, tp, txnBatch(t, 5, 1, 9, 1, 5))
}

// TestTxnFollower: a follower tracks transactions from the batches it
// copies, markers included: its LSO holds at an open transaction, its
// .txnindex gets the ABORT, and a truncation below the marker reopens the
// transaction and removes the entry.
func TestTxnFollower(t *testing.T) {
	ldir, fdir := t.TempDir(), t.TempDir()
	leader := openReplicated(t, ldir, ioring.ModeAuto, nil)
	defer func() { leader.Close() }()
	follower := openReplicated(t, fdir, ioring.ModeAuto, nil)
	defer func() { follower.Close() }()
	tp := TP{"r", 0}
	for _, e := range []*Core{leader, follower} {
		if _, err := e.CreateTopic("r", 1, -1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	mustOK(t, leader.BecomeLeader(tp, 1))
	mustOK(t, follower.BecomeFollower(tp, 1))
	if _, err := markerSync(follower, tp, Marker{ProducerID: 1}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("marker on a follower: %v", err)
	}
	mustAppend(t, leader, tp, mkBatch(t, 2, "a", 1, -1, 0, 0))
	first := mustAppend(t, leader, tp, txnBatch(t, 2, 1, 7, 0, 0))
	mustAppend(t, leader, tp, mkBatch(t, 1, "b", 1, -1, 0, 0))
	mustOK(t, leader.SetHW(tp, mustState(t, leader, tp).LEO))
	replicate(t, leader, follower, tp, 100)
	if st := mustState(t, follower, tp); st.HW != 5 || st.LSO != first {
		t.Fatalf("follower: HW %d LSO %d, want 5 and %d", st.HW, st.LSO, first)
	}
	abortAt := mustMarker(t, leader, tp, Marker{ProducerID: 7, CoordinatorEpoch: 1})
	replicate(t, leader, follower, tp, 1<<20)
	// The marker is on both, below neither HW yet: still unsettled.
	if st := mustState(t, follower, tp); st.LSO != first {
		t.Fatalf("follower with the marker above its HW: LSO %d, want %d", st.LSO, first)
	}
	mustOK(t, leader.SetHW(tp, abortAt+1))
	replicate(t, leader, follower, tp, 1<<20)
	for name, e := range map[string]*Core{"leader": leader, "follower": follower} {
		if st := mustState(t, e, tp); st.LSO != abortAt+1 {
			t.Fatalf("%s after the abort: LSO %d, want %d", name, st.LSO, abortAt+1)
		}
		_, aborted := readIso(t, e, tp, ReadCommitted)
		want := []segment.AbortedTxn{{ProducerID: 7, FirstOffset: first, LastOffset: abortAt, LastStableOffset: abortAt + 1}}
		if !slices.Equal(aborted, want) {
			t.Fatalf("%s: aborted %+v, want %+v", name, aborted, want)
		}
	}
	// The follower loses the marker (a leader change truncates it): the
	// transaction is open again there, and the entry is gone.
	mustOK(t, follower.Truncate(tp, abortAt))
	if st := mustState(t, follower, tp); st.LSO != first {
		t.Fatalf("follower truncated below the marker: LSO %d, want %d", st.LSO, first)
	}
	if _, aborted := readIso(t, follower, tp, ReadCommitted); len(aborted) != 0 {
		t.Fatalf("follower truncated below the marker still reports %v", aborted)
	}
	idx, _ := filepath.Glob(filepath.Join(fdir, "r-0", "*.txnindex"))
	for _, p := range idx {
		if fi, err := os.Stat(p); err != nil || fi.Size() != 0 {
			t.Fatalf("%s after truncation: %v %v", p, fi.Size(), err)
		}
	}
}

// TestTxnIndexRebuiltAtStart: with segments rolled at every append, a
// restart that finds a .txnindex deleted or torn, or that follows a crash
// (the files copied from under a running engine: no clean shutdown, the
// producer snapshot of the last roll), rebuilds it from the log (the
// aborted transactions read_committed readers get are the same), and
// retention deletes the files with their segments.
func TestTxnIndexRebuiltAtStart(t *testing.T) {
	for _, damage := range []string{"deleted", "torn", "snapshot-deleted", "crash"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			e := openEngine(t, dir, ioring.ModeAuto)
			defer func() { e.Close() }()
			tp := TP{"x", 0}
			if _, err := e.CreateTopic("x", 1, -1, map[string]string{"segment.ms": "1"}, false); err != nil {
				t.Fatal(err)
			}
			ts := int64(1000)
			for i := range 6 {
				ts += 10
				pid := int64(1 + i%2)
				mustAppend(t, e, tp, txnBatch(t, 1, ts, pid, 0, int32(i/2)))
				ts += 10
				mustAppend(t, e, tp, mkBatch(t, 1, "p", ts, -1, 0, 0))
				ts += 10
				// A marker is stamped with the broker's clock, the
				// batches around it with the test's small timestamps: a
				// segment a marker began rolls only at the next marker
				// at least segment.ms (1 ms) later. Without the pause, six
				// markers could come within a millisecond on a fast run
				// and leave fewer than the four segments checked below.
				time.Sleep(2 * time.Millisecond)
				mustMarker(t, e, tp, Marker{ProducerID: pid, Commit: i%3 == 0, CoordinatorEpoch: 1})
			}
			// One more transaction is open at the "crash".
			ts += 10
			open := mustAppend(t, e, tp, txnBatch(t, 1, ts, 3, 0, 0))
			_, want := readIso(t, e, tp, ReadCommitted)
			if len(want) != 4 {
				t.Fatalf("%d aborted transactions, want 4: %v", len(want), want)
			}
			if damage == "crash" {
				crashed := t.TempDir()
				copyTree(t, dir, crashed)
				mustOK(t, e.Close())
				dir = crashed
			} else {
				mustOK(t, e.Close())
			}
			pdir := filepath.Join(dir, "x-0")
			idx, _ := filepath.Glob(filepath.Join(pdir, "*.txnindex"))
			logs, _ := filepath.Glob(filepath.Join(pdir, "*.log"))
			if len(idx) != len(logs) || len(logs) < 4 {
				t.Fatalf("%d txn indexes for %d segments", len(idx), len(logs))
			}
			var victim string
			for _, p := range idx {
				if fi, _ := os.Stat(p); fi.Size() > 0 {
					victim = p
					break
				}
			}
			switch damage {
			case "deleted":
				mustOK(t, os.Remove(victim))
			case "torn":
				mustOK(t, os.Truncate(victim, 20))
			case "snapshot-deleted":
				mustOK(t, os.Remove(victim))
				mustOK(t, os.Remove(filepath.Join(pdir, snapshotFile)))
			}
			e = openEngine(t, dir, ioring.ModeAuto)
			if _, got := readIso(t, e, tp, ReadCommitted); !slices.Equal(got, want) {
				t.Fatalf("after the restart: %+v, want %+v", got, want)
			}
			if st := mustState(t, e, tp); st.LSO != open {
				t.Fatalf("after the restart: LSO %d, want %d (the open transaction)", st.LSO, open)
			}
			if fi, err := os.Stat(victim); err != nil || fi.Size()%34 != 0 || fi.Size() == 0 {
				t.Fatalf("%s not rebuilt: %v", victim, err)
			}
			// DeleteRecords past a few segments removes their indexes.
			low, err := e.DeleteRecords(tp, want[2].FirstOffset)
			mustOK(t, err)
			idx, _ = filepath.Glob(filepath.Join(pdir, "*.txnindex"))
			logs, _ = filepath.Glob(filepath.Join(pdir, "*.log"))
			if len(idx) != len(logs) {
				t.Fatalf("after DeleteRecords to %d: %d txn indexes for %d segments", low, len(idx), len(logs))
			}
			if _, got := readIso(t, e, tp, ReadCommitted); len(got) == 0 || got[0].LastOffset < low {
				t.Fatalf("after DeleteRecords to %d: %+v", low, got)
			}
		})
	}
}

// TestSnapshotV1StillRead: a snapshot written before transactions
// (version 1) decodes with no transaction open.
func TestSnapshotV1StillRead(t *testing.T) {
	ps := newProducerState()
	ps.update(batch.Header{ProducerID: 5, ProducerEpoch: 1, BaseSequence: 0, LastOffsetDelta: 3, MaxTimestamp: 7}, 10, nil, false)
	v2 := encodeSnapshot(ps.entries, 14)
	// The same entry in version 1's layout: no coordinator epoch, no
	// transaction.
	v1 := []byte(snapshotMagic)
	v1 = append(v1, 0, 1)
	v1 = append(v1, v2[6:18]...)            // offset, count
	v1 = append(v1, v2[18:28]...)           // pid, epoch
	v1 = append(v1, v2[28+12:len(v2)-4]...) // n and the batches
	v1 = append(v1, crc32c(v1)...)          // checksum
	got, off, err := decodeSnapshot(v1)
	if err != nil || off != 14 {
		t.Fatalf("version 1: %v, offset %d", err, off)
	}
	e := got.entries[5]
	if e == nil || e.txnFirst != -1 || e.coordinatorEpoch != -1 || e.epoch != 1 || !slices.Equal(e.batches, ps.entries[5].batches) {
		t.Fatalf("version 1 entry %+v, want %+v", e, ps.entries[5])
	}
	// Version 2 keeps an open transaction and the coordinator epoch.
	ps.update(batch.Header{ProducerID: 5, ProducerEpoch: 1, BaseSequence: 4, Attributes: batch.AttrTransactional}, 14, nil, false)
	ps.update(batch.Header{ProducerID: 6, ProducerEpoch: 0, Attributes: batch.AttrTransactional | batch.AttrControl}, 15, &batch.Marker{CoordinatorEpoch: 8}, false)
	got, _, err = decodeSnapshot(encodeSnapshot(ps.entries, 16))
	if err != nil || got.entries[5].txnFirst != 14 || got.entries[6].coordinatorEpoch != 8 {
		t.Fatalf("version 2: %v %+v %+v", err, got.entries[5], got.entries[6])
	}
}

func crc32c(b []byte) []byte {
	return binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, castagnoli))
}

// copyTree copies the files under src to dst as they are now: with an
// engine running over src, a crash's view (the page cache's content, no
// clean-shutdown marker).
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(out, 0o750)
		}
		if filepath.Base(p) == ".lock" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o640)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCleanerStopsAtLSO: with a transaction open, the cleaner compacts
// nothing at or above the LSO (Kafka's cleaner stops there too: what an
// open transaction wrote may yet be aborted); once it commits, the rest is
// compacted.
func TestCleanerStopsAtLSO(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), Shards: 1, Cleaner: CleanerConfig{Backoff: 10 * time.Millisecond}, Topic: smallSegments(4096)}
	e, err := OpenCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	compact := map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
	if _, err := e.CreateTopic("c", 1, -1, compact, false); err != nil {
		t.Fatal(err)
	}
	tp := TP{"c", 0}
	write := func(n int) {
		for i := range n {
			k := fmt.Sprintf("key-%d", i%4)
			mustAppend(t, e, tp, keyedBatch(t, batch.None, []string{k}, [][]byte{[]byte(strings.Repeat("v", 300))}))
		}
	}
	write(20) // about two segments before the transaction
	lso := mustAppend(t, e, tp, txnBatch(t, 1, time.Now().UnixMilli(), 7, 0, 0))
	write(60)
	if st := mustState(t, e, tp); st.LSO != lso {
		t.Fatalf("LSO %d, want %d", st.LSO, lso)
	}
	testkit.WaitFor(t, 10*time.Second, "a clean below the LSO", func() bool { return e.CleanerStats().Cleans >= 1 })
	// More ticks of the cleaner, which must find nothing more to do (an
	// LSO inside a segment once kept the log due, cleaned over and over).
	cleans := e.CleanerStats().Cleans
	time.Sleep(200 * time.Millisecond)
	if n := e.CleanerStats().Cleans; n > cleans+1 {
		t.Fatalf("%d cleans in 200 ms with nothing to clean", n-cleans)
	}
	above := 0
	for off := range readRecords(t, e, tp) {
		if off >= lso {
			above++
		}
	}
	if above != 61 {
		t.Fatalf("%d records at or above the LSO %d after cleans, want all 61", above, lso)
	}

	mustMarker(t, e, tp, Marker{ProducerID: 7, Commit: true})
	write(20) // the marker's segment rolls away from the active one
	testkit.WaitFor(t, 10*time.Second, "a clean past the old LSO", func() bool {
		n := 0
		for off := range readRecords(t, e, tp) {
			if off >= lso {
				n++
			}
		}
		return n < 40
	})
}

// TestProducerOpenTxnsTracked: the open-transaction map the shard reads
// each round agrees with the producers' entries through random data
// batches, markers, rounds that commit and rounds rolled back.
func TestProducerOpenTxnsTracked(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ps := newProducerState()
	off := int64(0)
	for round := range 2000 {
		for range 1 + r.IntN(4) {
			pid := int64(r.IntN(6))
			h := batch.Header{ProducerID: pid, ProducerEpoch: 0}
			var m *batch.Marker
			switch r.IntN(3) {
			case 0:
				h.Attributes = batch.AttrTransactional | batch.AttrControl
				m = &batch.Marker{Commit: r.IntN(2) == 0}
			case 1:
				h.Attributes = batch.AttrTransactional
			}
			ps.update(h, off, m, true)
			off++
		}
		if round%3 == 0 {
			ps.rollback()
		} else {
			ps.commit()
		}
		want := map[int64]int64{}
		for pid, e := range ps.entries {
			if e.txnFirst >= 0 {
				want[pid] = e.txnFirst
			}
		}
		if !maps.Equal(ps.open, want) {
			t.Fatalf("round %d: open %v, entries say %v", round, ps.open, want)
		}
	}
}

// TestTxnOngoing: TxnOngoing tells, from any goroutine, whether a
// producer's transaction is open on a partition at an epoch (what lets a
// produce skip the coordinator's verification, KIP-890), and an append
// that relied on it (AppendOptions.OngoingTxn) is refused once a marker
// has ended the transaction, as Kafka refuses a batch without its
// verification guard; the same batch verified (no OngoingTxn) is taken.
func TestTxnOngoing(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	tp := TP{"o", 0}
	if _, err := e.CreateTopic("o", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	ongoing := func(r AppendOptions, b []byte) error {
		ch := make(chan error, 1)
		e.Append(tp, b, r, func(_ AppendResult, err error) { ch <- err })
		return <-ch
	}
	if e.TxnOngoing(tp, 7, 0) {
		t.Fatal("ongoing before any batch")
	}
	if e.TxnOngoing(TP{"missing", 0}, 7, 0) {
		t.Fatal("ongoing on a partition that does not exist")
	}
	// Not open: an append relying on it is refused and writes nothing.
	if err := ongoing(AppendOptions{OngoingTxn: true}, txnBatch(t, 1, 1, 7, 0, 0)); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("unverified batch opening a transaction: %v, want ErrInvalidTxnState", err)
	}
	if st := mustState(t, e, tp); st.LEO != 0 {
		t.Fatalf("a refused batch was written: LEO %d", st.LEO)
	}
	mustAppend(t, e, tp, txnBatch(t, 2, 1, 7, 0, 0))
	if !e.TxnOngoing(tp, 7, 0) {
		t.Fatal("not ongoing after the transaction's first batch")
	}
	if e.TxnOngoing(tp, 7, 1) || e.TxnOngoing(tp, 8, 0) {
		t.Fatal("ongoing for another epoch or producer")
	}
	// Open: an append relying on it is taken, and so is a plain
	// idempotent one from another producer (OngoingTxn concerns
	// transactional batches only).
	if err := ongoing(AppendOptions{OngoingTxn: true}, txnBatch(t, 1, 1, 7, 0, 2)); err != nil {
		t.Fatalf("batch of the open transaction: %v", err)
	}
	if err := ongoing(AppendOptions{OngoingTxn: true}, mkBatch(t, 1, "plain", 1, 8, 0, 0)); err != nil {
		t.Fatalf("idempotent batch: %v", err)
	}
	// A marker ends it: the next batch relying on the open transaction is
	// refused; verified, it opens the next transaction.
	mustMarker(t, e, tp, Marker{ProducerID: 7, ProducerEpoch: 0, Commit: true})
	if e.TxnOngoing(tp, 7, 0) {
		t.Fatal("ongoing after the commit marker")
	}
	leo := mustState(t, e, tp).LEO
	if err := ongoing(AppendOptions{OngoingTxn: true}, txnBatch(t, 1, 1, 7, 0, 3)); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("unverified batch after the marker: %v, want ErrInvalidTxnState", err)
	}
	if st := mustState(t, e, tp); st.LEO != leo {
		t.Fatalf("a refused batch was written: LEO %d, was %d", st.LEO, leo)
	}
	if err := ongoing(AppendOptions{}, txnBatch(t, 1, 1, 7, 0, 3)); err != nil {
		t.Fatalf("verified batch opening the next transaction: %v", err)
	}
	if !e.TxnOngoing(tp, 7, 0) {
		t.Fatal("not ongoing after the next transaction's first batch")
	}
}

// TestAppendMarkers: one call ends a producer's transaction on partitions
// of several shards, answering each partition (a missing one with its
// error) and leaving each partition's LSO at its HW.
func TestAppendMarkers(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	const parts = 6
	if _, err := e.CreateTopic("m", parts, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	for i := range int32(parts) {
		mustAppend(t, e, TP{"m", i}, txnBatch(t, 1, 1, 5, 0, 0))
		if st := mustState(t, e, TP{"m", i}); st.LSO != 0 {
			t.Fatalf("partition %d: LSO %d with the transaction open", i, st.LSO)
		}
	}
	type answer struct {
		i   int
		err error
	}
	ch := make(chan answer, parts+1)
	var items []MarkerItem
	for i := range parts + 1 { // the last partition does not exist
		items = append(items, MarkerItem{TP: TP{"m", int32(i)}, Done: func(_ AppendResult, err error) { ch <- answer{i, err} }})
	}
	e.AppendMarkers(Marker{ProducerID: 5, ProducerEpoch: 0, Commit: true}, items, AppendOptions{RequireISR: true})
	got := map[int]error{}
	for range parts + 1 {
		a := <-ch
		got[a.i] = a.err
	}
	for i := range parts {
		if got[i] != nil {
			t.Fatalf("partition %d: %v", i, got[i])
		}
		if st := mustState(t, e, TP{"m", int32(i)}); st.LSO != 2 || st.HW != 2 {
			t.Fatalf("partition %d after the marker: LSO %d HW %d, want 2 and 2", i, st.LSO, st.HW)
		}
	}
	if !errors.Is(got[parts], ErrUnknownTopicOrPartition) {
		t.Fatalf("missing partition: %v", got[parts])
	}
}
