package fetcher_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/replication/fetcher"
)

// fetchSpy records every Fetch request a kfake cluster sees (with the time)
// and lets kfake answer it.
type fetchSpy struct {
	mu    sync.Mutex
	reqs  []*kmsg.FetchRequest
	times []time.Time
}

func spyFetches(c interface {
	ControlKey(int16, func(kmsg.Request) (kmsg.Response, error, bool))
	KeepControl()
}) *fetchSpy {
	spy := &fetchSpy{}
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		// A copy: kfake fills topic names into the request as it serves it.
		cp := kmsg.NewPtrFetchRequest()
		cp.Version = kreq.GetVersion()
		if err := cp.ReadFrom(kreq.AppendTo(nil)); err != nil {
			panic(err)
		}
		spy.mu.Lock()
		spy.reqs = append(spy.reqs, cp)
		spy.times = append(spy.times, time.Now())
		spy.mu.Unlock()
		return nil, nil, false
	})
	return spy
}

func (spy *fetchSpy) all() ([]*kmsg.FetchRequest, []time.Time) {
	spy.mu.Lock()
	defer spy.mu.Unlock()
	return append([]*kmsg.FetchRequest(nil), spy.reqs...), append([]time.Time(nil), spy.times...)
}

// TestFetchRequestFields: what a follower's Fetch carries, per version:
// the replica as ReplicaState{ID, Epoch} on v15+ (KIP-903) and ReplicaID
// before; topic ids on v13+ and names before (a request with a partition
// that has no id goes as v12); the current leader epoch, the follower's
// log start, the limits; long polls with max wait and min bytes 1, the
// first of them opening the long polls' fetch session (id 0, epoch 0,
// KIP-227).
func TestFetchRequestFields(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int16
		withID  bool
		version int16
	}{
		{"v16", 16, true, 16},
		{"v14", 14, true, 14},
		{"v12", 12, true, 12},
		{"v16 without topic id", 16, false, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, id := newKfake(t, "fields", 1)
			addr := c.ListenAddrs()[0]
			produce(t, producer(t, addr), "fields", []int32{0}, 10, 50, 10)
			spy := spyFetches(c)
			f := newFollower(t)
			s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 7, BrokerEpoch: 33, FetchVersionMax: tc.max,
				WaitMax: 300 * time.Millisecond, ResponseBytesMax: 5 << 20, PartitionBytesMax: 70 << 10}, f)
			p := fetcher.Partition{TP: engine.TP{Topic: "fields"}, FetchOffset: 0, LogStartOffset: 0, LeaderEpoch: c.PartitionInfo("fields", 0).Epoch}
			if tc.withID {
				p.TopicID = id
			}
			s.Add(p)
			f.waitLEO(10, 10*time.Second, p.TP)
			// The long poll follows once the stream is idle.
			var reqs []*kmsg.FetchRequest
			var long *kmsg.FetchRequest
			for deadline := time.Now().Add(10 * time.Second); long == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				reqs, _ = spy.all()
				for _, r := range reqs {
					if r.MaxWaitMillis > 0 {
						long = r
						break
					}
				}
			}
			f.check()
			for _, r := range reqs {
				if r.Version != tc.version {
					t.Errorf("Fetch v%d, want v%d", r.Version, tc.version)
				}
			}
			if long == nil {
				t.Fatalf("no long poll among %d fetches in 10 s", len(reqs))
			}
			r := long
			if tc.version >= 15 {
				if r.ReplicaState.ID != 7 || r.ReplicaState.Epoch != 33 {
					t.Errorf("ReplicaState %+v, want ID 7 epoch 33", r.ReplicaState)
				}
			} else if r.ReplicaID != 7 {
				t.Errorf("ReplicaID %d, want 7", r.ReplicaID)
			}
			rt := r.Topics[0]
			if tc.version >= 13 && rt.TopicID != id || tc.version < 13 && rt.Topic != "fields" {
				t.Errorf("topic %q id %x on v%d", rt.Topic, rt.TopicID, r.Version)
			}
			rp := rt.Partitions[0]
			want := fmt.Sprint(300, 1, 5<<20, 0, 0, 0, p.LeaderEpoch, int64(10), int64(0), 70<<10)
			got := fmt.Sprint(r.MaxWaitMillis, r.MinBytes, r.MaxBytes, r.IsolationLevel, r.SessionID, r.SessionEpoch,
				rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes)
			if got != want {
				t.Errorf("long poll fields %s, want %s", got, want)
			}
		})
	}
}

// TestCallerPause: a partition paused by the caller gets no more records
// (the answer in flight is dropped, its offset stays) and shows its reason
// in Stats; resumed, it goes on with no gap and no duplicate.
func TestCallerPause(t *testing.T) {
	b := startBroker(t)
	id := b.createTopic("pause", 1)
	cl := producer(t, b.Addr)
	produce(t, cl, "pause", []int32{0}, 1000, 100, 50)
	tp := engine.TP{Topic: "pause"}
	f := newFollower(t)
	f.doneDelay = time.Millisecond
	s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: -1, PartitionBytesMax: 4 << 10}, f)
	s.Add(fetcher.Partition{TP: tp, TopicID: id, LeaderEpoch: -1})
	f.waitFor("some records", 10*time.Second, func() bool { return f.logLocked(tp).next >= 200 })
	reason := errors.New("log being truncated")
	s.Pause(tp, reason)
	f.mu.Lock()
	calls := f.logLocked(tp).calls
	f.mu.Unlock()
	time.Sleep(200 * time.Millisecond)
	st := s.Stats().Partitions[0]
	if !st.Paused || !errors.Is(st.Err, reason) {
		t.Errorf("stats %+v, want paused with the caller's reason", st)
	}
	f.mu.Lock()
	more := f.logLocked(tp).calls - calls
	f.mu.Unlock()
	if more > 1 {
		t.Errorf("%d Records calls after Pause, want at most the one under way", more)
	}
	s.Resume(tp)
	f.waitLEO(1000, 10*time.Second, tp)
	f.check()
	if c := f.copyOf(tp); c.records != 1000 {
		t.Errorf("%d records copied, want 1000", c.records)
	}
}

// TestLeaderEpochFencingRinglog: ringlog's broker checks the current
// leader epoch of a fetch (KIP-320): a follower that knows a newer epoch
// than the leader gets UNKNOWN_LEADER_EPOCH and is paused.
func TestLeaderEpochFencingRinglog(t *testing.T) {
	b := startBroker(t)
	id := b.createTopic("fence", 1)
	tp := engine.TP{Topic: "fence"}
	st, err := b.Engine().State(tp)
	if err != nil {
		t.Fatal(err)
	}
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: -1}, f)
	s.Add(fetcher.Partition{TP: tp, TopicID: id, LeaderEpoch: st.LeaderEpoch + 1})
	f.waitFor("a pause", 10*time.Second, func() bool { return f.paused[tp] != nil })
	f.mu.Lock()
	err = f.paused[tp]
	f.mu.Unlock()
	if !errors.Is(err, kerr.UnknownLeaderEpoch) {
		t.Errorf("paused with %v, want UNKNOWN_LEADER_EPOCH", err)
	}
}

// TestDivergingEpoch: a leader that answers a fetch with a diverging epoch
// (KIP-595) gets the same treatment as an OffsetForLeaderEpoch answer:
// Truncate, then fetching from the offset the handler returns.
func TestDivergingEpoch(t *testing.T) {
	c, id := newKfake(t, "diverge", 1)
	addr := c.ListenAddrs()[0]
	produce(t, producer(t, addr), "diverge", []int32{0}, 50, 50, 10)
	end := boundary(t, addr, "diverge", id, 0, 50, 30)
	spy := spyFetches(c)
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		return answer(kreq.(*kmsg.FetchRequest), func(p *kmsg.FetchResponseTopicPartition, _ int64) {
			p.HighWatermark, p.LogStartOffset = 50, 0
			p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 2, end
		}), nil, true
	})
	tp := engine.TP{Topic: "diverge"}
	f := newFollower(t)
	f.reset(tp, 40)
	s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 1}, f)
	s.Add(fetcher.Partition{TP: tp, TopicID: id, FetchOffset: 40, LeaderEpoch: -1})
	f.waitLEO(50, 10*time.Second, tp)
	f.check()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.truncates) != 1 || f.truncates[0].epoch != 2 || f.truncates[0].end != end {
		t.Fatalf("Truncate calls %+v, want one (epoch 2, end %d)", f.truncates, end)
	}
	reqs, _ := spy.all()
	if len(reqs) < 2 || reqs[0].Topics[0].Partitions[0].FetchOffset != 40 || reqs[1].Topics[0].Partitions[0].FetchOffset != end {
		t.Errorf("%d fetches, want the first at 40 and the second at %d", len(reqs), end)
	}
	if l := f.logs[tp]; l.records != 50-end {
		t.Errorf("%d records copied from %d, want %d", l.records, end, 50-end)
	}
}

// TestThrottle: a response with a throttle time holds the stream's next
// request for that long (Kafka 2.0+ leaves the wait to the client).
func TestThrottle(t *testing.T) {
	c, id := newKfake(t, "throttle", 1)
	addr := c.ListenAddrs()[0]
	spy := spyFetches(c)
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		resp := answer(kreq.(*kmsg.FetchRequest), func(p *kmsg.FetchResponseTopicPartition, _ int64) {
			p.HighWatermark, p.LogStartOffset = 0, 0
		})
		resp.ThrottleMillis = 300
		return resp, nil, true
	})
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 1}, f)
	s.Add(fetcher.Partition{TP: engine.TP{Topic: "throttle"}, TopicID: id, LeaderEpoch: -1})
	time.Sleep(500 * time.Millisecond)
	_, times := spy.all()
	if len(times) < 2 {
		t.Fatalf("%d fetches", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < 250*time.Millisecond {
		t.Errorf("second fetch %v after a 300 ms throttle", gap)
	}
}

// TestPauseDropsAnswerInFlight: the answer to a fetch that was in flight
// when the caller paused the partition is dropped, and the partition's
// offset stays where it was: resumed, it copies from there.
func TestPauseDropsAnswerInFlight(t *testing.T) {
	c, id := newKfake(t, "drop", 1)
	addr := c.ListenAddrs()[0]
	produce(t, producer(t, addr), "drop", []int32{0}, 20, 50, 10)
	held, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	c.ControlKey(kmsg.Fetch.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		first.Do(func() {
			close(held)
			<-release // the first fetch waits for the pause; kfake then answers it
		})
		return nil, nil, false
	})
	tp := engine.TP{Topic: "drop"}
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 1}, f)
	s.Add(fetcher.Partition{TP: tp, TopicID: id, LeaderEpoch: -1})
	<-held
	s.Pause(tp, errors.New("paused by the test"))
	close(release)
	waitStats(t, s, "the answer in", func(st fetcher.Stats) bool { return st.InFlight == 0 && st.Fetches == 1 })
	if c := f.copyOf(tp); c.calls != 0 {
		t.Fatalf("%d Records calls for a partition paused while its fetch was in flight", c.calls)
	}
	if ps := s.Stats().Partitions[0]; ps.FetchOffset != 0 || !ps.Paused {
		t.Fatalf("stats %+v, want paused at 0", ps)
	}
	s.Resume(tp)
	f.waitLEO(20, 10*time.Second, tp)
	f.check()
}
