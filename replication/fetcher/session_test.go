package fetcher_test

import (
	"context"
	"math/rand/v2"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/replication/fetcher"
)

// addAll adds partitions 0..n-1 of topic, from offset 0.
func addAll(s *fetcher.Stream, topic string, id [16]byte, n int32) {
	for _, tp := range tps(topic, n) {
		s.Add(fetcher.Partition{TP: tp, TopicID: id, LeaderEpoch: -1})
	}
}

// TestSessionIncremental: each lane opens a fetch session with a full
// fetch (epoch 0) and then fetches incrementally. An idle stream's long
// polls name no partition; after a record lands on one partition, the
// requests name only that one (its new fetch offset) and forget only it
// (while it is with the handler); everything is copied once, in order. A
// partition removed is forgotten, and named again once added back.
// Closing the stream closes its sessions on the leader (epoch -1).
func TestSessionIncremental(t *testing.T) {
	b := startBroker(t)
	const n = 50
	id := b.createTopic("sess", n)
	spy := &wireSpy{}
	f := newFollower(t)
	s, err := fetcher.New(fetcher.Config{Addr: b.Addr, ReplicaID: -1, Slots: 2, WaitMax: 100 * time.Millisecond, Dial: spy.dial}, f)
	if err != nil {
		t.Fatal(err)
	}
	addAll(s, "sess", id, n)
	waitStats(t, s, "idle incremental long polls", func(st fetcher.Stats) bool { return st.IncrementalFetches >= 3 && st.LongPolls >= 4 })

	first := spy.since(0)
	if r := first[0].req; r.SessionEpoch != 0 || r.SessionID != 0 || len(named(r)) == 0 {
		t.Fatalf("first fetch: session %d epoch %d naming %d partitions, want a full fetch opening a session", r.SessionID, r.SessionEpoch, len(named(r)))
	}
	full := 0
	for _, sf := range first {
		if sf.req.SessionEpoch == 0 {
			full = max(full, len(named(sf.req)))
		}
	}
	if full != n {
		t.Fatalf("largest full fetch named %d partitions, want all %d (the long polls' session)", full, n)
	}
	idle := spy.since(spy.count())
	time.Sleep(350 * time.Millisecond)
	idle = spy.since(len(first) + len(idle))
	for _, sf := range idle {
		if sf.req.SessionEpoch <= 0 || len(named(sf.req)) > 0 || len(forgotten(sf.req)) > 0 {
			t.Fatalf("idle fetch: epoch %d naming %v forgetting %v, want an incremental fetch naming nothing", sf.req.SessionEpoch, named(sf.req), forgotten(sf.req))
		}
	}
	if len(idle) < 2 {
		t.Fatalf("%d fetches in 350 ms of an idle stream with 100 ms long polls", len(idle))
	}

	mark := spy.count()
	tp := engine.TP{Topic: "sess", Partition: 7}
	produce(t, producer(t, b.Addr), "sess", []int32{7}, 1, 20, 1)
	f.waitLEO(1, 10*time.Second, tp)
	waitStats(t, s, "partition 7 fetched from offset 1", func(st fetcher.Stats) bool {
		for _, sf := range spy.since(mark) {
			if slices.Contains(named(sf.req), 7) {
				return true
			}
		}
		return false
	})
	for _, sf := range spy.since(mark) {
		if sf.req.SessionEpoch <= 0 {
			t.Fatalf("a full fetch (epoch %d, %d partitions) after one record", sf.req.SessionEpoch, len(named(sf.req)))
		}
		for _, p := range append(named(sf.req), forgotten(sf.req)...) {
			if p != 7 {
				t.Fatalf("fetch after a record on partition 7 names %v and forgets %v", named(sf.req), forgotten(sf.req))
			}
		}
	}
	f.check()
	if cp := f.copyOf(tp); cp.records != 1 {
		t.Fatalf("partition 7: %d records copied, want 1", cp.records)
	}

	// A partition removed (a leadership moved) is forgotten by the next
	// incremental request (which may name partition 7: the long polls'
	// session last heard of it at offset 0); added back, it is named
	// again, and its high watermark comes back.
	gone := engine.TP{Topic: "sess", Partition: 3}
	mark = spy.count()
	s.Remove(gone)
	waitStats(t, s, "partition 3 forgotten", func(fetcher.Stats) bool {
		for _, sf := range spy.since(mark) {
			if slices.Equal(forgotten(sf.req), []int32{3}) && !slices.Contains(named(sf.req), 3) && sf.req.SessionEpoch > 0 {
				return true
			}
		}
		return false
	})
	mark = spy.count()
	s.Add(fetcher.Partition{TP: gone, TopicID: id, LeaderEpoch: -1})
	waitStats(t, s, "partition 3 named again, its HW known", func(st fetcher.Stats) bool {
		for _, sf := range spy.since(mark) {
			if slices.Contains(named(sf.req), 3) {
				return st.Partitions[3].HW == 0
			}
		}
		return false
	})

	if got := b.B.Server().FetchSessionStats().Sessions; got < 2 {
		t.Fatalf("%d fetch sessions on the leader, want the stream's", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.B.Server().FetchSessionStats().Sessions != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d fetch sessions left on the leader after Close", b.B.Server().FetchSessionStats().Sessions)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionRequestBytes: a stream sends far smaller Fetch requests with
// sessions than without (a leader keeping none: fetch session cache slots
// -1), idle and with a trickle of records, and copies every record either
// way. 64 partitions keep it cheap; BenchmarkSessionRequestBytes measures
// 1,000.
func TestSessionRequestBytes(t *testing.T) {
	with, without := sessionRequestBytes(t, 64, 20, 300*time.Millisecond)
	t.Logf("bytes per Fetch request, 64 partitions: idle %.0f with sessions, %.0f without; a trickle of 20 records: %.0f with, %.0f without",
		with.idle, without.idle, with.trickle, without.trickle)
	if with.idle*10 > without.idle || with.trickle*3 > without.trickle {
		t.Fatalf("bytes per Fetch request with sessions %+v, without %+v: want 10 times fewer idle, 3 times fewer with a trickle", with, without)
	}
}

// requestBytes are the mean bytes of a stream's Fetch requests, and the
// process's CPU time per second of the idle phase (leader and follower:
// both run here).
type requestBytes struct{ idle, trickle, idleCPU float64 }

// sessionRequestBytes measures the mean Fetch request of a stream of n
// partitions on a leader with sessions and on one without: idle for
// idle, then while trickle records land on random partitions, 5 ms
// apart, until they are copied.
func sessionRequestBytes(tb testing.TB, n int32, trickle int, idle time.Duration) (with, without requestBytes) {
	for _, sessions := range []bool{true, false} {
		b := startBrokerWith(tb, func(c *broker.Config) {
			if !sessions {
				c.FetchSessionSlots = -1
			}
		})
		id := b.createTopic("bytes", n)
		f := newFollower(tb)
		s := newStream(tb, fetcher.Config{Addr: b.Addr, ReplicaID: -1, WaitMax: 100 * time.Millisecond}, f)
		addAll(s, "bytes", id, n)
		waitStats(tb, s, "long polls", func(st fetcher.Stats) bool { return st.LongPolls >= 3 })
		perFetch := func(a, b fetcher.Stats) float64 {
			return float64(b.FetchBytesSent-a.FetchBytesSent) / float64(max(b.Fetches-a.Fetches, 1))
		}
		var got requestBytes
		before := s.Stats()
		cpu := cpuSeconds()
		time.Sleep(idle)
		got.idleCPU = (cpuSeconds() - cpu) / idle.Seconds()
		got.idle = perFetch(before, s.Stats())

		before = s.Stats()
		prod := producer(tb, b.Addr)
		want := map[int32]int64{}
		for range trickle {
			p := rand.Int32N(n)
			want[p]++
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "bytes", Partition: p, Value: []byte("trickle")}).FirstErr(); err != nil {
				tb.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		f.waitFor("the trickle copied", 10*time.Second, func() bool {
			for p, k := range want {
				if l := f.logLocked(engine.TP{Topic: "bytes", Partition: p}); l.records != k || l.busy {
					return false
				}
			}
			return true
		})
		got.trickle = perFetch(before, s.Stats())
		f.check()
		if st := s.Stats(); sessions != (st.IncrementalFetches > 0) {
			tb.Fatalf("sessions %v: %d incremental fetches", sessions, st.IncrementalFetches)
		}
		if sessions {
			with = got
		} else {
			without = got
		}
	}
	return with, without
}

// cpuSeconds is the CPU time the Go runtime has seen this process's
// goroutines use (runtime/metrics: user time, GC and scavenger included;
// system calls' kernel time not).
func cpuSeconds() float64 {
	sample := []metrics.Sample{{Name: "/cpu/classes/total:cpu-seconds"}, {Name: "/cpu/classes/idle:cpu-seconds"}}
	metrics.Read(sample)
	return sample[0].Value.Float64() - sample[1].Value.Float64()
}

// TestSessionEvicted: a leader that evicts the stream's sessions (another
// client's session takes its slot in a full cache) answers the next
// incremental fetch FETCH_SESSION_ID_NOT_FOUND; the stream falls back to a
// full fetch, opens a new session and copies on, every record once.
//
// The cache has one slot: the other stream's first session can only be
// opened by evicting this stream's (idle 1 ms or more). With two slots, as
// before, the other stream's first session took the free slot and its
// second (its partitions added one by one) evicted the least recently used
// idle session, which on a loaded machine could be its own first one, this
// stream's having been renewed by a long poll in between: a suite run saw
// no reset in 10 s.
func TestSessionEvicted(t *testing.T) {
	b := startBrokerWith(t, func(c *broker.Config) {
		c.FetchSessionSlots, c.FetchSessionEviction = 1, time.Millisecond
	})
	const n = 4
	id := b.createTopic("evict", n)
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: -1, Slots: 1, WaitMax: 100 * time.Millisecond}, f)
	addAll(s, "evict", id, n)
	waitStats(t, s, "incremental fetches", func(st fetcher.Stats) bool { return st.IncrementalFetches >= 2 })

	// Another stream over the same partitions: its session takes the
	// cache's slot from the first stream's idle one.
	other := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: -1, Slots: 1, WaitMax: 100 * time.Millisecond}, newFollower(t))
	addAll(other, "evict", id, n)
	waitStats(t, s, "a session reset", func(st fetcher.Stats) bool { return st.SessionResets >= 1 })

	produce(t, producer(t, b.Addr), "evict", []int32{0, 1, 2, 3}, 20, 30, 5)
	f.waitLEO(20, 10*time.Second, tps("evict", n)...)
	f.check()
	for _, tp := range tps("evict", n) {
		if cp := f.copyOf(tp); cp.records != 20 {
			t.Fatalf("%v: %d records copied, want 20", tp, cp.records)
		}
	}
	t.Logf("stream stats: %d fetches, %d incremental, %d session resets", s.Stats().Fetches, s.Stats().IncrementalFetches, s.Stats().SessionResets)
}

// TestSessionFollowerISR: two brokers replicating each other's partitions
// (RF 2, min.insync.replicas 2, replica.lag.time.max.ms 600 ms). The
// followers fetch in sessions, so most of their fetches name no partition;
// the leaders still count every partition of a session as fetched at its
// cached offset, so idle partitions stay in the ISR well past the lag time
// and acks=all produces to each of them, and a trickle to one, succeed.
func TestSessionFollowerISR(t *testing.T) {
	pair := startPair(t, func(c *broker.Config) {
		c.Cluster.LagTimeMax = 600 * time.Millisecond
		c.Topic.MinInsyncReplicas = 2
	})
	const n = 12
	cl := newClient(t, pair[0].Addr(), kgo.SeedBrokers(pair[0].Addr(), pair[1].Addr()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProduceRequestTimeout(2*time.Second), kgo.RecordDeliveryTimeout(3*time.Second),
		kgo.DisableIdempotentWrite()) // so that the delivery timeout bounds a produce that cannot commit
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createRF2(t, cl, "isr", n)
	produceEach := func(what string, tries int) {
		t.Helper()
		for p := range int32(n) {
			for try := 1; ; try++ {
				err := cl.ProduceSync(ctx, &kgo.Record{Topic: "isr", Partition: p, Value: []byte(what)}).FirstErr()
				if err == nil {
					break
				}
				if try >= tries {
					t.Fatalf("acks=all produce to partition %d (%s), %d tries: %v", p, what, try, err)
				}
			}
		}
	}
	// The first records wait for the followers to join the ISR: on a
	// loaded machine (a CI suite run) one had not within the 3 s delivery
	// timeout. What the test is about comes after.
	produceEach("first", 5)
	before := [2]int64{}
	for i, b := range pair {
		before[i] = b.Server().FetchSessionStats().FollowerIncrementalFetches
	}
	// Four lag times with a trickle to partition 0 only: the others are
	// named in no fetch.
	for end := time.Now().Add(2400 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "isr", Partition: 0, Value: []byte("trickle")}).FirstErr(); err != nil {
			t.Fatalf("acks=all trickle to partition 0: %v", err)
		}
	}
	produceEach("after", 1)
	for i, b := range pair {
		st := b.Server().FetchSessionStats()
		t.Logf("broker %d: %d follower sessions, %d incremental follower fetches in 2.4 s", i+1, st.FollowerSessions, st.FollowerIncrementalFetches-before[i])
		if st.FollowerSessions == 0 || st.FollowerIncrementalFetches-before[i] < 3 {
			t.Fatalf("broker %d: %d follower sessions, %d incremental follower fetches in 2.4 s", i+1, st.FollowerSessions, st.FollowerIncrementalFetches-before[i])
		}
	}
	isrs := isrSizes(t, cl, "isr")
	for p, k := range isrs {
		if k != 2 {
			t.Fatalf("partition %d: ISR of %d after 2.4 s of idle follower sessions, want 2 (all: %v)", p, k, isrs)
		}
	}
}

// createRF2 creates topic with n partitions of two replicas.
func createRF2(t testing.TB, cl *kgo.Client, topic string, n int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, n, 2
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: error %d", topic, code)
	}
	// Leaders and followers are in place once every partition's ISR is
	// full.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		sizes := isrSizes(t, cl, topic)
		full := len(sizes) == int(n)
		for _, k := range sizes {
			full = full && k == 2
		}
		if full {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ISRs of %s not full: %v", topic, sizes)
		}
	}
}

// isrSizes returns the ISR size of each partition of topic, by partition,
// from the brokers' metadata.
func isrSizes(t testing.TB, cl *kgo.Client, topic string) map[int32]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int{}
	for _, mt := range resp.Topics {
		for _, p := range mt.Partitions {
			out[p.Partition] = len(p.ISR)
		}
	}
	return out
}
