package engine

import (
	"context"

	"ringlog/ioring"
)

// RingDepth is one shard's io_uring depth (ioring.Depth), for the
// broker's metrics.
type RingDepth struct {
	Shard int
	ioring.Depth
}

// RingDepths samples the depth of every shard's ring, each on its shard
// between two rounds (a ring is its shard's alone: ioring's contract). The
// sample is a call, which runs with the shard's appends settled, so what
// it finds in flight is what the shard runs in the background: the syncs of rolled segments and of
// the flush policy. Shards on the portable path, and shards that do not
// answer before ctx ends or whose inbox is full (the sample must not add
// to a backlog, nor wait behind one), are left out. It must not be called
// from a shard goroutine.
func (e *Core) RingDepths(ctx context.Context) []RingDepth {
	type answer struct {
		d  ioring.Depth
		ok bool
	}
	calls := make([]chan answer, len(e.shards))
	for i, s := range e.shards {
		c := make(chan answer, 1) // the shard never waits for the sampler
		fn := func() {
			d, ok := ioring.DepthOf(s.io)
			c <- answer{d, ok}
		}
		if s.tryPost(fn) {
			calls[i] = c
		}
	}
	var out []RingDepth
	for i, c := range calls {
		if c == nil {
			continue
		}
		select {
		case a := <-c:
			if a.ok {
				out = append(out, RingDepth{Shard: e.shards[i].id, Depth: a.d})
			}
		case <-e.shards[i].done:
		case <-ctx.Done():
			return out
		}
	}
	return out
}

// tryPost queues fn on the shard as post does, but only when the inbox has
// room now: false when it is full or the shard stopped.
func (s *shard) tryPost(fn func()) bool {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.stopped {
		return false
	}
	select {
	case s.inbox <- shardMsg{call: fn}:
		return true
	default:
		return false
	}
}
