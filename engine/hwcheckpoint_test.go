package engine

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ringlog/ioring"
)

func TestHWCheckpointCodec(t *testing.T) {
	hws := map[TP]int64{{"a", 0}: 5, {"a", 1}: 0, {"b.c_d-e", 7}: 1 << 40}
	b := encodeHWCheckpoint(hws)
	if string(b) != "0\n3\na 0 5\na 1 0\nb.c_d-e 7 1099511627776\n" {
		t.Fatalf("encoded %q", b)
	}
	got, err := decodeHWCheckpoint(b)
	if err != nil || !maps.Equal(got, hws) {
		t.Fatalf("decode: %v %v", got, err)
	}
	if got, err := decodeHWCheckpoint(encodeHWCheckpoint(nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	for _, bad := range []string{
		"", "1\n0\n", "0\n", "0\nx\n", "0\n-1\n", "0\n99999\na 0 1\n",
		"0\n1\n", "0\n1\na 0\n", "0\n1\na b 1\n", "0\n1\na 0 -1\n", "0\n1\na -1 0\n",
		"0\n1\nbad/name 0 1\n", "0\n1\na 0 1 2\n", "0\n1\na 0 1\na 1 1\n",
	} {
		if _, err := decodeHWCheckpoint([]byte(bad)); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

func FuzzDecodeHWCheckpoint(f *testing.F) {
	f.Add(encodeHWCheckpoint(map[TP]int64{{"a", 0}: 5, {"b", 3}: 9}))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n1\na 0 -1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hws, err := decodeHWCheckpoint(b)
		if err != nil {
			return
		}
		again, err := decodeHWCheckpoint(encodeHWCheckpoint(hws))
		if err != nil || !maps.Equal(again, hws) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

func readHWCheckpoint(t testing.TB, dir string) map[TP]int64 {
	t.Helper()
	hws, err := loadHWCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	return hws
}

func TestHWSurvivesRestart(t *testing.T) {
	for _, mode := range modes() {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			e, err := OpenCore(Config{Dir: dir, Shards: 2, IO: mode, OnAppended: func(TP, int64) {}, HWCheckpointInterval: 10 * time.Millisecond})
			mustOK(t, err)
			defer func() { e.Close() }()
			e.CreateTopic("h", 2, -1, nil, false)
			tp, tp1 := TP{"h", 0}, TP{"h", 1}
			mustOK(t, e.BecomeLeader(tp, 1))
			mustOK(t, e.BecomeLeader(tp1, 1))
			for range 5 {
				appendSync(e, tp, mkBatch(t, 2, "x", 1, -1, 0, 0))
				appendSync(e, tp1, mkBatch(t, 2, "x", 1, -1, 0, 0))
			}
			mustOK(t, e.SetHW(tp, 6))
			mustOK(t, e.SetHW(tp1, 10))
			// Written while running, so that a crash keeps it.
			deadline := time.Now().Add(5 * time.Second)
			for hws := readHWCheckpoint(t, dir); hws[tp] != 6 || hws[tp1] != 10; hws = readHWCheckpoint(t, dir) {
				if time.Now().After(deadline) {
					t.Fatalf("checkpoint %v", hws)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if _, err := e.DeleteRecords(tp1, 4); err != nil {
				t.Fatal(err)
			}
			mustOK(t, e.SetHW(tp, 8))
			mustOK(t, e.Close())
			if hws := readHWCheckpoint(t, dir); hws[tp] != 8 {
				t.Fatalf("checkpoint at close %v", hws)
			}

			e = openReplicated(t, dir, mode, nil)
			if st, _ := e.State(tp); st.HW != 8 || st.LEO != 10 || st.Role != RoleNone {
				t.Fatalf("after restart: %+v", st)
			}
			if hs := readAll(t, e, tp); len(hs) != 4 {
				t.Fatalf("consumers see %d batches after restart, want 4 (HW 8)", len(hs))
			}
			mustOK(t, e.Close())

			// A value beyond the LEO (the log lost its tail) is capped; a
			// partition missing from the file starts at its log start.
			mustOK(t, os.WriteFile(filepath.Join(dir, hwCheckpointFile), encodeHWCheckpoint(map[TP]int64{tp: 1000}), 0o644))
			e = openReplicated(t, dir, mode, nil)
			if st, _ := e.State(tp); st.HW != 10 {
				t.Fatalf("HW beyond the LEO: %+v", st)
			}
			if st, _ := e.State(tp1); st.HW != 4 || st.LogStartOffset != 4 {
				t.Fatalf("partition without a checkpoint: %+v", st)
			}
			// A deleted topic leaves the file at once.
			mustOK(t, e.DeleteTopic("h"))
			if hws := readHWCheckpoint(t, dir); len(hws) != 0 {
				t.Fatalf("checkpoint after delete: %v", hws)
			}
			mustOK(t, e.Close())

			// A damaged checkpoint stops the start rather than guess.
			mustOK(t, os.WriteFile(filepath.Join(dir, hwCheckpointFile), []byte("0\n2\nh 0 1\n"), 0o644))
			if e2, err := OpenCore(Config{Dir: dir, Shards: 1, IO: mode, OnAppended: func(TP, int64) {}}); err == nil {
				e2.Close()
				t.Fatal("a damaged checkpoint was accepted")
			}
		})
	}
}

// TestNoReplicationLayerHWAfterRestart: an engine without a replication
// layer checkpoints its high watermarks as every engine does (one code
// path), and after a restart its HW is its LEO, whatever the checkpoint
// says.
func TestNoReplicationLayerHWAfterRestart(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, ioring.ModeAuto)
	e.CreateTopic("s", 1, -1, nil, false)
	appendSync(e, TP{"s", 0}, mkBatch(t, 3, "x", 1, -1, 0, 0))
	mustOK(t, e.Close())
	if _, err := os.Stat(filepath.Join(dir, hwCheckpointFile)); err != nil {
		t.Fatalf("no %s after a clean close: %v", hwCheckpointFile, err)
	}
	e = openEngine(t, dir, ioring.ModeAuto)
	defer e.Close()
	if st, _ := e.State(TP{"s", 0}); st.HW != 3 {
		t.Fatalf("HW after restart: %+v", st)
	}
}
