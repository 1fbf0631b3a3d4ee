package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"ringlog/internal/fsutil"
	"ringlog/internal/procs"
	"ringlog/ioring"
	"ringlog/segment"
	"ringlog/segment/batch"
)

// A shard is a goroutine locked to an OS thread that owns a set of
// partitions for their whole life on this broker, with its own io_uring
// ring and an inbox. All changes to its partitions' logs happen on it, so
// the hot path takes no locks. Its loop: take what the inbox holds, build
// one write per partition from all the appends queued for it, hand every
// write of the round to the kernel in one submission (group commit), and
// answer each partition's appends when its write completed. Where the
// shard owns its ring and its disk I/O is on it (diskOwner) rounds
// overlap: the next round's partitions are written while the previous
// round's writes are in flight, a partition at most one write at a time;
// elsewhere a round waits for its writes. Control work (opening and
// deleting partitions, retention, calls) runs with nothing in flight
// (settle).
type shard struct {
	e      *Core
	id     int
	io     ioring.IO
	choice ioring.Choice
	inbox  chan shardMsg
	// owner is the shard's ring owner (Config.RingOwners), set on the
	// shard's thread before ownerReady closes; nil when the shard waits
	// on its inbox. Senders wake it after queueing (wake).
	owner      atomic.Pointer[ioring.Owner]
	ownerReady chan struct{}
	parts      map[*partition]struct{}
	done       chan struct{}
	// gate orders senders against the stop: a sender holds it shared
	// while it checks stopped and puts its message in the inbox; drain
	// takes it whole after done is closed, so that every message that got
	// into the inbox is found by the drain and answered (an append racing
	// Close was left in the inbox, its caller waiting forever).
	gate    sync.RWMutex
	stopped bool
	drained chan struct{} // closed once the inbox is drained after the stop
	broken  error         // the ring failed: appends on this shard fail from now on
	// brokenHandled: the shard's partitions were taken offline after
	// broken was set (ringFailed).
	brokenHandled bool

	// overflow holds, in order, the messages that shards' own threads
	// could not put in this shard's full inbox (handOff): a shard's thread
	// never waits for another shard (two doing so on each other's full
	// inboxes would deadlock), nor for itself. ovLen is its length, read
	// without ovMu. backlog (shard only) is what takeOverflow moved out of
	// the inbox and the overflow, taken before the inbox again.
	ovMu     sync.Mutex
	overflow []shardMsg
	ovLen    atomic.Int32
	backlog  []shardMsg

	// Partitions whose pending acks=all appends the high watermark
	// reached (SetHW, any goroutine).
	dueMu sync.Mutex
	due   []*partition

	// diskOwner is the owner whose ring carries the shard's disk I/O too
	// (s.io is its DiskIO), nil when the disk path has a ring of its own
	// or is portable; shard only. roundWait is set while a round waits in
	// the owner's turn for its writes and syncs: the inbox's messages are
	// for the next round then, and must not keep the turn from blocking.
	diskOwner *ioring.Owner
	roundWait bool
	// inflight counts the append tasks submitted and not yet finished
	// (shard only): a partition has one at most (its task). wrote is
	// when the shard last submitted appends.
	inflight int
	wrote    time.Time

	// queued lists the partitions with appends waiting (their queue),
	// those whose write is in flight among them; requeued is its spare
	// (round swaps them).
	queued, requeued []*partition

	// Round scratch, reused.
	ops      []*ioring.Op
	out      []*ioring.Op
	finished []*segment.Task
}

// inboxSize bounds the requests waiting for a shard. A full inbox makes
// the sender wait for room (send, post), holding the network loop or the
// goroutine that sent it: back-pressure rather than growing memory, and
// never an error. A shard's own thread never waits: what it cannot put
// in a full inbox goes to the target's overflow (handOff).
const inboxSize = 8192

// shardIdle is how long a ring-owning shard goes without writing before
// its waits give their P up (runOwner).
const shardIdle = 50 * time.Millisecond

// maxRound bounds the requests one round takes, so that control work and
// the next round's latency stay bounded under load.
const maxRound = 4096

type appendReq struct {
	p       *partition
	batches [][]byte
	hdrs    []segmentHeader
	opts    AppendOptions
	done    func(AppendResult, error)
	// produced says the batches are a producer's, cut but not yet
	// checked: the shard checks them as it stages them (checkProduced).
	produced bool
	// internal marks a service's append (AppendOnShard), whose records
	// need no key on a compacted topic (keyed).
	internal bool
	// replica is set instead of done for a follower's copy of its
	// leader's batches (AppendReplica).
	replica func(leo int64, err error)
	// base and end are the offsets of the first batch and after the last,
	// once prepared.
	base, end int64
	// markers, when set, holds the transaction marker of each control
	// batch (nil for data batches): AppendMarker's, or those a follower
	// copies.
	markers []*batch.Marker
	// markerTV is the transaction version of AppendMarker's marker
	// (Marker.TransactionVersion), which decides how its producer epoch
	// is checked.
	markerTV int16
	// aborted are the aborted-transactions index entries of the ABORT
	// markers among the batches, written once the batches are (prepare).
	aborted []segment.AbortedTxn
}

// written tells the appender that r is written here and waits for the
// high watermark (AppendOptions.Written).
func (r *appendReq) written() {
	if r.opts.Written != nil {
		r.opts.Written()
	}
}

// fail answers r with err; a replica append learns the LEO, where the
// follower fetches from next.
func (r *appendReq) fail(err error) {
	if r.replica != nil {
		var leo int64
		if r.p.log() != nil {
			leo = r.p.log().LEO()
		}
		r.replica(leo, err)
	} else {
		r.done(AppendResult{}, err)
	}
}

// shardMsg is one entry of a shard's inbox. At most one field is set; an
// empty message only wakes the shard (acksDue).
type shardMsg struct {
	append  *appendReq   // Append, AppendReplica
	appends []*appendReq // AppendBatch: the items bound for this shard
	call    func()       // post, do, start
	stop    chan error   // stop: gets the shutdown's error
}

func newShard(e *Core, id int) (*shard, error) {
	io, choice, err := ioring.Open(e.cfg.IO, ioring.Config{Writes: e.cfg.IOWrites})
	if err != nil {
		return nil, err
	}
	if e.cfg.WrapIO != nil {
		io = e.cfg.WrapIO(io)
	}
	return &shard{e: e, id: id, io: io, choice: choice, inbox: make(chan shardMsg, inboxSize), ownerReady: make(chan struct{}),
		parts: map[*partition]struct{}{}, done: make(chan struct{}), drained: make(chan struct{})}, nil
}

// post queues fn to run on the shard goroutine between two rounds and
// returns without waiting for it. It fails with ErrClosed, and fn does not
// run, when the shard has stopped. A full inbox makes it wait for room
// (back-pressure), except on the thread of a shard that owns its ring
// (handOff), which never waits; a shard that waits on its inbox must not
// call it. A shard that stops with fn still queued drops fn: whoever
// waits for fn's effect must also watch the shard stop (do does).
func (s *shard) post(fn func()) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.stopped {
		return ErrClosed
	}
	m := shardMsg{call: fn}
	if s.handOff(m) {
		return nil
	}
	select {
	case s.inbox <- m:
		s.wake()
		return nil
	case <-s.done:
		return ErrClosed
	}
}

// handOff queues m for the shard without waiting, and reports whether it
// did; false tells the caller to wait for room in the inbox. The caller
// holds the gate shared and found the shard running.
//
// On a shard's thread (the engine's shards own their rings: connections'
// requests and the replies of other shards run there) it never fails: a
// full inbox, or messages already in the overflow, send m to the
// overflow. Waiting there could deadlock two shards posting to each
// other's full inboxes, or a shard posting to its own.
//
// Order: the messages of one sender reach the shard in the order sent. A
// sender puts m in the inbox only when the overflow is empty, and the
// shard takes the overflow together with the number of messages the inbox
// holds at that instant (takeOverflow), which it takes first: every
// message a sender put in the inbox before one of its own went to the
// overflow is among them, and every one after the swap comes after.
func (s *shard) handOff(m shardMsg) bool {
	if s.ovLen.Load() == 0 {
		select {
		case s.inbox <- m:
			s.wake()
			return true
		default:
		}
	}
	if s.e == nil || s.e.owners == nil || s.e.owners.Current() == nil {
		// Not a shard's thread (or a shard without an engine, in a
		// test): wait for room, which is back-pressure.
		return false
	}
	s.ovMu.Lock()
	s.overflow = append(s.overflow, m)
	s.ovLen.Store(int32(len(s.overflow)))
	s.ovMu.Unlock()
	s.wake()
	// A shard that waits on its inbox (it could not become an owner, or
	// its ring failed) is woken by an empty message; a full inbox will be
	// read anyway.
	select {
	case s.inbox <- shardMsg{}:
	default:
	}
	return true
}

// next takes the shard's next message without waiting (shard only): the
// backlog first, then, if messages wait in the overflow, those the inbox
// holds and the overflow after them, else the inbox's head.
func (s *shard) next() (shardMsg, bool) {
	if len(s.backlog) == 0 && s.ovLen.Load() > 0 {
		s.takeOverflow()
	}
	if len(s.backlog) > 0 {
		m := s.backlog[0]
		s.backlog[0] = shardMsg{}
		s.backlog = s.backlog[1:]
		return m, true
	}
	select {
	case m := <-s.inbox:
		return m, true
	default:
		return shardMsg{}, false
	}
}

// takeOverflow moves to the backlog the messages the inbox holds, then
// the overflow's (shard only; see handOff for why in that order). The
// count of the inbox is read with the overflow swapped out, under ovMu,
// before ovLen says it is empty: a sender that then finds it empty puts
// its next message in the inbox behind them.
func (s *shard) takeOverflow() {
	s.ovMu.Lock()
	ov := s.overflow
	s.overflow = nil
	n := len(s.inbox)
	s.ovLen.Store(0)
	s.ovMu.Unlock()
	for range n {
		s.backlog = append(s.backlog, <-s.inbox)
	}
	s.backlog = append(s.backlog, ov...)
}

// waiting reports whether messages wait for the shard (its owner's busy
// hook: it must not block in its ring then). Shard only.
func (s *shard) waiting() bool {
	return len(s.inbox) > 0 || s.ovLen.Load() > 0 || len(s.backlog) > 0
}

// wake rings the shard's doorbell after a message went into its inbox,
// when the shard waits in its ring (an owner) rather than on the inbox.
// Any goroutine: from another shard's thread it is a MSG_RING submitted
// with that shard's next turn, from any other goroutine an eventfd write,
// and nothing at all when the shard is not waiting.
func (s *shard) wake() {
	if o := s.owner.Load(); o != nil {
		o.Wake()
	}
}

// do runs fn on the shard goroutine between two rounds, waits for it and
// returns its error, or ErrClosed when the shard stopped first (fn then did
// not run). It must not be called from a shard goroutine: it would wait
// for itself.
func (s *shard) do(fn func() error) error {
	return s.start(fn).wait()
}

// start queues fn as do does but returns at once; the call's wait returns
// fn's error. It lets one goroutine keep calls on several shards in flight
// (opening a topic's partitions) and still learn when a shard stopped
// before running its call.
func (s *shard) start(fn func() error) shardCall {
	c := shardCall{s: s, res: make(chan error, 1)}
	if err := s.post(func() { c.res <- fn() }); err != nil {
		c.res <- err
	}
	return c
}

// shardCall is a call queued by start.
type shardCall struct {
	s   *shard
	res chan error // buffered: the shard never waits for the caller
}

// wait returns the call's error, or ErrClosed when the shard stopped
// without running it.
func (c shardCall) wait() error {
	select {
	case err := <-c.res:
		return err
	case <-c.s.done:
		// The shard ran every call it took before closing done, so a
		// result not there now will never come.
		select {
		case err := <-c.res:
			return err
		default:
			return ErrClosed
		}
	}
}

func (s *shard) stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	errc := make(chan error, 1)
	s.inbox <- shardMsg{stop: errc}
	s.wake()
	err := <-errc
	<-s.drained
	return err
}

func (s *shard) run() {
	// The shard's state is touched by this goroutine alone; locking it to
	// one thread also keeps the ring's submitter on one CPU's caches (and
	// an owner's ring is SINGLE_ISSUER: this thread alone may submit).
	runtime.LockOSThread()
	defer s.drain()
	ready := false
	if s.e.owners != nil {
		o, err := s.e.owners.NewOwner()
		if err != nil {
			s.e.log.Error("shard cannot be a ring owner; it waits on its inbox", "shard", s.id, "err", err)
		} else {
			s.owner.Store(o)
			s.diskOnOwner(o)
			close(s.ownerReady)
			ready = true
			if stopped := s.runOwner(o); stopped {
				return
			}
			// The owner's ring failed and is closed (what was registered
			// on it was told and gave up): the shard waits on its inbox
			// from now on. Its disk I/O was on that ring: the shard is
			// broken (runOwner), its partitions offline, and its appends
			// fail with a storage error.
			s.owner.Store(nil)
			s.diskOwner = nil
			s.ringFailed()
		}
	}
	if !ready {
		close(s.ownerReady)
	}
	if s.waitsInRing() {
		procs.Add()
		defer procs.Release()
		ioring.KeepP(s.io)
	}
	retention := time.NewTicker(s.e.cfg.RetentionCheckInterval)
	defer retention.Stop()
	flush := time.NewTicker(100 * time.Millisecond)
	defer flush.Stop()
	var idle <-chan time.Time
	for {
		// Background syncs (of rolled segments) in flight are reaped
		// every few milliseconds while the shard has nothing else to do.
		idle = nil
		if s.io.InFlight() > 0 && s.broken == nil {
			idle = time.After(5 * time.Millisecond)
		}
		if len(s.backlog) > 0 || s.ovLen.Load() > 0 {
			// Messages of other shards' threads wait beside the inbox.
			m, _ := s.next()
			if stop := s.handle(m); stop != nil {
				stop <- s.shutdown()
				return
			}
			continue
		}
		var m shardMsg
		select {
		case m = <-s.inbox:
		case <-retention.C:
			s.enforceRetention()
			continue
		case <-flush.C:
			s.flushDue()
			s.ringFailed()
			continue
		case <-idle:
			s.reap(0)
			s.ringFailed()
			continue
		}
		if stop := s.handle(m); stop != nil {
			stop <- s.shutdown()
			return
		}
	}
}

// waitsInRing tells whether the shard's rounds wait in io_uring_enter for
// their writes: direct writes on the io_uring path complete when the
// device has them, not inside the submission as buffered writes copied
// inline do. A thread waiting in a system call keeps its P, so such a
// shard counts one of its own (internal/procs), as netpoll's loops and
// ring-owning shards do: what the round's wait would leave in that P's run
// queue (a loop's handler, another shard) gets an idle P at once instead
// of when sysmon takes the P back. Measured at 50k records/s (ARCHITECTURE.md,
// "A P per loop"): the produce p99.9 of the gnet path halved.
func (s *shard) waitsInRing() bool {
	return s.e.direct && s.io.Kind() == ioring.Uring
}

// diskOnOwner moves the shard's disk I/O onto its owner's ring (shard
// only, before it opens any log): one ring then carries the shard's
// network, doorbells and disk, and a turn is one io_uring_enter for all
// of them. The ring the shard opened for its disk (newShard) is closed;
// nothing was submitted to it yet. If the owner cannot carry it, that
// ring stays.
func (s *shard) diskOnOwner(o *ioring.Owner) {
	if s.io.Kind() != ioring.Uring {
		return
	}
	io, err := o.DiskIO(ioring.Config{Writes: s.e.cfg.IOWrites})
	if err != nil {
		s.e.log.Error("shard's disk I/O stays on a ring of its own", "shard", s.id, "err", err)
		return
	}
	if s.e.cfg.WrapIO != nil {
		io = s.e.cfg.WrapIO(io)
	}
	if err := s.io.Close(); err != nil {
		s.e.log.Warn("closing the shard's own disk ring", "shard", s.id, "err", err)
	}
	s.io, s.diskOwner = io, o
}

// runOwner is the loop of a shard that owns a ring: it waits in the
// ring's io_uring_enter, for the completions of what others registered on
// it (netpoll's connections), for the doorbell of its inbox, and for its
// timers (the wait's timeout), instead of on the inbox. A thread waiting
// in a system call keeps its P, so the shard counts one of its own
// (internal/procs), as netpoll's loops do. It returns true when the shard
// stopped, false when the ring failed: the owner is then closed, which
// tells whoever registered on it (netpoll's loops close their
// connections and stop their server, as on a loop of their own whose
// ring fails).
func (s *shard) runOwner(o *ioring.Owner) (stopped bool) {
	procs.Add()
	defer procs.Release()
	o.KeepP()
	defer o.Close()
	o.AddHook(func() {}, func() bool { return !s.roundWait && (s.waiting() || s.writable()) })
	now := time.Now()
	retentionAt := now.Add(s.e.cfg.RetentionCheckInterval)
	flushAt := now.Add(100 * time.Millisecond)
	for {
		wait := min(time.Until(retentionAt), time.Until(flushAt))
		if s.io.InFlight() > 0 && s.diskOwner == nil {
			// Background syncs on a disk ring of the shard's own are
			// reaped every few milliseconds; on the owner's ring their
			// completions end the wait.
			wait = min(wait, 5*time.Millisecond)
		}
		turn := o.Turn
		if s.inflight == 0 && time.Since(s.wrote) > shardIdle {
			// Nothing written for a while: the wait may last until a
			// timer, and gives the P up meanwhile, as a wait on the
			// inbox does. An idle broker whose shards kept their Ps
			// took two to three times the CPU and context switches; a
			// shard under load keeps it (giving it up whenever nothing
			// was in flight cost 7% more CPU per GB, after 5 ms idle
			// 5%: sysmon's retakes between a producer's lingers).
			turn = o.TurnIdle
		}
		if err := turn(max(wait, time.Microsecond)); err != nil {
			s.ownerFailed(err)
			return false
		}
		if s.io.InFlight() > 0 {
			// Appends whose writes completed are answered; their
			// partitions' next appends go in this turn's round.
			s.reap(0)
			s.ringFailed()
		}
		now := time.Now()
		if !now.Before(retentionAt) {
			s.settle()
			s.enforceRetention()
			retentionAt = now.Add(s.e.cfg.RetentionCheckInterval)
		}
		if !now.Before(flushAt) {
			s.flushDue()
			s.ringFailed()
			flushAt = now.Add(100 * time.Millisecond)
		}
		if m, ok := s.next(); ok {
			if stop := s.handle(m); stop != nil {
				stop <- s.shutdown()
				return true
			}
		} else if len(s.queued) > 0 {
			s.round()
			s.ringFailed()
		}
	}
}

// ownerFailed: the ring that carries the connections, the doorbell and,
// when diskOwner is set, the disk I/O broke. Nothing on it can be served
// or woken any more: its connections are closed (the owner's Close runs
// its closers) and the shard waits on its inbox. The writes and syncs in
// it have an unknown fate, as on a failed disk ring: the shard is broken
// and its partitions go offline (ringFailed). A disk ring of the shard's
// own did not fail, and its partitions stay.
func (s *shard) ownerFailed(err error) {
	if s.diskOwner != nil && s.broken == nil {
		s.broken = err
	}
	s.e.log.Error("shard's ring owner failed; its connections are closed and the shard waits on its inbox", "shard", s.id, "err", err)
}

// handle takes m and what else the inbox holds (up to maxRound), writes
// the round, runs the calls and answers the acks due. It returns the stop
// request if one came.
func (s *shard) handle(m shardMsg) (stop chan error) {
	var calls []func()
	for n := 0; ; n++ {
		switch {
		case m.append != nil:
			s.enqueue(m.append)
		case m.appends != nil:
			for _, r := range m.appends {
				s.enqueue(r)
			}
		case m.call != nil:
			calls = append(calls, m.call)
		case m.stop != nil:
			stop = m.stop
		}
		if stop != nil || n >= maxRound {
			break
		}
		var ok bool
		if m, ok = s.next(); ok {
			continue
		}
		break
	}
	if len(calls) > 0 || stop != nil {
		// Calls see every append taken with them written, and nothing
		// in flight.
		s.settle()
	} else {
		s.round()
	}
	s.ringFailed()
	for _, fn := range calls {
		fn()
	}
	s.answerDue()
	// Control work and done callbacks may have queued appends of their
	// own (AppendOnShard): write them now rather than when the next
	// request arrives. A shard whose rounds overlap writes them at its
	// next turn (runOwner), once their partitions' writes in flight
	// completed.
	for s.diskOwner == nil && len(s.queued) > 0 && s.broken == nil {
		s.round()
	}
	return stop
}

// brokenErr is the answer of an append the broken ring will not write,
// or whose fate it lost.
func (s *shard) brokenErr() error {
	return fmt.Errorf("%w: %w", ErrStorage, s.broken)
}

// writable reports whether a queued partition has no write in flight: the
// next round has work (shard only; the owner's busy hook).
func (s *shard) writable() bool {
	for _, p := range s.queued {
		if p.task == nil {
			return true
		}
	}
	return false
}

// drain ends the shard: senders waiting for room in the inbox give up
// (done), senders in the middle of a send finish it (gate), later ones
// are refused (stopped), and what reached the inbox, the overflow or the
// backlog is answered: appends fail with ErrClosed, calls are dropped (do
// and start watch done).
func (s *shard) drain() {
	close(s.done)
	s.gate.Lock()
	s.stopped = true
	s.gate.Unlock()
	// No sender is in the middle of a hand-off now (they hold the gate).
	for _, m := range s.backlog {
		m.fail()
	}
	s.backlog = nil
	s.ovMu.Lock()
	ov := s.overflow
	s.overflow = nil
	s.ovLen.Store(0)
	s.ovMu.Unlock()
	for _, m := range ov {
		m.fail()
	}
	for {
		select {
		case m := <-s.inbox:
			m.fail()
		default:
			close(s.drained)
			return
		}
	}
}

// fail answers a message the shard will not take.
func (m shardMsg) fail() {
	if m.append != nil {
		m.append.fail(ErrClosed)
	}
	for _, r := range m.appends {
		r.fail(ErrClosed)
	}
	if m.stop != nil {
		m.stop <- nil
	}
}

func (s *shard) enqueue(r *appendReq) {
	p := r.p
	if p.deleted.Load() {
		r.fail(unknownPartition(p.tp))
		return
	}
	if err := p.offlineErr(); err != nil {
		r.fail(err)
		return
	}
	if s.broken != nil {
		r.fail(s.brokenErr())
		return
	}
	if len(p.queue) == 0 {
		s.queued = append(s.queued, p)
	}
	p.queue = append(p.queue, r)
}

// reap completes whatever ops come back, waiting for at least min, and
// answers the appends whose writes completed (finish).
func (s *shard) reap(min int) {
	var err error
	s.out, err = s.io.Wait(s.out[:0], min, -1)
	if err != nil {
		s.broken = err
		s.e.log.Error("shard ring failed", "shard", s.id, "err", err)
		s.abandon()
		return
	}
	bgFailed := false
	finished := s.finished[:0]
	for _, op := range s.out {
		if t, done := segment.Complete(op); done {
			if t.Kind == segment.TaskAppend {
				finished = append(finished, t)
			} else if t.Err != nil {
				s.e.log.Error("background sync failed", "shard", s.id, "err", t.Err)
				bgFailed = true
			}
		}
	}
	// The list is reused: its ops must not keep their tasks, and through
	// them the requests' bytes, until the next round overwrites them.
	clear(s.out)
	if bgFailed {
		// The log whose sync failed stopped itself (fsyncgate): its
		// partition goes offline (an append of it in flight is then
		// answered with the error: finish).
		s.checkFailedLogs()
	}
	for _, t := range finished {
		s.inflight--
		s.finish(t)
	}
	clear(finished)
	s.finished = finished[:0]
}

// openPartition creates (fresh) or recovers p's log on this shard.
func (s *shard) openPartition(p *partition, fresh bool) error {
	if fresh {
		if _, err := os.Stat(p.dir); err == nil {
			// Left over from a topic of the same name whose deletion did not
			// finish: move it aside rather than adopting its data.
			if err := os.Rename(p.dir, deletedDir(p.dir, p.tp, strconv.FormatInt(time.Now().UnixNano(), 10))); err != nil {
				return err
			}
		}
	}
	l, err := segment.Open(p.dir, p.topic.config.Log, s.logOptions())
	if err != nil {
		if !fresh && offlineAtOpen(err) {
			// One partition's log does not stop the broker: it stays
			// offline, its files as they are, and the rest opens.
			s.keepOffline(p, err)
			return nil
		}
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	p.cur.Store(l)
	if r := l.Recovery(); !fresh {
		if r.Clean {
			s.e.opensClean.Add(1)
		} else {
			s.e.opensRecovered.Add(1)
			p.recovered = recoveredEnd(p.tp, l)
			s.e.log.Info("recovered partition", "partition", p.dir, "segments_scanned", r.SegmentsScanned,
				"batches", r.BatchesScanned, "truncated_bytes", r.TruncatedBytes, "zero_bytes", r.ZeroBytes, "reason", r.Reason,
				"leo", p.recovered.LEO, "last_epoch", p.recovered.LastEpoch)
		}
	}
	if err := p.loadProducers(); err != nil {
		// Closed as failed: no clean-shutdown marker vouches for a log
		// whose batch headers could not be read.
		l.Stop(err)
		l.Close()
		p.cur.Store(nil)
		if !fresh && offlineAtOpen(err) {
			s.keepOffline(p, err)
			return nil
		}
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	p.snapshotBase = l.ActiveBase()
	// No role until the replication layer gives one. The epoch is the
	// latest the log knows, so that a stale role change is refused.
	p.role.Store(int32(RoleNone))
	if eps := l.Epochs(); len(eps) > 0 {
		p.leaderEpoch.Store(eps[len(eps)-1].Epoch)
	}
	hw := l.LogStartOffset()
	if v, ok := s.e.hwAtOpen[p.tp]; ok && !fresh {
		hw = min(max(v, hw), l.LEO())
	}
	p.hw.Store(hw)
	if s.e.cfg.OnAppended == nil {
		// No replication layer: the partition leads itself, alone in its
		// ISR, and everything in its log is committed.
		p.role.Store(int32(RoleLeader))
		p.hw.Store(l.LEO())
	}
	p.publishTxns()
	s.parts[p] = struct{}{}
	return nil
}

// closePartition closes p's log cleanly, with a producer snapshot.
func (s *shard) closePartition(p *partition) error {
	delete(s.parts, p)
	if p.log() == nil {
		return nil
	}
	var errs []error
	if p.log().Failed() == nil {
		errs = append(errs, p.writeSnapshot())
	}
	errs = append(errs, p.log().Close())
	return errors.Join(errs...)
}

// nameMax is the longest file name Linux file systems take (NAME_MAX).
const nameMax = 255

// deletedDir is where the folder dir of partition tp goes while it is
// removed: Kafka's "<topic>-<partition>.<unique>-delete", with the topic
// cut short so that the name fits NAME_MAX (Kafka's LocalLog does the
// same). A topic name may be 249 bytes, and its folder 255 already: a
// suffix added to that fails the rename (ENAMETOOLONG), the deletion stops
// there and the data stays. unique tells apart two deletions of
// partitions whose cut names meet (the topic id, or a time).
func deletedDir(dir string, tp TP, unique string) string {
	suffix := fmt.Sprintf("-%d.%s%s", tp.Partition, unique, deleteSuffix)
	topic := tp.Topic // ASCII (ValidateTopicName): cut anywhere
	if len(topic)+len(suffix) > nameMax {
		topic = topic[:nameMax-len(suffix)]
	}
	return filepath.Join(filepath.Dir(dir), topic+suffix)
}

// deletePartition closes p and removes its files (renamed aside first).
func (s *shard) deletePartition(p *partition) error {
	for _, r := range p.queue {
		r.fail(unknownPartition(p.tp))
	}
	p.queue = nil
	p.failAcks(-1, unknownPartition(p.tp))
	if err := s.cancelMove(p); err != nil {
		s.e.log.Error("remove a deleted partition's future log", "partition", p.dir, "err", err)
	}
	delete(s.parts, p)
	if p.log() != nil {
		p.log().Close()
	}
	p.notify()
	if p.ldir.Load() == nil {
		// Offline with its log directory since the start: its folder,
		// wherever it is, is not here to remove.
		s.e.log.Warn("deleted partition's folder left in its offline log directory", "partition", p.tp)
		return nil
	}
	gone := deletedDir(p.dir, p.tp, fmt.Sprintf("%x", p.topic.id[:8]))
	if err := os.Rename(p.dir, gone); err != nil {
		return err
	}
	if err := fsutil.SyncDir(filepath.Dir(p.dir)); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

// enforceRetention applies retention.ms and retention.bytes to every
// partition of the shard, below each high watermark, and expires idle
// producers.
func (s *shard) enforceRetention() {
	cutoff := s.e.cfg.Now().Add(-s.e.cfg.ProducerIDExpiration).UnixMilli()
	for p := range s.parts {
		if p.log().Failed() != nil || p.offlineErr() != nil {
			continue
		}
		n, err := p.log().EnforceRetention(p.hw.Load())
		if err != nil {
			s.e.log.Error("retention", "partition", p.dir, "err", err)
			s.checkDisk(p, err)
		} else if n > 0 {
			s.e.log.Debug("retention deleted segments", "partition", p.dir, "segments", n, "log_start_offset", p.log().LogStartOffset())
		}
		p.producers.expire(cutoff)
		// Forgets the ended transactions the high watermark passed.
		p.publishTxns()
	}
}

// flushDue syncs the logs whose flush.ms has passed (flush policy
// interval), all in one submission, and empties the tail caches of the
// logs no longer written (segment.TailIdle). A log may have a write in
// flight: the sync covers the writes that completed before it, the only
// ones it counts as flushed (the log counts a write's records when it
// completes).
func (s *shard) flushDue() {
	s.ops = s.ops[:0]
	for p := range s.parts {
		if p.offlineErr() != nil {
			continue
		}
		if t := p.log().PrepareFlush(false); t != nil {
			s.ops = append(s.ops, t.Ops...)
		}
		p.log().DropIdleTail(segment.TailIdle)
	}
	if len(s.ops) > 0 {
		if err := s.io.Submit(s.ops...); err != nil {
			s.broken = err
			return
		}
		s.ops = s.ops[:0]
	}
}

// shutdown closes every partition cleanly after the ops in flight (the
// appends were settled with the stop: handle).
func (s *shard) shutdown() error {
	for s.io.InFlight() > 0 && s.broken == nil {
		s.reap(s.io.InFlight())
	}
	var errs []error
	for p := range s.parts {
		p.failAcks(-1, ErrClosed)
		errs = append(errs, s.closePartition(p))
	}
	errs = append(errs, s.io.Close())
	return errors.Join(errs...)
}

// logOptions are the segment options of the shard's logs.
func (s *shard) logOptions() segment.Options {
	return segment.Options{IO: s.io, Now: s.e.cfg.Now, DirectWrites: s.e.direct, TailBudget: s.e.tails}
}
