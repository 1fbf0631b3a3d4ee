package engine

import (
	"cmp"
	"slices"
)

// ActiveProducer is one producer's state on a partition as DescribeProducers
// reports it (KIP-664): Kafka's ProducerStateEntry seen from outside.
type ActiveProducer struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the sequence of the last record of the producer's
	// last batch at its current epoch, -1 when it wrote none at that
	// epoch (a marker at a bumped epoch, KIP-890, clears the batches).
	LastSequence int32
	// LastTimestamp is the max timestamp of its last batch, data or
	// marker, -1 when unknown.
	LastTimestamp int64
	// CoordinatorEpoch is that of the transaction coordinator that wrote
	// its last marker here, -1 before any.
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset of its open transaction on the
	// partition (Kafka's currentTxnFirstOffset), -1 when none is open.
	TxnStartOffset int64
}

// ActiveProducers returns the producers tp remembers, by producer id. The
// state belongs to the partition's shard, so the copy is made there,
// between two rounds (what a round has applied but not yet written is
// left out, as it could still be rolled back). Leaders and followers
// both keep the state (followers from the batches they copy); the caller
// decides which may answer.
func (e *Core) ActiveProducers(tp TP) ([]ActiveProducer, error) {
	p, err := e.partition(tp)
	if err != nil {
		return nil, err
	}
	var out []ActiveProducer
	err = p.shard.do(func() error {
		if err := p.offlineErr(); err != nil {
			return err
		}
		entries := p.producers.beforeRound()
		out = make([]ActiveProducer, 0, len(entries))
		for pid, pe := range entries {
			out = append(out, ActiveProducer{ProducerID: pid, ProducerEpoch: pe.epoch, LastSequence: pe.lastSeq(),
				LastTimestamp: pe.lastTimestamp, CoordinatorEpoch: pe.coordinatorEpoch, TxnStartOffset: pe.txnFirst})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ActiveProducer) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out, nil
}
