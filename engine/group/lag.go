package group

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"

	"ringlog/engine"
)

// CommittedOffset is a group's committed offset of one partition.
type CommittedOffset struct {
	Group  string
	TP     engine.TP
	Offset int64
}

// CommittedOffsets returns the committed offsets of the groups this broker
// coordinates now (the partitions of __consumer_offsets it leads and has
// loaded), at most limit of them, and how many more there were. It is
// meant for a metrics scrape (consumer lag, computed by the broker): each
// partition's groups are read on the goroutine of the shard that owns
// them, as everything of a group is, and the copy stops at limit, so that
// no count of groups makes a scrape hold more than limit offsets. Which
// offsets are kept when there are more is arbitrary (the order the shards
// answer in); those kept are returned sorted by group, topic and
// partition.
//
// It waits for every partition's shard at most until ctx ends; late
// counts the partitions of __consumer_offsets that did not answer by
// then, whose offsets are left out. Like every call that posts to the
// shards, it must not be called from a shard goroutine.
func (c *Coordinator) CommittedOffsets(ctx context.Context, limit int) (offsets []CommittedOffset, skipped, late int) {
	if c == nil || c.closed.Load() {
		return nil, 0, 0
	}
	var budget, over atomic.Int64
	type answer struct{ offs []CommittedOffset }
	// Buffered for every partition: a shard answering after ctx ended
	// does not block.
	answers := make(chan answer, len(c.parts))
	asked := 0
	for _, p := range c.parts {
		err := c.eng.OnShard(p.tp, func() {
			var offs []CommittedOffset
			if p.state == partLoaded {
				for id, g := range p.groups {
					for tp, cm := range g.offsets {
						if budget.Add(1) > int64(limit) {
							over.Add(1)
							continue
						}
						offs = append(offs, CommittedOffset{Group: id, TP: tp, Offset: cm.offset})
					}
				}
			}
			answers <- answer{offs}
		})
		if err == nil {
			asked++ // a partition without a replica here has no groups here
		}
	}
wait:
	for got := 0; got < asked; got++ {
		select {
		case a := <-answers:
			offsets = append(offsets, a.offs...)
		case <-ctx.Done():
			late = asked - got
			break wait
		}
	}
	slices.SortFunc(offsets, func(a, b CommittedOffset) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.TP.Topic, b.TP.Topic), cmp.Compare(a.TP.Partition, b.TP.Partition))
	})
	return offsets, int(over.Load()), late
}
