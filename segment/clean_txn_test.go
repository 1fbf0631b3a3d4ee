package segment

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"ringlog/segment/batch"
)

// txnKeyed appends one batch of keyed records ("<key>" = "<value>") for
// producer pid (-1: none), transactional when txn is set, at timestamp ts.
func txnKeyed(t *testing.T, l *Log, pid int64, seq int32, txn bool, ts int64, kv ...string) int64 {
	t.Helper()
	var recs []batch.Record
	for i := 0; i < len(kv); i += 2 {
		recs = append(recs, batch.Record{OffsetDelta: int32(i / 2), Key: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	h := batch.Header{LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: ts, MaxTimestamp: ts,
		ProducerID: pid, ProducerEpoch: -1, BaseSequence: -1}
	if pid >= 0 {
		h.ProducerEpoch, h.BaseSequence = 0, seq
	}
	if txn {
		h.Attributes |= batch.AttrTransactional
	}
	b, err := batch.Build(nil, h, batch.None, recs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Append([][]byte{b}, AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.BaseOffset
}

func txnMarker(t *testing.T, l *Log, pid int64, commit bool, ts int64) int64 {
	t.Helper()
	res, err := l.Append([][]byte{batch.MarkerBatch(nil, pid, 0, batch.Marker{Commit: commit}, ts)}, AppendOptions{Validated: true})
	if err != nil {
		t.Fatal(err)
	}
	return res.BaseOffset
}

// cleanNoProducers cleans everything below the active segment as if no
// producer were active (none of their last batches is kept).
func cleanNoProducers(t *testing.T, l *Log) CleanStats {
	t.Helper()
	p, err := l.PlanClean(l.LEO(), map[int64]int64{})
	if err != nil || p == nil {
		t.Fatalf("plan: %v %v", p, err)
	}
	r, err := l.Clean(p, CleanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.InstallClean(r)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestCleanTransactions: the first clean removes an aborted transaction's
// records and keeps its marker and index entry; the next finds both
// transactions empty (the committed one's records were overwritten) and
// gives their markers a delete horizon; a clean after delete.retention.ms
// removes them. Committed records are compacted as any others.
func TestCleanTransactions(t *testing.T) {
	clk := newClock()
	cfg := compactConfig()
	l := openLog(t, t.TempDir(), cfg, Options{Now: clk.Now})
	defer l.Close()
	ts := clk.now.UnixMilli()
	first := txnKeyed(t, l, 1, 0, true, ts, "a", "aborted-a", "b", "aborted-b")
	txnKeyed(t, l, 2, 0, true, ts, "c", "committed-c")
	abortAt := txnMarker(t, l, 1, false, ts)
	mustOK(t, l.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: first, LastOffset: abortAt, LastStableOffset: first + 2}))
	commitAt := txnMarker(t, l, 2, true, ts)
	txnKeyed(t, l, -1, 0, false, ts, "c", "plain-c", "e", "plain-e")
	forceRoll(t, l)

	values := func() (recs []string, markers []int64) {
		got, hs := readRecords(t, l)
		for _, r := range got {
			if r.offset != abortAt && r.offset != commitAt {
				recs = append(recs, fmt.Sprintf("%s=%s", r.key, r.value))
			}
		}
		for _, h := range hs {
			if h.Control() && h.NumRecords > 0 {
				markers = append(markers, h.BaseOffset)
			}
		}
		return recs, markers
	}

	st := cleanNoProducers(t, l)
	recs, markers := values()
	if want := []string{"c=plain-c", "e=plain-e"}; !slices.Equal(recs, want) {
		t.Fatalf("after the first clean: %q, want %q", recs, want)
	}
	if !slices.Equal(markers, []int64{abortAt, commitAt}) || st.AbortedBatchesRemoved != 1 {
		t.Fatalf("after the first clean: markers at %v, %d aborted batches removed", markers, st.AbortedBatchesRemoved)
	}
	if got := l.AbortedTxns(0, l.LEO()); len(got) != 1 || got[0].LastOffset != abortAt {
		t.Fatalf("after the first clean the abort is indexed as %+v", got)
	}

	cleanNoProducers(t, l)
	if _, markers := values(); !slices.Equal(markers, []int64{abortAt, commitAt}) {
		t.Fatalf("markers within their horizon: %v", markers)
	}
	if got := l.AbortedTxns(0, l.LEO()); len(got) != 0 {
		t.Fatalf("an aborted transaction without data is still indexed: %+v", got)
	}
	if st, _ := l.CleanStatus(l.LEO()); st.Due {
		t.Fatalf("due before the markers' horizon: %+v", st)
	}

	clk.advance(time.Duration(cfg.DeleteRetentionMs+1) * time.Millisecond)
	if st, _ := l.CleanStatus(l.LEO()); !st.Due || st.Reason != "delete horizon" {
		t.Fatalf("not due after the markers' horizon: %+v", st)
	}
	st = cleanNoProducers(t, l)
	recs, markers = values()
	if len(markers) != 0 || st.MarkersRemoved != 2 {
		t.Fatalf("after the horizon: markers at %v, %d removed", markers, st.MarkersRemoved)
	}
	if want := []string{"c=plain-c", "e=plain-e"}; !slices.Equal(recs, want) {
		t.Fatalf("after the horizon: %q, want %q", recs, want)
	}
}

// TestCleanKeepsAbortedLastBatchOfProducer: an active producer's last
// batch stays, emptied, even in an aborted transaction; its marker stays
// with it (its data is still seen), indexed.
func TestCleanKeepsAbortedLastBatchOfProducer(t *testing.T) {
	l := openLog(t, t.TempDir(), compactConfig(), Options{})
	defer l.Close()
	first := txnKeyed(t, l, 1, 0, true, 1, "a", "x")
	abortAt := txnMarker(t, l, 1, false, 1)
	mustOK(t, l.AppendAbortedTxn(AbortedTxn{ProducerID: 1, FirstOffset: first, LastOffset: abortAt, LastStableOffset: abortAt + 1}))
	txnKeyed(t, l, -1, 0, false, 1, "z", "z")
	forceRoll(t, l)
	for range 2 {
		p, err := l.PlanClean(l.LEO(), map[int64]int64{1: first})
		if err != nil || p == nil {
			t.Fatal(p, err)
		}
		r, err := l.Clean(p, CleanOptions{})
		mustOK(t, err)
		_, err = l.InstallClean(r)
		mustOK(t, err)
	}
	_, hs := readRecords(t, l)
	if len(hs) != 3 || hs[0].NumRecords != 0 || hs[0].ProducerID != 1 || !hs[1].Control() || hs[1].NumRecords != 1 {
		t.Fatalf("batches after two cleans: %+v", hs)
	}
	if got := l.AbortedTxns(0, l.LEO()); len(got) != 1 {
		t.Fatalf("aborted transactions: %+v", got)
	}
}

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
