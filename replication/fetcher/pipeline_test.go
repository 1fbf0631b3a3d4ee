package fetcher_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/replication/fetcher"
)

// TestPipelining: with N slots over 16 partitions that all have data and a
// follower whose appends take time, several fetches are in flight at once,
// never more than N, and every partition's batches reach the handler in
// order, contiguous, one call at a time. With one slot, never more than one.
func TestPipelining(t *testing.T) {
	const parts, n = 16, 2000
	b := startBroker(t)
	id := b.createTopic("pipe", parts)
	var all []int32
	for p := range int32(parts) {
		all = append(all, p)
	}
	produce(t, producer(t, b.Addr), "pipe", all, n, 100, 100)
	l := leader{addr: b.Addr, replicaID: -1, topic: "pipe", topicID: id}

	for _, slots := range []int{1, 4} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			f := newFollower(t)
			f.doneDelay = 2 * time.Millisecond // the append on the shard
			s := newStream(t, fetcher.Config{Addr: l.addr, ReplicaID: l.replicaID, Slots: slots, PartitionBytesMax: 16 << 10}, f)
			for _, p := range all {
				s.Add(l.partition(p, 0))
			}
			f.waitLEO(n, 30*time.Second, tps("pipe", parts)...)
			f.check()
			st := s.Stats()
			t.Logf("slots=%d: %d fetches, %d long polls, in-flight peak %d", slots, st.Fetches, st.LongPolls, st.InFlightPeak)
			if st.InFlightPeak > int64(slots) {
				t.Errorf("in-flight peak %d above %d slots", st.InFlightPeak, slots)
			}
			if slots > 1 && st.InFlightPeak < 3 {
				t.Errorf("in-flight peak %d with %d slots: the fetches did not overlap", st.InFlightPeak, slots)
			}
			// The copies are complete; the last dones (2 ms late) move
			// the fetch offsets to the end and the lag to 0.
			waitStats(t, s, "every partition at the end, no lag", func(st fetcher.Stats) bool {
				for _, ps := range st.Partitions {
					if ps.FetchOffset != n || ps.Lag != 0 || ps.HW != n {
						return false
					}
				}
				return len(st.Partitions) == parts
			})
		})
	}
}

// TestAddRemoveWhileRunning: a partition added mid-stream is copied from
// its offset; a removed one gets no handler call once Remove has returned
// (beyond one already under way); a re-Add with a new offset restarts it
// there.
func TestAddRemoveWhileRunning(t *testing.T) {
	forLeaders(t, "addrm", 3, func(t *testing.T, l leader) {
		f := newFollower(t)
		f.async = true
		s := newStream(t, fetcher.Config{Addr: l.addr, ReplicaID: l.replicaID, Slots: 2, IdleRecheck: time.Millisecond}, f)
		cl := producer(t, l.addr)
		p0, p1, p2 := engine.TP{Topic: "addrm", Partition: 0}, engine.TP{Topic: "addrm", Partition: 1}, engine.TP{Topic: "addrm", Partition: 2}
		s.Add(l.partition(0, 0))
		s.Add(l.partition(1, 0))
		produce(t, cl, "addrm", []int32{0, 1, 2}, 500, 50, 50)
		f.waitLEO(500, 10*time.Second, p0, p1)

		s.Remove(p1)
		f.waitFor("p1 idle", 5*time.Second, func() bool { return !f.logLocked(p1).busy })
		callsAtRemove := f.copyOf(p1).calls
		s.Add(l.partition(2, 0))
		produce(t, cl, "addrm", []int32{0, 1, 2}, 500, 50, 50)
		f.waitLEO(1000, 10*time.Second, p0, p2)
		time.Sleep(100 * time.Millisecond)
		if got := f.copyOf(p1).calls; got > callsAtRemove+1 {
			t.Errorf("removed partition got %d more Records calls", got-callsAtRemove)
		}
		for _, ps := range s.Stats().Partitions {
			if ps.TP == p1 {
				t.Errorf("removed partition still in Stats: %+v", ps)
			}
		}

		// Re-add p1 near 700, as a follower whose log was cut there would.
		from := boundary(t, l.addr, l.topic, l.topicID, 1, 1000, 700)
		f.reset(p1, from)
		s.Add(l.partition(1, from))
		f.waitLEO(1000, 10*time.Second, p1)
		f.check()
		if c := f.copyOf(p1); c.records != 1000-from {
			t.Errorf("re-added partition copied %d records from %d, want %d", c.records, from, 1000-from)
		}
	})
}

// TestReconnectKfake: the leader closes the connection in the middle of the
// copy (twice); the stream reconnects and resumes, with no loss and no
// duplicate (the follower's contiguity check).
func TestReconnectKfake(t *testing.T) {
	const n = 3000
	c, id := newKfake(t, "drop", 3)
	l := leader{addr: c.ListenAddrs()[0], replicaID: 1, topic: "drop", topicID: id}
	produce(t, producer(t, l.addr), "drop", []int32{0, 1, 2}, n, 100, 100)
	var fetches, drops atomic.Int32
	c.ControlKey(kmsg.Fetch.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		k := fetches.Add(1)
		if k == 5 || k == 12 {
			drops.Add(1)
			c.KeepControl()
			return nil, errors.New("drop the connection"), true
		}
		return nil, nil, false
	})
	f := newFollower(t)
	f.async = true
	s := newStream(t, fetcher.Config{Addr: l.addr, ReplicaID: 1, Slots: 3, PartitionBytesMax: 8 << 10, ReconnectBackoff: 10 * time.Millisecond}, f)
	for p := range int32(3) {
		s.Add(l.partition(p, 0))
	}
	f.waitLEO(n, 30*time.Second, tps("drop", 3)...)
	f.check()
	st := s.Stats()
	if drops.Load() != 2 || st.Connects != 3 || st.Disconnects != 2 {
		t.Errorf("%d drops, %d connects, %d disconnects; want 2, 3, 2", drops.Load(), st.Connects, st.Disconnects)
	}
	for p := range int32(3) {
		if c := f.copyOf(engine.TP{Topic: "drop", Partition: p}); c.records != n {
			t.Errorf("partition %d: %d records, want %d", p, c.records, n)
		}
	}
}

// TestReconnectBrokerRestart: ringlog's broker restarts (same port, same
// data) while the follower copies and the producer writes; the copy
// resumes and ends equal to the leader's log.
func TestReconnectBrokerRestart(t *testing.T) {
	const n = 4000
	b := startBroker(t)
	id := b.createTopic("restart", 2)
	l := leader{addr: b.Addr, replicaID: -1, topic: "restart", topicID: id}
	produce(t, producer(t, b.Addr), "restart", []int32{0, 1}, n/2, 100, 100)
	f := newFollower(t)
	f.doneDelay = time.Millisecond
	s := newStream(t, fetcher.Config{Addr: l.addr, Slots: 2, ReplicaID: -1, PartitionBytesMax: 4 << 10, ReconnectBackoff: 20 * time.Millisecond}, f)
	s.Add(l.partition(0, 0))
	s.Add(l.partition(1, 0))
	f.waitFor("some progress", 10*time.Second, func() bool { return f.logLocked(engine.TP{Topic: "restart"}).next > 100 })
	b.Restart()
	produce(t, producer(t, b.Addr), "restart", []int32{0, 1}, n/2, 100, 100)
	f.waitLEO(n, 30*time.Second, tps("restart", 2)...)
	f.check()
	if st := s.Stats(); st.Disconnects < 1 || st.Connects < 2 {
		t.Errorf("%d disconnects, %d connects: the restart was not seen", st.Disconnects, st.Connects)
	}
	for p := range int32(2) {
		c := f.copyOf(engine.TP{Topic: "restart", Partition: p})
		if want := leaderLog(t, b.Addr, "restart", id, p, n); string(c.data) != string(want) {
			t.Errorf("partition %d: copy (%d bytes) differs from the leader's log (%d bytes)", p, len(c.data), len(want))
		}
	}
}

// TestPartialLoad: two partitions stream while a third, in its own slot,
// is idle. The stream is rarely quiet, so long polls are rare (they would
// hold the streaming partitions' answers) and the idle slot is fetched on
// its own every IdleRecheck: boundedly often, and its first record arrives
// within a few rechecks. (With one streaming partition the stream is quiet
// between rounds and idle partitions ride in its long polls for free.)
func TestPartialLoad(t *testing.T) {
	c, id := newKfake(t, "partial", 3)
	addr := c.ListenAddrs()[0]
	var idleAlone atomic.Int32
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		idle, others := false, false
		for _, rt := range kreq.(*kmsg.FetchRequest).Topics {
			for _, rp := range rt.Partitions {
				idle = idle || rp.Partition == 1
				others = others || rp.Partition != 1
			}
		}
		if idle && !others {
			idleAlone.Add(1)
		}
		return nil, nil, false
	})
	f := newFollower(t)
	f.doneDelay = time.Millisecond
	const recheck = 20 * time.Millisecond
	s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 1, Slots: 3, IdleRecheck: recheck, PartitionBytesMax: 2 << 10}, f)
	for p := range int32(3) { // one partition per slot, in order
		s.Add(fetcher.Partition{TP: engine.TP{Topic: "partial", Partition: p}, TopicID: id, LeaderEpoch: -1})
	}

	// p0 and p2 stream for a second: a producer keeps them ahead.
	cl := producer(t, addr)
	stop := make(chan struct{})
	produced := make(chan int, 1)
	go func() {
		n := 0
		defer func() { produced <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			produce(t, cl, "partial", []int32{0, 2}, 200, 100, 50)
			n += 200
		}
	}()
	time.Sleep(time.Second)
	idle := idleAlone.Load()
	before := s.Stats()

	// Now p1 gets a record while the others still stream.
	sent := time.Now()
	produce(t, cl, "partial", []int32{1}, 1, 10, 1)
	f.waitLEO(1, 5*time.Second, engine.TP{Topic: "partial", Partition: 1})
	latency := time.Since(sent)
	close(stop)
	n := int64(<-produced)
	f.waitLEO(n, 30*time.Second, engine.TP{Topic: "partial"}, engine.TP{Topic: "partial", Partition: 2})
	f.check()
	t.Logf("idle slot fetched alone %d times in 1 s while two others streamed (%d fetches, %d long polls, peak in flight %d); its record arrived %v after the produce",
		idle, before.Fetches, before.LongPolls, before.InFlightPeak, latency)
	if max := int32(time.Second/recheck) + 10; idle > max {
		t.Errorf("the idle slot was fetched alone %d times in 1 s, want at most %d (one per %v)", idle, max, recheck)
	}
	if before.LongPolls*2 > before.Fetches {
		t.Errorf("%d of %d fetches were long polls while two partitions streamed", before.LongPolls, before.Fetches)
	}
	if latency > 10*recheck+200*time.Millisecond {
		t.Errorf("the idle partition's record took %v to arrive", latency)
	}
}
