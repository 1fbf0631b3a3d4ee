package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ringlog/ioring"
	"ringlog/segment/batch"
)

// moveEngine opens an engine on dirs with 4 KiB segments (a move copies
// several closed segments and an active one) and hook as its MoveHook.
func moveEngine(t testing.TB, dirs []string, hook func(TP, MoveStep)) *Core {
	t.Helper()
	e, err := OpenCore(Config{Dir: dirs[0], LogDirs: dirs[1:], Shards: 2, IO: ioring.ModePortable,
		Topic: smallSegments(4096), MoveHook: hook})
	mustOK(t, err)
	return e
}

// otherDir is the directory of dirs that does not hold tp's folder.
func otherDir(t testing.TB, dirs []string, name string) (from, to string) {
	t.Helper()
	from = partitionDirs(t, dirs...)[name]
	for _, d := range dirs {
		if d != from {
			return from, d
		}
	}
	t.Fatal("one directory")
	return
}

func absPath(t testing.TB, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	mustOK(t, err)
	return a
}

// checkBatches fails unless tp holds want batches of 3 records with
// consecutive offsets from 0.
func checkBatches(t testing.TB, e *Core, tp TP, want int) {
	t.Helper()
	hs := readAll(t, e, tp)
	if len(hs) != want {
		t.Fatalf("%v holds %d batches, want %d", tp, len(hs), want)
	}
	for i, h := range hs {
		if h.BaseOffset != int64(3*i) {
			t.Fatalf("%v batch %d at offset %d, want %d", tp, i, h.BaseOffset, 3*i)
		}
	}
}

// TestMoveReplicaWhileAppending: a partition moved to another log
// directory while a producer appends keeps every appended batch, in order,
// after the move and after a restart; during the move Sizes shows the
// future log in the destination; afterwards the folder is only there.
func TestMoveReplicaWhileAppending(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	paused, resume, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	e := moveEngine(t, dirs, func(_ TP, step MoveStep) {
		switch step {
		case MoveCopiedClosed:
			close(paused)
			<-resume
		case MoveDone:
			close(done)
		}
	})
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	tp := TP{"t", 0}
	fillPartitions(t, e, "t", 1, 40)
	from, to := otherDir(t, dirs, "t-0")

	var mu sync.Mutex
	appended := 40
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := appendSync(e, tp, mkBatch(t, 3, "during the move", 5000, -1, 0, 0)); err != nil {
				t.Errorf("append during the move: %v", err)
				return
			}
			mu.Lock()
			appended++
			mu.Unlock()
		}
	}()
	mustOK(t, e.AlterReplicaLogDir(tp, absPath(t, to)))
	<-paused
	var future *PartitionSize
	for _, ps := range e.Sizes() {
		if ps.Future {
			future = &ps
		}
	}
	if future == nil || future.Dir != absPath(t, to) || future.Size <= 0 || future.TP != tp {
		t.Fatalf("Sizes during the move: %+v", e.Sizes())
	}
	close(resume)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the move did not finish")
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	n := appended
	mu.Unlock()
	if n <= 40 {
		t.Fatalf("no append during the move")
	}
	checkBatches(t, e, tp, n)
	if got := partitionDirs(t, dirs...)["t-0"]; got != to {
		t.Fatalf("t-0 is in %s after the move, want %s", got, to)
	}
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, ent := range ents {
			if strings.HasSuffix(ent.Name(), futureSuffix) || strings.HasSuffix(ent.Name(), deleteSuffix) {
				t.Fatalf("left in %s: %s", d, ent.Name())
			}
		}
	}
	for _, ps := range e.Sizes() {
		if ps.Future || ps.Dir != absPath(t, to) {
			t.Fatalf("Sizes after the move: %+v", ps)
		}
	}
	// It takes appends in its new place, and survives a restart there.
	if _, err := appendSync(e, tp, mkBatch(t, 3, "after", 6000, -1, 0, 0)); err != nil {
		t.Fatal(err)
	}
	mustOK(t, e.Close())
	e = moveEngine(t, dirs, nil)
	defer e.Close()
	checkBatches(t, e, tp, n+1)
	if clean, _ := e.OpenStats(); clean < 1 {
		t.Errorf("the moved log did not open cleanly")
	}
	_ = from
}

// TestMoveReplicaErrors: an unknown or relative directory is
// ErrLogDirNotFound, an unknown partition ErrUnknownTopicOrPartition, the
// directory the log is in already a no-op.
func TestMoveReplicaErrors(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	e := moveEngine(t, dirs, nil)
	defer e.Close()
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	tp := TP{"t", 0}
	from, _ := otherDir(t, dirs, "t-0")
	for _, bad := range []string{filepath.Join(root, "c"), "b", ""} {
		if err := e.AlterReplicaLogDir(tp, bad); !errors.Is(err, ErrLogDirNotFound) {
			t.Errorf("to %q: %v, want ErrLogDirNotFound", bad, err)
		}
	}
	if err := e.AlterReplicaLogDir(TP{"nosuch", 0}, absPath(t, dirs[1])); !errors.Is(err, ErrUnknownTopicOrPartition) {
		t.Errorf("unknown partition: %v", err)
	}
	mustOK(t, e.AlterReplicaLogDir(tp, absPath(t, from)))
	for _, ps := range e.Sizes() {
		if ps.Future {
			t.Fatalf("a move to where the log is: %+v", ps)
		}
	}
}

// TestMoveReplicaCrashAtEachStep: the on-disk state at every step of a
// move (copied as a SIGKILL there would leave it) opens with exactly one
// complete log of the partition, with every batch: the source before the
// swap's first rename, the copy from the second on, and between the two
// the complete future log renamed into place. A move the crash cut short
// of its swap starts again (Kafka resumes it too): the log ends in the
// destination, and no future or deleted folder is left.
func TestMoveReplicaCrashAtEachStep(t *testing.T) {
	steps := []MoveStep{MoveStarted, MoveCopiedClosed, MoveCopied, MoveSourceRenamed, MoveFutureRenamed, MoveDone}
	for _, at := range steps {
		t.Run(string(at), func(t *testing.T) {
			root := t.TempDir()
			live := filepath.Join(root, "live")
			dirs := []string{filepath.Join(live, "a"), filepath.Join(live, "b")}
			reached, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
			e := moveEngine(t, dirs, func(_ TP, step MoveStep) {
				if step == at {
					close(reached)
					<-release
				}
				if step == MoveDone {
					close(done)
				}
			})
			if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
				t.Fatal(err)
			}
			tp := TP{"t", 0}
			fillPartitions(t, e, "t", 1, 40)
			_, to := otherDir(t, dirs, "t-0")
			mustOK(t, e.AlterReplicaLogDir(tp, absPath(t, to)))
			<-reached
			crashed := filepath.Join(root, "crashed")
			copyTree(t, live, crashed)
			close(release)
			<-done
			mustOK(t, e.Close())

			cdirs := []string{filepath.Join(crashed, "a"), filepath.Join(crashed, "b")}
			resumed := make(chan struct{})
			e = moveEngine(t, cdirs, func(_ TP, step MoveStep) {
				if step == MoveDone {
					close(resumed)
				}
			})
			defer e.Close()
			checkBatches(t, e, tp, 40)
			// Cut short before the swap, the log opened where it was (from)
			// and moves again.
			if map[MoveStep]bool{MoveStarted: true, MoveCopiedClosed: true, MoveCopied: true}[at] {
				select {
				case <-resumed:
				case <-time.After(10 * time.Second):
					t.Fatalf("the move cut short at %s did not complete after the restart", at)
				}
			}
			if where, want := partitionDirs(t, cdirs...)["t-0"], filepath.Join(crashed, filepath.Base(to)); where != want {
				t.Errorf("after a crash at %s the log is in %s, want %s", at, where, want)
			}
			checkBatches(t, e, tp, 40)
			for _, d := range cdirs {
				ents, _ := os.ReadDir(d)
				for _, ent := range ents {
					if strings.HasSuffix(ent.Name(), futureSuffix) || strings.HasSuffix(ent.Name(), deleteSuffix) {
						t.Errorf("left in %s after the start: %s", d, ent.Name())
					}
				}
			}
			// And it takes appends.
			if _, err := appendSync(e, tp, mkBatch(t, 3, "after", 6000, -1, 0, 0)); err != nil {
				t.Fatal(err)
			}
			checkBatches(t, e, tp, 41)
		})
	}
}

// TestMoveReplicaTruncatedDuringMove: a follower's log truncated while its
// move copies (and written again at the same offsets with other batches)
// moves whole: the swap copies every file again rather than only the bytes
// past what the background copy took, which would keep the cut batches.
func TestMoveReplicaTruncatedDuringMove(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	paused, resume, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	e, err := OpenCore(Config{Dir: dirs[0], LogDirs: dirs[1:], Shards: 2, IO: ioring.ModePortable,
		Topic: smallSegments(4096), OnAppended: func(TP, int64) {},
		MoveHook: func(_ TP, step MoveStep) {
			switch step {
			case MoveCopiedClosed:
				close(paused)
				<-resume
			case MoveDone:
				close(done)
			}
		}})
	mustOK(t, err)
	defer e.Close()
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	tp := TP{"t", 0}
	mustOK(t, e.BecomeFollower(tp, 1))
	batchAt := func(value string, base int64, epoch int32) []byte {
		b := mkBatch(t, 3, value, 1, -1, 0, 0)
		mustOK(t, batch.SetBaseOffset(b, base))
		mustOK(t, batch.SetPartitionLeaderEpoch(b, epoch))
		return b
	}
	const n = 60
	for i := range int64(n) {
		if _, err := appendReplicaSync(e, tp, batchAt("old", 3*i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	_, to := otherDir(t, dirs, "t-0")
	mustOK(t, e.AlterReplicaLogDir(tp, absPath(t, to)))
	<-paused
	// Cut the last few batches (in the active segment, which the copy
	// took a prefix of) and write others at the same offsets.
	cut := int64(3 * (n - 4))
	mustOK(t, e.Truncate(tp, cut))
	for off := cut; off < 3*n; off += 3 {
		if _, err := appendReplicaSync(e, tp, batchAt("new", off, 2)); err != nil {
			t.Fatal(err)
		}
	}
	want := readAllUpTo(t, e, tp, 3*n)
	close(resume)
	<-done
	got := readAllUpTo(t, e, tp, 3*n)
	if len(got) != len(want) {
		t.Fatalf("%d batches after the move, %d before", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("batch %d after the move: %+v, before: %+v", i, got[i], want[i])
		}
	}
	if got[len(got)-1].PartitionLeaderEpoch != 2 {
		t.Fatalf("the last batch is of epoch %d: the cut batches came back", got[len(got)-1].PartitionLeaderEpoch)
	}
}

// readAllUpTo reads tp's batch headers below end through the replica path
// (a follower's high watermark does not move here).
func readAllUpTo(t testing.TB, e *Core, tp TP, end int64) []batch.Header {
	t.Helper()
	var out []batch.Header
	for off := int64(0); off < end; {
		res, err := e.ReadReplica(tp, off, 1<<20, true)
		mustOK(t, err)
		buf := make([]byte, res.Bytes)
		n := 0
		for _, rg := range res.Regions {
			if err := rg.ReadAt(buf[n : n+int(rg.Len)]); err != nil {
				t.Fatal(err)
			}
			n += int(rg.Len)
		}
		res.Release()
		it := batch.Split(buf)
		for it.Next() {
			h, err := batch.Validate(it.Batch(), batch.Stored)
			mustOK(t, err)
			out = append(out, h)
			off = h.NextOffset()
		}
	}
	return out
}
