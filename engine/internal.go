package engine

import (
	"errors"
	"fmt"

	"ringlog/segment"
	"ringlog/segment/batch"
)

// Hooks for services built inside the broker on top of partitions (the
// group coordinator keeps its state in the partitions of an internal topic
// and its in-memory state on the shards that own them, so that a group's
// state and its log are touched by one goroutine).

// OnShard runs fn on the goroutine of the shard that owns tp, between two
// rounds, and returns without waiting for it. fn must not block. It fails
// when tp does not exist or the engine stopped; fn then does not run. A
// shard that stops after OnShard returned may drop fn. OnShard waits while
// the shard's inbox is full, so it must not be called from a shard
// goroutine (inside fn, a done callback, OnAppended), but on the thread of
// a shard that owns its ring (Config.RingOwners: a handler of a connection
// on it), where it never waits (the overflow, shard.handOff).
func (e *Core) OnShard(tp TP, fn func()) error {
	p, err := e.partition(tp)
	if err != nil {
		return err
	}
	return p.shard.post(fn)
}

// AppendOnShard queues records for tp from the goroutine of the shard that
// owns it (inside an OnShard function or an append's done callback): the
// append joins the shard's next round without going through its inbox,
// which could be full. done runs on the shard goroutine. opts are Append's:
// on a replicated engine, RequireISR answers once the high watermark
// covers the records (a service writing as Kafka writes its internal
// topics, with acks=all).
func (e *Core) AppendOnShard(tp TP, records []byte, opts AppendOptions, done func(AppendResult, error)) {
	r := e.newAppend(tp, records, opts, done)
	if r == nil {
		return
	}
	r.internal = true
	r.p.shard.enqueue(r)
}

// ReadAll calls fn with every whole batch of tp from its log start offset
// to its high watermark, in order, as the log holds it (replaying an
// internal topic). The slice passed to fn is valid only during the call.
// Any goroutine may call it.
func (e *Core) ReadAll(tp TP, fn func(b []byte) error) error {
	return e.readAll(tp, false, fn)
}

// ReadAllToLEO is ReadAll up to the LEO as it is when the call starts,
// records above the high watermark included. It is how a service replays
// a partition this broker just became the leader of: a leader never
// truncates its own log, so all of it will be committed while it leads
// (Kafka's group coordinator loads its partitions to the log end too),
// and a new leader's high watermark may still lag what its predecessor
// acknowledged.
func (e *Core) ReadAllToLEO(tp TP, fn func(b []byte) error) error {
	return e.readAll(tp, true, fn)
}

func (e *Core) readAll(tp TP, toLEO bool, fn func(b []byte) error) error {
	p, err := e.partition(tp)
	if err != nil {
		return err
	}
	off, end := p.log().LogStartOffset(), p.hw.Load()
	if toLEO {
		end = p.log().LEO()
	}
	for off < end {
		buf, err := p.log().ReadBatches(off, 1<<20, end)
		if errors.Is(err, segment.ErrOutOfRange) {
			// Retention moved the start meanwhile: go on from there.
			off = p.log().LogStartOffset()
			continue
		}
		if err != nil {
			return storageError(err)
		}
		if len(buf) == 0 {
			return fmt.Errorf("%w: no batch at offset %d below %d", ErrStorage, off, end)
		}
		it := batch.Split(buf)
		for it.Next() {
			h := it.Header()
			if h.NextOffset() <= off {
				continue
			}
			if err := fn(it.Batch()); err != nil {
				return err
			}
			off = h.NextOffset()
		}
		if err := it.Err(); err != nil {
			return storageError(err)
		}
	}
	return nil
}
