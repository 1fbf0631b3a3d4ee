package segment

import (
	"math"

	"ringlog/segment/batch"
)

// filter decides what becomes of one batch, following Kafka's
// LogCleaner.shouldRetainRecord and MemoryRecords.filterTo. A record below
// the map's end is removed when a later record of its key exists, when it
// has no key (a compacted log cannot hold one; Kafka drops them too), or
// when it is a tombstone whose batch's delete horizon has passed. Records
// at or after the map's end are kept. It returns the batch to write (b
// itself when nothing changed; nil to drop it) and whether it changed.
//
// Tombstones follow KIP-534: a kept tombstone's batch is given a delete
// horizon (now + delete.retention.ms) the first time a clean rewrites it,
// and a later clean removes the tombstone once the horizon has passed. This
// rule counts delete.retention.ms on the broker's clock from the moment
// the cleaner first saw the tombstone, whatever the producer's timestamps
// and however segments were grouped, and it is what current Kafka does
// for record batch v2; the legacy rule (segment age against the clean
// section's last modification) would make a tombstone's life depend on
// producer timestamps and file times.
func (c *cleanRun) filter(b []byte, h batch.Header, last bool) ([]byte, bool, error) {
	if h.Control() {
		return c.filterControl(b, h, last)
	}
	if c.txn.dataBatch(h) {
		// A batch of an aborted transaction (clean_txn.go): its records
		// go whatever their keys.
		c.stats.RecordsRead += int64(h.NumRecords)
		c.stats.RecordsRemoved += int64(h.NumRecords)
		c.stats.AbortedBatchesRemoved++
		if !last && !c.producerLast(h) {
			c.stats.BatchesDropped++
			return nil, true, nil
		}
		if h.NumRecords == 0 {
			return b, false, nil
		}
		c.stats.BatchesEmptied++
		out, err := batch.Build(c.outBuf[:0], h, batch.None, nil)
		c.outBuf = out[:0]
		return out, true, err
	}
	c.kept, c.arena = c.kept[:0], c.arena[:0]
	removed, tombstones, tombstonesBelow := 0, 0, 0
	hasHorizon := h.HasDeleteHorizon()
	err := batch.Records(h, b, maxDecompressedBytes, func(r *batch.Record) error {
		off := h.BaseOffset + int64(r.OffsetDelta)
		c.stats.RecordsRead++
		if off < c.mapEnd {
			if r.Key == nil || c.m.get(r.Key) > off {
				removed++
				return nil
			}
			if r.Value == nil && hasHorizon && c.now >= h.BaseTimestamp {
				removed++
				c.stats.TombstonesRemoved++
				return nil
			}
		}
		if r.Value == nil {
			tombstones++
			if off < c.mapEnd {
				tombstonesBelow++
			}
		}
		kr := *r
		// The record's Headers slice is reused for the next record.
		n := len(c.arena)
		c.arena = append(c.arena, r.Headers...)
		kr.Headers = c.arena[n:len(c.arena):len(c.arena)]
		c.kept = append(c.kept, kr)
		return nil
	})
	if err != nil {
		// Stored, CRC-checked, yet unreadable (a batch too large to
		// inflate within the bound, say): keep it whole rather than lose
		// its records.
		c.stats.BatchesUndecodable++
		return b, false, nil
	}
	c.stats.RecordsRemoved += int64(removed)
	horizon, setHorizon := int64(0), false
	if tombstones > 0 {
		if hasHorizon {
			horizon = h.BaseTimestamp
		} else if hz, ok := c.rebase(h); ok {
			horizon, setHorizon = hz, true
		}
		// Only tombstones below the map's end can be removed by the next
		// clean on account of their horizon; the others are still dirty,
		// and the next clean maps them anyway.
		if (hasHorizon || setHorizon) && tombstonesBelow > 0 {
			c.horizon = min(c.horizon, horizon)
		}
	}
	if removed == 0 && !setHorizon {
		return b, false, nil
	}
	if len(c.kept) == 0 {
		if !last && !c.producerLast(h) {
			c.stats.BatchesDropped++
			return nil, true, nil
		}
		// An empty batch keeps its offsets (and the producer's sequence
		// numbers and epoch) with no record: a bare header, uncompressed
		// as Kafka writes it.
		c.stats.BatchesEmptied++
		out, err := batch.Build(c.outBuf[:0], h, batch.None, nil)
		c.outBuf = out[:0]
		return out, true, err
	}
	nh := h
	if setHorizon {
		nh.BaseTimestamp = horizon
		nh.Attributes |= batch.AttrDeleteHorizon
	}
	// baseOffset, lastOffsetDelta, maxTimestamp, the producer fields and
	// the leader epoch stay those of the original batch, and the records
	// keep their offset deltas: offsets and the segment's time bounds do
	// not move.
	c.stats.BatchesRewritten++
	out, err := batch.Build(c.outBuf[:0], nh, h.Codec(), c.kept)
	c.outBuf = out[:0]
	return out, true, err
}

// rebase prepares the kept records for the delete horizon of batch h: the
// horizon takes baseTimestamp's place (KIP-534), so each record's
// timestamp delta is recomputed from it and every reader, which adds the
// delta to baseTimestamp, still gets the record's own timestamp (Kafka
// leaves the deltas as they were, which shifts the timestamps consumers
// see). It reports false, changing nothing, when a delta would overflow:
// the tombstones then keep no horizon and stay.
func (c *cleanRun) rebase(h batch.Header) (int64, bool) {
	hz := c.now + c.cfg.DeleteRetentionMs
	if c.cfg.DeleteRetentionMs > math.MaxInt64-c.now {
		hz = math.MaxInt64
	}
	for i := range c.kept {
		ts := h.BaseTimestamp + c.kept[i].TimestampDelta // checked by Records
		if (hz > 0 && ts < math.MinInt64+hz) || (hz < 0 && ts > math.MaxInt64+hz) {
			return 0, false
		}
	}
	for i := range c.kept {
		c.kept[i].TimestampDelta = h.BaseTimestamp + c.kept[i].TimestampDelta - hz
	}
	return hz, true
}

// producerLast reports whether h is the last batch of an active producer.
func (c *cleanRun) producerLast(h batch.Header) bool {
	if h.ProducerID < 0 {
		return false
	}
	last, ok := c.producers[h.ProducerID]
	return ok && last == h.LastOffset()
}
