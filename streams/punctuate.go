package streams

import (
	"slices"
	"time"
)

// PunctuationType is what a punctuation's time is measured in, as
// Kafka's PunctuationType.
type PunctuationType int

const (
	// StreamTimePunctuation fires as the task's stream time advances,
	// checked after each record (Kafka checks after each batch of
	// records): first with the first record processed after Schedule,
	// then whenever stream time reaches the next multiple of the interval
	// (from the Unix epoch) past the last firing, once however many
	// intervals the record skipped (Kafka's PunctuationSchedule.next).
	// fn is given the stream time. Nothing fires while no record arrives.
	StreamTimePunctuation PunctuationType = iota
	// WallClockPunctuation fires from the processing loop between polls,
	// first one interval after Schedule, then at the next multiple of the
	// interval past the first due time, once however many were missed
	// (a long commit, an overloaded machine). fn is given the wall-clock
	// time. The loop's poll waits no longer than the next one is due.
	WallClockPunctuation
)

// punctuation is one scheduled punctuator of a task.
type punctuation struct {
	typ      PunctuationType
	interval int64 // ms
	// next is when it fires next (ms: stream time or Unix wall time);
	// committed is next as of the last commit, for a stream-time
	// punctuation: an aborted transaction rewinds stream time and the
	// punctuations with it, so that the records processed again punctuate
	// as they did.
	next, committed int64
	fn              func(ts time.Time)
	cancelled       bool
}

func (t *task) schedule(interval time.Duration, typ PunctuationType, fn func(ts time.Time)) func() {
	ms := interval.Milliseconds()
	if ms < 1 {
		ms = 1 // Kafka rejects intervals under 1 ms; 1 ms is its floor
	}
	p := &punctuation{typ: typ, interval: ms, fn: fn}
	if typ == WallClockPunctuation {
		p.next = time.Now().UnixMilli() + ms
	}
	// Stream time: next 0, so the first record processed fires it.
	p.committed = p.next
	t.puncts = append(t.puncts, p)
	return func() {
		p.cancelled = true
		t.puncts = slices.DeleteFunc(t.puncts, func(q *punctuation) bool { return q == p })
	}
}

// punctuate fires the punctuations of type typ due at now (ms).
func (t *task) punctuate(typ PunctuationType, now int64) {
	if len(t.puncts) == 0 {
		return
	}
	// A punctuator may schedule or cancel: fire from a copy.
	for _, p := range slices.Clone(t.puncts) {
		if p.typ != typ || p.cancelled || now < p.next {
			continue
		}
		// Kafka's PunctuationSchedule.next: the first multiple of the
		// interval (from the last due time) past now.
		p.next += (now-p.next)/p.interval*p.interval + p.interval
		start := time.Now()
		p.fn(time.UnixMilli(now))
		t.punctuations.Add(1)
		t.punctuationNanos.Add(int64(time.Since(start)))
		if t.err != nil {
			return
		}
	}
}

// punctuationsCommitted records the stream-time punctuations' next times
// as committed.
func (t *task) punctuationsCommitted() {
	for _, p := range t.puncts {
		p.committed = p.next
	}
}

// rewindPunctuations sets the stream-time punctuations back to their
// last committed state, with stream time (rewindTimes).
func (t *task) rewindPunctuations() {
	for _, p := range t.puncts {
		if p.typ == StreamTimePunctuation {
			p.next = p.committed
		}
	}
}

// nextWallClock is when the earliest wall-clock punctuation of the
// application's tasks is due, zero if none is scheduled.
func (a *App) nextWallClockLocked() time.Time {
	var next int64
	for _, t := range a.tasks {
		for _, p := range t.puncts {
			if p.typ == WallClockPunctuation && (next == 0 || p.next < next) {
				next = p.next
			}
		}
	}
	if next == 0 {
		return time.Time{}
	}
	return time.UnixMilli(next)
}

// punctuateWallClockLocked fires the wall-clock punctuations due, in a
// transaction exactly once (begun if none is open: what they forward and
// store is committed with the next commit, as records' outputs).
func (a *App) punctuateWallClockLocked() error {
	now := time.Now()
	due := a.nextWallClockLocked()
	if due.IsZero() || now.Before(due) {
		return nil
	}
	if a.sess != nil && !a.inTxn {
		if err := a.sess.Begin(); err != nil {
			return err
		}
		a.inTxn = true
	}
	ms := now.UnixMilli()
	for _, t := range a.tasks {
		t.punctuate(WallClockPunctuation, ms)
		if t.err != nil {
			return t.err
		}
	}
	return nil
}
