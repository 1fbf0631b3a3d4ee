//go:build linux

package segment

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"ringlog/internal/powerfs"
	"ringlog/ioring"
)

// A log on powerfs, which forgets on command what was never synced:
// appends with flush policy always, rolls, truncations, clean and unclean
// closes, then power losses of every kind. Every append that returned
// (synced) is read back at its offset, through the indexes too; nothing
// truncated comes back; no invalid batch is served.
func TestPowerLossLog(t *testing.T) {
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	kinds := map[string]func() (ioring.IO, ioring.Choice, error){
		"portable": func() (ioring.IO, ioring.Choice, error) { return ioring.Open(ioring.ModePortable, ioring.Config{}) },
		"uring":    func() (ioring.IO, ioring.Choice, error) { return ioring.Open(ioring.ModeUring, ioring.Config{}) },
		"uring-ring": func() (ioring.IO, ioring.Choice, error) {
			return ioring.Open(ioring.ModeUring, ioring.Config{Writes: ioring.WritesInRing})
		},
	}
	for name, openIO := range kinds {
		t.Run(name, func(t *testing.T) { testPowerLossLog(t, rounds, openIO) })
	}
}

func testPowerLossLog(t *testing.T, rounds int, openIO func() (ioring.IO, ioring.Choice, error)) {
	// A fresh IO per life of the log, closed with it: a dead process's
	// ring goes with it, and the syncs it had in flight hold the files
	// until they complete.
	newIO := func() ioring.IO {
		x, _, err := openIO()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	{
		pfs := powerfs.MountT(t, powerfs.Options{Seed: 7})
		r := rand.New(rand.NewPCG(7, 8))
		cfg := smallConfig() // 64 KiB segments, 4 KiB indexes: rolls of both kinds
		cfg.Flush = FlushAlways
		// Nested and absent: Open creates the directories, durably.
		dir := filepath.Join(pfs.Dir(), "data", "topic-0")
		// acked maps each appended batch's base offset to its CRC.
		acked := map[int64]uint32{}
		seed := 0
		for round := range rounds {
			x := newIO()
			l, err := Open(dir, cfg, Options{IO: x})
			if err != nil {
				t.Fatalf("round %d: open after a power loss: %v", round, err)
			}
			checkAcked(t, l, acked, round)
			switch r.IntN(8) {
			case 0:
				// A follower's truncation (KIP-101), synced before it
				// returns: what it removed must not come back.
				if leo := l.LEO(); leo > l.LogStartOffset() {
					to := l.LogStartOffset() + r.Int64N(leo-l.LogStartOffset())
					if err := l.TruncateTo(to); err != nil {
						t.Fatal(err)
					}
					for base := range acked {
						if base >= l.LEO() {
							delete(acked, base)
						}
					}
				}
			case 1:
				// A follower whose log has nothing in common with the
				// leader's, restarting at an offset its old log may hold
				// (the segment file of that name is reused).
				to := l.LogStartOffset() + r.Int64N(l.LEO()-l.LogStartOffset()+1)
				if err := l.TruncateFullyAndStartAt(to); err != nil {
					t.Fatal(err)
				}
				clear(acked)
			}
			for range r.IntN(40) {
				seed++
				b := mkBatch(t, 1+r.IntN(20), 10+r.IntN(400), 1_700_000_000_000+int64(seed), seed)
				res, err := l.Append([][]byte{b}, AppendOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Synced {
					t.Fatal("an append under flush policy always was not synced")
				}
				h := splitBatches(t, readFrom(t, l, res.BaseOffset))[0]
				acked[res.BaseOffset] = h.CRC
			}
			if r.IntN(4) == 0 {
				// Background syncs of rolled segments are the owner's to
				// reap: on a shared IO, Close leaves them in flight.
				for x.InFlight() > 0 {
					done, err := x.Wait(nil, 1, -1)
					if err != nil {
						t.Fatal(err)
					}
					for _, op := range done {
						Complete(op)
					}
				}
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				powerCrash(l)
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
			mode := []powerfs.Mode{powerfs.Drop, powerfs.Torn, powerfs.Reorder}[r.IntN(3)]
			if err := pfs.PowerLoss(mode); err != nil {
				t.Fatal(err)
			}
		}
		l, err := Open(dir, cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkAcked(t, l, acked, rounds)
		t.Logf("%d power losses, %d batches acknowledged and kept at the end", rounds, len(acked))
		l.Close()
	}
}

// powerCrash abandons a log as a process that loses power does: like
// crash, and the files that background syncs still pin are closed too.
func powerCrash(l *Log) {
	for _, rt := range l.rollFlushes {
		rt.rolled.unref()
	}
	l.rollFlushes = nil
	crash(l)
}

// readFrom reads the batches from offset on (what a fetch at offset gets).
func readFrom(t *testing.T, l *Log, offset int64) []byte {
	t.Helper()
	b, err := l.ReadBatches(offset, 1<<20, l.LEO())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkAcked reads the whole log (every batch valid and in order) and
// finds each acknowledged batch at its offset, also through the offset
// index (a read from its offset starts with it).
func checkAcked(t *testing.T, l *Log, acked map[int64]uint32, round int) {
	t.Helper()
	got := map[int64]uint32{}
	for _, h := range splitBatches(t, readAll(t, l)) {
		got[h.BaseOffset] = h.CRC
	}
	for base, crc := range acked {
		if c, ok := got[base]; !ok || c != crc {
			t.Fatalf("round %d: the batch acknowledged at offset %d is lost (found %v, LEO %d, log start %d, recovery %+v)",
				round, base, ok, l.LEO(), l.LogStartOffset(), l.Recovery())
		}
		if h := splitBatches(t, readFrom(t, l, base)); len(h) == 0 || h[0].BaseOffset != base {
			t.Fatalf("round %d: a read from offset %d does not start with its batch", round, base)
		}
	}
}

// TestPowerLossAppendAfterRoll: an append that rolls the log and is
// answered as synced survives a power loss even when the old segment's
// background sync never ran (the shard answers the append on its own
// completion, not on the roll's). Before issue 20's fix the new segment's
// name was only synced with the background sync: the append was lost.
func TestPowerLossAppendAfterRoll(t *testing.T) {
	pfs := powerfs.MountT(t, powerfs.Options{})
	cfg := smallConfig()
	cfg.Flush = FlushAlways
	dir := filepath.Join(pfs.Dir(), "topic-0")
	x := ioring.NewPortable()
	l := openLog(t, dir, cfg, Options{IO: x})
	for i := 0; l.Segments() == 1; i++ {
		b := mkBatch(t, 10, 500, 1_700_000_000_000, i)
		task, err := l.Prepare([][]byte{b}, AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Only the append's own ops: a roll's background sync, if this
		// append rolled, is left unsubmitted.
		var own []*ioring.Op
		for _, op := range task.Ops {
			if op.Tag == task {
				own = append(own, op)
			}
		}
		if err := ioring.Do(x, own...); err != nil {
			t.Fatal(err)
		}
		for _, op := range own {
			Complete(op)
		}
		if task.Err != nil || !task.Result.Synced {
			t.Fatalf("append: %v, synced %v", task.Err, task.Result.Synced)
		}
	}
	leo := l.LEO()
	powerCrash(l)
	if err := pfs.PowerLoss(powerfs.Drop); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg, Options{})
	defer l.Close()
	if l.LEO() != leo {
		t.Fatalf("LEO %d after the power loss, %d acknowledged as synced", l.LEO(), leo)
	}
}
