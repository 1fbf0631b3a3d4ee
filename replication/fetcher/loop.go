package fetcher

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// loop is the stream's goroutine: it connects, decides what to send, writes
// requests, applies responses and makes the handler calls. Everything that
// can block (dial, handshake, writes) is bounded by a deadline or by Close.
func (s *Stream) loop() {
	defer close(s.done)
	var (
		reconnectAt time.Time
		backoff     time.Duration
		timer       = time.NewTimer(time.Hour)
	)
	defer timer.Stop()
	lost := func(err error) {
		s.teardown(err)
		backoff = nextBackoff(backoff, s.cfg.ReconnectBackoff, s.cfg.ReconnectBackoffMax)
		reconnectAt = time.Now().Add(jitter(backoff))
	}
	for {
		s.runCalls()
		if s.ctx.Err() != nil {
			if s.conn != nil {
				s.teardown(ErrClosed)
			}
			return
		}
		if s.conn == nil && !time.Now().Before(reconnectAt) {
			c, err := dial(s.ctx, &s.cfg, s.cfg.Slots+1, &s.bytesIn)
			if err != nil {
				if s.ctx.Err() != nil {
					continue
				}
				s.mu.Lock()
				s.stats.lastConnErr = err
				s.mu.Unlock()
				backoff = nextBackoff(backoff, s.cfg.ReconnectBackoff, s.cfg.ReconnectBackoffMax)
				reconnectAt = time.Now().Add(jitter(backoff))
				continue
			}
			s.mu.Lock()
			s.conn = c
			s.stats.connects++
			s.mu.Unlock()
		}

		now := time.Now()
		s.mu.Lock()
		reqs, wakeAt := s.scheduleLocked(now)
		if s.conn == nil && (wakeAt.IsZero() || reconnectAt.Before(wakeAt)) {
			wakeAt = reconnectAt
		}
		s.mu.Unlock()
		if len(reqs) > 0 {
			if err := s.writeRequests(reqs); err != nil {
				lost(err)
				continue
			}
		}

		var results chan result
		if s.conn != nil {
			results = s.conn.results
		}
		timerC := (<-chan time.Time)(nil)
		if !wakeAt.IsZero() {
			timer.Reset(max(time.Until(wakeAt), 0))
			timerC = timer.C
		}
		select {
		case <-s.ctx.Done():
		case <-s.wake:
		case <-timerC:
		case r := <-results:
			if r.err != nil {
				lost(r.err)
				continue
			}
			backoff = 0 // the leader answered: the connection works
			s.mu.Lock()
			s.applyLocked(r, time.Now())
			s.mu.Unlock()
			s.setReadDeadline()
		}
		timer.Stop()
	}
}

// runCalls makes the handler calls decided since the last pass, in order.
func (s *Stream) runCalls() {
	s.mu.Lock()
	calls := s.calls
	s.calls = nil
	s.mu.Unlock()
	for _, call := range calls {
		if s.ctx.Err() != nil {
			return
		}
		call()
	}
}

// writeRequests hands each request to the reader and writes it. A request
// is queued for the reader before its bytes go out, so that its response
// always finds it.
func (s *Stream) writeRequests(reqs []*request) error {
	c := s.conn
	for _, rq := range reqs {
		c.prepare(rq)
		c.pending <- rq // never blocks: capacity is the in-flight limit
		if err := c.writePrepared(rq, time.Now().Add(s.cfg.RequestTimeout)); err != nil {
			return err
		}
	}
	s.setReadDeadline()
	return nil
}

// setReadDeadline bounds the wait for the next response while requests are
// in flight. Without one a silent leader (a cable pulled, a host frozen)
// would hold the partitions forever; TCP keepalive takes minutes.
func (s *Stream) setReadDeadline() {
	s.mu.Lock()
	n := len(s.inflight)
	s.mu.Unlock()
	var d time.Time
	if n > 0 {
		d = time.Now().Add(s.cfg.WaitMax + s.cfg.RequestTimeout)
	}
	// An error here means the connection is closed; the reader reports it.
	_ = s.conn.nc.SetReadDeadline(d)
}

// teardown closes the connection and puts every partition of a request in
// flight back to idle: none of them was answered, so their offsets stand.
func (s *Stream) teardown(err error) {
	c := s.conn
	c.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn = nil
	for _, rq := range s.inflight {
		s.releaseLocked(rq)
	}
	s.inflight = nil
	s.longPoll = false
	for i := range s.slots {
		s.slots[i].inflight = false
	}
	if !errors.Is(err, ErrClosed) {
		s.stats.disconnects++
		s.stats.lastConnErr = err
	}
}

// releaseLocked ends a request's hold on its partitions: removed ones are
// deleted, the others go back to idle.
func (s *Stream) releaseLocked(rq *request) {
	for _, h := range rq.parts {
		pt := h.p
		if pt.state != stFetching && pt.state != stTruncating {
			panic(fmt.Sprintf("fetcher: partition %v in state %v held by a request", pt.spec.TP, pt.state))
		}
		pt.state = stIdle
		if pt.removed {
			s.slots[pt.slot].n--
			delete(s.parts, pt.spec.TP)
		}
	}
}

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
			fetchable[pt.slot] = append(fetchable[pt.slot], pt)
		}
	}
	if s.conn == nil || s.longPoll {
		return nil, wakeAt
	}
	if now.Before(s.stats.throttledUntil) {
		soonest(s.stats.throttledUntil)
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
		if rq := s.fetchRequestLocked(all, v, wait, now); rq != nil {
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
		if rq := s.fetchRequestLocked(fetchable[i], v, 0, now); rq != nil {
			reqs = append(reqs, rq)
		}
	}
	return reqs, wakeAt
}

func (s *Stream) truncInFlightLocked() bool {
	for _, rq := range s.inflight {
		if _, ok := rq.kind.(*kmsg.OffsetForLeaderEpochRequest); ok {
			return true
		}
	}
	return false
}

// fetchRequestLocked builds one Fetch for ps and marks them in flight. It
// returns nil if no partition could go (all lacked a topic id the leader's
// versions need).
func (s *Stream) fetchRequestLocked(ps []*part, v versions, wait time.Duration, now time.Time) *request {
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
	// A partition whose last answer was a cut batch goes first, where the
	// leader returns the first batch whole whatever the limits (KIP-74).
	first := -1
	for i, pt := range ps {
		if pt.partial {
			first = i
			break
		}
	}
	if first > 0 {
		ps[0], ps[first] = ps[first], ps[0]
	}
	// Topics are laid out in order of first appearance, so rq.parts[0] is
	// the first partition of the response too.

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
	req.IsolationLevel = 0                  // a follower copies everything, transactions included
	req.SessionID, req.SessionEpoch = 0, -1 // full fetches, no session (KIP-227)
	rq := &request{kind: req, sent: now, long: wait > 0, wait: wait}
	topicIdx := make(map[engine.TP]int) // keyed by topic name only (Partition 0)
	for _, pt := range ps {
		if version > fetchVersionNames && pt.spec.TopicID == ([16]byte{}) {
			s.pauseLocked(pt, fmt.Errorf("%w: the leader serves Fetch v%d+ only", ErrNoTopicID, v.fetchMin))
			continue
		}
		k := engine.TP{Topic: pt.spec.TP.Topic}
		ti, ok := topicIdx[k]
		if !ok {
			ti = len(req.Topics)
			topicIdx[k] = ti
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
		pt.state = stFetching
		rq.parts = append(rq.parts, held{p: pt, gen: pt.gen})
	}
	if len(rq.parts) == 0 {
		return nil
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

// applyLocked applies the response to the oldest request in flight.
func (s *Stream) applyLocked(r result, now time.Time) {
	rq := s.inflight[0]
	if rq != r.req {
		panic("fetcher: response matched to a request out of order")
	}
	s.inflight[0] = nil
	s.inflight = s.inflight[1:]
	if rq.long {
		s.longPoll = false
	}
	for _, i := range rq.slots {
		s.slots[i].inflight = false
		s.slots[i].lastResp = now
	}
	switch resp := r.resp.(type) {
	case *kmsg.FetchResponse:
		s.applyFetchLocked(rq, resp, now)
	case *kmsg.OffsetForLeaderEpochResponse:
		s.applyTruncationLocked(rq, resp, now)
	default:
		panic(fmt.Sprintf("fetcher: unexpected response %T", resp))
	}
}

// respKey finds a partition in a response: by topic id on v13+, by name
// before.
type respKey struct {
	topic string
	id    [16]byte
	part  int32
}

func (s *Stream) applyFetchLocked(rq *request, resp *kmsg.FetchResponse, now time.Time) {
	if resp.ThrottleMillis > 0 {
		s.stats.throttledUntil = now.Add(time.Duration(resp.ThrottleMillis) * time.Millisecond)
	}
	byID := resp.Version > fetchVersionNames
	index := make(map[respKey]*kmsg.FetchResponseTopicPartition)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			k := respKey{part: t.Partitions[j].Partition}
			if byID {
				k.id = t.TopicID
			} else {
				k.topic = t.Topic
			}
			if _, dup := index[k]; !dup {
				index[k] = &t.Partitions[j]
			}
		}
	}
	hot := make([]bool, len(s.slots))
	progress := false
	for i := range rq.parts {
		h := &rq.parts[i]
		pt, ok := s.takeLocked(h)
		if !ok {
			continue
		}
		if resp.ErrorCode != 0 {
			s.retryLocked(pt, leaderError(resp.ErrorCode), now)
			progress = true
			continue
		}
		k := respKey{part: pt.spec.TP.Partition}
		if byID {
			k.id = pt.spec.TopicID
		} else {
			k.topic = pt.spec.TP.Topic
		}
		rp := index[k]
		if rp == nil {
			s.retryLocked(pt, fmt.Errorf("%w: %v missing from the Fetch response", ErrProtocol, pt.spec.TP), now)
			progress = true
			continue
		}
		if s.applyPartLocked(pt, h, rq, rp, now) {
			hot[pt.slot] = true
			progress = true
		} else if pt.state != stIdle || pt.paused {
			progress = true
		}
	}
	for _, i := range rq.slots {
		s.slots[i].cold = !hot[i]
	}
	// A long poll that came back early with nothing (a leader shutting
	// down answers parked fetches at once) must not be resent at once, or
	// the stream would spin.
	if rq.long && !progress && now.Sub(rq.sent) < rq.wait/2 {
		s.pollAt = now.Add(s.cfg.RetryBackoff)
	}
}

// takeLocked ends a request's hold on one partition and reports whether
// its answer still applies.
func (s *Stream) takeLocked(h *held) (*part, bool) {
	pt := h.p
	if pt.state != stFetching && pt.state != stTruncating {
		panic(fmt.Sprintf("fetcher: partition %v in state %v held by a request", pt.spec.TP, pt.state))
	}
	pt.state = stIdle
	switch {
	case pt.removed:
		s.slots[pt.slot].n--
		delete(s.parts, pt.spec.TP)
		return nil, false
	case h.gen != pt.gen, pt.paused:
		// Replaced while in flight (fetched anew with its new state), or
		// paused by the caller (the answer is dropped, the offset stays).
		return nil, false
	}
	return pt, true
}

// applyPartLocked applies one partition's Fetch answer. It reports whether
// records (or anything that calls for an immediate next fetch) came.
func (s *Stream) applyPartLocked(pt *part, h *held, rq *request, rp *kmsg.FetchResponseTopicPartition, now time.Time) bool {
	tp := pt.spec.TP
	switch code := rp.ErrorCode; {
	case code == kerr.OffsetOutOfRange.Code:
		pt.state = stHandler
		logStart, hw := rp.LogStartOffset, rp.HighWatermark
		done := s.doneFunc(pt, h.gen, false)
		s.calls = append(s.calls, func() { s.h.OutOfRange(tp, logStart, hw, done) })
		return true
	case pausesPartition(code):
		s.pauseLocked(pt, leaderError(code))
		return false
	case code != 0:
		s.retryLocked(pt, leaderError(code), now)
		return false
	}
	pt.backoff, pt.lastErr = 0, nil
	changed := rp.HighWatermark != pt.hw || rp.LogStartOffset != pt.leaderLogStart
	pt.hw, pt.leaderLogStart = rp.HighWatermark, rp.LogStartOffset
	hw, logStart := pt.hw, pt.leaderLogStart

	if d := rp.DivergingEpoch; d.Epoch >= 0 {
		// KIP-595: the leader found our log diverging; same as an
		// OffsetForLeaderEpoch answer.
		pt.state = stHandler
		done := s.doneFunc(pt, h.gen, true)
		s.calls = append(s.calls, func() { s.h.Truncate(tp, d.Epoch, d.EndOffset, done) })
		return true
	}
	whole, err := wholeBatches(rp.RecordBatches)
	switch {
	case len(whole) > 0:
		pt.partial = false
		pt.state = stHandler
		s.stats.recordBytes += int64(len(whole))
		done := s.doneFunc(pt, h.gen, false)
		s.calls = append(s.calls, func() { s.h.Records(tp, whole, hw, logStart, done) })
		// A corrupt header after whole batches is met again, first, by
		// the next fetch, which starts after them.
		return true
	case err != nil:
		s.pauseLocked(pt, fmt.Errorf("%v at offset %d: %w", tp, pt.fetchOff, err))
		return false
	case len(rp.RecordBatches) > 0:
		// Only a cut batch: the response's byte limit ran out before this
		// partition got a whole one.
		if pt.partial && h == &rq.parts[0] {
			s.pauseLocked(pt, fmt.Errorf("%w: %v at offset %d, partition limit %d", ErrBatchTooLarge, tp, pt.fetchOff, s.cfg.PartitionBytesMax))
			return false
		}
		pt.partial = true
		return true
	}
	if changed {
		s.calls = append(s.calls, func() { s.h.HighWatermark(tp, hw, logStart) })
	}
	return false
}

func (s *Stream) applyTruncationLocked(rq *request, resp *kmsg.OffsetForLeaderEpochResponse, now time.Time) {
	index := make(map[respKey]*kmsg.OffsetForLeaderEpochResponseTopicPartition)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			k := respKey{topic: t.Topic, part: t.Partitions[j].Partition}
			if _, dup := index[k]; !dup {
				index[k] = &t.Partitions[j]
			}
		}
	}
	for i := range rq.parts {
		h := &rq.parts[i]
		pt, ok := s.takeLocked(h)
		if !ok {
			continue
		}
		tp := pt.spec.TP
		rp := index[respKey{topic: tp.Topic, part: tp.Partition}]
		switch {
		case rp == nil:
			s.retryLocked(pt, fmt.Errorf("%w: %v missing from the OffsetForLeaderEpoch response", ErrProtocol, tp), now)
		case rp.ErrorCode == 0:
			pt.state = stHandler
			pt.backoff, pt.lastErr = 0, nil
			epoch, end := rp.LeaderEpoch, rp.EndOffset
			done := s.doneFunc(pt, h.gen, true)
			s.calls = append(s.calls, func() { s.h.Truncate(tp, epoch, end, done) })
		case pausesPartition(rp.ErrorCode):
			s.pauseLocked(pt, leaderError(rp.ErrorCode))
		default:
			s.retryLocked(pt, leaderError(rp.ErrorCode), now)
		}
	}
}

// retryLocked backs a partition off after a retriable error.
func (s *Stream) retryLocked(pt *part, err error, now time.Time) {
	pt.backoff = nextBackoff(pt.backoff, s.cfg.RetryBackoff, s.cfg.RetryBackoffMax)
	pt.state = stBackoff
	pt.retryAt = now.Add(jitter(pt.backoff))
	pt.lastErr = err
	s.stats.retries++
}

func nextBackoff(cur, lo, hi time.Duration) time.Duration {
	if cur <= 0 {
		return lo
	}
	return min(cur*2, hi)
}

// jitter spreads d over [0.8d, 1.2d) so that followers that lost the same
// leader do not come back in step.
func jitter(d time.Duration) time.Duration {
	return d*4/5 + time.Duration(rand.Int64N(int64(d)*2/5+1))
}
