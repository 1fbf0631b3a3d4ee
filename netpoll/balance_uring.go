//go:build linux

package netpoll

import (
	"cmp"
	"slices"
	"time"
)

// The balancer of the shards' loops. A connection's frames are cut,
// decoded and checked on the shard that holds it, and the placement at
// accept (pick) sees only what each loop received until then: a client
// whose load starts or grows later stays where it landed. Every
// balanceEvery the balancer compares what each loop received in the
// window; when the busiest received more than half again the least busy
// and at least balanceMinGap more, the busiest moves one connection to
// the least busy: the one whose bytes in the window come nearest half the
// gap, if moving it narrows the gap by a quarter at least. A connection
// moved stays put for balanceSettle. A move waits for the connection's
// answers (its receive stopped meanwhile); one still waiting after
// balanceGiveUp (a request the handler holds: a long poll, a join) is
// given up and the connection reads again where it is. ARCHITECTURE.md,
// "Connections that move between shards".
const (
	balanceEvery  = 500 * time.Millisecond
	balanceMinGap = 4 << 20
	balanceSettle = 5 * time.Second
	balanceGiveUp = time.Second
)

// balancing is the balancer's settings: the constants above, or a test's
// knobs.
type balancing struct {
	every                  time.Duration
	minGap, settle, giveUp int64 // bytes; Now's nanoseconds
}

// startBalancer starts the balancer's goroutine when there is more than
// one loop (and a test has not switched it off).
func (e *uringEngine) startBalancer() {
	e.bal = balancing{every: balanceEvery, minGap: balanceMinGap, settle: int64(balanceSettle), giveUp: int64(balanceGiveUp)}
	if k := e.s.cfg.uring; k != nil {
		e.bal = balancing{every: cmp.Or(k.balanceEvery, e.bal.every), minGap: cmp.Or(k.balanceMinGap, e.bal.minGap),
			settle: cmp.Or(int64(k.balanceSettle), e.bal.settle), giveUp: cmp.Or(int64(k.balanceGiveUp), e.bal.giveUp)}
	}
	if len(e.loops) < 2 || e.bal.every < 0 {
		return
	}
	e.balStop, e.balDone = make(chan struct{}), make(chan struct{})
	go e.balance()
}

// balance is the balancer's goroutine.
func (e *uringEngine) balance() {
	defer close(e.balDone)
	t := time.NewTicker(e.bal.every)
	defer t.Stop()
	d := make([]int64, len(e.loops))
	for {
		select {
		case <-e.balStop:
			return
		case <-t.C:
		}
		hi, lo := 0, 0
		for i, l := range e.loops {
			rx := l.rxBytes.Load()
			d[i] = rx - l.balSeen
			l.balSeen = rx
			if d[i] > d[hi] {
				hi = i
			}
			if d[i] < d[lo] {
				lo = i
			}
		}
		gap := d[hi] - d[lo]
		for i, l := range e.loops {
			if d[i] == 0 && l.moving.Load() == 0 {
				// Nothing received: its connections' counts did not
				// move, and an idle shard is not woken for nothing.
				continue
			}
			// Every loop takes its connections' counts of the window;
			// the busiest picks one to move too, if the gap is worth it.
			var to *uloop
			if i == hi && gap >= e.bal.minGap && 2*d[hi] > 3*d[lo] {
				to = e.loops[lo]
			}
			_ = l.o.Post(func() { l.shed(to, gap) })
		}
	}
}

// shed closes the connections' window of received bytes and, when to is
// set, starts moving to it the connection whose bytes in the window come
// nearest half of gap, if moving it narrows the gap by a quarter at least;
// it gives up the moves that waited longer than balanceGiveUp. Owner's
// goroutine.
func (l *uloop) shed(to *uloop, gap int64) {
	if l.detached || l.stopping {
		return
	}
	var best *uconn
	var bestLeft int64
	now, bal := Now(), &l.e.bal
	for _, uc := range l.conns {
		if uc == nil {
			continue
		}
		if uc.moveTo != nil && now-uc.movedAt >= bal.giveUp {
			// Still waiting for an answer the handler holds: it reads
			// again here (serve re-arms the receive).
			uc.endMove()
			uc.serve()
		}
		d := uc.rx - uc.rxPrev
		uc.rxPrev = uc.rx
		if to == nil || d <= 0 || uc.closing || uc.gone || uc.moveTo != nil || now-uc.movedAt < bal.settle {
			continue
		}
		left := gap - 2*d // the gap after the move, signed
		if left < 0 {
			left = -left
		}
		if 4*left > 3*gap {
			continue
		}
		if best == nil || left < bestLeft {
			best, bestLeft = uc, left
		}
	}
	if best != nil {
		l.startMove(best, to, now)
	}
}

// startMove marks uc, one of the loop's connections, to move to the loop
// to once still (uconn.move). Owner's goroutine.
func (l *uloop) startMove(uc *uconn, to *uloop, now int64) {
	uc.moveTo, uc.movedAt = to, now
	l.moving.Add(1)
	uc.serve()
}

// still reports whether nothing of the connection is in its loop's ring
// or in flight: no request (the receive ended), no request of its
// client's unanswered, no response unwritten. A moving connection gets
// there once its receive is cancelled and its answers are out.
func (uc *uconn) still() bool {
	return uc.ops == 0 && !uc.recvOn && !uc.reading && !uc.sending && !uc.polling &&
		uc.w.empty() && !uc.c.busy()
}

// move hands the connection to the loop it is leaving for (moveTo), once
// still: its id goes back to this loop, and the new loop adopts it with
// its Conn and its bytes not yet framed, and arms its receive on its own
// ring. If that loop is stopping, the connection stays. The client sees
// only a pause of the requests it had in flight. Owner's goroutine.
func (uc *uconn) move() {
	to := uc.moveTo
	uc.endMove()
	from := uc.l
	if uc.starved {
		uc.starved = false
		if i := slices.Index(from.starved, uc); i >= 0 {
			from.starved = slices.Delete(from.starved, i, i+1)
		}
	}
	if uc.dirty {
		// Queued to be served by this loop's next turn (a shed posted
		// between a reap and the turn): not here any more.
		uc.dirty = false
		if i := slices.Index(from.dirty, uc); i >= 0 {
			from.dirty[i] = nil
		}
	}
	from.forget(uc)
	if !to.take(uc) {
		from.adoptID(uc)
		uc.serve()
		return
	}
	from.s.st.uringMoves.Add(1)
}

// endMove ends the connection's move, done, given up or closed (on its
// loop's goroutine, before the move changes the loop).
func (uc *uconn) endMove() {
	if uc.moveTo != nil {
		uc.moveTo = nil
		uc.l.moving.Add(-1)
	}
}
