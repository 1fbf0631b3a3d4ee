package kafka

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// Fetch sessions (KIP-227, Fetch v7+). A consumer that fetches many
// partitions sends them all once, in a full fetch with session epoch 0,
// and the broker keeps them in a session whose id the response carries;
// the consumer's next fetches are incremental (epoch 1, 2, ...): they name
// only the partitions whose fetch position or limits changed (and, under
// forgotten_topics_data, those it no longer wants), and the response
// names only the partitions with something new: records, a high watermark
// or log start offset other than the last one sent, a preferred read
// replica, or an error (Kafka's CachedPartition.maybeUpdateResponseData).
// So a fetch of a thousand idle partitions costs a few bytes each way.
//
// As in Kafka's FetchManager:
//   - epoch -1 is a full fetch without a session, and epoch 0 a full fetch
//     that opens one; either closes the session its id names, if any;
//   - an incremental fetch names a session the cache holds
//     (FETCH_SESSION_ID_NOT_FOUND otherwise, and the client starts over
//     with a full fetch) at the epoch that session expects
//     (INVALID_FETCH_SESSION_EPOCH otherwise); the epoch then moves on, so
//     a repeated or overtaken request is refused rather than served twice;
//   - a session keys its partitions by topic id from Fetch v13 and by
//     name before; a request of the other kind is FETCH_SESSION_TOPIC_ID_ERROR;
//   - partitions that returned records move to the end of the session's
//     order, so that the response's max_bytes is shared fairly across
//     fetches;
//   - the cache holds max.incremental.fetch.session.cache.slots sessions
//     (1000). When it is full, a new session takes the slot of the least
//     recently used one idle for min.incremental.fetch.session.eviction.ms
//     (2 minutes), or, for a follower, of the least recently used
//     consumer's; otherwise none is created (session id 0: the client goes
//     on with full fetches), as Kafka's FetchSessionCache does.
//
// Followers (replication/fetcher) fetch in sessions as consumers do, one
// session per fetch slot. For a follower the offset a session caches is
// its LEO: every fetch of the session reads every partition of it, named
// or not, and each read records that offset with the node
// (readReplicaPart), so the HW and the ISR see the progress of partitions
// the request left out, as Kafka's leader updates the follower state of
// every partition of the session. Beyond Kafka, a session answers only
// the fetcher that opened it (the same replica id and broker epoch, or a
// consumer):
// another's fetch read from a follower's cached offsets would take them
// for its own LEO.
//
// A session's partitions come off the wire: each costs a few dozen bytes,
// and a request cannot name more than its frame holds, so the cache is
// bounded by slots times what one request can add; a session grows only
// by requests, one at a time (the epoch check).

// sessionsDefaultSlots and sessionsDefaultEviction are Kafka's defaults
// of max.incremental.fetch.session.cache.slots and
// min.incremental.fetch.session.eviction.ms.
const (
	sessionsDefaultSlots    = 1000
	sessionsDefaultEviction = 120 * time.Second
)

// fetchSessions is the broker's cache of fetch sessions. Any goroutine may
// call it.
type fetchSessions struct {
	mu    sync.Mutex
	slots int
	evict time.Duration
	byID  map[int32]*fetchSession
	// incremental and followerIncremental count the incremental fetches
	// served, all and those of followers (FetchSessionStats).
	incremental, followerIncremental int64
	// now is time.Now, replaced in tests.
	now func() time.Time
}

// sessionKey names a partition of a session: by topic id (v13+) or name.
type sessionKey struct {
	id        [16]byte
	name      string
	partition int32
}

type fetchSession struct {
	id int32
	// epoch is the epoch the next incremental fetch must carry.
	epoch    int32
	ids      bool // keyed by topic id (opened at v13+)
	follower bool
	// replica is the follower that opened the session, -1 for a consumer,
	// and replicaEpoch its broker epoch then (-1 when it sent none).
	replica      int32
	replicaEpoch int64
	lastUsed     time.Time
	parts        []*sessionPart // the fetch order
	index        map[sessionKey]*sessionPart
}

// sessionPart is one partition of a session: what the client asked last,
// and what the last response told it.
type sessionPart struct {
	key         sessionKey
	offset      int64
	maxBytes    int64
	leaderEpoch int32
	// hw and logStart as last sent (-1: not sent, or sent with an error,
	// so that the partition is sent again once the error is gone).
	hw, logStart int64
	// gone is set when the partition left the session (forgotten, or the
	// session closed) while a fetch still holds it.
	gone bool
	// returned marks, during settle, a partition that returned records.
	returned bool
}

func newFetchSessions(slots int, evict time.Duration) *fetchSessions {
	if slots == 0 {
		slots = sessionsDefaultSlots
	}
	if evict <= 0 {
		evict = sessionsDefaultEviction
	}
	return &fetchSessions{slots: max(slots, 0), evict: evict, byID: map[int32]*fetchSession{}, now: time.Now}
}

// plan applies a v7+ request's session fields to f: it closes and opens
// sessions, and for an incremental fetch replaces f.topics with the
// session's partitions. It returns a response-level error code, or 0.
// f.topics holds the request's partitions when it is called.
func (fs *fetchSessions) plan(s *Server, f *fetch, req *kmsg.FetchRequest) int16 {
	ids := req.Version >= 13
	fs.mu.Lock()
	defer fs.mu.Unlock()
	switch req.SessionEpoch {
	case -1, 0:
		if req.SessionID != 0 {
			fs.closeLocked(req.SessionID)
		}
		if req.SessionEpoch == 0 {
			f.session = fs.openLocked(f, ids)
		}
		return 0
	}
	sess := fs.byID[req.SessionID]
	switch {
	case sess == nil:
		return kerr.FetchSessionIDNotFound.Code
	case req.SessionEpoch != sess.epoch:
		return kerr.InvalidFetchSessionEpoch.Code
	case sess.ids != ids:
		return kerr.FetchSessionTopicIDError.Code
	case sess.replica != f.replica || sess.replica >= 0 && sess.replicaEpoch != f.replicaEpoch:
		// A follower's session holds its fetch offsets, which the
		// leader reads as that follower's LEO on every fetch: another
		// follower's (or a consumer's) fetch must not be served from
		// them, nor a follower's from a consumer's, nor another
		// incarnation's of the same follower (KIP-903's broker epoch;
		// a restarted follower opens sessions of its own). Kafka does
		// not check; no client of either kind shares a session.
		return kerr.FetchSessionIDNotFound.Code
	}
	fs.incremental++
	if f.replica >= 0 {
		fs.followerIncremental++
	}
	sess.epoch = nextSessionEpoch(sess.epoch)
	sess.lastUsed = fs.now()
	// The request's partitions join the session or update it.
	sess.merge(f, false)
	// Then the forgotten ones leave it.
	forgot := false
	for i := range req.ForgottenTopics {
		ft := &req.ForgottenTopics[i]
		for _, part := range ft.Partitions {
			k := sessionKey{partition: part}
			if ids {
				k.id = ft.TopicID
			} else {
				k.name = ft.Topic
			}
			if sp := sess.index[k]; sp != nil {
				sp.gone = true
				delete(sess.index, k)
				forgot = true
			}
		}
	}
	if forgot {
		n := 0
		for _, sp := range sess.parts {
			if !sp.gone {
				sess.parts[n] = sp
				n++
			}
		}
		clear(sess.parts[n:])
		sess.parts = sess.parts[:n]
	}
	f.topics = s.sessionTopics(sess, f)
	f.session, f.incremental = sess, true
	return 0
}

// nextSessionEpoch is the epoch after e, wrapping past MaxInt32 to 1 (0
// and -1 have their own meanings), as Kafka's JFetchMetadata.nextEpoch.
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// openLocked makes a session of f's partitions, evicting one if the cache
// is full and Kafka's rules allow; nil when none can be made.
func (fs *fetchSessions) openLocked(f *fetch, ids bool) *fetchSession {
	if fs.slots == 0 {
		return nil
	}
	now := fs.now()
	if len(fs.byID) >= fs.slots {
		var stale, consumer *fetchSession
		for _, s := range fs.byID {
			if now.Sub(s.lastUsed) >= fs.evict && (stale == nil || s.lastUsed.Before(stale.lastUsed)) {
				stale = s
			}
			if !s.follower && (consumer == nil || s.lastUsed.Before(consumer.lastUsed)) {
				consumer = s
			}
		}
		switch {
		case stale != nil:
			fs.closeLocked(stale.id)
		case f.replica >= 0 && consumer != nil:
			fs.closeLocked(consumer.id)
		default:
			return nil
		}
	}
	sess := &fetchSession{epoch: 1, ids: ids, follower: f.replica >= 0, replica: f.replica, replicaEpoch: f.replicaEpoch, lastUsed: now, index: map[sessionKey]*sessionPart{}}
	for {
		sess.id = rand.Int32N(1<<31-1) + 1
		if fs.byID[sess.id] == nil {
			break
		}
	}
	sess.merge(f, true)
	fs.byID[sess.id] = sess
	return sess
}

// merge adds f's partitions to sess, or updates what the request says of
// those it holds; with mark, each of f's partitions is pointed at its
// place in the session (a full fetch answers from f's own partitions).
func (sess *fetchSession) merge(f *fetch, mark bool) {
	for i := range f.topics {
		t := &f.topics[i]
		for j := range t.parts {
			p := &t.parts[j]
			k := sessionKey{partition: p.tp.Partition}
			if sess.ids {
				k.id = t.id
			} else {
				k.name = t.name
			}
			sp := sess.index[k]
			if sp == nil {
				sp = &sessionPart{key: k, hw: -1, logStart: -1}
				sess.index[k] = sp
				sess.parts = append(sess.parts, sp)
			}
			sp.offset, sp.maxBytes, sp.leaderEpoch = p.offset, p.maxBytes, p.leaderEpoch
			if mark {
				p.sp = sp
			}
		}
	}
}

// FetchSessionStats is a snapshot of the broker's fetch session cache,
// what Kafka's FetchSessionCache metrics show
// (NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached).
type FetchSessionStats struct {
	// Sessions counts the sessions held, FollowerSessions those opened by
	// followers; Partitions the partitions they hold.
	Sessions, FollowerSessions, Partitions int
	// IncrementalFetches counts the incremental fetches served,
	// FollowerIncrementalFetches those of followers.
	IncrementalFetches, FollowerIncrementalFetches int64
}

// FetchSessionStats returns a snapshot of the fetch session cache.
func (s *Server) FetchSessionStats() FetchSessionStats {
	fs := s.sessions
	fs.mu.Lock()
	defer fs.mu.Unlock()
	st := FetchSessionStats{Sessions: len(fs.byID), IncrementalFetches: fs.incremental, FollowerIncrementalFetches: fs.followerIncremental}
	for _, sess := range fs.byID {
		if sess.follower {
			st.FollowerSessions++
		}
		st.Partitions += len(sess.parts)
	}
	return st
}

func (fs *fetchSessions) closeLocked(id int32) {
	sess := fs.byID[id]
	if sess == nil {
		return
	}
	delete(fs.byID, id)
	for _, sp := range sess.parts {
		sp.gone = true
	}
}

// sessionTopics is the read plan of an incremental fetch: every partition
// of the session in its order, consecutive partitions of a topic under one
// topic (a topic may come back later in the order; Kafka's responses do
// the same). A topic id this broker does not know is UNKNOWN_TOPIC_ID.
// Called with fs.mu held.
func (s *Server) sessionTopics(sess *fetchSession, f *fetch) []fetchTopic {
	var topics []fetchTopic
	for _, sp := range sess.parts {
		k := sp.key
		if n := len(topics); n == 0 || topics[n-1].id != k.id || (!sess.ids && topics[n-1].name != k.name) {
			t := fetchTopic{name: k.name, id: k.id}
			if sess.ids {
				if info, ok := s.eng.TopicByID(k.id); ok {
					t.name = info.Name
				} else {
					t.name, t.unknownID = "", true
				}
			}
			topics = append(topics, t)
		}
		t := &topics[len(topics)-1]
		p := fetchPart{tp: engine.TP{Topic: t.name, Partition: k.partition}, offset: sp.offset, maxBytes: sp.maxBytes,
			leaderEpoch: sp.leaderEpoch, sp: sp}
		switch {
		case f.denied != 0:
			p.fixedErr = f.denied
		case t.unknownID:
			p.fixedErr = kerr.UnknownTopicID.Code
		}
		t.parts = append(t.parts, p)
	}
	return topics
}

// settle decides, under the cache's lock, which partitions of f's last read
// pass its response names, and remembers what it tells the client: every
// partition of a full fetch; of an incremental one, those with records, a
// changed high watermark or log start offset, a preferred replica or an
// error. Partitions that returned records move to the end of the
// session's order.
func (fs *fetchSessions) settle(f *fetch) {
	if f.session == nil {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	moved := 0
	for i := range f.topics {
		t := &f.topics[i]
		for j := range t.parts {
			p := &t.parts[j]
			sp := p.sp
			if sp == nil {
				p.skip = false
				continue
			}
			records := p.res != nil && p.res.Bytes > 0
			must := !f.incremental || records || p.preferredSet || p.errCode != 0 ||
				p.hw != sp.hw || p.logStart != sp.logStart
			p.skip = !must
			if p.errCode != 0 {
				sp.hw, sp.logStart = -1, -1
			} else {
				sp.hw, sp.logStart = p.hw, p.logStart
			}
			if records && f.incremental && !sp.gone && !sp.returned {
				sp.returned = true
				moved++
			}
		}
	}
	if moved == 0 {
		return
	}
	// A stable partition of the order: the others, then those that
	// returned records, each group in the order it had.
	parts := f.session.parts
	back := make([]*sessionPart, 0, moved)
	n := 0
	for _, sp := range parts {
		if sp.returned {
			sp.returned = false
			back = append(back, sp)
		} else {
			parts[n] = sp
			n++
		}
	}
	copy(parts[n:], back)
}
