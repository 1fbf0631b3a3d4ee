package fetcher

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// scheduleLocked decides what to send now, marks what it sends as in
// flight, and returns when it next needs to look (zero: only on an event).
//
// The rules (doc.go explains why):
//   - nothing is sent behind a long poll;
//   - partitions that need truncation go first, in one OffsetForLeaderEpoch;
//   - when nothing is in flight, no partition is with the handler and no
//     slot is hot, one long poll carries every fetchable partition;
//   - otherwise each free slot sends its fetchable partitions without
//     waiting (max_wait 0) if its last response had records, or if it has
//     been idle for IdleRecheck.
func (s *Stream) scheduleLocked(now time.Time) (reqs []*request, wakeAt time.Time) {
	wakeAt = time.Time{}
	soonest := func(t time.Time) {
		if wakeAt.IsZero() || t.Before(wakeAt) {
			wakeAt = t
		}
	}
	// Backoffs end whether or not a connection exists.
	handlerN := 0
	var trunc []*part
	fetchable := make([][]*part, len(s.slots))
	for _, pt := range s.parts {
		if pt.state == stBackoff {
			if now.Before(pt.retryAt) {
				soonest(pt.retryAt)
				continue
			}
			pt.state = stIdle
		}
		switch {
		case pt.state == stHandler:
			handlerN++
		case pt.state != stIdle || pt.paused || pt.removed:
		case pt.needsTrunc:
			trunc = append(trunc, pt)
		default:
			if d := s.holdLocked(pt); d > 0 {
				// Throttled: left out of this round's fetches
				// (and forgotten by their sessions) until the
				// follower's rate is back under its bound.
				soonest(now.Add(d))
				continue
			}
			fetchable[pt.slot] = append(fetchable[pt.slot], pt)
		}
	}
	if s.conn == nil || s.longPoll {
		return nil, wakeAt
	}
	if now.Before(s.throttledUntil) {
		soonest(s.throttledUntil)
		return nil, wakeAt
	}
	v := s.conn.versions

	if len(trunc) > 0 && !s.truncInFlightLocked() {
		if v.ofle < 0 {
			for _, pt := range trunc {
				s.pauseLocked(pt, fmt.Errorf("%w: OffsetForLeaderEpoch v%d+", ErrUnsupported, ofleVersionMin))
			}
		} else {
			reqs = append(reqs, s.ofleRequestLocked(trunc, v.ofle, now))
		}
	}

	hot := false
	for i := range s.slots {
		hot = hot || (len(fetchable[i]) > 0 && !s.slots[i].cold)
	}
	if len(s.inflight) == 0 && handlerN == 0 && !hot {
		// Quiet and idle: one long poll for everything. (A hot slot
		// fetches on its own even when the stream is quiet: merging it
		// would put the slots in lockstep, one request per round, and
		// undo the pipelining.)
		var all []*part
		for _, ps := range fetchable {
			all = append(all, ps...)
		}
		if len(all) == 0 {
			return reqs, wakeAt
		}
		if now.Before(s.pollAt) {
			soonest(s.pollAt)
			return reqs, wakeAt
		}
		// A partition whose backoff ends during the poll would wait for
		// the poll's end: wait no longer than that.
		wait := s.cfg.WaitMax
		if !wakeAt.IsZero() {
			wait = max(min(wait, wakeAt.Sub(now)), time.Millisecond)
		}
		if rq := s.fetchRequestLocked(all, &s.lanes[len(s.slots)], v, wait, now); rq != nil {
			s.longPoll = true
			reqs = append(reqs, rq)
		}
		return reqs, wakeAt
	}

	for i := range s.slots {
		sl := &s.slots[i]
		if sl.inflight || len(fetchable[i]) == 0 {
			continue
		}
		if sl.cold {
			if at := sl.lastResp.Add(s.cfg.IdleRecheck); now.Before(at) {
				soonest(at)
				continue
			}
		}
		if rq := s.fetchRequestLocked(fetchable[i], &s.lanes[i], v, 0, now); rq != nil {
			reqs = append(reqs, rq)
		}
	}
	return reqs, wakeAt
}

// holdLocked is how long the replication throttle keeps pt out of the
// fetches: never once it caught up with the leader's high watermark as of
// its last fetch (Kafka's PartitionFetchState.isReplicaInSync: lag known
// and 0), else what Config.Throttle says.
func (s *Stream) holdLocked(pt *part) time.Duration {
	if s.cfg.Throttle == nil || (pt.hw >= 0 && pt.fetchOff >= pt.hw) {
		return 0
	}
	return s.cfg.Throttle.Hold(pt.spec.TP)
}

func (s *Stream) truncInFlightLocked() bool {
	for _, rq := range s.inflight {
		if _, ok := rq.kind.(*kmsg.OffsetForLeaderEpochRequest); ok {
			return true
		}
	}
	return false
}

// fetchRequestLocked builds one Fetch for ps on lane ln (the session of
// the slot, or of the long polls) and marks them in flight. It returns nil
// if no partition could go (all lacked a topic id the leader's versions
// need).
func (s *Stream) fetchRequestLocked(ps []*part, ln *lane, v versions, wait time.Duration, now time.Time) *request {
	version := v.fetch
	if version > fetchVersionNames {
		for _, pt := range ps {
			if pt.spec.TopicID == ([16]byte{}) {
				// Names are needed; fall back to v12 if the leader
				// still serves it, else these partitions cannot go.
				if v.fetchMin <= fetchVersionNames {
					version = fetchVersionNames
				}
				break
			}
		}
	}
	going := ps[:0:0]
	for _, pt := range ps {
		if version > fetchVersionNames && pt.spec.TopicID == ([16]byte{}) {
			s.pauseLocked(pt, fmt.Errorf("%w: the leader serves Fetch v%d+ only", ErrNoTopicID, v.fetchMin))
			continue
		}
		going = append(going, pt)
	}
	if len(going) == 0 {
		return nil
	}
	ps = going
	// A partition whose last answer was a cut batch goes first, where the
	// leader returns the first batch whole whatever the limits (KIP-74).
	for i, pt := range ps {
		if pt.partial {
			ps[0], ps[i] = ps[i], ps[0]
			break
		}
	}

	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	if version >= 15 {
		req.ReplicaID = -1
		if s.cfg.ReplicaID >= 0 {
			req.ReplicaState.ID = s.cfg.ReplicaID
			req.ReplicaState.Epoch = s.cfg.BrokerEpoch
		}
	} else {
		req.ReplicaID = max(s.cfg.ReplicaID, -1)
	}
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = s.cfg.ResponseBytesMax
	req.IsolationLevel = 0 // a follower copies everything, transactions included
	rq := &request{kind: req, sent: now, long: wait > 0, wait: wait, full: true}
	// Fetch sessions (KIP-227, session.go): an incremental fetch names
	// only the partitions that changed since the lane's last request.
	var named []bool
	if version >= sessionVersionMin {
		rq.lane = ln
		named, rq.full = s.sessionLocked(req, ln, ps)
	} else {
		req.SessionID, req.SessionEpoch = 0, -1 // no sessions before v7
	}
	// Topics are laid out in order of first appearance, so rq.parts[0] is
	// the first partition of a full fetch's response too. ps comes from a
	// walk of a map, whose order Go varies: no partition is always last
	// under the response's byte limit (Kafka rotates its fetch order for
	// the same fairness; a session keeps its own order on the leader).
	topicIdx := make(map[string]int)
	for i, pt := range ps {
		pt.state = stFetching
		rq.parts = append(rq.parts, held{p: pt, gen: pt.gen})
		if named != nil && !named[i] {
			continue
		}
		ti, ok := topicIdx[pt.spec.TP.Topic]
		if !ok {
			ti = len(req.Topics)
			topicIdx[pt.spec.TP.Topic] = ti
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = pt.spec.TP.Topic, pt.spec.TopicID
			req.Topics = append(req.Topics, t)
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = pt.spec.TP.Partition
		fp.CurrentLeaderEpoch = pt.spec.LeaderEpoch
		fp.FetchOffset = pt.fetchOff
		fp.LastFetchedEpoch = -1 // truncation goes through OffsetForLeaderEpoch
		fp.LogStartOffset = pt.logStart
		fp.PartitionMaxBytes = s.cfg.PartitionBytesMax
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, fp)
	}
	for _, h := range rq.parts {
		sl := &s.slots[h.p.slot]
		if !sl.inflight {
			sl.inflight = true
			rq.slots = append(rq.slots, h.p.slot)
		}
	}
	s.addInFlightLocked(rq)
	s.stats.fetches++
	if rq.long {
		s.stats.longPolls++
	}
	return rq
}

// ofleRequestLocked builds one OffsetForLeaderEpoch for ps.
func (s *Stream) ofleRequestLocked(ps []*part, version int16, now time.Time) *request {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = version
	req.ReplicaID = max(s.cfg.ReplicaID, -1)
	rq := &request{kind: req, sent: now}
	topicIdx := make(map[string]int)
	for _, pt := range ps {
		ti, ok := topicIdx[pt.spec.TP.Topic]
		if !ok {
			ti = len(req.Topics)
			topicIdx[pt.spec.TP.Topic] = ti
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = pt.spec.TP.Topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition = pt.spec.TP.Partition
		rp.CurrentLeaderEpoch = pt.spec.LeaderEpoch
		rp.LeaderEpoch = pt.spec.LastFetchedEpoch
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
		pt.state = stTruncating
		rq.parts = append(rq.parts, held{p: pt, gen: pt.gen})
	}
	s.addInFlightLocked(rq)
	s.stats.truncations++
	return rq
}

func (s *Stream) addInFlightLocked(rq *request) {
	s.inflight = append(s.inflight, rq)
	s.stats.requests++
	if n := int64(len(s.inflight)); n > s.stats.inflightPeak {
		s.stats.inflightPeak = n
	}
}
