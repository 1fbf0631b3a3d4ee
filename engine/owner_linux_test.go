//go:build linux

package engine

import (
	"testing"
	"time"

	"ringlog/ioring"
)

// TestShardDoorbellWakesOwner: a shard that owns its ring waits in
// io_uring_enter, not on its inbox; a call posted to it from another
// shard's thread wakes it with a MSG_RING doorbell (the shard counts the
// doorbells it received), and the call runs on it.
func TestShardDoorbellWakesOwner(t *testing.T) {
	if why := ioring.ProbeOwner(); why != "" {
		t.Fatalf("io_uring ring owners unavailable: %s", why)
	}
	e, err := OpenCore(Config{Dir: t.TempDir(), Shards: 2, IO: ioring.ModeUring, RingOwners: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	owners := e.RingOwners()
	if len(owners) != 2 {
		t.Fatalf("%d ring owners (%s), want one per shard", len(owners), e.RingOwnersWhy())
	}
	from, to := e.shards[0], e.shards[1]
	// The target may be awake (its flush timer) when the post arrives:
	// then no doorbell is needed; try until one was rung while it slept.
	for attempt := 0; owners[1].Stats().BellsReceived == 0; attempt++ {
		if attempt == 50 {
			t.Fatalf("no doorbell reached the shard in 50 posts: %+v, sender %+v", owners[1].Stats(), owners[0].Stats())
		}
		time.Sleep(10 * time.Millisecond) // the target back in its wait
		ran := make(chan bool, 1)
		if err := from.do(func() error {
			return to.post(func() { ran <- to.owner.Load().Current() })
		}); err != nil {
			t.Fatal(err)
		}
		select {
		case onShard := <-ran:
			if !onShard {
				t.Fatal("a call posted to the shard ran off its thread")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a call posted to a shard waiting in its ring never ran")
		}
	}
	// Eventfd wakes are not counted here: the engine's own goroutines
	// (no owners) may post to the shard meanwhile, and rightly use it.
	if owners[0].Stats().BellsSent == 0 {
		t.Fatal("the sending shard rang no doorbell")
	}
}
