package fetcher_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"ringlog/engine"
	"ringlog/replication/fetcher"
)

// answer builds a Fetch response for every partition of req with fn.
func answer(req *kmsg.FetchRequest, fn func(p *kmsg.FetchResponseTopicPartition, fetchOffset int64)) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark, p.LogStartOffset = -1, -1
			fn(&p, rp.FetchOffset)
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// TestCutBatchTrimmed: the leader's answer ends inside a batch (in its
// header or in its records); the handler sees the whole batches only and
// the next fetch starts after them.
func TestCutBatchTrimmed(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep func(b int) int // bytes of the second batch sent
	}{
		{"body", func(b int) int { return b - 7 }},
		{"header", func(int) int { return 30 }},
		{"length", func(int) int { return 8 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, id := newKfake(t, "cut", 1)
			addr := c.ListenAddrs()[0]
			produce(t, producer(t, addr), "cut", []int32{0}, 20, 50, 10)
			log := leaderLog(t, addr, "cut", id, 0, 20)
			bs, err := parseBatches(log)
			if err != nil || len(bs) < 2 {
				t.Fatalf("leader log: %d batches, %v", len(bs), err)
			}
			a, second := log[:bs[0].size], log[bs[0].size:bs[0].size+bs[1].size]
			cut := append(append([]byte(nil), a...), second[:tc.keep(len(second))]...)
			var offsets []int64
			var mu sync.Mutex
			c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				req := kreq.(*kmsg.FetchRequest)
				if len(req.Topics) == 0 {
					// An incremental fetch (KIP-227) naming nothing:
					// the offset has not moved.
					c.KeepControl()
					return nil, nil, false
				}
				off := req.Topics[0].Partitions[0].FetchOffset
				mu.Lock()
				offsets = append(offsets, off)
				mu.Unlock()
				c.KeepControl()
				if off != 0 {
					return nil, nil, false
				}
				return answer(req, func(p *kmsg.FetchResponseTopicPartition, _ int64) {
					p.HighWatermark, p.LogStartOffset, p.RecordBatches = 20, 0, cut
				}), nil, true
			})
			f := newFollower(t)
			s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 1}, f)
			s.Add(fetcher.Partition{TP: engine.TP{Topic: "cut"}, TopicID: id, LeaderEpoch: -1})
			f.waitLEO(20, 10*time.Second, engine.TP{Topic: "cut"})
			f.check()
			mu.Lock()
			defer mu.Unlock()
			if len(offsets) < 2 || offsets[0] != 0 || offsets[1] != bs[0].last+1 {
				t.Errorf("fetch offsets %v, want 0 then %d (after the one whole batch)", offsets, bs[0].last+1)
			}
			if cp := f.copyOf(engine.TP{Topic: "cut"}); string(cp.data) != string(log) || cp.calls < 2 {
				t.Errorf("copy of %d bytes in %d calls, want the leader's %d in 2 or more", len(cp.data), cp.calls, len(log))
			}
			if st := s.Stats(); st.RecordBytes != int64(len(log)) {
				t.Errorf("RecordBytes %d, want %d", st.RecordBytes, len(log))
			}
		})
	}
}

// TestOnlyCutBatchTooLarge: a leader that keeps answering with a cut first
// batch (it ignores KIP-74) gets the partition paused with
// ErrBatchTooLarge, not fetched forever.
func TestOnlyCutBatchTooLarge(t *testing.T) {
	c, id := newKfake(t, "big", 1)
	addr := c.ListenAddrs()[0]
	produce(t, producer(t, addr), "big", []int32{0}, 10, 50, 10)
	log := leaderLog(t, addr, "big", id, 0, 10)
	bs, err := parseBatches(log)
	if err != nil {
		t.Fatal(err)
	}
	first := log[:bs[0].size] // a leader that never sends it whole
	var fetches atomic.Int32
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fetches.Add(1)
		return answer(kreq.(*kmsg.FetchRequest), func(p *kmsg.FetchResponseTopicPartition, _ int64) {
			p.HighWatermark, p.LogStartOffset, p.RecordBatches = 10, 0, first[:len(first)-1]
		}), nil, true
	})
	f := newFollower(t)
	tp := engine.TP{Topic: "big"}
	s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 1}, f)
	s.Add(fetcher.Partition{TP: tp, TopicID: id, LeaderEpoch: -1})
	f.waitFor("a pause", 10*time.Second, func() bool { return f.paused[tp] != nil })
	f.mu.Lock()
	err = f.paused[tp]
	f.mu.Unlock()
	if !errors.Is(err, fetcher.ErrBatchTooLarge) {
		t.Errorf("paused with %v, want ErrBatchTooLarge", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := fetches.Load(); n != 2 {
		t.Errorf("%d fetches, want 2 (the cut batch, then the same while first)", n)
	}
}

// TestPartitionErrors: NOT_LEADER_OR_FOLLOWER pauses a partition (others
// go on) until Resume; KAFKA_STORAGE_ERROR is retried with backoff; an
// answer with no records but a new high watermark reaches HighWatermark and
// the lag in Stats.
func TestPartitionErrors(t *testing.T) {
	c, id := newKfake(t, "errs", 3)
	addr := c.ListenAddrs()[0]
	produce(t, producer(t, addr), "errs", []int32{0, 1}, 100, 50, 10)
	var mu sync.Mutex
	notLeader, storage, hwOnly := 1, 3, 1
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		mu.Lock()
		defer mu.Unlock()
		inject := false
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				switch rp.Partition {
				case 0:
					inject = inject || notLeader > 0
				case 1:
					inject = inject || storage > 0
				case 2:
					inject = inject || hwOnly > 0
				}
			}
		}
		if !inject {
			return nil, nil, false
		}
		return answer(req, func(p *kmsg.FetchResponseTopicPartition, _ int64) {
			switch {
			case p.Partition == 0 && notLeader > 0:
				notLeader--
				p.ErrorCode = kerr.NotLeaderForPartition.Code
			case p.Partition == 1 && storage > 0:
				storage--
				p.ErrorCode = kerr.KafkaStorageError.Code
			case p.Partition == 2 && hwOnly > 0:
				hwOnly--
				p.HighWatermark, p.LogStartOffset = 777, 3
			}
		}), nil, true
	})
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 1, RetryBackoff: 5 * time.Millisecond, IdleRecheck: time.Millisecond}, f)
	p0, p1, p2 := engine.TP{Topic: "errs", Partition: 0}, engine.TP{Topic: "errs", Partition: 1}, engine.TP{Topic: "errs", Partition: 2}
	for p := range int32(3) {
		s.Add(fetcher.Partition{TP: engine.TP{Topic: "errs", Partition: p}, TopicID: id, LeaderEpoch: -1})
	}
	start := time.Now()
	f.waitLEO(100, 10*time.Second, p1)
	// Three retries 5 ms apart, while p2 (idle) is long-polled: the polls
	// end when p1's backoff does, not after WaitMax (500 ms) each.
	if el := time.Since(start); el > 400*time.Millisecond {
		t.Errorf("p1 copied %v after three 5 ms backoffs: the retries waited for long polls", el)
	}
	f.waitFor("p0 paused, p2's high watermark", 10*time.Second, func() bool { return f.paused[p0] != nil && len(f.hwCalls) > 0 })
	f.check()
	f.mu.Lock()
	err, n0 := f.paused[p0], f.logLocked(p0).next
	f.mu.Unlock()
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("p0 paused with %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if n0 != 0 {
		t.Errorf("p0 copied up to %d while paused", n0)
	}
	if st := s.Stats(); st.Retries < 3 {
		t.Errorf("%d retries, want at least 3 (KAFKA_STORAGE_ERROR)", st.Retries)
	}
	f.mu.Lock()
	if hc := f.hwCalls[0]; hc.tp != p2 || hc.hw != 777 || hc.logStart != 3 {
		t.Errorf("first HighWatermark call %+v, want p2 777 3", hc)
	}
	f.mu.Unlock()
	s.Resume(p0)
	f.waitLEO(100, 10*time.Second, p0)
	f.check()
}

// TestOutOfRangeRinglog: a stream fetching as a consumer (replica id -1)
// ahead of the log gets OFFSET_OUT_OF_RANGE with the offsets -1, as Kafka
// answers consumers (a follower is told the leader's log start and high
// watermark: kafka's TestClusterFollowerFetching); its handler picks the
// offset to go on from (here the log start, 0, as a consumer's
// auto.offset.reset=earliest would after a ListOffsets), and the stream
// copies everything from there.
func TestOutOfRangeRinglog(t *testing.T) {
	b := startBroker(t)
	id := b.createTopic("oor", 1)
	produce(t, producer(t, b.Addr), "oor", []int32{0}, 100, 50, 10)
	tp := engine.TP{Topic: "oor"}
	f := newFollower(t)
	f.reset(tp, 500)
	f.onOutOfRange = func(_ engine.TP, logStart, _ int64) int64 { return max(logStart, 0) }
	s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: -1}, f)
	s.Add(fetcher.Partition{TP: tp, TopicID: id, FetchOffset: 500, LeaderEpoch: -1})
	f.waitFor("the copy from the log start", 10*time.Second, func() bool { return f.logLocked(tp).records == 100 })
	f.check()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.oors) != 1 || f.oors[0].logStart != -1 || f.oors[0].hw != -1 {
		t.Errorf("OutOfRange calls %+v, want one with log start -1 and HW -1 (a consumer's answer)", f.oors)
	}
	if l := f.logs[tp]; l.records != 100 {
		t.Errorf("copied %d records, want 100", l.records)
	}
}

// TestReplicaFetchRefusedRinglog: ringlog refuses a replica fetch from a
// broker outside the partition's replicas with NOT_LEADER_OR_FOLLOWER, as
// Kafka does; the stream pauses and reports.
func TestReplicaFetchRefusedRinglog(t *testing.T) {
	b := startBroker(t)
	id := b.createTopic("refused", 1)
	tp := engine.TP{Topic: "refused"}
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: 42, BrokerEpoch: 9}, f)
	s.Add(fetcher.Partition{TP: tp, TopicID: id, LeaderEpoch: -1})
	f.waitFor("a pause", 10*time.Second, func() bool { return f.paused[tp] != nil })
	f.mu.Lock()
	err := f.paused[tp]
	f.mu.Unlock()
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("paused with %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if st := s.Stats(); st.FetchVersion != 16 || st.OffsetForLeaderEpochVersion != 4 {
		t.Errorf("versions Fetch v%d OffsetForLeaderEpoch v%d, want 16 and 4", st.FetchVersion, st.OffsetForLeaderEpochVersion)
	}
}

// TestFrameLimit: a response frame above FrameBytesMax closes the
// connection with ErrFrameTooLarge before its body is read; nothing
// reaches the handler, and the stream keeps reconnecting with backoff.
func TestFrameLimit(t *testing.T) {
	b := startBroker(t)
	id := b.createTopic("frames", 1)
	produce(t, producer(t, b.Addr), "frames", []int32{0}, 1, 64<<10, 1)
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: -1, FrameBytesMax: 16 << 10, ReconnectBackoff: 10 * time.Millisecond, ReconnectBackoffMax: 20 * time.Millisecond}, f)
	s.Add(fetcher.Partition{TP: engine.TP{Topic: "frames"}, TopicID: id, LeaderEpoch: -1})
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Disconnects < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: no disconnects", s.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := s.Stats()
	if !errors.Is(st.LastConnError, fetcher.ErrFrameTooLarge) {
		t.Errorf("last connection error %v, want ErrFrameTooLarge", st.LastConnError)
	}
	if st.RecordBytes != 0 || st.BytesReceived > 8<<10 {
		t.Errorf("%d record bytes, %d bytes received: the big frame was read", st.RecordBytes, st.BytesReceived)
	}
	t.Logf("%v", st.LastConnError)
}

// TestNoSpinIdle: an idle stream long-polls: a handful of fetches a second,
// not thousands.
func TestNoSpinIdle(t *testing.T) {
	b := startBroker(t)
	id := b.createTopic("idle", 4)
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: -1, WaitMax: 200 * time.Millisecond, IdleRecheck: time.Millisecond}, f)
	for p := range int32(4) {
		s.Add(fetcher.Partition{TP: engine.TP{Topic: "idle", Partition: p}, TopicID: id, LeaderEpoch: -1})
	}
	time.Sleep(300 * time.Millisecond) // each new partition's first fetch
	st0 := s.Stats()
	time.Sleep(time.Second)
	st := s.Stats()
	fetches, polls := st.Fetches-st0.Fetches, st.LongPolls-st0.LongPolls
	// At most 6 (5 waits of 200 ms, one more at the edge); fewer when the
	// machine is loaded, which delays the answers: spinning is what this
	// checks, not a rate.
	if fetches < 1 || fetches > 6 || polls != fetches {
		t.Errorf("%d fetches (%d long polls) in 1 s with a 200 ms max wait, want 1 to 6, all long polls", fetches, polls)
	}
}

// TestNoSpinEarlyEmpty: a leader that answers every long poll at once with
// nothing (as one shutting down does) is polled at the retry backoff, not
// in a loop.
func TestNoSpinEarlyEmpty(t *testing.T) {
	c, id := newKfake(t, "early", 2)
	var fetches atomic.Int32
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		fetches.Add(1)
		return answer(kreq.(*kmsg.FetchRequest), func(p *kmsg.FetchResponseTopicPartition, _ int64) {
			p.HighWatermark, p.LogStartOffset = 0, 0
		}), nil, true
	})
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: c.ListenAddrs()[0], ReplicaID: 1, RetryBackoff: 50 * time.Millisecond}, f)
	for p := range int32(2) {
		s.Add(fetcher.Partition{TP: engine.TP{Topic: "early", Partition: p}, TopicID: id, LeaderEpoch: -1})
	}
	time.Sleep(time.Second)
	if n := fetches.Load(); n < 5 || n > 30 {
		t.Errorf("%d fetches in 1 s against a leader answering at once, want 5 to 30 (50 ms apart)", n)
	}
}

// TestOldLeaderVersions: a leader of Kafka 1.1's versions (ApiVersions v1,
// Fetch up to v7, OffsetForLeaderEpoch up to v1) is negotiated with
// (KIP-511 fallback), fetched from by name, and partitions that need
// truncation are paused with ErrUnsupported (no replica id before v3).
func TestOldLeaderVersions(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "old"), kfake.MaxVersions(kversion.V1_1_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	produce(t, producer(t, addr), "old", []int32{0}, 50, 50, 10)
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 1}, f)
	p0, p1 := engine.TP{Topic: "old", Partition: 0}, engine.TP{Topic: "old", Partition: 1}
	s.Add(fetcher.Partition{TP: p0, LeaderEpoch: -1})
	s.Add(fetcher.Partition{TP: p1, LeaderEpoch: -1, NeedsTruncation: true})
	f.waitLEO(50, 10*time.Second, p0)
	f.waitFor("p1 paused", 10*time.Second, func() bool { return f.paused[p1] != nil })
	f.check()
	f.mu.Lock()
	err = f.paused[p1]
	f.mu.Unlock()
	if !errors.Is(err, fetcher.ErrUnsupported) {
		t.Errorf("p1 paused with %v, want ErrUnsupported", err)
	}
	if st := s.Stats(); st.FetchVersion != 7 || st.OffsetForLeaderEpochVersion != -1 {
		t.Errorf("versions Fetch v%d OffsetForLeaderEpoch v%d, want 7 and -1", st.FetchVersion, st.OffsetForLeaderEpochVersion)
	}
}

// TestCloseBounded: Close returns promptly whether the leader never answers
// the handshake or the handler never calls done.
func TestCloseBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	s, err := fetcher.New(fetcher.Config{Addr: ln.Addr().String(), ReplicaID: 1, DialTimeout: time.Minute}, newFollower(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Add(fetcher.Partition{TP: engine.TP{Topic: "x"}, LeaderEpoch: -1})
	time.Sleep(100 * time.Millisecond) // in the handshake by now
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil || time.Since(start) > time.Second {
		t.Errorf("Close during the handshake: %v after %v", err, time.Since(start))
	}

	// A handler that holds its done forever.
	c, id := newKfake(t, "hold", 1)
	produce(t, producer(t, c.ListenAddrs()[0]), "hold", []int32{0}, 10, 50, 10)
	h := &holdingHandler{follower: newFollower(t), got: make(chan struct{}, 1)}
	s, err = fetcher.New(fetcher.Config{Addr: c.ListenAddrs()[0], ReplicaID: 1}, h)
	if err != nil {
		t.Fatal(err)
	}
	s.Add(fetcher.Partition{TP: engine.TP{Topic: "hold"}, TopicID: id, LeaderEpoch: -1})
	<-h.got
	start = time.Now()
	if err := s.Close(ctx); err != nil || time.Since(start) > time.Second {
		t.Errorf("Close with a done outstanding: %v after %v", err, time.Since(start))
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// holdingHandler keeps the dones of Records calls and never calls them.
type holdingHandler struct {
	*follower
	got   chan struct{}
	done  func(int64, error) // the first
	dones []func(int64, error)
}

func (h *holdingHandler) Records(_ engine.TP, _ []byte, _, _ int64, done func(int64, error)) {
	h.mu.Lock()
	if h.done == nil {
		h.done = done
	}
	h.dones = append(h.dones, done)
	h.mu.Unlock()
	select {
	case h.got <- struct{}{}:
	default:
	}
}

// TestStaleDoneIgnored: a partition replaced by Add while its records are
// with the handler is fetched from the new offset, and the old call's done
// (arriving late, while the new call's records are with the handler) moves
// nothing.
func TestStaleDoneIgnored(t *testing.T) {
	c, id := newKfake(t, "stale", 1)
	addr := c.ListenAddrs()[0]
	produce(t, producer(t, addr), "stale", []int32{0}, 100, 50, 10)
	var mu sync.Mutex
	var offsets []int64
	c.ControlKey(kmsg.Fetch.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req := kreq.(*kmsg.FetchRequest); len(req.Topics) > 0 { // else incremental, naming nothing
			mu.Lock()
			offsets = append(offsets, req.Topics[0].Partitions[0].FetchOffset)
			mu.Unlock()
		}
		return nil, nil, false
	})
	h := &holdingHandler{follower: newFollower(t), got: make(chan struct{}, 1)}
	tp := engine.TP{Topic: "stale"}
	s := newStream(t, fetcher.Config{Addr: addr, ReplicaID: 1, PartitionBytesMax: 1}, h)
	s.Add(fetcher.Partition{TP: tp, TopicID: id, LeaderEpoch: -1})
	<-h.got
	s.Add(fetcher.Partition{TP: tp, TopicID: id, FetchOffset: 50, LeaderEpoch: -1})
	<-h.got // the records from 50, held
	h.mu.Lock()
	stale, current := h.dones[0], h.dones[1]
	h.mu.Unlock()
	stale(10, nil)
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	got := append([]int64(nil), offsets...)
	mu.Unlock()
	if len(got) != 2 || got[0] != 0 || got[1] != 50 {
		t.Fatalf("fetch offsets %v after a stale done, want [0 50]", got)
	}
	current(60, nil)
	waitStats(t, s, "the current done applied", func(st fetcher.Stats) bool { return st.Partitions[0].FetchOffset == 60 })
}

// TestStatsLag: while a partition's records are with the handler, Stats
// shows the leader's HW, the unchanged fetch offset and the lag between
// them; once done, the lag is gone.
func TestStatsLag(t *testing.T) {
	b := startBroker(t)
	id := b.createTopic("lag", 1)
	produce(t, producer(t, b.Addr), "lag", []int32{0}, 1000, 50, 50)
	h := &holdingHandler{follower: newFollower(t), got: make(chan struct{}, 1)}
	tp := engine.TP{Topic: "lag"}
	s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: -1, PartitionBytesMax: 4 << 10}, h)
	s.Add(fetcher.Partition{TP: tp, TopicID: id, LeaderEpoch: -1})
	<-h.got
	ps := s.Stats().Partitions[0]
	if ps.State != "handler" || ps.FetchOffset != 0 || ps.HW != 1000 || ps.Lag != 1000 {
		t.Fatalf("stats while the handler holds the records: %+v", ps)
	}
	h.mu.Lock()
	done := h.done
	h.mu.Unlock()
	done(1000, nil) // as if the follower had everything
	waitStats(t, s, "no lag", func(st fetcher.Stats) bool {
		return st.Partitions[0].Lag == 0 && st.Partitions[0].FetchOffset == 1000
	})
}
