package fetcher

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
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
				s.closeSessions()
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
			s.connNow.Store(c)
			if s.ctx.Err() != nil {
				c.nc.Close() // Close ran between the dial and the Store
			}
		}

		now := time.Now()
		if s.conn != nil && !s.conn.reauthAt.IsZero() && !now.Before(s.conn.reauthAt) {
			// The SASL session is about to expire: a new connection
			// authenticates afresh, at once (this is no failure).
			s.teardown(errReauthenticate)
			reconnectAt = now
			continue
		}
		s.mu.Lock()
		reqs, wakeAt := s.scheduleLocked(now)
		if s.conn == nil && (wakeAt.IsZero() || reconnectAt.Before(wakeAt)) {
			wakeAt = reconnectAt
		}
		if s.conn != nil && !s.conn.reauthAt.IsZero() && (wakeAt.IsZero() || s.conn.reauthAt.Before(wakeAt)) {
			wakeAt = s.conn.reauthAt
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
		n, err := c.writePrepared(rq, time.Now().Add(s.cfg.RequestTimeout))
		if err != nil {
			return err
		}
		if rq.kind.Key() == kmsg.Fetch.Int16() {
			s.fetchBytesOut.Add(int64(n))
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
	s.connNow.Store(nil)
	c.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn = nil
	for _, rq := range s.inflight {
		s.releaseLocked(rq)
	}
	s.inflight = nil
	s.longPoll = false
	s.resetSessionsLocked()
	for i := range s.slots {
		s.slots[i].inflight = false
	}
	if !errors.Is(err, ErrClosed) && !errors.Is(err, errReauthenticate) {
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
