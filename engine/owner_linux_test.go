//go:build linux

package engine

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"ringlog/internal/testkit"
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

// TestShardHandOffsNeverWait: two shards that own their rings, each on
// its own thread handing more than two inboxes' worth of appends and calls
// to the other shard and to itself at the same moment (as connections on
// their rings producing to each other's partitions would, under load):
// the inboxes fill, and a shard's thread that waited for room in the
// other's inbox while the other waited for room in its own would hold
// both for ever. Every append and call must arrive, each sender's in the
// order it sent them (appends from one sender get increasing offsets).
func TestShardHandOffsNeverWait(t *testing.T) {
	if why := ioring.ProbeOwner(); why != "" {
		t.Fatalf("io_uring ring owners unavailable: %s", why)
	}
	e, err := OpenCore(Config{Dir: t.TempDir(), Shards: 2, IO: ioring.ModeUring, RingOwners: true})
	if err != nil {
		t.Fatal(err)
	}
	stuck := false
	defer func() {
		if !stuck { // shards that hold each other would never stop
			e.Close()
		}
	}()
	if len(e.RingOwners()) != 2 {
		t.Fatalf("no ring owners: %s", e.RingOwnersWhy())
	}
	if _, err := e.CreateTopic("h", 4, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	// One partition of each sender's per target shard.
	var tps [2][2]TP // [sender][target]
	for pt := range int32(4) {
		tp := TP{"h", pt}
		p, err := e.partition(tp)
		if err != nil {
			t.Fatal(err)
		}
		to := p.shard.id
		for from := range 2 {
			if tps[from][to].Topic == "" {
				tps[from][to] = tp
				break
			}
		}
	}
	for from := range 2 {
		for to := range 2 {
			if tps[from][to].Topic == "" {
				t.Fatalf("partitions by shard: %v", tps)
			}
		}
	}
	const n = 2*inboxSize + 1000 // per sender and target, appends and calls each
	rec := mkBatch(t, 1, "v", 1, -1, 0, 0)
	var wg sync.WaitGroup
	var bad atomic.Int64
	var offsets [2][2][]int64 // [from][to]: by send order
	var calls [2][2]int       // [from][to]: calls run, on the target's thread
	for from := range 2 {
		for to := range 2 {
			offsets[from][to] = make([]int64, n)
		}
	}
	var barrier sync.WaitGroup
	barrier.Add(2)
	for from := range 2 {
		wg.Add(1)
		s := e.shards[from]
		if err := s.post(func() {
			defer wg.Done()
			barrier.Done()
			barrier.Wait() // both shards busy here: neither drains its inbox
			for i := range n {
				for to := range 2 {
					wg.Add(2)
					// A batch of its own: the shard writes its offsets.
					e.Append(tps[from][to], slices.Clone(rec), AppendOptions{}, func(r AppendResult, err error) {
						if err != nil {
							bad.Add(1)
						}
						offsets[from][to][i] = r.BaseOffset
						wg.Done()
					})
					if err := e.shards[to].post(func() {
						if calls[from][to] != i {
							bad.Add(1)
						}
						calls[from][to]++
						wg.Done()
					}); err != nil {
						t.Error(err)
						wg.Done()
					}
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		stuck = true
		t.Fatalf("shards handing off to each other's full inboxes never finished (inboxes %d and %d of %d)",
			len(e.shards[0].inbox), len(e.shards[1].inbox), inboxSize)
	}
	if bad.Load() != 0 {
		t.Fatalf("%d appends failed or calls out of order", bad.Load())
	}
	for from := range 2 {
		for to := range 2 {
			o := offsets[from][to]
			for i := 1; i < n; i++ {
				if o[i] <= o[i-1] {
					t.Fatalf("appends from shard %d to shard %d out of order: #%d at offset %d after #%d at %d", from, to, i, o[i], i-1, o[i-1])
				}
			}
		}
	}
	for to := range 2 {
		if ov := e.shards[to].ovLen.Load(); ov != 0 {
			t.Fatalf("shard %d overflow still holds %d", to, ov)
		}
	}
}

// TestShardOneRingCarriesDisk: a shard that owns its ring puts its disk
// I/O in that ring too, so an engine of n such shards holds n io_uring
// rings, not 2n (a disk ring beside each owner's, as before); and a
// round's fdatasyncs (flush policy always) complete through the owner,
// which counts them, before the append is answered. The rings go when
// the engine closes.
func TestShardOneRingCarriesDisk(t *testing.T) {
	if why := ioring.ProbeOwner(); why != "" {
		t.Fatalf("io_uring ring owners unavailable: %s", why)
	}
	for _, shards := range []int{1, 3} {
		before := testkit.IORings(t)
		e, err := OpenCore(Config{Dir: t.TempDir(), Shards: shards, IO: ioring.ModeUring, RingOwners: true})
		if err != nil {
			t.Fatal(err)
		}
		owners := e.RingOwners()
		if len(owners) != shards {
			e.Close()
			t.Fatalf("%d ring owners (%s), want %d", len(owners), e.RingOwnersWhy(), shards)
		}
		if got := testkit.IORings(t) - before; got != shards {
			e.Close()
			t.Fatalf("%d shards that own their rings hold %d io_uring rings, want one each", shards, got)
		}
		if _, err := e.CreateTopic("d", int32(shards), -1, map[string]string{"flush.messages": "1"}, false); err != nil {
			t.Fatal(err)
		}
		syncs := func() (n int64) {
			for _, o := range owners {
				n += o.Stats().DiskSyncs
			}
			return n
		}
		for i := range 5 {
			for pt := range int32(shards) {
				was := syncs()
				res := make(chan error, 1)
				var synced int64
				e.Append(TP{"d", pt}, mkBatch(t, 1, "v", 1, -1, 0, 0), AppendOptions{}, func(r AppendResult, err error) {
					synced = syncs() // read on the shard, as it answers
					res <- err
				})
				if err := <-res; err != nil {
					t.Fatal(err)
				}
				if synced <= was {
					t.Fatalf("append %d to partition %d answered after %d syncs on the owners' rings, %d before it: its fdatasync did not complete there first", i, pt, synced, was)
				}
			}
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if got := testkit.IORings(t) - before; got != 0 {
			t.Fatalf("%d io_uring rings left after the engine closed", got)
		}
	}
}

// TestShardRoundSyncsInOwnerTurns: a round whose fdatasyncs (flush policy
// always) are in the kernel waits for them in its owner's turns, so what
// else the owner carries goes on meanwhile: work posted to the owner runs
// while the shard's sync is in flight (the shard's IO has ops out). Before,
// the round waited in a disk ring of its own and the owner's work, like
// its connections' completions, waited for the round to end: a post never
// found a sync in flight.
func TestShardRoundSyncsInOwnerTurns(t *testing.T) {
	if why := ioring.ProbeOwner(); why != "" {
		t.Fatalf("io_uring ring owners unavailable: %s", why)
	}
	e, err := OpenCore(Config{Dir: t.TempDir(), Shards: 1, IO: ioring.ModeUring, RingOwners: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	owners := e.RingOwners()
	if len(owners) != 1 {
		t.Fatalf("no ring owner: %s", e.RingOwnersWhy())
	}
	if _, err := e.CreateTopic("s", 1, -1, map[string]string{"flush.messages": "1"}, false); err != nil {
		t.Fatal(err)
	}
	s := e.shards[0]
	stop := make(chan struct{})
	appended := make(chan error, 1)
	go func() { // appends of 64 KiB, each synced, one after the other
		value := string(make([]byte, 64<<10))
		for {
			select {
			case <-stop:
				appended <- nil
				return
			default:
			}
			res := make(chan error, 1)
			e.Append(TP{"s", 0}, mkBatch(t, 1, value, 1, -1, 0, 0), AppendOptions{}, func(_ AppendResult, err error) { res <- err })
			if err := <-res; err != nil {
				appended <- err
				return
			}
		}
	}()
	var during, posts atomic.Int64
	deadline := time.Now().Add(5 * time.Second)
	for during.Load() == 0 && time.Now().Before(deadline) {
		if err := owners[0].Post(func() {
			posts.Add(1)
			if s.io.InFlight() > 0 { // on the shard's thread: its IO is its own
				during.Add(1)
			}
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	close(stop)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if during.Load() == 0 {
		t.Fatalf("none of %d posts ran on the owner while the shard's sync was in flight: the round's wait blocks the owner", posts.Load())
	}
}
