package batch

import (
	"fmt"
	"hash/crc32"
	"sync"
)

// The rewrites a broker makes to a batch before appending it, in place.
// baseOffset and partitionLeaderEpoch lie before the CRC's range, which is
// why Kafka put them there: assigning offsets and stamping the leader epoch
// costs no CRC work. maxTimestamp and the attributes lie inside it.

// SetBaseOffset writes off into the baseOffset field of the batch that starts
// b: the offset assignment of an append. It fails only when b is shorter
// than a header.
func SetBaseOffset(b []byte, off int64) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("%w: %d bytes, a header needs %d", ErrShort, len(b), HeaderSize)
	}
	be.PutUint64(b[BaseOffsetPos:], uint64(off))
	return nil
}

// SetPartitionLeaderEpoch writes epoch into the partitionLeaderEpoch field
// of the batch that starts b. The leader stamps every batch it appends with
// its epoch; followers and KIP-101 truncation rely on it. It fails only when
// b is shorter than a header.
func SetPartitionLeaderEpoch(b []byte, epoch int32) error {
	if len(b) < HeaderSize {
		return fmt.Errorf("%w: %d bytes, a header needs %d", ErrShort, len(b), HeaderSize)
	}
	be.PutUint32(b[PartitionLeaderEpochPos:], uint32(epoch))
	return nil
}

// SetMaxTimestamp writes ts into maxTimestamp, sets the timestamp type to
// LogAppendTime if logAppendTime and to CreateTime otherwise, and updates the
// CRC, as Kafka's DefaultRecordBatch.setMaxTimestamp does. A broker calls it
// with the append time for a topic whose message.timestamp.type is
// LogAppendTime, and with MaxRecordTimestamp for a CreateTime topic. When
// neither field changes, b is left as it is.
//
// b must be exactly one batch. The CRC is updated, not recomputed: the change
// that the new fields make to the CRC is computed from those fields alone and
// folded into the stored value. That costs the same for any batch size, and
// it keeps a batch that was corrupt before the call corrupt after it, instead
// of sealing its damage under a fresh, valid CRC.
func SetMaxTimestamp(b []byte, ts int64, logAppendTime bool) error {
	h, err := ParseHeader(b)
	if err != nil {
		return err
	}
	if size := h.Size(); len(b) < size {
		return fmt.Errorf("%w: batch of %d bytes, %d present", ErrShort, size, len(b))
	} else if len(b) > size {
		return fmt.Errorf("%w: %d bytes after a batch of %d", ErrLength, len(b)-size, size)
	}
	attrs := h.Attributes &^ AttrLogAppendTime
	if logAppendTime {
		attrs |= AttrLogAppendTime
	}
	if attrs == h.Attributes && ts == h.MaxTimestamp {
		return nil
	}

	// The changed fields sit in [AttributesPos, ProducerIDPos). XOR the
	// old bytes of that window with the new to get the difference.
	const window = ProducerIDPos - AttributesPos
	var diff [window]byte
	copy(diff[:], b[AttributesPos:ProducerIDPos])
	be.PutUint16(b[AttributesPos:], uint16(attrs))
	be.PutUint64(b[MaxTimestampPos:], uint64(ts))
	for i, v := range b[AttributesPos:ProducerIDPos] {
		diff[i] ^= v
	}
	crc := h.CRC ^ crcShift(crcLinear(diff[:]), len(b)-ProducerIDPos)
	be.PutUint32(b[CRCPos:], crc)
	return nil
}

// CRC-32C is linear over GF(2): for two messages of the same length,
// CRC(a) ^ CRC(b) = L(a ^ b), where L is the CRC without the initial and
// final inversions. A difference confined to the first bytes of the range,
// followed by n zero bytes, has L equal to the L of those first bytes
// multiplied by x^(8n) modulo the polynomial. This is zlib's crc32_combine
// arithmetic, for the Castagnoli polynomial.

// castagnoliReversed is crc32.Castagnoli; bit 31 holds the coefficient of
// x^0, as in every reflected CRC.
const castagnoliReversed = crc32.Castagnoli

// crcLinear returns L(p): the CRC-32C of p from a zero state, without the
// final inversion. crc32.Update inverts on entry and on exit, so starting it
// from all ones and inverting its result cancels both.
func crcLinear(p []byte) uint32 {
	return ^crc32.Update(^uint32(0), castagnoli, p)
}

// multModP multiplies two polynomials modulo the Castagnoli polynomial, in
// the reflected representation. It runs one step per bit of a, without
// branches on the data, and stops when a has no bits left.
func multModP(a, b uint32) uint32 {
	var p uint32
	for ; a != 0; a <<= 1 {
		p ^= b & -(a >> 31)
		b = b>>1 ^ castagnoliReversed&-(b&1)
	}
	return p
}

// x2nModP holds x^(2^k) modulo the polynomial for k = 0..63: enough for any
// shift of less than 2^61 bytes, so no assumption about the period of the
// sequence is needed.
var x2nModP = func() [64]uint32 {
	var t [64]uint32
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = multModP(t[k-1], t[k-1])
	}
	return t
}()

// shiftTable holds x^(8 * j * 256^i) modulo the polynomial for i = 0..3 and
// j = 0..255: the shift over j * 256^i zero bytes. Splitting n into its four
// bytes turns a shift over n < 2^32 zero bytes into at most four
// multiplications, against about log2(n) with x2nModP alone. The table is
// 4 KiB, built on first use.
var shiftTable = sync.OnceValue(func() *[4][256]uint32 {
	t := new([4][256]uint32)
	for i := range t {
		t[i][0] = 1 << 31        // x^0
		t[i][1] = x2nModP[3+8*i] // x^(8 * 256^i)
		for j := 2; j < len(t[i]); j++ {
			t[i][j] = multModP(t[i][j-1], t[i][1])
		}
	}
	return t
})

// crcShift returns the linear CRC state c advanced over n zero bytes:
// c * x^(8n) modulo the polynomial.
func crcShift(c uint32, n int) uint32 {
	t := shiftTable()
	for i := 0; n > 0 && i < len(t); i, n = i+1, n>>8 {
		if j := n & 0xff; j != 0 {
			c = multModP(t[i][j], c)
		}
	}
	// Batches stay far below 2^32 bytes (SizeMax); the general case is
	// kept for correctness, one bit of n at a time.
	for k := 3 + 32; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			c = multModP(x2nModP[k], c)
		}
	}
	return c
}
