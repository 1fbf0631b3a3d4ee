package fetcher

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
	// The records handed over hold the frame on; the rest of it is done
	// with once the response is applied.
	defer r.frame.release(nil)
	switch resp := r.resp.(type) {
	case *kmsg.FetchResponse:
		s.applyFetchLocked(rq, resp, r.frame, now)
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

func (s *Stream) applyFetchLocked(rq *request, resp *kmsg.FetchResponse, f *frame, now time.Time) {
	if resp.ThrottleMillis > 0 {
		s.throttledUntil = now.Add(time.Duration(resp.ThrottleMillis) * time.Millisecond)
	}
	sessionErr := false
	if rq.lane != nil {
		sessionErr = s.sessionAnswerLocked(rq, resp)
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
		switch {
		case sessionErr:
			// The leader lost or refused the session: the lane's next
			// request, a full fetch, carries the partition at once.
			hot[pt.slot] = true
			progress = true
			continue
		case resp.ErrorCode != 0:
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
		if rp == nil && !rq.full {
			// An incremental fetch's answer leaves out the partitions
			// with nothing new: no records, the high watermark and log
			// start offset last sent, no error.
			pt.backoff, pt.lastErr = 0, nil
			continue
		}
		if rp == nil {
			s.retryLocked(pt, fmt.Errorf("%w: %v missing from the Fetch response", ErrProtocol, pt.spec.TP), now)
			progress = true
			continue
		}
		if s.applyPartLocked(pt, h, rq, rp, f, now) {
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

// applyPartLocked applies one partition's Fetch answer, whose bytes are in
// f. It reports whether records (or anything that calls for an immediate
// next fetch) came.
func (s *Stream) applyPartLocked(pt *part, h *held, rq *request, rp *kmsg.FetchResponseTopicPartition, f *frame, now time.Time) bool {
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
	if s.cfg.Throttle != nil && len(rp.RecordBatches) > 0 {
		s.cfg.Throttle.Record(tp, len(rp.RecordBatches))
	}
	whole, err := wholeBatches(rp.RecordBatches)
	switch {
	case len(whole) > 0:
		pt.partial = false
		pt.state = stHandler
		s.stats.recordBytes += int64(len(whole))
		done := f.holdFor(s.doneFunc(pt, h.gen, false))
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
		if pt.partial && rq.full && h == &rq.parts[0] {
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
