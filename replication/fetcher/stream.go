package fetcher

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// Partition is one partition a follower copies from the leader, as the
// caller (package replication) knows it.
type Partition struct {
	TP engine.TP
	// TopicID names the topic on Fetch v13+ (KIP-516). A partition
	// without one is fetched with v12 if the leader still serves it.
	TopicID [16]byte
	// FetchOffset is where fetching starts: the follower's LEO.
	FetchOffset int64
	// LogStartOffset is the follower's log start offset, sent with each
	// fetch (v5+) so that the leader knows it.
	LogStartOffset int64
	// LeaderEpoch is the current leader epoch as the follower knows it,
	// sent as CurrentLeaderEpoch (v9+, KIP-320) so that a leader that is
	// ahead or behind refuses rather than serves. -1 disables the check.
	LeaderEpoch int32
	// NeedsTruncation asks for an OffsetForLeaderEpoch round before the
	// first fetch (KIP-101, KIP-279): after a leader change the follower's
	// log may hold offsets the new leader never had.
	NeedsTruncation bool
	// LastFetchedEpoch is the epoch of the follower's last batch, the
	// epoch asked about in OffsetForLeaderEpoch.
	LastFetchedEpoch int32
}

// Handler receives a stream's results. Every method is called on the
// stream's goroutine, one call at a time, in order per partition; none may
// block (hand the work to the partition's owner and return). The done
// functions may be called from any goroutine, before or after the method
// returns, at most once (later calls are ignored); until done is called the
// partition is not fetched again. After Remove or a replacing Add, a call
// already under way may still complete, and the done of an earlier call is
// ignored.
type Handler interface {
	// Records hands over whole record batches from fetchOffset on (the
	// first batch is the one holding fetchOffset, so it may start
	// earlier), with the leader's high watermark and log start offset.
	// The caller appends them (AppendReplica) and calls done with the
	// offset to fetch next, normally its new LEO. data is valid until done
	// is called: it lies in the response's pooled buffer, which goes back
	// to the pool then (unless done reports an error), so the caller must
	// copy what it keeps longer. A non-nil error pauses the partition
	// (reported through Paused).
	Records(tp engine.TP, data []byte, hw, logStart int64, done func(nextOffset int64, err error))
	// Truncate answers OffsetForLeaderEpoch for LastFetchedEpoch: the
	// largest epoch the leader knows at or below it, and where that epoch
	// ends in the leader's log (-1, -1 when the leader knows no such
	// epoch). A leader's Fetch DivergingEpoch (KIP-595) is handed over the
	// same way. The caller truncates its log and calls done with the
	// offset to fetch from.
	Truncate(tp engine.TP, epoch int32, endOffset int64, done func(fetchOffset int64, err error))
	// OutOfRange reports that the leader refused the fetch offset, with
	// the leader's log start offset and high watermark (-1 when the leader
	// did not say). The caller decides, for example to truncate fully and
	// start at the leader's log start; done takes the offset to fetch.
	OutOfRange(tp engine.TP, leaderLogStart, leaderHW int64, done func(fetchOffset int64, err error))
	// HighWatermark reports a new high watermark or log start offset from a
	// response that carried no records for the partition.
	HighWatermark(tp engine.TP, hw, logStart int64)
	// Paused reports that the stream stopped fetching the partition: the
	// leader answered NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
	// UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID or
	// INCONSISTENT_TOPIC_ID (errors.Is with the kerr value), a done
	// reported an error, or the bytes cannot be used (ErrCorruptBatch,
	// ErrBatchTooLarge, ErrNoTopicID). The caller re-adds the partition
	// with new state, resumes it, or removes it.
	Paused(tp engine.TP, err error)
}

// Stream is one follower's fetch connection to one leader broker, carrying
// every partition the follower copies from that leader. See doc.go.
type Stream struct {
	cfg     Config
	h       Handler
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed when the loop has returned
	wake    chan struct{} // capacity 1: state changed, the loop should look
	bytesIn atomic.Int64
	// fetchBytesOut counts the Fetch request frames written.
	fetchBytesOut atomic.Int64

	mu sync.Mutex // guards everything below; never held across a handler call
	// parts holds every partition added and not removed, and removed ones
	// still in a request in flight (removed set), until that request ends.
	parts map[engine.TP]*part
	slots []slot
	// lanes are the fetch sessions (session.go): one per slot, and the
	// last for the merged long polls.
	lanes []lane
	// calls are handler calls decided under mu, made by the loop after
	// unlocking, in order.
	calls []func()
	// inflight lists the requests written and not answered, oldest first.
	inflight []*request
	// longPoll is set while a merged long poll is in flight; nothing is
	// sent behind it.
	longPoll bool
	// pollAt holds the next long poll back after one came back early and
	// empty; throttledUntil holds every request back while the leader's
	// throttle lasts (Kafka 2.0+ leaves the wait to the client, KIP-219).
	pollAt, throttledUntil time.Time
	conn                   *conn // nil while disconnected; written by the loop only
	// connNow is conn for Close, which closes its socket so that a write
	// blocked on a leader that stopped reading ends at once.
	connNow atomic.Pointer[conn]
	stats   counters
	rot     int // rotates the partition order of requests (fairness)
}

// part is one partition's state. Which request or call holds it is in
// state; paused and needsTrunc are orthogonal to it.
type part struct {
	spec Partition
	gen  uint64 // bumped by every Add, so that stale answers are ignored
	slot int

	state      pstate
	fetchOff   int64
	logStart   int64 // the follower's, sent to the leader
	needsTrunc bool
	paused     bool
	pauseErr   error
	removed    bool
	// partial is set when the last response held only a cut batch for the
	// partition; it goes first in the next request so that it gets a whole
	// batch (KIP-74), and a second cut while first is ErrBatchTooLarge.
	partial bool

	retryAt time.Time
	backoff time.Duration
	lastErr error

	hw, leaderLogStart int64 // last seen from the leader; -1 unknown
}

type pstate uint8

const (
	stIdle       pstate = iota // fetchable (unless paused, or needsTrunc)
	stFetching                 // in a Fetch in flight
	stTruncating               // in an OffsetForLeaderEpoch in flight
	stHandler                  // handed to the handler, waiting for done
	stBackoff                  // waiting until retryAt after an error
)

func (s pstate) String() string {
	return [...]string{"idle", "fetching", "truncating", "handler", "backoff"}[s]
}

// slot is one pipeline position: at most one Fetch of its partitions in
// flight.
type slot struct {
	n        int  // partitions assigned
	inflight bool // a request holding its partitions is in flight
	// cold is set when the slot's last response carried no records; a cold
	// slot waits for a long poll or for IdleRecheck after lastResp.
	cold     bool
	lastResp time.Time
}

// request is one request in flight and what it holds.
type request struct {
	kind    kmsg.Request
	corr    int32
	version int16
	sent    time.Time
	parts   []held
	slots   []int // slots whose partitions the request holds
	long    bool  // a merged long poll
	wait    time.Duration
	// lane is the fetch session the request belongs to, nil for none
	// (OffsetForLeaderEpoch, Fetch below v7); full is set when it named
	// every partition it holds, in order (a full fetch, with or without
	// a session).
	lane *lane
	full bool
}

// held is a partition as it was when a request took it.
type held struct {
	p   *part
	gen uint64
}

// New validates cfg and starts a stream with no partitions. It connects in
// the background, so the leader may be down.
func New(cfg Config, h Handler) (*Stream, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("fetcher: nil Handler")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Stream{
		cfg:    cfg,
		h:      h,
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
		wake:   make(chan struct{}, 1),
		parts:  make(map[engine.TP]*part),
		slots:  make([]slot, cfg.Slots),
		lanes:  make([]lane, cfg.Slots+1),
	}
	go s.loop()
	return s, nil
}

// Add starts fetching a partition, or replaces its state if present
// (a new epoch, offset or truncation need): answers to earlier requests and
// earlier handler calls for it are then ignored. It clears a pause.
func (s *Stream) Add(p Partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pt := s.parts[p.TP]
	if pt == nil {
		pt = &part{slot: s.leastLoadedSlotLocked()}
		s.slots[pt.slot].n++
		s.parts[p.TP] = pt
	}
	pt.spec = p
	pt.gen++
	s.refreshLocked(&p)
	s.slots[pt.slot].cold = false // a new partition likely has data to catch up on
	pt.fetchOff, pt.logStart = p.FetchOffset, p.LogStartOffset
	pt.needsTrunc = p.NeedsTruncation
	pt.paused, pt.pauseErr, pt.removed, pt.partial = false, nil, false, false
	pt.backoff, pt.lastErr = 0, nil
	pt.hw, pt.leaderLogStart = -1, -1
	if pt.state == stHandler || pt.state == stBackoff {
		pt.state = stIdle
	}
	// A partition still in a request keeps its state: it is fetched again
	// (with the new state) once that request ends, so that it is never in
	// two requests at once.
	s.wakeLocked()
}

// Remove stops fetching a partition. Answers for it still in flight are
// dropped; a done for it is ignored.
func (s *Stream) Remove(tp engine.TP) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pt := s.parts[tp]; pt != nil && !pt.removed {
		s.removeLocked(tp, pt)
		s.wakeLocked()
	}
}

func (s *Stream) removeLocked(tp engine.TP, pt *part) {
	pt.gen++
	if pt.state == stFetching || pt.state == stTruncating {
		pt.removed = true // deleted when its request ends
		return
	}
	s.slots[pt.slot].n--
	delete(s.parts, tp)
}

// Pause stops fetching a partition until Resume or Add; reason shows in
// Stats. A response in flight for it is dropped (its offset stays), and a
// pending done still moves its offset.
func (s *Stream) Pause(tp engine.TP, reason error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pt := s.parts[tp]; pt != nil && !pt.removed {
		pt.paused, pt.pauseErr = true, reason
	}
}

// Resume fetches a paused partition again from where it stood.
func (s *Stream) Resume(tp engine.TP) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pt := s.parts[tp]; pt != nil && !pt.removed && pt.paused {
		pt.paused, pt.pauseErr = false, nil
		pt.backoff = 0
		s.slots[pt.slot].cold = false
		s.wakeLocked()
	}
}

// Close stops the stream: the connection is closed and no handler call
// starts afterwards. It waits for the stream's goroutines until ctx ends
// (a handler that blocks holds them).
func (s *Stream) Close(ctx context.Context) error {
	s.cancel()
	// The loop closes the leader's fetch sessions before it closes the
	// connection (closeSessions); the socket is closed here only if it
	// has not done so soon, so that a write blocked on a leader that
	// stopped reading ends.
	grace := time.NewTimer(2 * sessionCloseWait)
	defer grace.Stop()
	select {
	case <-s.done:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	if c := s.connNow.Load(); c != nil {
		c.nc.Close()
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("fetcher: close: %w", ctx.Err())
	}
}

func (s *Stream) leastLoadedSlotLocked() int {
	best := 0
	for i := range s.slots {
		if s.slots[i].n < s.slots[best].n {
			best = i
		}
	}
	return best
}

func (s *Stream) wakeLocked() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// doneFunc returns the done of a handler call for pt. It applies the
// caller's offset if pt is still the partition that call was for.
func (s *Stream) doneFunc(pt *part, gen uint64, truncation bool) func(int64, error) {
	var once atomic.Bool
	return func(next int64, err error) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if pt.gen != gen || pt.removed || pt.state != stHandler {
			return
		}
		pt.state = stIdle
		if err == nil && next < 0 {
			err = fmt.Errorf("%w: %d", ErrBadOffset, next)
		}
		if err != nil {
			s.pauseLocked(pt, err)
		} else {
			pt.fetchOff = next
			if truncation {
				pt.needsTrunc = false
			}
		}
		s.wakeLocked()
	}
}

// pauseLocked pauses pt on the stream's decision and reports it.
func (s *Stream) pauseLocked(pt *part, err error) {
	pt.paused, pt.pauseErr, pt.lastErr = true, err, err
	tp := pt.spec.TP
	s.calls = append(s.calls, func() { s.h.Paused(tp, err) })
}
