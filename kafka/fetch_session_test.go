package kafka_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionParts lists the partitions a fetch response names, with whether
// each carried records, as "p0+" (records) or "p0" (none).
func sessionParts(resp *kmsg.FetchResponse) []string {
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			s := fmt.Sprintf("p%d", p.Partition)
			if len(p.RecordBatches) > 0 {
				s += "+"
			}
			out = append(out, s)
		}
	}
	return out
}

// TestFetchSessions: KIP-227 on the wire, at a version naming topics by
// name (12) and one naming them by id (13, 18). A full fetch at epoch 0
// opens a session; an incremental fetch names only what changed and is
// answered with only the partitions that have something new (records, a
// new high watermark); a partition returning records moves to the end of
// the session's order; forgotten partitions leave it; a wrong epoch is
// INVALID_FETCH_SESSION_EPOCH, a session of the other topic naming
// FETCH_SESSION_TOPIC_ID_ERROR, and epoch -1 closes the session, after
// which its id is FETCH_SESSION_ID_NOT_FOUND.
func TestFetchSessions(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	id := fetchTestTopic(t, b, "sess", 3, map[int32]int{0: 1, 1: 1, 2: 1})
	rc := dialFetch(t, b.Addr)
	produce := func(p int32) {
		t.Helper()
		cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "sess", Partition: p, Value: []byte("more")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []int16{12, 13, 18} {
		// Open: every partition, from offset 0.
		req := fetchReq(v, "sess", id, fetchPartReq(0, 0, 1<<20), fetchPartReq(1, 0, 1<<20), fetchPartReq(2, 0, 1<<20))
		req.SessionEpoch = 0
		resp := rc.fetchRaw(req, 5*time.Second)
		if resp.ErrorCode != 0 || resp.SessionID == 0 {
			t.Fatalf("v%d open: error %d, session %d", v, resp.ErrorCode, resp.SessionID)
		}
		sid := resp.SessionID
		if got := sessionParts(resp); !slices.Equal(got, []string{"p0+", "p1+", "p2+"}) {
			t.Fatalf("v%d open: %v", v, got)
		}
		hw := map[int32]int64{}
		for _, p := range resp.Topics[0].Partitions {
			hw[p.Partition] = p.HighWatermark
		}
		incr := func(epoch int32, parts ...kmsg.FetchRequestTopicPartition) *kmsg.FetchRequest {
			r := fetchReq(v, "sess", id, parts...)
			r.SessionID, r.SessionEpoch = sid, epoch
			r.MaxWaitMillis = 10
			if len(parts) == 0 {
				r.Topics = nil
			}
			return r
		}
		// Incremental: the client moves every partition to its end; all
		// three are named (new positions), none has records, and the
		// answer names none of them (nothing changed since).
		resp = rc.fetchRaw(incr(1, fetchPartReq(0, hw[0], 1<<20), fetchPartReq(1, hw[1], 1<<20), fetchPartReq(2, hw[2], 1<<20)), 5*time.Second)
		if resp.ErrorCode != 0 || resp.SessionID != sid || len(sessionParts(resp)) != 0 {
			t.Fatalf("v%d caught up: error %d, session %d, %v", v, resp.ErrorCode, resp.SessionID, sessionParts(resp))
		}
		// Nothing named, one partition gets a record: only it comes back.
		produce(1)
		resp = rc.fetchRaw(incr(2), 5*time.Second)
		if got := sessionParts(resp); resp.ErrorCode != 0 || !slices.Equal(got, []string{"p1+"}) {
			t.Fatalf("v%d after a produce to 1: error %d, %v", v, resp.ErrorCode, got)
		}
		// The session still reads partition 1 from the old position (the
		// client did not name it): the same record again, and partition 1
		// now comes last in the order, after 0 and 2.
		produce(0)
		produce(2)
		resp = rc.fetchRaw(incr(3), 5*time.Second)
		if got := sessionParts(resp); !slices.Equal(got, []string{"p0+", "p2+", "p1+"}) {
			t.Fatalf("v%d the session's order: %v, want p0+ p2+ p1+", v, got)
		}
		// A wrong epoch, and the same epoch again, are refused.
		for _, ep := range []int32{3, 9} {
			if resp := rc.fetchRaw(incr(ep), 5*time.Second); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || len(resp.Topics) != 0 {
				t.Fatalf("v%d epoch %d: error %d", v, ep, resp.ErrorCode)
			}
		}
		// Forget partition 2: it is no longer fetched.
		r := incr(4, fetchPartReq(0, hw[0]+1, 1<<20), fetchPartReq(1, hw[1]+1, 1<<20))
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = "sess", id, []int32{2}
		r.ForgottenTopics = append(r.ForgottenTopics, ft)
		resp = rc.fetchRaw(r, 5*time.Second)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d forget: error %d", v, resp.ErrorCode)
		}
		produce(2)
		produce(0)
		resp = rc.fetchRaw(incr(5), 5*time.Second)
		if got := sessionParts(resp); !slices.Equal(got, []string{"p0+"}) {
			t.Fatalf("v%d after forgetting 2: %v, want p0+", v, got)
		}
		// The other way of naming topics is refused.
		other := int16(13)
		if v >= 13 {
			other = 12
		}
		wrong := fetchReq(other, "sess", id)
		wrong.Topics = nil
		wrong.SessionID, wrong.SessionEpoch = sid, 6
		if resp := rc.fetchRaw(wrong, 5*time.Second); resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
			t.Fatalf("v%d session used at v%d: error %d", v, other, resp.ErrorCode)
		}
		// Close it with a sessionless full fetch: the id is gone.
		closing := fetchReq(v, "sess", id, fetchPartReq(0, 0, 1<<20))
		closing.SessionID, closing.SessionEpoch = sid, -1
		if resp := rc.fetchRaw(closing, 5*time.Second); resp.ErrorCode != 0 || resp.SessionID != 0 {
			t.Fatalf("v%d close: error %d, session %d", v, resp.ErrorCode, resp.SessionID)
		}
		if resp := rc.fetchRaw(incr(6), 5*time.Second); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("v%d closed session: error %d", v, resp.ErrorCode)
		}
	}
}

// TestFetchSessionsConsumer: a kgo consumer (fetch sessions on, its
// default) and one with them off read the same records, in order, while a
// producer keeps writing, through many incremental fetches of partitions
// most of which have nothing new each time; the first one's fetch
// requests shrink to what changed (its smallest is smaller than the
// sessionless consumer's smallest, which names every partition).
func TestFetchSessionsConsumer(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	const parts, per = 8, 200
	e2eCreateTopic(t, b, "sessc", parts, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := b.client(kgo.DefaultProduceTopic("sessc"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	go func() {
		for i := range per {
			for p := range int32(parts) {
				if i%(int(p)+1) != 0 {
					continue // partitions fill at different rates
				}
				prod.Produce(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i)}, nil)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	want := 0
	for p := range parts {
		for i := range per {
			if i%(p+1) == 0 {
				want++
			}
		}
	}
	smallest := map[bool]int{}
	for _, sessions := range []bool{true, false} {
		hook := &fetchWriteHook{smallest: 1 << 30}
		opts := []kgo.Opt{kgo.ConsumeTopics("sessc"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(50 * time.Millisecond), kgo.WithHooks(hook)}
		if !sessions {
			opts = append(opts, kgo.DisableFetchSessions())
		}
		cl := b.client(opts...)
		seen := map[string]bool{}
		next := map[int32]int64{}
		for len(seen) < want {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records", len(seen), want)
			}
			if err := fs.Err(); err != nil {
				t.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next[r.Partition] {
					t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1)
				}
				next[r.Partition]++
				seen[string(r.Value)] = true
			})
		}
		if len(seen) != want {
			t.Fatalf("%d records, want %d", len(seen), want)
		}
		cl.Close()
		smallest[sessions] = hook.min()
	}
	t.Logf("smallest fetch request: %d bytes with sessions, %d without (8 partitions)", smallest[true], smallest[false])
	if smallest[true] >= smallest[false] {
		t.Fatalf("smallest fetch request: %d bytes with sessions, %d without", smallest[true], smallest[false])
	}
}

// fetchWriteHook notes the smallest Fetch request a client wrote.
type fetchWriteHook struct {
	mu       sync.Mutex
	smallest int
}

func (h *fetchWriteHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key != int16(kmsg.Fetch) || err != nil {
		return
	}
	h.mu.Lock()
	h.smallest = min(h.smallest, n)
	h.mu.Unlock()
}

func (h *fetchWriteHook) min() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.smallest
}

// TestFetchSessionOwner: a fetch session answers only the kind of fetcher
// that opened it, the same follower (replica id) or a consumer. A
// follower's session holds its fetch offsets, which the leader takes for
// that follower's LEO on every fetch: served to another replica id they
// would move the high watermark on offsets that replica never reached.
// The session stays usable by its owner.
func TestFetchSessionOwner(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	id := fetchTestTopic(t, b, "owner", 1, map[int32]int{0: 1})
	rc := dialFetch(t, b.Addr)
	open := fetchReq(13, "owner", id, fetchPartReq(0, 0, 1<<20))
	open.SessionEpoch = 0
	resp := rc.fetchRaw(open, 5*time.Second)
	if resp.ErrorCode != 0 || resp.SessionID == 0 {
		t.Fatalf("open: error %d, session %d", resp.ErrorCode, resp.SessionID)
	}
	incr := func(replica int32, epoch int32) *kmsg.FetchResponse {
		r := fetchReq(13, "owner", id)
		r.Topics = nil
		r.ReplicaID = replica
		r.SessionID, r.SessionEpoch = resp.SessionID, epoch
		return rc.fetchRaw(r, 5*time.Second)
	}
	if got := incr(2, 1); got.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("a consumer's session used by replica 2: error %d, want FETCH_SESSION_ID_NOT_FOUND", got.ErrorCode)
	}
	if got := incr(-1, 1); got.ErrorCode != 0 || got.SessionID != resp.SessionID {
		t.Fatalf("the session used by its consumer: error %d, session %d", got.ErrorCode, got.SessionID)
	}

	// A follower's session (v15+: ReplicaState, KIP-903) answers that
	// follower at that broker epoch only.
	open = fetchReq(15, "owner", id, fetchPartReq(0, 0, 1<<20))
	open.ReplicaID, open.ReplicaState.ID, open.ReplicaState.Epoch = -1, 2, 5
	open.SessionEpoch = 0
	opened := rc.fetchRaw(open, 5*time.Second)
	if opened.ErrorCode != 0 || opened.SessionID == 0 {
		t.Fatalf("open as replica 2: error %d, session %d", opened.ErrorCode, opened.SessionID)
	}
	asReplica := func(replica int32, brokerEpoch int64) int16 {
		r := fetchReq(15, "owner", id)
		r.Topics = nil
		r.ReplicaID, r.ReplicaState.ID, r.ReplicaState.Epoch = -1, replica, brokerEpoch
		r.SessionID, r.SessionEpoch = opened.SessionID, 1
		return rc.fetchRaw(r, 5*time.Second).ErrorCode
	}
	for _, other := range []struct {
		replica int32
		epoch   int64
	}{{3, 5}, {2, 6}, {-1, -1}} {
		if code := asReplica(other.replica, other.epoch); code != kerr.FetchSessionIDNotFound.Code {
			t.Fatalf("replica 2's session (epoch 5) used by replica %d epoch %d: error %d, want FETCH_SESSION_ID_NOT_FOUND", other.replica, other.epoch, code)
		}
	}
	if code := asReplica(2, 5); code != 0 {
		t.Fatalf("replica 2's session used by it: error %d", code)
	}
}
