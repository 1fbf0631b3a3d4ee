//go:build linux

package engine

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"ringlog/ioring"
)

// holdIO keeps back the completions of the ops on files under dir while
// held: the shard learns of them only once they are let go, as if the
// device were slow for that one partition. The ops themselves went to
// the kernel and completed there. It counts the writes submitted to those
// files.
type holdIO struct {
	ioring.IO
	dir string

	mu     sync.Mutex
	hold   bool
	held   []*ioring.Op // kept back; returned by the first Wait after let
	writes int
}

func (h *holdIO) ours(op *ioring.Op) bool {
	return op.File != nil && strings.HasPrefix(op.File.Name(), h.dir+string(filepath.Separator))
}

func (h *holdIO) Submit(ops ...*ioring.Op) error {
	h.mu.Lock()
	for _, op := range ops {
		if op.Kind == ioring.OpWrite && h.ours(op) {
			h.writes++
		}
	}
	h.mu.Unlock()
	return h.IO.Submit(ops...)
}

func (h *holdIO) Wait(out []*ioring.Op, min int, timeout time.Duration) ([]*ioring.Op, error) {
	start := len(out)
	for {
		got := len(out) - start
		var err error
		out, err = h.IO.Wait(out, max(min-got, 0), timeout)
		if err != nil {
			return out, err
		}
		h.mu.Lock()
		kept := out[:start+got]
		for _, op := range out[start+got:] {
			if h.hold && h.ours(op) {
				h.held = append(h.held, op)
			} else {
				kept = append(kept, op)
			}
		}
		if !h.hold {
			kept = append(kept, h.held...)
			h.held = nil
		}
		out = kept
		h.mu.Unlock()
		if len(out)-start >= min {
			return out, nil
		}
		if h.IO.InFlight() == 0 {
			// Only held ops are left: wait for them to be let go.
			time.Sleep(time.Millisecond)
		}
	}
}

func (h *holdIO) InFlight() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.IO.InFlight() + len(h.held)
}

// let goes of the held ops: the next Wait returns them.
func (h *holdIO) let() {
	h.mu.Lock()
	h.hold = false
	h.mu.Unlock()
}

func (h *holdIO) state() (held, writes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held), h.writes
}

// TestRoundsOverlap: on a shard whose disk I/O is on its own ring (a ring
// owner), a partition's append is written and answered while another
// partition's write is in flight, and the partition whose write is in
// flight keeps its next append queued until that write completed (one
// write at a time per partition: the next rewrites the block the previous
// ends in), then writes it after the first, in order. With rounds that
// wait for their writes the second partition's append waits too, and the
// test fails. Both write paths (direct and buffered) are run: a buffered
// write on the ring completes as it is copied, but the shard learns of it
// from its ring all the same.
func TestRoundsOverlap(t *testing.T) {
	if why := ioring.ProbeOwner(); why != "" {
		t.Fatalf("io_uring ring owners unavailable: %s", why)
	}
	for _, writes := range []Writes{WritesDirect, WritesBuffered} {
		t.Run(string(writes), func(t *testing.T) {
			dir := t.TempDir()
			var hold *holdIO
			e, err := OpenCore(Config{Dir: dir, Shards: 1, IO: ioring.ModeUring, RingOwners: true, Writes: writes,
				WrapIO: func(io ioring.IO) ioring.IO {
					hold = &holdIO{IO: io, dir: filepath.Join(dir, "o-0")}
					return hold
				}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				// When the test failed with the slow write held, a shard
				// whose rounds wait for their writes waits for it in its
				// ring, where nothing comes any more: the close is given
				// a bound rather than the test's whole time.
				hold.let()
				closed := make(chan error, 1)
				go func() { closed <- e.Close() }()
				select {
				case err := <-closed:
					if err != nil {
						t.Error(err)
					}
				case <-time.After(10 * time.Second):
					t.Error("the engine does not close")
				}
			}()
			if len(e.RingOwners()) != 1 {
				t.Fatalf("no ring owner: %s", e.RingOwnersWhy())
			}
			if _, err := e.CreateTopic("o", 2, -1, nil, false); err != nil {
				t.Fatal(err)
			}
			slow, fast := TP{"o", 0}, TP{"o", 1}
			for _, tp := range []TP{slow, fast} {
				if _, err := appendSync(e, tp, mkBatch(t, 1, "warm", 0, -1, 0, 0)); err != nil {
					t.Fatal(err)
				}
			}
			type answer struct {
				res AppendResult
				err error
			}
			appendAsync := func(tp TP, key string) chan answer {
				c := make(chan answer, 1)
				e.Append(tp, mkBatch(t, 2, key, 0, -1, 0, 0), AppendOptions{}, func(r AppendResult, err error) { c <- answer{r, err} })
				return c
			}
			hold.mu.Lock()
			hold.hold = true
			writesBefore := hold.writes
			hold.mu.Unlock()

			first := appendAsync(slow, "s1")
			deadline := time.Now().Add(10 * time.Second)
			for {
				if held, _ := hold.state(); held > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the slow partition's write never completed in the kernel")
				}
				time.Sleep(time.Millisecond)
			}
			second := appendAsync(slow, "s2")
			other := appendAsync(fast, "f")
			select {
			case a := <-other:
				if a.err != nil || a.res.BaseOffset != 1 {
					t.Fatalf("the other partition's append: %+v %v, want offset 1", a.res, a.err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the other partition's append waits for the slow partition's write")
			}
			// The slow partition's second append is queued behind its
			// first, not written beside it.
			time.Sleep(20 * time.Millisecond)
			if _, writes := hold.state(); writes != writesBefore+1 {
				t.Fatalf("%d writes to the slow partition while its first was in flight, want 1", writes-writesBefore)
			}
			select {
			case a := <-first:
				t.Fatalf("answered before its write completed: %+v %v", a.res, a.err)
			case a := <-second:
				t.Fatalf("the queued append answered before the write ahead of it completed: %+v %v", a.res, a.err)
			default:
			}

			hold.let()
			// Another append wakes the shard to reap what was let go.
			if _, err := appendSync(e, fast, mkBatch(t, 1, "wake", 0, -1, 0, 0)); err != nil {
				t.Fatal(err)
			}
			for i, c := range []chan answer{first, second} {
				select {
				case a := <-c:
					if want := int64(1 + 2*i); a.err != nil || a.res.BaseOffset != want {
						t.Fatalf("slow partition's append %d: %+v %v, want offset %d", i+1, a.res, a.err, want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("slow partition's append %d not answered after its write was let go", i+1)
				}
			}
			var got []string
			for _, h := range readAll(t, e, slow) {
				got = append(got, fmt.Sprintf("%d+%d", h.BaseOffset, h.NumRecords))
			}
			if s := strings.Join(got, ","); s != "0+1,1+2,3+2" {
				t.Fatalf("slow partition reads back batches %s, want 0+1,1+2,3+2", s)
			}
		})
	}
}

// TestAppendFromDoneIsWritten: an append queued on the shard from an
// append's done callback (AppendOnShard, as a service does) is written and
// answered without waiting for another message to wake the shard, on every
// shard loop: the inbox loop whose rounds wait (portable, io_uring) and the
// ring owner's whose rounds overlap.
func TestAppendFromDoneIsWritten(t *testing.T) {
	setups := []struct {
		name string
		cfg  Config
	}{
		{"portable", Config{IO: ioring.ModePortable}},
		{"uring", Config{IO: ioring.ModeUring}},
		{"uring-owners", Config{IO: ioring.ModeUring, RingOwners: true}},
	}
	for _, su := range setups {
		t.Run(su.name, func(t *testing.T) {
			cfg := su.cfg
			cfg.Dir, cfg.Shards = t.TempDir(), 1
			e, err := OpenCore(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if _, err := e.CreateTopic("d", 1, -1, nil, false); err != nil {
				t.Fatal(err)
			}
			tp := TP{"d", 0}
			second := make(chan error, 1)
			first := make(chan error, 1)
			follow := mkBatch(t, 1, "second", 0, -1, 0, 0)
			e.Append(tp, mkBatch(t, 1, "first", 0, -1, 0, 0), AppendOptions{}, func(_ AppendResult, err error) {
				first <- err
				e.AppendOnShard(tp, follow, AppendOptions{}, func(_ AppendResult, err error) { second <- err })
			})
			for what, c := range map[string]chan error{"first": first, "second": second} {
				select {
				case err := <-c:
					if err != nil {
						t.Fatalf("%s append: %v", what, err)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%s append not answered", what)
				}
			}
		})
	}
}
