package kafka

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
	"ringlog/replication"
	"ringlog/segment"
)

// Fetch, v4 to v18.
//
// v4 is the first version that carries RecordBatch v2 semantics (isolation
// level, last stable offset, aborted transactions); every client that can
// talk to this broker at all (it stores magic 2 only) sends v4 or newer.
// fetchVersionMax is pinned rather than taken from kmsg: the response is
// framed by hand (fetch_frame.go), so a newer kmsg must not silently
// advertise a layout this file has not been checked against
// (TestFetchFramingMatchesKmsg fails when kmsg moves on).
//
// Non-obvious invariants of the fetch path:
//   - Records are never read into memory on the serving path: they go out
//     as the engine's file regions (sendfile), and each read's pin on its
//     segments is released exactly once, by the response's OnDone, which
//     netpoll also runs when the connection dies (TestFetchReleasesReads
//     deletes the topic and finds no descriptor left open).
//   - A long poll holds no read: segments pinned for max_wait_ms would keep
//     deleted files on disk.
//   - The waiter is registered before the long poll's first look at the
//     partitions; the other order loses an append that lands in between
//     and the consumer waits out max_wait_ms.
//   - A graceful stop must call StopLongPolls before closing the network:
//     netpoll's Close waits for every request in flight, and a parked fetch
//     is one (a restart under a consumer once took max_wait_ms and failed).
//   - An empty record set is sent with length 0, never null: librdkafka
//     takes a null record set for a malformed one.
const (
	fetchVersionMin = 4
	fetchVersionMax = 18
)

func init() {
	register(api{key: kmsg.Fetch, min: fetchVersionMin, max: fetchVersionMax, async: handleFetch})
}

// fetch is one Fetch request in flight, from decoding to the reply. The
// network goroutine owns it until it either answers or hands it to a
// long-poll goroutine (fetch_wait.go), which owns it from then on.
type fetch struct {
	s       *Server
	cx      *reqCtx
	version int16

	maxWait       time.Duration
	minBytes      int64
	maxBytes      int64 // response-level limit (KIP-74: the first batch may exceed it)
	readCommitted bool
	// replica is the broker id of a follower fetching from this leader,
	// -1 for a consumer.
	replica int32
	// replicaEpoch is that follower's broker epoch (v15+, KIP-903), -1
	// when it sent none.
	replicaEpoch int64
	// heldFor is, after a read pass, the shortest time a replication
	// throttle holds back a partition of the follower's (0: none held).
	heldFor time.Duration
	// rack is the consumer's client.rack (v11+, KIP-392).
	rack string

	// errCode is a response-level error (fetch sessions); with it set the
	// response carries no topics.
	errCode int16
	// throttleMs is the response's throttle_time_ms (quota.go).
	throttleMs int32
	topics     []fetchTopic
	// denied is the code every partition gets when a replica fetch comes
	// from a principal that may not CLUSTER_ACTION.
	denied int16
	// session is the fetch session (fetch_session.go) the response names,
	// nil for none; incremental is set when the request was incremental,
	// and then topics are the session's partitions.
	session     *fetchSession
	incremental bool

	// Long-poll state (fetch_wait.go).
	cancel    chan struct{} // closed when the wait must end early
	cancelWhy atomic.Int32  // why cancel was closed: cancelConnClosed or cancelStop
}

// fetchTopic is one topic of the request, answered in request order.
type fetchTopic struct {
	name  string   // v4-v12 (and resolved from id on v13+, "" when unknown)
	id    [16]byte // v13+
	parts []fetchPart
	// unknownID is set in an incremental fetch when the session's topic
	// id names no topic here.
	unknownID bool
}

// fetchPart is one requested partition and, after a read pass, its answer.
type fetchPart struct {
	tp          engine.TP
	offset      int64
	maxBytes    int64 // partition_max_bytes
	leaderEpoch int32 // current_leader_epoch; -1 skips the check (KIP-320)
	// fixedErr is an error decided from the request alone (an unknown
	// topic id); such a partition is never read.
	fixedErr int16

	// The answer of the last read pass.
	errCode  int16
	hw       int64
	lso      int64
	logStart int64
	// aborted are the aborted transactions of the records read
	// (read_committed).
	aborted []segment.AbortedTxn
	// res holds the records' file regions; nil when there are none to
	// send. It pins segment files until released (exactly once: by the
	// next read pass, by the wait, or by the response's OnDone).
	res *segment.ReadResult
	// currentLeader, set with FENCED_LEADER_EPOCH, tells a v16+ client who
	// leads at which epoch so that it need not refresh metadata (KIP-951).
	currentLeader bool
	epochNow      int32
	// preferred, when preferredSet, is the replica the consumer should
	// fetch from instead of this leader (KIP-392).
	preferred    int32
	preferredSet bool
	// sp is the partition's place in the fetch session, if any; skip
	// leaves it out of an incremental response (fetchSessions.settle).
	sp   *sessionPart
	skip bool
}

// handleFetch runs on the connection's network goroutine. It answers at once
// when the data is there (or an error is), and otherwise hands the request
// to a long poll that an append or max_wait_ms ends.
func handleFetch(s *Server, cx *reqCtx, kreq kmsg.Request) {
	f := s.newFetch(cx, kreq.(*kmsg.FetchRequest))
	if f.errCode != 0 {
		f.respond()
		return
	}
	bytes, done := f.read()
	// Kafka's conditions for answering without waiting (ReplicaManager
	// fetchMessages): no wait asked, nothing asked, enough bytes, or an
	// error the client must see now.
	if done || bytes >= f.minBytes || f.maxWait <= 0 || f.empty() {
		f.respond()
		return
	}
	// A follower's fetch that a replication throttle left without the
	// records of some partition waits no longer than the throttle holds
	// them (Kafka's waits its whole max_wait_ms: a throttled move then
	// runs in steps of that, well under its rate).
	if f.heldFor > 0 {
		f.maxWait = min(f.maxWait, time.Duration(now()-f.cx.times.received)+f.heldFor)
	}
	// Nothing held while waiting: a long poll must not pin segments that
	// retention wants to delete.
	f.release()
	s.waits.start(f)
}

// newFetch turns the request into the plan of partitions to read, deciding
// every error that does not need a read.
func (s *Server) newFetch(cx *reqCtx, req *kmsg.FetchRequest) *fetch {
	f := &fetch{
		s:             s,
		cx:            cx,
		version:       req.Version,
		maxWait:       time.Duration(req.MaxWaitMillis) * time.Millisecond,
		minBytes:      int64(req.MinBytes),
		maxBytes:      max(int64(req.MaxBytes), 0),
		readCommitted: req.IsolationLevel == 1,
		replica:       -1,
		rack:          req.Rack,
	}
	// Followers fetch with their broker id (replica_id up to v14, the
	// replica_state tag from v15, KIP-903); a negative id is a consumer's.
	// The node judges, partition by partition, whether the follower is a
	// replica (readReplicaPart).
	replicaID := req.ReplicaID
	f.replicaEpoch = -1
	if req.Version >= 15 {
		replicaID, f.replicaEpoch = req.ReplicaState.ID, req.ReplicaState.Epoch
	}
	if replicaID >= 0 {
		f.replica = replicaID
	}
	// Kafka's RequestMetrics name a fetch FetchFollower by its replica
	// id alone (FetchRequest.isFromFollower), authorized or not.
	cx.times.fetch = fetchConsumer
	if replicaID >= 0 {
		cx.times.fetch = fetchFollower
	}
	// The broker's own bound on a response, as Kafka's: a max_bytes of
	// 2 GiB (and v0-v2, which have none) would build a frame the
	// connection cannot send.
	if limit := int64(s.cfg.FetchMaxBytes); replicaID < 0 {
		f.maxBytes = min(f.maxBytes, limit)
	} else {
		f.maxBytes = min(f.maxBytes, int64(s.cfg.ReplicaFetchMaxBytes))
	}
	// A follower's fetch moves the high watermark and the ISR: only a
	// broker may send one (clusterAction). Anyone else gets every
	// partition TOPIC_AUTHORIZATION_FAILED, what Kafka answers a replica
	// fetch whose principal may not CLUSTER_ACTION.
	var denied int16
	if replicaID >= 0 && !s.clusterAction(cx) {
		denied = kerr.TopicAuthorizationFailed.Code
		f.replica = -1
	}
	f.denied = denied
	f.topics = make([]fetchTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := &f.topics[i]
		t.name, t.id = rt.Topic, rt.TopicID
		topicErr := denied
		if req.Version >= 13 && denied == 0 {
			// KIP-516: v13+ names topics by id only.
			if info, ok := s.eng.TopicByID(rt.TopicID); ok {
				t.name = info.Name
			} else {
				t.name = ""
				topicErr = kerr.UnknownTopicID.Code
			}
		}
		t.parts = make([]fetchPart, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			t.parts[j] = fetchPart{
				tp:          engine.TP{Topic: t.name, Partition: rp.Partition},
				offset:      rp.FetchOffset,
				maxBytes:    max(int64(rp.PartitionMaxBytes), 0),
				leaderEpoch: rp.CurrentLeaderEpoch,
				fixedErr:    topicErr,
			}
		}
	}
	// Fetch sessions (KIP-227, fetch_session.go): an incremental fetch
	// reads the session's partitions instead of the request's.
	if req.Version >= 7 {
		if code := s.sessions.plan(s, f, req); code != 0 {
			f.errCode, f.topics = code, nil
		}
	}
	// A consumer needs READ on each topic it reads (with an authorizer,
	// authz.go), checked on every fetch, incremental ones too: the ACLs
	// may have changed since the session took the partition.
	if f.replica < 0 && denied == 0 {
		for i := range f.topics {
			t := &f.topics[i]
			if t.name == "" || s.authorize(cx, acl.OpRead, acl.ResourceTopic, t.name) {
				continue
			}
			for j := range t.parts {
				if t.parts[j].fixedErr == 0 {
					t.parts[j].fixedErr = kerr.TopicAuthorizationFailed.Code
				}
			}
		}
	}
	return f
}

// empty reports whether the request asked for no partition at all (Kafka
// answers such a fetch at once).
func (f *fetch) empty() bool {
	for i := range f.topics {
		if len(f.topics[i].parts) > 0 {
			return false
		}
	}
	return true
}

// read does one read pass over every partition in request order, replacing
// the previous pass's answer. It returns the record bytes found and whether
// some partition has an error, which ends a long poll at once.
//
// The response-level max_bytes is shared in request order, and each
// partition also stops at its partition_max_bytes; the first partition that
// has data returns its first batch whole even when it is larger than either
// limit, so that a consumer always makes progress (KIP-74). Later
// partitions get what the limit leaves, possibly nothing. A region may end
// inside a batch: clients drop a partial trailing batch.
//
// Isolation: read_committed reads up to the last stable offset and gets
// the aborted transactions it read; a long poll re-reads at the same
// level, and wakes when the high watermark moves, which is when the last
// stable offset may move too.
func (f *fetch) read() (bytes int64, done bool) {
	limit := f.maxBytes
	f.heldFor = 0
	minOne := true
	for i := range f.topics {
		for j := range f.topics[i].parts {
			p := &f.topics[i].parts[j]
			p.releaseRead()
			if p.fixedErr != 0 {
				p.fail(p.fixedErr)
				done = true
				continue
			}
			if !f.s.readPart(p, f, min(p.maxBytes, limit), minOne) {
				done = true
				continue
			}
			if p.res != nil && p.res.Bytes > 0 {
				minOne = false
				bytes += p.res.Bytes
				limit = max(limit-p.res.Bytes, 0)
			}
		}
	}
	return bytes, done
}

// readPart reads one partition into p, for a consumer or for the follower
// f.replica. It reports false when p got an error code.
func (s *Server) readPart(p *fetchPart, f *fetch, maxBytes int64, minOne bool) bool {
	p.preferredSet = false
	if f.replica >= 0 {
		return s.readReplicaPart(p, f, maxBytes, minOne)
	}
	code := s.leaderCode(p.tp)
	leads := code == 0
	if !leads && (code != kerr.NotLeaderForPartition.Code || !s.followerServes(p.tp, f.version)) {
		p.fail(code)
		return false
	}
	st, err := s.eng.State(p.tp)
	if err != nil {
		p.fail(errorCode(err))
		return false
	}
	// KIP-320: a consumer that knows an older epoch has stale metadata and
	// must refresh it (FENCED_LEADER_EPOCH); one that knows a newer epoch
	// is ahead of this broker, which will learn it (UNKNOWN_LEADER_EPOCH).
	// -1 means the client does not check, as Kafka reads an absent epoch.
	if p.leaderEpoch != -1 {
		switch {
		case p.leaderEpoch < st.LeaderEpoch:
			p.fail(kerr.FencedLeaderEpoch.Code)
			// Only a leader can name itself the current leader.
			p.currentLeader, p.epochNow = leads, st.LeaderEpoch
			return false
		case p.leaderEpoch > st.LeaderEpoch:
			p.fail(kerr.UnknownLeaderEpoch.Code)
			return false
		}
	}
	if leads {
		if pref := s.preferredReplica(p.tp, f.rack); pref >= 0 {
			// KIP-392: the consumer is told to fetch from a replica in its
			// rack, and gets no records from here, at once (false ends a
			// long poll as an error does; the code stays 0).
			p.errCode, p.preferred, p.preferredSet, p.res = 0, pref, true, nil
			p.setState(st)
			return false
		}
	} else if p.offset > st.HW && p.offset >= st.LogStartOffset {
		// A follower behind its leader: what the consumer asks for is
		// not committed here yet (Kafka answers an empty fetch, not an
		// out-of-range one, which would reset the consumer).
		p.errCode, p.res = 0, nil
		p.setState(st)
		return true
	}
	iso := engine.ReadUncommitted
	if f.readCommitted {
		iso = engine.ReadCommitted
	}
	res, err := s.eng.Read(p.tp, p.offset, maxBytes, minOne, iso)
	return s.readDone(p, res, err, false)
}

// followerServes reports whether this broker, not tp's leader, serves a
// consumer's fetch for tp: as a follower, to a client that knows of
// follower fetching (Fetch v11+, KIP-392), below its own high watermark.
func (s *Server) followerServes(tp engine.TP, version int16) bool {
	return version >= 11 && s.cfg.Node.Follows(tp)
}

// preferredReplica picks the replica a consumer in rack should fetch from
// instead of this leader (KIP-392, Kafka's RackAwareReplicaSelector): an
// in-sync replica on a live broker in the consumer's rack, when this
// broker is not in it. -1: fetch here.
func (s *Server) preferredReplica(tp engine.TP, rack string) int32 {
	if rack == "" || rack == s.cfg.Rack {
		return -1
	}
	img := s.cfg.Node.Image()
	p, ok := img.Partition(tp.Topic, tp.Partition)
	if !ok {
		return -1
	}
	for _, r := range p.ISR {
		if r == s.cfg.NodeID {
			continue
		}
		if b, ok := img.Broker(r); ok && !b.Fenced && b.Rack == rack {
			return r
		}
	}
	return -1
}

// readReplicaPart reads one partition for a follower: the fetch offset is
// its LEO, which the leader records first (it may move the high
// watermark), and the read goes up to the leader's LEO.
func (s *Server) readReplicaPart(p *fetchPart, f *fetch, maxBytes int64, minOne bool) bool {
	replica, brokerEpoch := f.replica, f.replicaEpoch
	if err := s.cfg.Node.FollowerFetch(p.tp, replica, brokerEpoch, p.offset, p.leaderEpoch); err != nil {
		p.fail(errorCode(err))
		if errors.Is(err, replication.ErrOffsetOutOfRange) {
			// The follower resets from the leader's offsets.
			if st, err := s.eng.State(p.tp); err == nil {
				p.setState(st)
			}
		}
		return false
	}
	if d := s.cfg.Node.HoldLeaderReplication(p.tp, replica); d > 0 {
		// A replication throttle (KIP-73): a throttled partition's
		// follower outside the ISR gets no records while the leader's
		// replication rate is over leader.replication.throttled.rate,
		// only the offsets, as Kafka's ReplicaManager answers it.
		if f.heldFor == 0 || d < f.heldFor {
			f.heldFor = d
		}
		st, err := s.eng.State(p.tp)
		if err != nil {
			p.fail(errorCode(err))
			return false
		}
		p.errCode, p.res = 0, nil
		p.setState(st)
		return true
	}
	res, err := s.eng.ReadReplica(p.tp, p.offset, maxBytes, minOne)
	return s.readDone(p, res, err, true)
}

// recordReplication counts the record bytes of throttled partitions that
// a follower's fetch is answered with against the leader's replication
// throttle (Kafka's KafkaApis.sizeOfThrottledPartitions): in sync or not,
// they are the leader's replication traffic.
func (f *fetch) recordReplication() {
	if f.replica < 0 {
		return
	}
	var n int64
	for i := range f.topics {
		for j := range f.topics[i].parts {
			p := &f.topics[i].parts[j]
			if p.res != nil && p.res.Bytes > 0 && f.s.cfg.Node.LeaderThrottled(p.tp) {
				n += p.res.Bytes
			}
		}
	}
	f.s.cfg.Node.RecordLeaderReplication(n)
}

// readDone takes a read's outcome into p, for a follower (replica) or a
// consumer.
func (s *Server) readDone(p *fetchPart, res engine.ReadResult, err error, replica bool) bool {
	switch {
	case err == nil:
		p.errCode = 0
		p.setState(res.State)
		p.res = res.ReadResult
		p.aborted = res.Aborted
		return true
	case errors.Is(err, segment.ErrOutOfRange):
		p.fail(kerr.OffsetOutOfRange.Code)
		if replica {
			// A follower resets from the leader's offsets
			// (replication/fetcher). A consumer resets with ListOffsets
			// (auto.offset.reset) and is told -1, as Kafka answers.
			p.setState(res.State)
		}
		return false
	case errors.Is(err, engine.ErrUnknownTopicOrPartition):
		p.fail(kerr.UnknownTopicOrPartition.Code) // deleted since State
		return false
	default:
		// Anything else comes from reading index or batch headers off the
		// disk under the log.
		s.log.Error("fetch: read failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "offset", p.offset, "err", err)
		p.fail(kerr.KafkaStorageError.Code)
		return false
	}
}

// fail sets an error answer. Offsets are -1 (unknown), as Kafka answers a
// partition it could not read.
func (p *fetchPart) fail(code int16) {
	p.errCode = code
	p.hw, p.lso, p.logStart = -1, -1, -1
	p.aborted = nil
	p.currentLeader = false
}

func (p *fetchPart) setState(st engine.PartitionState) {
	p.hw, p.lso, p.logStart = st.HW, st.LSO, st.LogStartOffset
	p.aborted = nil
}

// releaseRead unpins the segments of p's last read.
func (p *fetchPart) releaseRead() {
	if p.res != nil {
		p.res.Release()
		p.res = nil
	}
}

// release unpins every segment the last read pass pinned.
func (f *fetch) release() {
	for i := range f.topics {
		for j := range f.topics[i].parts {
			f.topics[i].parts[j].releaseRead()
		}
	}
}
