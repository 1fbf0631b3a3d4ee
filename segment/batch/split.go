package batch

import "fmt"

// Iter walks batches laid back to back: the records field of a produce
// request, a fetch response's records, or a region of a segment file. It
// frames batches by their headers (ParseHeader) and checks nothing else, so
// the caller validates each one with the mode that fits its origin. An Iter
// allocates nothing per batch: Batch returns a slice of the input.
//
//	it := batch.Split(records)
//	for it.Next() {
//		h, err := batch.Validate(it.Batch(), batch.Strict)
//		...
//	}
//	if err := it.Err(); err != nil { ... }
type Iter struct {
	b   []byte
	pos int
	cur []byte
	h   Header
	err error
}

// Split returns an Iter over the batches in b.
func Split(b []byte) Iter { return Iter{b: b} }

// Next advances to the next batch and reports whether there is one. It
// returns false at the end of the input, and on a batch that cannot be
// framed: a header that does not parse, or a batch that declares more bytes
// than remain (ErrShort). A trailing partial batch is thus an error, never
// silently dropped; Err tells which case ended the walk.
func (it *Iter) Next() bool {
	it.cur = nil
	if it.err != nil || it.pos >= len(it.b) {
		return false
	}
	rest := it.b[it.pos:]
	h, err := ParseHeader(rest)
	if err != nil {
		it.err = fmt.Errorf("batch at byte %d: %w", it.pos, err)
		return false
	}
	size := h.Size()
	if len(rest) < size {
		it.err = fmt.Errorf("batch at byte %d: %w: batch of %d bytes, %d present", it.pos, ErrShort, size, len(rest))
		return false
	}
	it.cur = rest[:size:size]
	it.h = h
	it.pos += size
	return true
}

// Batch returns the current batch, aliasing the input; the capacity is
// clipped so that appending to it cannot overwrite the next batch.
func (it *Iter) Batch() []byte { return it.cur }

// Header returns the header of the current batch, as ParseHeader decoded it.
func (it *Iter) Header() Header { return it.h }

// Pos is the position of the first byte not consumed: after a batch, the
// byte that follows it; once Next has failed, the start of the batch it
// could not frame, which is where recovery cuts a torn segment. (Recovery
// also validates each batch it passes, and cuts at Pos minus the batch's size
// when Validate rejects one.)
func (it *Iter) Pos() int { return it.pos }

// Err returns the error that ended the walk, or nil if it reached the end of
// the input.
func (it *Iter) Err() error { return it.err }

// WholePrefix returns the length of the longest prefix of b made of whole
// batches: b is a run of batches whose last one may be cut, as a read
// that a byte limit ended inside a batch is (KIP-74; Kafka's clients drop
// the partial batch, and a follower must append whole batches only).
//
// It frames by the length field as soon as the 12 bytes of LengthPrefix
// are there, so that a cut batch is told from a damaged one without its
// header: a batchLength below LengthMin is ErrLength, a batch that extends
// past the end of b is the cut (no error), and a whole batch must pass
// ParseHeader (ErrMagic, ErrLength). On an error, the whole batches before
// the one that cannot be framed are still counted. Like Split it checks
// nothing else (not the CRC, not the records) and allocates nothing.
func WholePrefix(b []byte) (int, error) {
	pos := 0
	for len(b)-pos >= LengthPrefix {
		rest := b[pos:]
		n := int64(int32(be.Uint32(rest[LengthPos:])))
		if n < LengthMin {
			return pos, fmt.Errorf("batch at byte %d: %w: batchLength %d below %d", pos, ErrLength, n, LengthMin)
		}
		if LengthPrefix+n > int64(len(rest)) {
			break // the cut batch
		}
		h, err := ParseHeader(rest)
		if err != nil {
			return pos, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		pos += h.Size()
	}
	return pos, nil
}
