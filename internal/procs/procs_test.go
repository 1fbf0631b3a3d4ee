package procs

import (
	"runtime"
	"testing"
)

// TestAddReleaseBase: each Add raises GOMAXPROCS by one, Base stays the
// value before the first Add, and the last Release restores it.
func TestAddReleaseBase(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	Add()
	Add()
	if got := runtime.GOMAXPROCS(0); got != base+2 {
		t.Fatalf("GOMAXPROCS %d after two Adds, want %d", got, base+2)
	}
	if got := Base(); got != base {
		t.Fatalf("Base %d with two Ps added, want %d", got, base)
	}
	Release()
	if got := runtime.GOMAXPROCS(0); got != base+1 {
		t.Fatalf("GOMAXPROCS %d after a Release, want %d", got, base+1)
	}
	Release()
	if got, added := runtime.GOMAXPROCS(0), Added(); got != base || added != 0 {
		t.Fatalf("GOMAXPROCS %d, %d added after the last Release, want %d and 0", got, added, base)
	}
	if got := Base(); got != base {
		t.Fatalf("Base %d with nothing added, want %d", got, base)
	}
}
