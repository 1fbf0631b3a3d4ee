package fetcher

import (
	"fmt"

	"ringlog/segment/batch"
)

// wholeBatches returns the longest prefix of data made of whole batches.
// Leaders cut the last batch of a partition when a byte limit falls inside
// it (clients drop the partial batch; Kafka does the same), and a follower
// must append whole batches only. The framing is segment/batch's
// (WholePrefix).
//
// It walks headers only: the CRC is the appender's to check. A header
// that cannot be a batch ends the walk with ErrCorruptBatch; the whole
// batches before it are still returned, so that a follower copies what
// is good and stops at the bad batch on its next fetch.
func wholeBatches(data []byte) (whole []byte, err error) {
	n, err := batch.WholePrefix(data)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrCorruptBatch, err)
	}
	// Capped: the bytes after the prefix are the next partition's records
	// in the same response buffer, and an append to the prefix must not
	// write over them.
	return data[:n:n], err
}
