package engine

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRecoveredLogs: a log that a start finds without its clean-shutdown
// marker (a crash) is listed with where it ended, its last leader epoch
// included; a log closed cleanly, and every log after a clean restart,
// is not.
func TestRecoveredLogs(t *testing.T) {
	dir := t.TempDir()
	e := openReplicated(t, dir, "", nil)
	e.CreateTopic("r", 2, -1, nil, false)
	crashed, clean := TP{"r", 0}, TP{"r", 1}
	for _, tp := range []TP{crashed, clean} {
		mustOK(t, e.BecomeLeader(tp, 3))
		appendSync(e, tp, mkBatch(t, 4, "x", 1, -1, 0, 0))
	}
	mustOK(t, e.Close())
	// As a crash leaves it: no marker on one log.
	if err := os.Remove(filepath.Join(dir, "r-0", "clean-shutdown")); err != nil {
		t.Fatal(err)
	}
	e = openReplicated(t, dir, "", nil)
	want := []RecoveredLog{{TP: crashed, LastEpoch: 3, LEO: 4}}
	if got := e.RecoveredLogs(); !slices.Equal(got, want) {
		t.Fatalf("after one log lost its marker: %+v, want %+v", got, want)
	}
	mustOK(t, e.Close())
	e = openReplicated(t, dir, "", nil)
	defer e.Close()
	if got := e.RecoveredLogs(); len(got) != 0 {
		t.Fatalf("after a clean restart: %+v", got)
	}
}
