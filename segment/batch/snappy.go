package batch

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/klauspost/compress/snappy"
)

// Kafka's snappy comes in two shapes. The Java client writes snappy-java's
// stream format ("xerial"): an 8-byte magic, a 4-byte version and a 4-byte
// minimum compatible version, then blocks, each a raw snappy block behind
// its big-endian int32 length. franz-go and librdkafka may write one raw
// snappy block. Both are read, told apart by the magic, as every Kafka
// client does.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize  = 16
	xerialBlockPrefix = 4
)

// snappyExpansionMax bounds how much a standard snappy block can inflate:
// the densest element is a copy with a 2-byte offset, 3 bytes for up to 64
// bytes of output. A block that declares more than this from its size is
// corrupt, and is rejected before its output is allocated.
const snappyExpansionMax = 22

func decompressSnappy(dst, src []byte, limit int) ([]byte, error) {
	if bytes.HasPrefix(src, xerialMagic) {
		return decompressXerial(dst, src, limit)
	}
	return snappyBlock(dst[:0], src, limit)
}

// snappyBlock appends the decoding of one raw snappy block to dst, failing
// if dst would grow past limit bytes. It decodes with the strict standard
// decoder: the s2 extensions that klauspost's fast decoder also accepts are
// not snappy, and a batch that Java consumers could not read must not pass.
func snappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappyDecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecompress, err)
	}
	if n > limit-len(dst) {
		return nil, fmt.Errorf("%w: output of %d bytes, limit %d", ErrTooLarge, len(dst)+n, limit)
	}
	if n > len(block)*snappyExpansionMax {
		return nil, fmt.Errorf("%w: a block of %d bytes declares %d", ErrDecompress, len(block), n)
	}
	dst = growLimited(dst, n, limit)
	out, err := snappyDecode(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecompress, err)
	}
	if len(out) != n {
		return nil, fmt.Errorf("%w: block decoded to %d bytes, declared %d", ErrDecompress, len(out), n)
	}
	return dst[:len(dst)+n], nil
}

// snappyDecodedLen is snappy.DecodedLen, guarded (see recoverDecoder).
func snappyDecodedLen(block []byte) (n int, err error) {
	defer recoverDecoder(&err)
	return snappy.DecodedLen(block)
}

// snappyDecode is snappy.DecodeStrict, guarded.
func snappyDecode(dst, block []byte) (out []byte, err error) {
	defer recoverDecoder(&err)
	return snappy.DecodeStrict(dst, block)
}

// decompressXerial decodes snappy-java's stream format. The version fields
// are not checked: every version so far has the same block layout, and
// snappy-java itself only rejects a minimum version above its own.
func decompressXerial(dst, src []byte, limit int) ([]byte, error) {
	if len(src) < xerialHeaderSize {
		return nil, fmt.Errorf("%w: xerial header of %d bytes", ErrDecompress, len(src))
	}
	rest := src[xerialHeaderSize:]
	out := dst[:0]
	for len(rest) > 0 {
		if len(rest) < xerialBlockPrefix {
			return nil, fmt.Errorf("%w: xerial block length cut after %d bytes", ErrDecompress, len(rest))
		}
		n := int64(int32(be.Uint32(rest)))
		rest = rest[xerialBlockPrefix:]
		if n < 0 || n > int64(len(rest)) {
			return nil, fmt.Errorf("%w: xerial block of %d bytes, %d left", ErrDecompress, n, len(rest))
		}
		var err error
		if out, err = snappyBlock(out, rest[:n], limit); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	if out == nil {
		// A stream of no blocks is the empty records section.
		out = []byte{}
	}
	return out, nil
}

// scratch holds decompression buffers for CheckRecords, whose output is
// walked and dropped: reusing it saves an allocation and the zeroing of a
// fresh buffer per compressed batch, which measured as a third of the
// broker's produce CPU with snappy batches.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// scratchKeepMax bounds the buffers the pool keeps, so that one huge batch
// does not pin its buffer forever.
const scratchKeepMax = 4 << 20

func getScratch() *[]byte { return scratch.Get().(*[]byte) }

func putScratch(bp *[]byte, used []byte) {
	if cap(used) > cap(*bp) && cap(used) <= scratchKeepMax {
		*bp = used[:0]
	}
	scratch.Put(bp)
}

// growLimited returns b with room for n more bytes, growing by doubling as
// append would, but never to a capacity over limit, so that a stream that
// ends just under its limit does not leave a buffer twice that size behind.
func growLimited(b []byte, n, limit int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	c := min(max(2*cap(b), len(b)+n), max(limit, len(b)+n))
	grown := make([]byte, len(b), c)
	copy(grown, b)
	return grown
}

// compressSnappy writes one raw snappy block, as franz-go and librdkafka do,
// rather than the xerial framing of the Java client. Every consumer reads it:
// snappy-java's SnappyInputStream falls back to a raw block when the magic is
// absent, and the other clients try both. A raw block is also smaller (no
// 16-byte header, no per-block lengths) and a batch is always compressed
// whole, so the framing's one advantage, streaming, buys nothing here.
func compressSnappy(dst, src []byte) ([]byte, error) {
	n := snappy.MaxEncodedLen(len(src))
	if n < 0 {
		return dst, fmt.Errorf("%w: %d bytes is over snappy's block limit", ErrTooLarge, len(src))
	}
	start := len(dst)
	dst = growLimited(dst, n, start+n)
	out := snappy.Encode(dst[start:start+n], src)
	return dst[:start+len(out)], nil
}
