package replication

import (
	"fmt"
	"time"
)

// maxWaiters bounds the acks=all produce requests waiting on one
// partition. Requests in flight are already bounded per connection; this
// keeps one partition from holding an unbounded queue if the HW stalls.
const maxWaiters = 1 << 16

// waiter is an acks=all produce request appended and waiting for the HW.
type waiter struct {
	required int64 // the LEO right after its append: HW >= required acks it
	deadline time.Time
	token    any
}

// Ack is the outcome of an acks=all produce request: Err is nil,
// ErrNotEnoughReplicasAfterAppend or ErrRequestTimedOut.
type Ack struct {
	Token any
	Err   error
}

// CanAppendAcksAll refuses an acks=all produce before it is appended when
// the committed ISR is smaller than min.insync.replicas (capped at the
// replication factor), with ErrNotEnoughReplicas. Kafka checks the
// committed ISR here, not the maximal one: a pending expansion may yet be
// refused.
func (l *Leader) CanAppendAcksAll() error {
	if n, m := len(l.isr), l.effectiveMinISR(); n < m {
		return fmt.Errorf("%w: ISR %v, min.insync.replicas %d", ErrNotEnoughReplicas, l.isr, m)
	}
	return nil
}

// WaitHW queues an acks=all produce request whose batches were appended
// and end just before required (the LEO after its append: the request is
// acknowledged when HW >= required). Requests are queued in append order,
// so required never goes down; Ready answers them.
func (l *Leader) WaitHW(required int64, deadline time.Time, token any) error {
	if len(l.waiters) >= maxWaiters {
		return ErrTooManyWaiters
	}
	if required > l.leo || (len(l.waiters) > 0 && required < l.waiters[len(l.waiters)-1].required) {
		return fmt.Errorf("%w: wait for %d, LEO %d", ErrInvalidOffsets, required, l.leo)
	}
	l.waiters = append(l.waiters, waiter{required: required, deadline: deadline, token: token})
	return nil
}

// Ready answers the waiting requests that can be answered at now, in the
// order they were queued: those the HW covers (with
// ErrNotEnoughReplicasAfterAppend when the maximal ISR is by then below
// min.insync.replicas, as Kafka's checkEnoughReplicasReachOffset does), and
// those whose deadline has passed (ErrRequestTimedOut). The caller calls
// it after anything that moved the HW, and on its timer.
func (l *Leader) Ready(now time.Time) []Ack {
	var out []Ack
	kept := l.waiters[:0]
	for _, w := range l.waiters {
		switch {
		case l.hw >= w.required:
			var err error
			if len(l.maximal) < l.effectiveMinISR() {
				err = ErrNotEnoughReplicasAfterAppend
			}
			out = append(out, Ack{Token: w.token, Err: err})
		case !now.Before(w.deadline):
			out = append(out, Ack{Token: w.token, Err: ErrRequestTimedOut})
		default:
			kept = append(kept, w)
		}
	}
	clear(l.waiters[len(kept):])
	l.waiters = kept
	return out
}

// Waiting is the number of queued acks=all requests.
func (l *Leader) Waiting() int { return len(l.waiters) }

// DrainWaiters removes and returns every queued request's token, for a
// leader that loses its leadership (they are answered
// NOT_LEADER_OR_FOLLOWER; their batches may or may not survive).
func (l *Leader) DrainWaiters() []any {
	out := make([]any, len(l.waiters))
	for i, w := range l.waiters {
		out[i] = w.token
	}
	clear(l.waiters)
	l.waiters = l.waiters[:0]
	return out
}
