package segment

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"ringlog/segment/batch"
)

// cleanCrashFixture is a log whose next clean rewrites at least two
// groups, the first merging several segments, with what the log holds
// before and after that clean.
type cleanCrashFixture struct {
	k         *keyedLog
	cfg       Config
	pre, post []keyedRec
	leo       int64
}

func newCleanCrashFixture(t *testing.T) *cleanCrashFixture {
	cfg := compactConfig()
	k := newKeyedLog(t, t.TempDir(), cfg, allCodecs, 11)
	k.keys = 200
	k.write(300)
	k.roll()
	// The first clean shrinks the segments, so that the next one merges
	// them; then new dirty segments and an active one.
	if _, err := k.l.CleanNow(k.l.LEO(), CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	k.write(250)
	k.roll()
	k.write(3)
	f := &cleanCrashFixture{k: k, cfg: cfg, leo: k.l.LEO()}
	f.pre, _ = readRecords(t, k.l)
	f.post = compacted(f.pre, k.l.ActiveBase(), false)
	return f
}

// run plans and runs the clean, checking the shape the test needs.
func (f *cleanCrashFixture) run(t *testing.T) *CleanResult {
	l := f.k.l
	p, err := l.PlanClean(l.LEO(), nil)
	if err != nil || p == nil {
		t.Fatal(p, err)
	}
	r, err := l.Clean(p, CleanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.groups) < 2 || len(r.groups[0].old) < 2 {
		t.Fatalf("%d groups, the first of %d segments: the fixture needs two, the first merging", len(r.groups), len(r.groups[0].old))
	}
	return r
}

// reopen recovers the abandoned log and checks it: recovery passes, no
// clean file is left, the LEO is kept, every read works, and each group's
// offsets hold either the content from before the clean or from after it,
// as want says ("pre", "post", or "either": any group may be either).
func (f *cleanCrashFixture) reopen(t *testing.T, r *CleanResult, want string) *Log {
	t.Helper()
	l, err := Open(f.k.l.Dir(), f.cfg, Options{Now: f.k.clk.Now})
	if err != nil {
		t.Fatalf("recovery: %v", err)
	}
	noCleanFiles(t, l.Dir())
	if l.LEO() != f.leo {
		t.Fatalf("LEO %d after recovery, was %d", l.LEO(), f.leo)
	}
	got, hdrs := readRecords(t, l)
	checkReadsEverywhere(t, l, hdrs)
	// Indexes are rebuilt for segments that came out of a swap.
	for _, s := range l.segs {
		if s.size() > 2*f.cfg.IndexIntervalBytes && s.offsets.count.Load() == 0 {
			t.Fatalf("segment %d of %d bytes has an empty index", s.base, s.size())
		}
	}
	switch want {
	case "pre":
		sameRecords(t, got, f.pre, "after recovery")
	case "post":
		sameRecords(t, got, f.post, "after recovery")
	default:
		in := func(recs []keyedRec, from, to int64) []keyedRec {
			var out []keyedRec
			for _, rec := range recs {
				if rec.offset >= from && rec.offset < to {
					out = append(out, rec)
				}
			}
			return out
		}
		from := int64(0)
		for i, g := range r.groups {
			gFrom, gTo := g.old[0].seg.base, g.old[len(g.old)-1].next
			sameRecords(t, in(got, from, gFrom), in(f.pre, from, gFrom), fmt.Sprintf("before group %d", i))
			part := in(got, gFrom, gTo)
			if pre := in(f.pre, gFrom, gTo); len(part) == len(pre) {
				sameRecords(t, part, pre, fmt.Sprintf("group %d as before", i))
			} else {
				sameRecords(t, part, in(f.post, gFrom, gTo), fmt.Sprintf("group %d as after", i))
			}
			from = gTo
		}
		sameRecords(t, in(got, from, f.leo), in(f.pre, from, f.leo), "after the groups")
	}
	// The log goes on: the next clean brings it to the cleaned content.
	if _, err := l.CleanNow(l.LEO(), CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	got, _ = readRecords(t, l)
	sameRecords(t, got, f.post, "after the next clean")
	return l
}

// abandon drops a clean result as a crash would: files stay as they are.
func abandon(r *CleanResult) {
	r.crashed = true
	r.finish()
}

func TestCleanCrashBeforeInstall(t *testing.T) {
	t.Run("cleaned", func(t *testing.T) {
		f := newCleanCrashFixture(t)
		r := f.run(t)
		abandon(r)
		crash(f.k.l)
		f.reopen(t, r, "pre").Close()
	})
	t.Run("torn", func(t *testing.T) {
		// The process died while writing a cleaned segment.
		f := newCleanCrashFixture(t)
		r := f.run(t)
		name := r.groups[0].seg.log.Name()
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(name, st.Size()/2); err != nil {
			t.Fatal(err)
		}
		abandon(r)
		crash(f.k.l)
		f.reopen(t, r, "pre").Close()
	})
}

func TestCleanCrashDuringInstall(t *testing.T) {
	for _, c := range []struct {
		step string
		nth  int // the nth time the step is reached; -1: the last
		want string
	}{
		{"swap", 1, "either"}, // the first group is committed, the second not
		{"swap", -1, "post"},  // every group renamed to .swap, directory not synced
		{"committed", 1, "post"},
		{"dropped", 1, "post"}, // part of the old segments deleted
		{"indexes", 1, "post"}, // new indexes under their final names, the .log still .swap
		{"renamed", 1, "either"},
		{"renamed", -1, "post"},
	} {
		t.Run(fmt.Sprintf("%s-%d", c.step, c.nth), func(t *testing.T) {
			f := newCleanCrashFixture(t)
			r := f.run(t)
			nth := c.nth
			if nth < 0 {
				nth = len(r.groups)
			}
			seen := 0
			cleanCrashHook = func(step string) bool {
				if step == c.step {
					seen++
				}
				return step == c.step && seen == nth
			}
			defer func() { cleanCrashHook = nil }()
			if _, err := f.k.l.InstallClean(r); !errors.Is(err, errCrashed) {
				t.Fatalf("install: %v, want the simulated crash at %s", err, c.step)
			}
			cleanCrashHook = nil
			crash(f.k.l)
			l := f.reopen(t, r, c.want)
			// A clean reopen after the recovery changes nothing.
			got, _ := readRecords(t, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, l.Dir(), f.cfg, Options{Now: f.k.clk.Now})
			again, _ := readRecords(t, l)
			sameRecords(t, again, got, "after a clean reopen")
			l.Close()
		})
	}
}

// TestCleanCrashCorruptSwap: a committed cleaned segment that fails
// validation is damage, not a torn write (it was synced before the rename
// that committed it), and the segments it replaces may be gone: Open
// refuses the log.
func TestCleanCrashCorruptSwap(t *testing.T) {
	f := newCleanCrashFixture(t)
	r := f.run(t)
	cleanCrashHook = func(step string) bool { return step == "dropped" }
	defer func() { cleanCrashHook = nil }()
	if _, err := f.k.l.InstallClean(r); !errors.Is(err, errCrashed) {
		t.Fatal(err)
	}
	crash(f.k.l)
	name := r.groups[0].seg.path(logSuffix) + swapSuffix
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b[batch.RecordsPos+len(b)/2]++
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(f.k.l.Dir(), f.cfg, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a damaged .swap: %v", err)
	}
}
