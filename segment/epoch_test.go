package segment

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"ringlog/segment/batch"
)

// The assign rule is Kafka's LeaderEpochFileCache.assign: the latest epoch
// at or after its start changes nothing; anything else drops, from the end,
// every entry whose epoch is at least the new one or whose start offset is
// at least the new one, then appends the new entry.
func TestEpochAssignFollowsKafka(t *testing.T) {
	e := func(es ...EpochEntry) []EpochEntry { return es }
	for _, tc := range []struct {
		name    string
		before  []EpochEntry
		epoch   int32
		offset  int64
		after   []EpochEntry
		changed bool
	}{
		{"empty cache", nil, 0, 0, e(EpochEntry{0, 0}), true},
		{"newer epoch after the latest start", e(EpochEntry{0, 0}), 1, 5, e(EpochEntry{0, 0}, EpochEntry{1, 5}), true},
		{"latest epoch again, later", e(EpochEntry{0, 0}, EpochEntry{1, 5}), 1, 9, e(EpochEntry{0, 0}, EpochEntry{1, 5}), false},
		{"latest epoch again, same start", e(EpochEntry{0, 0}, EpochEntry{1, 5}), 1, 5, e(EpochEntry{0, 0}, EpochEntry{1, 5}), false},
		{"latest epoch, earlier start", e(EpochEntry{0, 0}, EpochEntry{1, 5}), 1, 3, e(EpochEntry{0, 0}, EpochEntry{1, 3}), true},
		{"newer epoch at an empty epoch's start", e(EpochEntry{0, 0}, EpochEntry{2, 1}), 3, 1, e(EpochEntry{0, 0}, EpochEntry{3, 1}), true},
		{"newer epoch before the latest start", e(EpochEntry{0, 0}, EpochEntry{1, 5}, EpochEntry{2, 9}), 3, 5, e(EpochEntry{0, 0}, EpochEntry{3, 5}), true},
		{"older epoch drops the conflicting tail", e(EpochEntry{0, 0}, EpochEntry{2, 1}, EpochEntry{3, 2}), 1, 1, e(EpochEntry{0, 0}, EpochEntry{1, 1}), true},
		{"older epoch after the latest start", e(EpochEntry{0, 0}, EpochEntry{2, 5}), 1, 7, e(EpochEntry{0, 0}, EpochEntry{1, 7}), true},
		{"older than every epoch", e(EpochEntry{3, 10}, EpochEntry{4, 20}), 1, 30, e(EpochEntry{1, 30}), true},
		{"an earlier epoch's range", e(EpochEntry{1, 0}, EpochEntry{3, 100}, EpochEntry{4, 150}, EpochEntry{7, 300}), 2, 120, e(EpochEntry{1, 0}, EpochEntry{2, 120}), true},
		{"undefined epoch", e(EpochEntry{0, 0}), UndefinedEpoch, 5, e(EpochEntry{0, 0}), false},
		{"negative offset", e(EpochEntry{0, 0}), 1, -1, e(EpochEntry{0, 0}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := epochCache{entries: slices.Clone(tc.before)}
			if changed := c.assign(tc.epoch, tc.offset); changed != tc.changed || !slices.Equal(c.entries, tc.after) {
				t.Fatalf("assign(%d, %d) on %v: %v changed=%v, want %v changed=%v", tc.epoch, tc.offset, tc.before, c.entries, changed, tc.after, tc.changed)
			}
		})
	}
}

// Recovery meets again the batches of epochs that may have started in an
// earlier segment: only an epoch newer than the latest is recorded there.
func TestEpochAssignIfNewer(t *testing.T) {
	before := []EpochEntry{{0, 0}, {1, 100}, {2, 500}}
	for _, tc := range []struct {
		epoch  int32
		offset int64
		after  []EpochEntry
	}{
		{1, 300, before}, // a later batch of epoch 1: its start stays 100
		{2, 600, before},
		{0, 50, before},
		{3, 700, []EpochEntry{{0, 0}, {1, 100}, {2, 500}, {3, 700}}},
		{3, 400, []EpochEntry{{0, 0}, {1, 100}, {3, 400}}}, // newer, earlier: the tail goes
	} {
		c := epochCache{entries: slices.Clone(before)}
		c.assignIfNewer(tc.epoch, tc.offset)
		if !slices.Equal(c.entries, tc.after) {
			t.Fatalf("assignIfNewer(%d, %d): %v, want %v", tc.epoch, tc.offset, c.entries, tc.after)
		}
	}
}

// epochFileEntries reads the leader-epoch checkpoint of dir as it is on
// disk, without opening the log (Open would trim the cache to the LEO).
func epochFileEntries(t *testing.T, dir string) []EpochEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, epochFile))
	if err != nil {
		t.Fatal(err)
	}
	es, err := parseEpochFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// wantEpochs checks the cache in memory and in the checkpoint file.
func wantEpochs(t *testing.T, l *Log, want []EpochEntry, when string) {
	t.Helper()
	if got := l.Epochs(); !slices.Equal(got, want) {
		t.Fatalf("%s: epochs %v, want %v", when, got, want)
	}
	if got := epochFileEntries(t, l.dir); !slices.Equal(got, want) {
		t.Fatalf("%s: checkpoint file %v, want %v", when, got, want)
	}
}

func appendOne(t *testing.T, l *Log, epoch int32, seed int) {
	t.Helper()
	if _, err := l.Append([][]byte{mkBatch(t, 1, 20, 1, seed)}, AppendOptions{LeaderEpoch: epoch}); err != nil {
		t.Fatal(err)
	}
}

// replicate copies leader's batches from offset on to follower, as a
// follower's fetch does.
func replicate(t *testing.T, leader, follower *Log, offset int64) {
	t.Helper()
	data, err := leader.ReadBatches(offset, 1<<30, leader.LEO())
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]byte
	for len(data) > 0 {
		h, err := batch.ParseHeader(data)
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, data[:h.Size()])
		data = data[h.Size():]
	}
	if len(batches) == 0 {
		return
	}
	if _, err := follower.Append(batches, AppendOptions{Replica: true}); err != nil {
		t.Fatal(err)
	}
}

// A broker that led an epoch without writing holds an entry at its LEO.
// TruncateTo at or above the LEO returned before trimming the cache, so
// that entry survived a truncation to the LEO; Kafka's truncateFromEnd
// removes every entry starting at or after the new end.
func TestTruncateToLEODropsEpochLedWithoutWrites(t *testing.T) {
	for _, target := range []int64{1, 5} { // at the LEO, above it
		dir := t.TempDir()
		l := openLog(t, dir, smallConfig(), Options{})
		appendOne(t, l, 0, 0)
		if err := l.AssignEpoch(2, l.LEO()); err != nil {
			t.Fatal(err)
		}
		wantEpochs(t, l, []EpochEntry{{0, 0}, {2, 1}}, "after leading epoch 2")
		if err := l.TruncateTo(target); err != nil {
			t.Fatal(err)
		}
		if l.LEO() != 1 {
			t.Fatalf("truncate to %d moved the LEO to %d", target, l.LEO())
		}
		wantEpochs(t, l, []EpochEntry{{0, 0}}, "after truncating to the LEO")
		// Nothing left to trim: no rewrite, no error.
		if err := l.TruncateTo(target); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TruncateFullyAndStartAt empties the cache, on disk too (Kafka's
// clearAndFlush).
func TestTruncateFullyAndStartAtEmptiesEpochs(t *testing.T) {
	l := openLog(t, t.TempDir(), smallConfig(), Options{})
	defer l.Close()
	appendOne(t, l, 0, 0)
	if err := l.AssignEpoch(2, l.LEO()); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateFullyAndStartAt(40); err != nil {
		t.Fatal(err)
	}
	wantEpochs(t, l, nil, "after TruncateFullyAndStartAt")
}

// Broker A leads epoch 1 and writes offset 1; broker B leads epoch 2 from
// its LEO 1 without writing; A leads epoch 3 and writes offset 2. B then
// follows A. The old cache code left B with [{0 0} {2 1} {3 2}] against
// A's [{0 0} {1 1} {3 2}] over identical logs: the truncation to B's LEO
// kept {2 1}, and the replayed batch of epoch 1 was ignored as older.
// Either fix alone gives B the leader's exact cache.
func TestFollowerReplayAfterEmptyEpochMatchesLeaderCache(t *testing.T) {
	for _, truncate := range []bool{true, false} {
		name := "without truncation"
		if truncate {
			name = "truncated to the answer"
		}
		t.Run(name, func(t *testing.T) {
			a := openLog(t, t.TempDir(), smallConfig(), Options{})
			defer a.Close()
			bDir := t.TempDir()
			b := openLog(t, bDir, smallConfig(), Options{})
			appendOne(t, a, 0, 0)
			replicate(t, a, b, 0)

			if err := a.AssignEpoch(1, a.LEO()); err != nil {
				t.Fatal(err)
			}
			appendOne(t, a, 1, 1) // offset 1
			if err := b.AssignEpoch(2, b.LEO()); err != nil {
				t.Fatal(err)
			}
			if err := a.AssignEpoch(3, a.LEO()); err != nil {
				t.Fatal(err)
			}
			appendOne(t, a, 3, 2) // offset 2
			leaderEpochs := []EpochEntry{{0, 0}, {1, 1}, {3, 2}}
			wantEpochs(t, a, leaderEpochs, "leader")
			wantEpochs(t, b, []EpochEntry{{0, 0}, {2, 1}}, "follower before")

			if truncate {
				// B asks about its epoch 2: A answers epoch 1, ending at 2;
				// B truncates to min(2, its LEO 1).
				e, end := a.EndOffsetForEpoch(2)
				if e != 1 || end != 2 {
					t.Fatalf("leader answers epoch 2 with %d %d, want 1 2", e, end)
				}
				if err := b.TruncateTo(min(end, b.LEO())); err != nil {
					t.Fatal(err)
				}
				wantEpochs(t, b, []EpochEntry{{0, 0}}, "follower after truncation")
			}
			replicate(t, a, b, b.LEO())
			sameBytes(t, readAll(t, b), readAll(t, a), "follower log")
			wantEpochs(t, b, leaderEpochs, "follower after replay")

			// The corrected cache survives a clean restart and a crash.
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = openLog(t, bDir, smallConfig(), Options{})
			wantEpochs(t, b, leaderEpochs, "follower after restart")
			crash(b)
			b = openLog(t, bDir, smallConfig(), Options{})
			defer b.Close()
			if r := b.Recovery(); r.Clean || r.SegmentsScanned == 0 {
				t.Fatalf("no scan after crash: %+v", r)
			}
			wantEpochs(t, b, leaderEpochs, "follower after crash")
		})
	}
}

// A replica batch, or AssignEpoch, of an epoch older than the latest
// entry drops the entries it contradicts (Kafka's
// maybeTruncateNonMonotonicEntries) instead of being ignored; the result is
// persisted and kept across restarts.
func TestAssignOlderEpochDropsConflictingEntries(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, smallConfig(), Options{})
	for i := range 10 {
		appendOne(t, l, 0, i)
	}
	for i := range 10 {
		appendOne(t, l, 2, 10+i)
	}
	for i := range 10 {
		appendOne(t, l, 4, 20+i)
	}
	if err := l.AssignEpoch(6, l.LEO()); err != nil {
		t.Fatal(err)
	}
	wantEpochs(t, l, []EpochEntry{{0, 0}, {2, 10}, {4, 20}, {6, 30}}, "before")

	// A replica batch of epoch 5 at the LEO: the empty epoch 6 goes.
	h := batch.Header{BaseOffset: 30, PartitionLeaderEpoch: 5, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1, MaxTimestamp: 1}
	b, err := batch.Build(nil, h, batch.None, []batch.Record{{Value: []byte("v")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([][]byte{b}, AppendOptions{Replica: true}); err != nil {
		t.Fatal(err)
	}
	replayed := []EpochEntry{{0, 0}, {2, 10}, {4, 20}, {5, 30}}
	wantEpochs(t, l, replayed, "after a replica batch of epoch 5")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, smallConfig(), Options{})
	wantEpochs(t, l, replayed, "after restart")
	crash(l)
	l = openLog(t, dir, smallConfig(), Options{})
	wantEpochs(t, l, replayed, "after crash")

	// Epoch 1 from offset 5: epochs 2, 4 and 5 contradict it. (The batches
	// still say otherwise, so only a clean restart is asked to keep this: a
	// crash scan records their newer epochs again, as Kafka's recovery
	// does. A follower truncates before it meets such an epoch.)
	if err := l.AssignEpoch(1, 5); err != nil {
		t.Fatal(err)
	}
	corrected := []EpochEntry{{0, 0}, {1, 5}}
	wantEpochs(t, l, corrected, "after assigning epoch 1 at 5")
	if e, o := l.EndOffsetForEpoch(0); e != 0 || o != 5 {
		t.Fatalf("end of epoch 0: %d %d, want 0 5", e, o)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, smallConfig(), Options{})
	defer l.Close()
	wantEpochs(t, l, corrected, "after restart")
}

// Recovery scans the segments from the recovery point on, and meets there
// batches of an epoch that started in an earlier segment. Recording them
// with assign's rule would move that epoch's start to the first scanned
// batch and drop every later entry; recovery records only newer epochs.
func TestRecoveryScanKeepsEpochsStartedInEarlierSegments(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, smallConfig(), Options{})
	for i := range 20 {
		appendOne(t, l, 0, i)
	}
	epoch1 := l.LEO()
	for i := 0; l.active.base <= epoch1; i++ {
		if i == 10_000 {
			t.Fatal("no roll")
		}
		if _, err := l.Append([][]byte{mkBatch(t, 1, 500, 1, i)}, AppendOptions{LeaderEpoch: 1}); err != nil {
			t.Fatal(err)
		}
	}
	appendOne(t, l, 1, 1) // epoch 1 in the active segment too
	epoch2 := l.LEO()
	appendOne(t, l, 2, 2)
	want := []EpochEntry{{0, 0}, {1, epoch1}, {2, epoch2}}
	wantEpochs(t, l, want, "before the crash")
	if l.recoveryPoint != l.active.base {
		t.Fatalf("recovery point %d, active segment at %d", l.recoveryPoint, l.active.base)
	}
	crash(l)
	l = openLog(t, dir, smallConfig(), Options{})
	defer l.Close()
	if r := l.Recovery(); r.SegmentsScanned != 1 || r.BatchesScanned < 2 {
		t.Fatalf("recovery %+v, want a scan of the active segment", r)
	}
	wantEpochs(t, l, want, "after the crash")
}
