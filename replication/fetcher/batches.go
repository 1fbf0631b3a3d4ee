package fetcher

import (
	"encoding/binary"
	"fmt"
)

// RecordBatch v2 framing, as far as trimming needs it:
//
//	offset  size  field
//	     0     8  baseOffset
//	     8     4  batchLength  (bytes after this field)
//	    12     4  partitionLeaderEpoch
//	    16     1  magic (2)
//	    17     4  crc
//	    21     2  attributes
//	    23     4  lastOffsetDelta
//	    27   ...  (timestamps, producer, count: 61 bytes in all), records
//
// A batch occupies 12 + batchLength bytes.
const (
	batchHeaderLen   = 61
	batchLengthMin   = batchHeaderLen - 12 // a batchLength below this cannot hold the header
	batchMagicOffset = 16
	batchMagic       = 2
)

// wholeBatches returns the longest prefix of data made of whole batches.
// Leaders cut the last batch of a partition when a byte limit falls inside
// it (clients drop the partial batch; Kafka does the same), and a follower
// must append whole batches only.
//
// It walks headers only: the CRC is the appender's to check. A header
// that cannot be a batch ends the walk with ErrCorruptBatch; the whole
// batches before it are still returned, so that a follower copies what
// is good and stops at the bad batch on its next fetch.
func wholeBatches(data []byte) (whole []byte, err error) {
	off := 0
	for len(data)-off >= 12 {
		n := int64(int32(binary.BigEndian.Uint32(data[off+8:])))
		if n < batchLengthMin {
			return data[:off:off], fmt.Errorf("%w: batch length %d at byte %d", ErrCorruptBatch, n, off)
		}
		if n+12 > int64(len(data)-off) {
			break // cut by the leader's byte limit
		}
		if m := data[off+batchMagicOffset]; m != batchMagic {
			return data[:off:off], fmt.Errorf("%w: magic %d at byte %d", ErrCorruptBatch, m, off)
		}
		off += int(n) + 12
	}
	// Capped: the bytes after the prefix are the next partition's records
	// in the same response buffer, and an append to the prefix must not
	// write over them.
	return data[:off:off], nil
}
