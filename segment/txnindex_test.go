package segment

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"ringlog/segment/batch"
)

// txnLog writes n one-record batches with a marker every third one and
// records an aborted transaction for each marker; the segments are small,
// so the entries spread over several of them.
func txnLog(t *testing.T, dir string) (*Log, []AbortedTxn) {
	t.Helper()
	cfg := smallConfig()
	cfg.SegmentBytes = 2048
	l := openLog(t, dir, cfg, Options{})
	var want []AbortedTxn
	for i := range 60 {
		if i%3 == 2 {
			res, err := l.Append([][]byte{batch.MarkerBatch(nil, 7, 0, batch.Marker{}, 1)}, AppendOptions{Validated: true})
			if err != nil {
				t.Fatal(err)
			}
			e := AbortedTxn{ProducerID: 7, FirstOffset: res.BaseOffset - 2, LastOffset: res.BaseOffset, LastStableOffset: res.BaseOffset + 1}
			if err := l.AppendAbortedTxn(e); err != nil {
				t.Fatal(err)
			}
			want = append(want, e)
			continue
		}
		if _, err := l.Append([][]byte{mkBatch(t, 1, 100, 1, i)}, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if l.Segments() < 4 {
		t.Fatalf("%d segments, want several", l.Segments())
	}
	return l, want
}

func allAborted(l *Log) []AbortedTxn { return l.AbortedTxns(0, l.LEO()+1) }

// TestTxnIndexCleanReopen: entries survive a clean close, files are 34
// bytes an entry and 0640, and AbortedTxns answers ranges.
func TestTxnIndexCleanReopen(t *testing.T) {
	dir := t.TempDir()
	l, want := txnLog(t, dir)
	if got := allAborted(l); !slices.Equal(got, want) {
		t.Fatalf("before close: %v, want %v", got, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, smallConfig(), Options{})
	defer l.Close()
	if s := l.TxnIndexStale(); s != -1 {
		t.Fatalf("stale from %d after a clean close", s)
	}
	if got := allAborted(l); !slices.Equal(got, want) {
		t.Fatalf("after reopen: %v, want %v", got, want)
	}
	ents, _ := filepath.Glob(filepath.Join(dir, "*"+txnIndexSuffix))
	if len(ents) != l.Segments() {
		t.Fatalf("%d txn indexes for %d segments", len(ents), l.Segments())
	}
	total := int64(0)
	for _, p := range ents {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o640 {
			t.Fatalf("%s mode %v", p, fi.Mode())
		}
		total += fi.Size()
	}
	if total != int64(len(want))*txnEntrySize {
		t.Fatalf("%d bytes of entries, want %d", total, len(want)*txnEntrySize)
	}
	// A range from the middle: entries whose marker is at or after 30 and
	// whose first offset is below 40.
	got := l.AbortedTxns(30, 40)
	for _, e := range got {
		if e.LastOffset < 30 || e.FirstOffset >= 40 {
			t.Fatalf("entry %+v outside [30, 40)", e)
		}
	}
	if len(got) != 4 { // markers at 32, 35, 38, 41 (first offset 39)
		t.Fatalf("range [30, 40): %v", got)
	}
}

// TestTxnIndexStaleFiles: a missing, torn or garbled file of a segment
// below the recovery point is not trusted (stale from its base); a
// rebuild rewrites it from the entries given.
func TestTxnIndexStaleFiles(t *testing.T) {
	for _, damage := range []string{"missing", "torn", "garbled"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			l, want := txnLog(t, dir)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// The second segment's index.
			ents, _ := filepath.Glob(filepath.Join(dir, "*"+txnIndexSuffix))
			slices.Sort(ents)
			victim := ents[1]
			base, _ := parseSegmentName(filepath.Base(victim), txnIndexSuffix)
			switch damage {
			case "missing":
				os.Remove(victim)
			case "torn":
				fi, _ := os.Stat(victim)
				os.Truncate(victim, fi.Size()-5)
			case "garbled":
				b, _ := os.ReadFile(victim)
				b[19] ^= 0x40 // the first entry's last offset
				os.WriteFile(victim, b, 0o640)
			}
			l = openLog(t, dir, smallConfig(), Options{})
			defer l.Close()
			if s := l.TxnIndexStale(); s != base {
				t.Fatalf("stale from %d, want %d", s, base)
			}
			if err := l.RebuildTxnIndexes(want); err != nil {
				t.Fatal(err)
			}
			if l.TxnIndexStale() != -1 {
				t.Fatal("still stale after the rebuild")
			}
			if got := allAborted(l); !slices.Equal(got, want) {
				t.Fatalf("after rebuild: %v, want %v", got, want)
			}
		})
	}
}

// TestTxnIndexAfterCrash: the segments an unclean start scans have stale
// indexes; those below the recovery point keep theirs.
func TestTxnIndexAfterCrash(t *testing.T) {
	dir := t.TempDir()
	l, _ := txnLog(t, dir)
	active := l.ActiveBase()
	crash(l)
	l = openLog(t, dir, smallConfig(), Options{})
	defer l.Close()
	if s := l.TxnIndexStale(); s < 0 || s > active {
		t.Fatalf("stale from %d, active segment %d", s, active)
	}
}

// TestTxnIndexTruncateAndRetention: truncation drops the entries of
// markers it removes (and keeps them dropped after a reopen); retention
// and DeleteRecords delete the files with their segments.
func TestTxnIndexTruncateAndRetention(t *testing.T) {
	dir := t.TempDir()
	l, want := txnLog(t, dir)
	if err := l.TruncateTo(36); err != nil {
		t.Fatal(err)
	}
	var kept []AbortedTxn
	for _, e := range want {
		if e.LastOffset < 36 {
			kept = append(kept, e)
		}
	}
	if got := allAborted(l); !slices.Equal(got, kept) {
		t.Fatalf("after truncation: %v, want %v", got, kept)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, smallConfig(), Options{})
	defer l.Close()
	if got := allAborted(l); !slices.Equal(got, kept) {
		t.Fatalf("after reopen: %v, want %v", got, kept)
	}
	if _, err := l.DeleteRecordsBefore(30); err != nil {
		t.Fatal(err)
	}
	ents, _ := filepath.Glob(filepath.Join(dir, "*"+txnIndexSuffix))
	if len(ents) != l.Segments() {
		t.Fatalf("%d txn indexes for %d segments after DeleteRecords", len(ents), l.Segments())
	}
	for _, e := range allAborted(l) {
		if e.LastOffset < l.segs[0].base {
			t.Fatalf("entry %+v of a deleted segment", e)
		}
	}
}

// FuzzDecodeTxnIndex: no input panics, a decoded index re-encodes to the
// same bytes, and errors wrap ErrTxnIndex.
func FuzzDecodeTxnIndex(f *testing.F) {
	f.Add(appendTxnEntry(nil, AbortedTxn{ProducerID: 1, FirstOffset: 3, LastOffset: 5, LastStableOffset: 6}), int64(0), int64(10))
	f.Add([]byte{0, 1, 2}, int64(0), int64(10))
	f.Fuzz(func(t *testing.T, b []byte, base, next int64) {
		es, err := decodeTxnIndex(b, base, next)
		if err != nil {
			if !errors.Is(err, ErrTxnIndex) {
				t.Fatalf("error %v is not ErrTxnIndex", err)
			}
			return
		}
		if cap(es) > len(b)/txnEntrySize {
			t.Fatalf("%d entries allocated for %d bytes", cap(es), len(b))
		}
		var again []byte
		for _, e := range es {
			again = appendTxnEntry(again, e)
		}
		if string(again) != string(b) {
			t.Fatalf("re-encoded %x, was %x", again, b)
		}
	})
}
