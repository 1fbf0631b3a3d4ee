package framepool

import "testing"

func TestGetCapacities(t *testing.T) {
	for _, tc := range []struct {
		n, cap int
		pooled bool
	}{
		{100, 100, false}, // below MinSize: exact
		{MinSize - 1, MinSize - 1, false},
		{MinSize, MinSize, true},
		{MinSize + 1, 2 * MinSize, true}, // rounded up to a power of two
		{3 << 20, 4 << 20, true},
		{1<<27 + 1, 1<<27 + 1, false}, // above the largest class: exact
	} {
		b := Get(tc.n)
		if len(b) != 0 || cap(b) != tc.cap || Pooled(cap(b)) != tc.pooled {
			t.Errorf("Get(%d): len %d cap %d pooled %v, want len 0 cap %d pooled %v",
				tc.n, len(b), cap(b), Pooled(cap(b)), tc.cap, tc.pooled)
		}
	}
}

// TestPutReuses: a buffer given back is the one a next Get of its class
// returns. sync.Pool may miss (the goroutine moved to another P, a
// collection ran in between, and under the race detector it drops puts at
// random), so it is tried a few times, and not required under -race.
func TestPutReuses(t *testing.T) {
	reused := false
	for range 20 {
		b := Get(300 << 10)[:1]
		Put(b)
		c := Get(400 << 10) // same class: 512 KiB
		if cap(c) != 512<<10 {
			t.Fatalf("cap %d, want %d", cap(c), 512<<10)
		}
		if &c[:1][0] == &b[0] {
			reused = true
			break
		}
	}
	if !reused && !raceEnabled {
		t.Errorf("Get after Put never returned the buffer given back")
	}
	Put(make([]byte, 0, 300<<10)) // not a class size: dropped, not pooled
	if d := Get(300 << 10); cap(d) != 512<<10 {
		t.Errorf("a buffer of an odd capacity was pooled: cap %d", cap(d))
	}
}
