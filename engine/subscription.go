package engine

import (
	"context"
	"sync"
)

// Subscription hands out the records of one partition in order, from an
// offset on, waiting for new ones as they are produced. One goroutine
// calls Next; Close may be called from any.
type Subscription struct {
	e      *Engine
	tp     TP
	next   int64
	buf    []Record
	w      *Waiter
	done   chan struct{}
	closed sync.Once
}

// subscriptionBatch is how many records a subscription fetches at once.
const subscriptionBatch = 500

// Subscribe starts a subscription to tp from offset (use the end from
// Offsets to receive only new records). An unknown partition is
// ErrUnknownTopicOrPartition, an offset outside the partition
// ErrOffsetOutOfRange.
func (e *Engine) Subscribe(tp TP, offset int64) (*Subscription, error) {
	start, end, err := e.Offsets(tp)
	if err != nil {
		return nil, err
	}
	if offset < start || offset > end {
		_, err := e.Fetch(context.Background(), tp, offset, 1)
		return nil, err
	}
	s := &Subscription{e: e, tp: tp, next: offset, done: make(chan struct{})}
	// Watch before the first fetch, so that nothing produced in between
	// goes unnoticed.
	s.w = e.core.NewWaiter([]TP{tp})
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.subs == nil {
		s.w.Stop()
		return nil, ErrClosed
	}
	e.subs[s] = struct{}{}
	return s, nil
}

// Next returns the next record, waiting for one to be produced when the
// subscription has read everything. It returns ctx's error when ctx ends
// first, ErrClosed once the subscription or the engine is closed, and
// ErrOffsetOutOfRange when retention deleted the records it was at.
func (s *Subscription) Next(ctx context.Context) (Record, error) {
	for len(s.buf) == 0 {
		select {
		case <-s.done:
			return Record{}, ErrClosed
		default:
		}
		res, err := s.e.Fetch(ctx, s.tp, s.next, subscriptionBatch)
		if err != nil {
			return Record{}, err
		}
		s.buf, s.next = res.Records, res.Next
		if len(s.buf) > 0 {
			break
		}
		select {
		case <-s.w.C:
		case <-s.done:
			return Record{}, ErrClosed
		case <-ctx.Done():
			return Record{}, ctx.Err()
		}
	}
	r := s.buf[0]
	s.buf = s.buf[1:]
	return r, nil
}

// Close ends the subscription: a Next waiting returns ErrClosed.
func (s *Subscription) Close() {
	s.closed.Do(func() {
		close(s.done)
		s.w.Stop()
		s.e.mu.Lock()
		if s.e.subs != nil {
			delete(s.e.subs, s)
		}
		s.e.mu.Unlock()
	})
}
