package fetcher

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sessions (KIP-227), the follower's side. Each lane is one session
// with the leader: lane i carries slot i's requests, and the last lane the
// merged long polls (which hold every slot's partitions, so they cannot
// share a slot's session). A lane's requests are strictly sequential: a
// slot has at most one request in flight, and nothing is sent behind a
// long poll nor while a slot's request is in flight.
//
// A lane's first request is a full fetch (session epoch 0) naming its
// partitions; the leader answers with a session id, and the lane's next
// requests are incremental (epoch 1, 2, ...): they name only the partitions
// whose fetch offset, log start offset or leader epoch differ from what the
// lane last told the session, and list under forgotten_topics_data the
// partitions the session holds that this request does not fetch (with the
// handler, backing off, paused, truncating, removed, or moved to another
// slot). So after each request the session holds exactly the request's
// partitions at the follower's current offsets, as a sessionless request
// would have named them, and the leader reads them all: it records the
// follower's fetch offset (its LEO, for the HW and the ISR) for every
// partition of the session on every fetch, named or not, as Kafka's leader
// does. The answer names only partitions with news; one it leaves out
// had no records, no new high watermark or log start, and no error.
//
// A lane falls back to a full fetch (epoch 0) after FETCH_SESSION_ID_NOT_FOUND
// (the leader evicted or lost the session: a new one is opened),
// INVALID_FETCH_SESSION_EPOCH or FETCH_SESSION_TOPIC_ID_ERROR (the old id
// is sent with epoch 0, which closes it and opens a new one), any other
// response-level error, a lost connection (the session may have moved on
// with a request whose answer was lost), a change between naming topics
// and ids (v12 and v13+ sessions do not mix), and a request with a
// partition whose last answer was a cut batch (only a full fetch makes it
// first in the leader's read order, where KIP-74 returns a whole batch).
// A leader that opens no session (its cache is full of sessions it may not
// evict, or it keeps none) answers session id 0: the lane goes on with
// full fetches, asking for a session each time, as Kafka's follower does.

// sessionVersionMin is the first Fetch version with sessions.
const sessionVersionMin = 7

// lane is one fetch session.
type lane struct {
	// id is the leader's session id, 0 for none.
	id int32
	// epoch is the epoch of the next request: 0 for a full fetch that
	// opens a session (and closes id's, if any), 1.. for incremental ones.
	epoch int32
	// ids is set when the session keys partitions by topic id (it was
	// opened at v13+).
	ids bool
	// sent holds the session's partitions as the lane last told the
	// leader; round marks those of the request being built.
	sent  map[laneKey]laneEntry
	round uint64
	// refresh makes the next request a full fetch although the session
	// stands: a partition it holds was added anew (see Stream.Add).
	refresh bool
}

// laneKey names a partition as the session does: by topic id on v13+, by
// name before.
type laneKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// laneEntry is what the session holds of a partition.
type laneEntry struct {
	fetchOff, logStart int64
	leaderEpoch        int32
	round              uint64
}

// reset makes the lane's next request a full fetch opening a new session.
// The old id is kept (epoch 0 with it closes that session on the leader)
// unless the leader said it has no such session.
func (l *lane) reset(known bool) {
	if !known {
		l.id = 0
	}
	l.epoch = 0
	l.sent = nil
}

func (l *lane) key(p *Partition) laneKey {
	k := laneKey{partition: p.TP.Partition}
	if l.ids {
		k.id = p.TopicID
	} else {
		k.topic = p.TP.Topic
	}
	return k
}

// refreshLocked makes every lane whose session holds p fetch in full next.
// A partition added anew (after Remove, or replaced with a new leader
// epoch) starts with no high watermark known, and the leader sends one
// only when it differs from what it last sent that session; an entry left
// from before (no request forgot it in between) would keep the leader
// silent about it. A full fetch opens the session afresh, and its answer
// names every partition.
func (s *Stream) refreshLocked(p *Partition) {
	for i := range s.lanes {
		ln := &s.lanes[i]
		if _, ok := ln.sent[ln.key(p)]; ok {
			ln.refresh = true
		}
	}
}

// sessionLocked sets req's session fields for the request of lane ln
// carrying ps (in request order), and returns which of ps the request must
// name: all of them for a full fetch, the changed ones for an incremental
// one, whose forgotten topics it also fills. It reports whether the request
// is a full fetch. ps must not be empty.
func (s *Stream) sessionLocked(req *kmsg.FetchRequest, ln *lane, ps []*part) (named []bool, full bool) {
	ids := req.Version > fetchVersionNames
	full = ln.epoch == 0 || ln.refresh || ln.ids != ids || ps[0].partial
	named = make([]bool, len(ps))
	if full {
		ln.epoch, ln.ids, ln.refresh = 0, ids, false
		ln.sent = make(map[laneKey]laneEntry, len(ps))
	}
	ln.round++
	req.SessionID, req.SessionEpoch = ln.id, ln.epoch
	for i, pt := range ps {
		k := ln.key(&pt.spec)
		e := laneEntry{fetchOff: pt.fetchOff, logStart: pt.logStart, leaderEpoch: pt.spec.LeaderEpoch, round: ln.round}
		old, ok := ln.sent[k]
		old.round = ln.round
		named[i] = full || !ok || old != e
		ln.sent[k] = e
	}
	if full {
		return named, true
	}
	topicIdx := make(map[laneKey]int)
	for k, e := range ln.sent {
		if e.round == ln.round {
			continue
		}
		delete(ln.sent, k)
		tk := laneKey{topic: k.topic, id: k.id}
		ti, ok := topicIdx[tk]
		if !ok {
			ti = len(req.ForgottenTopics)
			topicIdx[tk] = ti
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = k.topic, k.id
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
		req.ForgottenTopics[ti].Partitions = append(req.ForgottenTopics[ti].Partitions, k.partition)
	}
	s.stats.incrementalFetches++
	return named, false
}

// sessionAnswerLocked moves rq's lane on with the response's session
// fields. It reports whether the response-level error, if any, was the
// session's (the request's partitions are then fetched again at once, by a
// full fetch, rather than backed off).
func (s *Stream) sessionAnswerLocked(rq *request, resp *kmsg.FetchResponse) bool {
	ln := rq.lane
	switch resp.ErrorCode {
	case 0:
	case kerr.FetchSessionIDNotFound.Code:
		ln.reset(false)
		s.stats.sessionResets++
		return true
	case kerr.InvalidFetchSessionEpoch.Code, kerr.FetchSessionTopicIDError.Code:
		ln.reset(true)
		s.stats.sessionResets++
		return true
	default:
		ln.reset(true)
		return false
	}
	switch {
	case rq.full:
		ln.id = resp.SessionID
		if ln.id != 0 {
			ln.epoch = 1
		} else {
			ln.sent = nil // no session: the next request is full again
		}
	case resp.SessionID != ln.id:
		// Not an answer to the session asked: start a new one.
		ln.reset(resp.SessionID != 0)
		s.stats.sessionResets++
	default:
		ln.epoch = nextSessionEpoch(ln.epoch)
	}
	return false
}

// resetSessionsLocked makes every lane's next request a full fetch: the
// connection was lost, and with it perhaps a request the leader applied.
func (s *Stream) resetSessionsLocked() {
	for i := range s.lanes {
		s.lanes[i].reset(true)
	}
}

// nextSessionEpoch is the epoch after e, wrapping past MaxInt32 to 1 (0
// and -1 have their own meanings), as Kafka's FetchMetadata.nextEpoch.
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// closeSessions tells the leader, best effort, that the lanes' sessions
// end (a Fetch with session epoch -1 naming no partition), so that they do
// not hold slots of its cache until evicted. The answers are not awaited:
// the connection closes next. Called by the loop when the stream closes.
func (s *Stream) closeSessions() {
	c := s.conn
	if c.versions.fetch < sessionVersionMin {
		return
	}
	s.mu.Lock()
	var reqs []*request
	for i := range s.lanes {
		if id := s.lanes[i].id; id != 0 {
			req := kmsg.NewPtrFetchRequest()
			req.Version = c.versions.fetch
			req.ReplicaID = -1
			if req.Version < 15 {
				req.ReplicaID = max(s.cfg.ReplicaID, -1)
			} else if s.cfg.ReplicaID >= 0 {
				req.ReplicaState.ID, req.ReplicaState.Epoch = s.cfg.ReplicaID, s.cfg.BrokerEpoch
			}
			req.MaxBytes = s.cfg.ResponseBytesMax
			req.SessionID, req.SessionEpoch = id, -1
			reqs = append(reqs, &request{kind: req})
			s.lanes[i].id = 0
		}
	}
	s.mu.Unlock()
	deadline := time.Now().Add(sessionCloseWait)
	for _, rq := range reqs {
		if c.write(rq, deadline) != nil {
			return
		}
	}
}

// sessionCloseWait bounds the writes of closeSessions (and how long Close
// waits for them before it closes the socket itself).
const sessionCloseWait = 50 * time.Millisecond
