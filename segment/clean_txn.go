package segment

import (
	"slices"

	"ringlog/segment/batch"
)

// Transactions in compaction, after Kafka's CleanedTransactionMetadata.
// A clean never reaches past the last stable offset (the caller's upper
// bound), so every transaction it sees has ended. Walking the batches in
// offset order, it:
//
//   - removes the batches of aborted transactions (the aborted-transactions
//     index names them: producer, first offset, marker), keeping the last
//     batch of an active producer emptied, as for any batch;
//   - keeps a marker while the clean still found data of its transaction
//     (an ABORT keeps its index entry then: the data goes in this pass,
//     the marker and entry in a later one), so that no consumer ever meets
//     a transaction's records without its marker;
//   - once a marker's transaction has no data left, gives the marker a
//     delete horizon (now + delete.retention.ms, KIP-534, as tombstones
//     get) and removes it in a clean after the horizon: a consumer that was
//     reading the transaction when its data went still gets the marker
//     (Kafka's two passes).
//
// COMMIT markers go by the same rule: one whose transaction's records were
// all compacted away is removed after its horizon.

// txnClean is a clean's view of transactions.
type txnClean struct {
	// aborted are the plan's aborted transactions by first offset; next
	// is the first not yet reached.
	aborted []AbortedTxn
	next    int
	// ongoingAborted are the aborted transactions begun below the batch
	// being read whose marker has not been read yet, by producer, with
	// whether a batch of theirs was seen in this clean.
	ongoingAborted map[int64]*abortedSeen
	// ongoingCommitted are the producers whose transactional batches,
	// not aborted, were seen since their last marker.
	ongoingCommitted map[int64]bool
	// entries are the index entries of the group being written: aborted
	// transactions whose marker stays because data of theirs was seen.
	entries []AbortedTxn
}

type abortedSeen struct {
	txn  AbortedTxn
	seen bool
}

func newTxnClean(aborted []AbortedTxn) *txnClean {
	slices.SortFunc(aborted, func(a, b AbortedTxn) int {
		switch {
		case a.FirstOffset < b.FirstOffset:
			return -1
		case a.FirstOffset > b.FirstOffset:
			return 1
		}
		return 0
	})
	return &txnClean{aborted: aborted, ongoingAborted: map[int64]*abortedSeen{}, ongoingCommitted: map[int64]bool{}}
}

// reach starts the aborted transactions whose first offset is at most
// offset.
func (x *txnClean) reach(offset int64) {
	for x.next < len(x.aborted) && x.aborted[x.next].FirstOffset <= offset {
		a := x.aborted[x.next]
		if _, ok := x.ongoingAborted[a.ProducerID]; !ok {
			x.ongoingAborted[a.ProducerID] = &abortedSeen{txn: a}
		}
		x.next++
	}
}

// dataBatch takes a data batch and reports whether it belongs to an
// aborted transaction (its records are then discarded).
func (x *txnClean) dataBatch(h batch.Header) bool {
	x.reach(h.LastOffset())
	if !h.Transactional() || h.ProducerID < 0 {
		return false
	}
	if a := x.ongoingAborted[h.ProducerID]; a != nil {
		a.seen = true
		return true
	}
	x.ongoingCommitted[h.ProducerID] = true
	return false
}

// marker takes a control batch (m nil when it holds no marker: an emptied
// one, or not a transaction marker) and reports whether its transaction
// has no data left, so that the marker may go once its horizon passes.
func (x *txnClean) marker(h batch.Header, m *batch.Marker) bool {
	x.reach(h.LastOffset())
	if m == nil {
		// An emptied control batch was cleaned already; any other
		// control record is kept.
		return h.NumRecords == 0
	}
	if !m.Commit {
		a := x.ongoingAborted[h.ProducerID]
		delete(x.ongoingAborted, h.ProducerID)
		if a != nil && a.seen {
			x.entries = append(x.entries, a.txn)
			return false
		}
		return true
	}
	seen := x.ongoingCommitted[h.ProducerID]
	delete(x.ongoingCommitted, h.ProducerID)
	return !seen
}

// filterControl decides what becomes of a control batch (filter's rules
// for markers; see the comment at the top of this file).
func (c *cleanRun) filterControl(b []byte, h batch.Header, last bool) ([]byte, bool, error) {
	var m *batch.Marker
	if h.NumRecords > 0 {
		mk, err := batch.ParseMarker(h, b)
		if err != nil {
			return b, false, nil // not a marker this broker knows: kept
		}
		m = &mk
	}
	if !c.txn.marker(h, m) {
		return b, false, nil
	}
	if m == nil {
		// Emptied by an earlier clean, kept then as a group's last
		// batch: it goes unless it is that again.
		if last {
			return b, false, nil
		}
		c.stats.BatchesDropped++
		return nil, true, nil
	}
	if h.HasDeleteHorizon() {
		if c.now < h.BaseTimestamp {
			c.horizon = min(c.horizon, h.BaseTimestamp)
			return b, false, nil
		}
		c.stats.MarkersRemoved++
		if last {
			// The group's last batch stays (the swap rule), emptied.
			c.stats.BatchesEmptied++
			nh := h
			nh.Attributes &^= batch.AttrDeleteHorizon
			out, err := batch.Build(c.outBuf[:0], nh, batch.None, nil)
			c.outBuf = out[:0]
			return out, true, err
		}
		c.stats.BatchesDropped++
		return nil, true, nil
	}
	// First clean to find the transaction empty: the horizon starts.
	c.kept, c.arena = c.kept[:0], c.arena[:0]
	err := batch.Records(h, b, maxDecompressedBytes, func(r *batch.Record) error {
		kr := *r
		n := len(c.arena)
		c.arena = append(c.arena, r.Headers...)
		kr.Headers = c.arena[n:len(c.arena):len(c.arena)]
		c.kept = append(c.kept, kr)
		return nil
	})
	if err != nil {
		return b, false, nil
	}
	hz, ok := c.rebase(h)
	if !ok {
		return b, false, nil
	}
	c.horizon = min(c.horizon, hz)
	nh := h
	nh.BaseTimestamp = hz
	nh.Attributes |= batch.AttrDeleteHorizon
	c.stats.BatchesRewritten++
	out, err := batch.Build(c.outBuf[:0], nh, h.Codec(), c.kept)
	c.outBuf = out[:0]
	return out, true, err
}

// planAborted collects the aborted transactions of the pinned segments
// that begin below end: the ones whose data a clean below end may meet.
func planAborted(segs []*segment, end int64) []AbortedTxn {
	var out []AbortedTxn
	for _, s := range segs {
		for _, a := range s.txn.entries.load() {
			if a.FirstOffset < end {
				out = append(out, a)
			}
		}
	}
	return out
}
