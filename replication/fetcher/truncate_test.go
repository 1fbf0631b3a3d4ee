package fetcher_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/replication/fetcher"
)

// TestTruncateBeforeFetchRinglog: a follower whose log runs past the
// leader's (offsets 100-149 were never committed) asks OffsetForLeaderEpoch
// first, truncates to the leader's end offset, and copies from there.
func TestTruncateBeforeFetchRinglog(t *testing.T) {
	b := startBroker(t)
	id := b.createTopic("trunc", 2)
	cl := producer(t, b.Addr)
	produce(t, cl, "trunc", []int32{0, 1}, 100, 50, 20)
	p0, p1 := engine.TP{Topic: "trunc", Partition: 0}, engine.TP{Topic: "trunc", Partition: 1}
	st, err := b.Engine().State(p0)
	if err != nil {
		t.Fatal(err)
	}
	f := newFollower(t)
	f.reset(p0, 150)
	s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: -1}, f)
	s.Add(fetcher.Partition{TP: p0, TopicID: id, FetchOffset: 150, LeaderEpoch: st.LeaderEpoch,
		NeedsTruncation: true, LastFetchedEpoch: st.LeaderEpoch})
	s.Add(fetcher.Partition{TP: p1, TopicID: id, FetchOffset: 0, LeaderEpoch: st.LeaderEpoch})
	f.waitFor("the truncation", 10*time.Second, func() bool { return len(f.truncates) > 0 })
	produce(t, cl, "trunc", []int32{0, 1}, 50, 50, 10)
	f.waitLEO(150, 10*time.Second, p0, p1)
	f.check()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.truncates) != 1 {
		t.Fatalf("%d Truncate calls, want 1: %+v", len(f.truncates), f.truncates)
	}
	if tc := f.truncates[0]; tc.tp != p0 || tc.epoch != st.LeaderEpoch || tc.end != 100 || !tc.beforeData {
		t.Errorf("Truncate(%v, epoch %d, end %d, before data %v), want (%v, %d, 100, true)", tc.tp, tc.epoch, tc.end, tc.beforeData, p0, st.LeaderEpoch)
	}
	if l := f.logs[p0]; l.records != 50 {
		t.Errorf("p0 copied %d records after truncating to 100, want 50", l.records)
	}
	if n := s.Stats().Truncations; n != 1 {
		t.Errorf("%d OffsetForLeaderEpoch requests, want 1", n)
	}
}

// TestTruncateWireOrder (kfake): partitions that need truncation go in one
// OffsetForLeaderEpoch request, with the replica id, their current leader
// epoch and their last fetched epoch, before any Fetch for them; their
// first Fetch starts at the offset the handler returned.
func TestTruncateWireOrder(t *testing.T) {
	c, id := newKfake(t, "ofle", 3)
	addr := c.ListenAddrs()[0]
	produce(t, producer(t, addr), "ofle", []int32{0, 1, 2}, 100, 50, 10)

	var (
		mu           sync.Mutex
		ofles        []*kmsg.OffsetForLeaderEpochRequest
		firstFetch   = map[int32]int64{}
		fetchedEarly []int32
	)
	ends := map[int32]int64{
		0: boundary(t, addr, "ofle", id, 0, 100, 40),
		1: boundary(t, addr, "ofle", id, 1, 100, 10),
	}
	c.ControlKey(kmsg.OffsetForLeaderEpoch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
		mu.Lock()
		ofles = append(ofles, req)
		mu.Unlock()
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewOffsetForLeaderEpochResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				p.Partition, p.LeaderEpoch, p.EndOffset = rp.Partition, rp.LeaderEpoch, ends[rp.Partition]
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.FetchRequest)
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				if _, ok := firstFetch[rp.Partition]; !ok {
					firstFetch[rp.Partition] = rp.FetchOffset
					if _, ok := ends[rp.Partition]; ok && len(ofles) == 0 {
						fetchedEarly = append(fetchedEarly, rp.Partition)
					}
				}
			}
		}
		return nil, nil, false
	})

	f := newFollower(t)
	f.reset(engine.TP{Topic: "ofle", Partition: 0}, 60)
	f.reset(engine.TP{Topic: "ofle", Partition: 1}, 100)
	s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 7, BrokerEpoch: 3}, f)
	epoch := c.PartitionInfo("ofle", 0).Epoch
	s.Add(fetcher.Partition{TP: engine.TP{Topic: "ofle", Partition: 0}, TopicID: id, FetchOffset: 60, LeaderEpoch: epoch, NeedsTruncation: true, LastFetchedEpoch: 5})
	s.Add(fetcher.Partition{TP: engine.TP{Topic: "ofle", Partition: 1}, TopicID: id, FetchOffset: 100, LeaderEpoch: epoch, NeedsTruncation: true, LastFetchedEpoch: 4})
	s.Add(fetcher.Partition{TP: engine.TP{Topic: "ofle", Partition: 2}, TopicID: id, FetchOffset: 0, LeaderEpoch: epoch})
	f.waitLEO(100, 10*time.Second, tps("ofle", 3)...)
	f.check()

	mu.Lock()
	defer mu.Unlock()
	if len(ofles) != 1 {
		t.Fatalf("%d OffsetForLeaderEpoch requests, want 1 for both partitions", len(ofles))
	}
	req := ofles[0]
	if req.ReplicaID != 7 || req.Version != 4 {
		t.Errorf("OffsetForLeaderEpoch v%d replica %d, want v4 replica 7", req.Version, req.ReplicaID)
	}
	asked := map[int32]int32{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			asked[rp.Partition] = rp.LeaderEpoch
			if rp.CurrentLeaderEpoch != epoch {
				t.Errorf("partition %d: current leader epoch %d, want %d", rp.Partition, rp.CurrentLeaderEpoch, epoch)
			}
		}
	}
	if len(asked) != 2 || asked[0] != 5 || asked[1] != 4 {
		t.Errorf("asked epochs %v, want map[0:5 1:4]", asked)
	}
	if len(fetchedEarly) > 0 {
		t.Errorf("partitions %v fetched before OffsetForLeaderEpoch", fetchedEarly)
	}
	if firstFetch[0] != ends[0] || firstFetch[1] != ends[1] || firstFetch[2] != 0 {
		t.Errorf("first fetch offsets %v, want map[0:%d 1:%d 2:0]", firstFetch, ends[0], ends[1])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, tc := range f.truncates {
		if !tc.beforeData {
			t.Errorf("%v: Truncate after data", tc.tp)
		}
	}
}

// TestTruncateErrors: a fenced epoch in the OffsetForLeaderEpoch answer
// pauses the partition; a retriable error retries the round.
func TestTruncateErrors(t *testing.T) {
	c, id := newKfake(t, "oflerr", 2)
	addr := c.ListenAddrs()[0]
	produce(t, producer(t, addr), "oflerr", []int32{0, 1}, 20, 50, 10)
	var mu sync.Mutex
	rounds := 0
	c.ControlKey(kmsg.OffsetForLeaderEpoch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
		mu.Lock()
		rounds++
		round := rounds
		mu.Unlock()
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range req.Topics {
			t := kmsg.NewOffsetForLeaderEpochResponseTopic()
			t.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				p.Partition, p.LeaderEpoch, p.EndOffset = rp.Partition, 0, 20
				switch {
				case rp.Partition == 0:
					p.ErrorCode = kerr.FencedLeaderEpoch.Code
				case round < 3:
					p.ErrorCode = kerr.KafkaStorageError.Code
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	f := newFollower(t)
	p0, p1 := engine.TP{Topic: "oflerr", Partition: 0}, engine.TP{Topic: "oflerr", Partition: 1}
	f.reset(p1, 20)
	s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 1, RetryBackoff: 5 * time.Millisecond}, f)
	s.Add(fetcher.Partition{TP: p0, TopicID: id, LeaderEpoch: -1, NeedsTruncation: true})
	s.Add(fetcher.Partition{TP: p1, TopicID: id, FetchOffset: 20, LeaderEpoch: -1, NeedsTruncation: true})
	f.waitFor("p0 paused and p1 truncated", 10*time.Second, func() bool { return f.paused[p0] != nil && len(f.truncates) == 1 })
	f.check()
	f.mu.Lock()
	err := f.paused[p0]
	f.mu.Unlock()
	if !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Errorf("p0 paused with %v, want FENCED_LEADER_EPOCH", err)
	}
	st := s.Stats()
	if st.Truncations != 3 || st.Retries != 2 {
		t.Errorf("%d OffsetForLeaderEpoch rounds and %d retries, want 3 and 2", st.Truncations, st.Retries)
	}
	if ps := st.Partitions[0]; !ps.Paused || !errors.Is(ps.Err, kerr.FencedLeaderEpoch) {
		t.Errorf("p0 stats %+v, want paused with FENCED_LEADER_EPOCH", ps)
	}
}
