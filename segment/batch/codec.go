package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec is a compression codec, as numbered in bits 0 to 2 of a batch's
// attributes.
type Codec int8

// The codecs Kafka defines. zstd arrived with Kafka 2.1 (KIP-110); the other
// values, 5 to 7, are unassigned and make a batch invalid.
const (
	None   Codec = 0
	Gzip   Codec = 1
	Snappy Codec = 2
	LZ4    Codec = 3
	Zstd   Codec = 4
)

// String returns Kafka's name for the codec (compression.type).
func (c Codec) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("Codec(%d)", int8(c))
}

// Valid reports whether c is one of the five codecs Kafka defines.
func (c Codec) Valid() bool { return c >= None && c <= Zstd }

// Decompress returns the decompressed form of src, a records section
// compressed with c. It never returns more than limit bytes: a stream that
// inflates past limit fails with ErrTooLarge, having allocated little more
// than limit. A malformed stream fails with ErrDecompress. For None it
// returns src itself (no copy), still subject to limit. Safe for concurrent
// use.
func Decompress(c Codec, src []byte, limit int) ([]byte, error) {
	return decompressTo(c, nil, src, limit)
}

// decompressTo is Decompress writing into dst's memory when it is large
// enough (a pooled scratch buffer), allocating otherwise.
func decompressTo(c Codec, dst, src []byte, limit int) ([]byte, error) {
	limit = max(limit, 0)
	if !c.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrCodec, int8(c))
	}
	if c != None && len(src) == 0 {
		// No codec encodes anything, not even nothing, in zero bytes;
		// some decoders would still return an empty result.
		return nil, fmt.Errorf("%s: %w: empty input", c, ErrDecompress)
	}
	var out []byte
	var err error
	switch c {
	case None:
		if len(src) > limit {
			return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(src), limit)
		}
		return src, nil
	case Gzip:
		out, err = decompressGzip(dst, src, limit)
	case Snappy:
		out, err = decompressSnappy(dst, src, limit)
	case LZ4:
		out, err = decompressLZ4(dst, src, limit)
	case Zstd:
		out, err = decompressZstd(dst, src, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c, err)
	}
	return out, nil
}

// Compress appends the compressed form of src to dst and returns the
// extended slice. It writes what Kafka's clients write, so that every
// consumer can read a batch this broker rewrites (compaction): a gzip member,
// an LZ4 frame, a zstd frame, and for snappy a raw block (see
// compressSnappy). Safe for concurrent use.
func Compress(c Codec, dst, src []byte) ([]byte, error) {
	switch c {
	case None:
		return append(dst, src...), nil
	case Gzip:
		return compressGzip(dst, src)
	case Snappy:
		return compressSnappy(dst, src)
	case LZ4:
		return compressLZ4(dst, src)
	case Zstd:
		return zstdEncoder().EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: %d", ErrCodec, int8(c))
}

// appender is an io.Writer that appends to a slice, so that the streaming
// compressors write straight into the caller's dst.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// The decoders are other projects' code fed with bytes from the network.
// Should one of them panic on some input, that input must cost one produce
// request an error, not the broker its life. Each call into a decoder is
// therefore guarded by recoverDecoder, and only those calls: a panic in this
// package's own code still crashes the fuzz targets, which is how it gets
// found.

// recoverDecoder, deferred, turns a decoder's panic into an error.
func recoverDecoder(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("decoder panicked: %v", r)
	}
}

// guardedReader guards each Read of a streaming decoder.
type guardedReader struct{ r io.Reader }

func (g guardedReader) Read(p []byte) (n int, err error) {
	defer recoverDecoder(&err)
	return g.r.Read(p)
}

// readLimited reads r to its end into a buffer that starts at hint bytes
// and never grows past limit+1: one byte over the limit is enough to learn
// that the stream is too large. Growing by doubling costs a copy per step,
// but keeps the allocation proportional to what the stream really produces,
// whatever its headers claim.
func readLimited(r io.Reader, dst []byte, hint, limit int) ([]byte, error) {
	capMax := limit
	if capMax < math.MaxInt {
		capMax++
	}
	var buf []byte
	if want := min(max(hint, 512), capMax); cap(dst) >= want {
		buf = dst[:0:min(cap(dst), capMax)]
	} else {
		buf = make([]byte, 0, want)
	}
	stalls := 0
	for {
		if len(buf) == cap(buf) {
			if cap(buf) == capMax {
				return nil, fmt.Errorf("%w: output over the limit of %d bytes", ErrTooLarge, limit)
			}
			next := capMax
			if cap(buf) < capMax/2 {
				next = 2 * cap(buf)
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDecompress, err)
		}
		// A reader that returns nothing and no error forever would
		// otherwise hang the caller; bufio.Reader gives up the same way.
		if stalls = stalls + 1; n > 0 {
			stalls = 0
		} else if stalls > 100 {
			return nil, fmt.Errorf("%w: %w", ErrDecompress, io.ErrNoProgress)
		}
	}
	if len(buf) > limit {
		return nil, fmt.Errorf("%w: output over the limit of %d bytes", ErrTooLarge, limit)
	}
	return buf, nil
}

// Readers and writers keep tens of kilobytes of tables and windows each, so
// they are pooled rather than built per batch.
var (
	gzipReaders = sync.Pool{New: func() any { return new(gzip.Reader) }}
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	lz4Writers  = sync.Pool{New: func() any { return newLZ4Writer() }}
)

// deflateExpansionMax bounds how much deflate can inflate: a stream of
// maximal-length matches yields 258 bytes per 2 bits, about 1032 to 1.
const deflateExpansionMax = 1032

func decompressGzip(dst, src []byte, limit int) ([]byte, error) {
	zr := gzipReaders.Get().(*gzip.Reader)
	defer gzipReaders.Put(zr)
	// Reset reads the member header at once. Kafka's gzip is a single
	// member; a concatenation of members (Java's GZIPInputStream reads
	// those too) is read whole.
	if err := gzipReset(zr, src); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecompress, err)
	}
	// The trailer's ISIZE is the size of the last member modulo 2^32: a
	// good first guess for a single member, bounded by what deflate could
	// possibly produce from src in case it lies.
	hint := 0
	if len(src) >= 4 {
		hint = min(int(binary.LittleEndian.Uint32(src[len(src)-4:])), len(src)*deflateExpansionMax)
	}
	out, err := readLimited(guardedReader{zr}, dst, hint, limit)
	// Drop the reference to src so that the pool does not pin it.
	_ = gzipReset(zr, nil)
	return out, err
}

// gzipReset points zr at src and reads the member header, which is where
// the gzip reader first parses input.
func gzipReset(zr *gzip.Reader, src []byte) (err error) {
	defer recoverDecoder(&err)
	return zr.Reset(bytes.NewReader(src))
}

func compressGzip(dst, src []byte) ([]byte, error) {
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	a := &appender{b: dst}
	zw.Reset(a)
	if _, err := zw.Write(src); err != nil {
		return dst, fmt.Errorf("gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return dst, fmt.Errorf("gzip: %w", err)
	}
	zw.Reset(nil)
	return a.b, nil
}

// newLZ4Writer builds the LZ4 frame writer. 64 KiB blocks are what Kafka's
// Java producer writes (KafkaLZ4BlockOutputStream), and keep the buffers of
// every consumer that reads our rewritten batches small.
func newLZ4Writer() *lz4.Writer {
	zw := lz4.NewWriter(nil)
	// The options are constants known to be valid; Apply cannot fail.
	_ = zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb))
	return zw
}

func decompressLZ4(dst, src []byte, limit int) ([]byte, error) {
	zr := lz4Readers.Get().(*lz4.Reader)
	defer lz4Readers.Put(zr)
	zr.Reset(bytes.NewReader(src))
	out, err := readLimited(guardedReader{zr}, dst, 4*len(src), limit)
	zr.Reset(nil)
	return out, err
}

func compressLZ4(dst, src []byte) ([]byte, error) {
	zw := lz4Writers.Get().(*lz4.Writer)
	defer lz4Writers.Put(zw)
	a := &appender{b: dst}
	zw.Reset(a)
	if _, err := zw.Write(src); err != nil {
		return dst, fmt.Errorf("lz4: %w", err)
	}
	if err := zw.Close(); err != nil {
		return dst, fmt.Errorf("lz4: %w", err)
	}
	zw.Reset(nil)
	return a.b, nil
}

// zstdWindowMax is the largest zstd window accepted: 128 MiB, the default
// limit of the reference library (ZSTD_WINDOWLOG_LIMIT_DEFAULT = 27), which
// librdkafka and the Java client (zstd-jni) decode with. A larger window
// could not be read by those consumers anyway.
const zstdWindowMax = 1 << 27

// The zstd coder is shared by every goroutine. Its DecodeAll and EncodeAll
// are safe for concurrent use: each call borrows one of GOMAXPROCS internal
// block coders and waits for one when all are busy, so the number of zstd
// operations in flight, and their memory, stays bounded by the CPU count.
var (
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxWindow(zstdWindowMax),
			// DecodeAll then stops at cap(dst): the per-call limit.
			zstd.WithDecodeAllCapLimit(true),
		)
		if err != nil {
			// Only invalid options fail, and these are constants.
			panic(fmt.Sprintf("batch: zstd decoder options: %v", err))
		}
		return d
	})
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderConcurrency(0),
			// An empty input still yields a frame, which every
			// decoder accepts, rather than zero bytes.
			zstd.WithZeroFrames(true),
		)
		if err != nil {
			panic(fmt.Sprintf("batch: zstd encoder options: %v", err))
		}
		return e
	})
)

// zstdSlack is the margin by which a failed decoding attempt is judged. The
// shared decoder stops where dst's capacity ends, but when it runs out of
// room inside a compressed block it says so with the same error as for a
// corrupt block. A block yields at most 128 KiB, so an attempt that failed
// with more than zstdSlack of its room unused did not fail for want of room:
// the stream is corrupt. Conversely a failure within zstdSlack of the end of
// the last attempt, at limit, is reported as ErrTooLarge; a stream corrupt
// just there is refused either way.
const zstdSlack = 192 << 10

// decompressZstd decodes with the shared decoder into a buffer whose
// capacity bounds the output (WithDecodeAllCapLimit), since the decoder
// takes no per-call limit. The first attempt is sized from the frame's
// declared content size, or from a typical ratio when the frame does not
// declare one (Java's streaming encoder does not); an attempt that ran out of
// room is retried four times larger, up to limit. The allocation thus
// follows what the stream really produces rather than limit, and a stream
// that declares too much is refused before any decoding. The worst case, a
// stream without a declared size that inflates far past limit, allocates
// about three times limit in all: the decoder appends a raw or RLE block
// that does not fit before it checks the capacity, so each attempt can
// reallocate its buffer once.
func decompressZstd(dst, src []byte, limit int) ([]byte, error) {
	dec := zstdDecoder()
	attempt := min(max(8*len(src), 64<<10), limit)
	if fh, ok := zstdFrameHeader(src); ok && fh.HasFCS {
		if fh.FrameContentSize > uint64(limit) {
			return nil, fmt.Errorf("%w: frame declares %d bytes, limit %d", ErrTooLarge, fh.FrameContentSize, limit)
		}
		attempt = int(fh.FrameContentSize)
	}
	for {
		buf := dst[:0]
		if cap(buf) < attempt {
			buf = make([]byte, 0, attempt)
		}
		out, err := zstdDecodeAll(dec, src, buf)
		switch {
		case err == nil && len(out) <= limit:
			return out, nil
		case err == nil:
			return nil, fmt.Errorf("%w: output over the limit of %d bytes", ErrTooLarge, limit)
		case zstdCorrupt(err):
			return nil, fmt.Errorf("%w: %w", ErrDecompress, err)
		case !errors.Is(err, zstd.ErrDecoderSizeExceeded) && len(out) < attempt-zstdSlack:
			return nil, fmt.Errorf("%w: %w", ErrDecompress, err)
		case attempt >= limit:
			return nil, fmt.Errorf("%w: output over the limit of %d bytes", ErrTooLarge, limit)
		}
		attempt = min(max(4*attempt, 64<<10), limit)
	}
}

// zstdFrameHeader decodes the header of the first frame in src.
func zstdFrameHeader(src []byte) (fh zstd.Header, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return fh, fh.Decode(src) == nil
}

// zstdDecodeAll is the decoder's DecodeAll, guarded.
func zstdDecodeAll(dec *zstd.Decoder, src, dst []byte) (out []byte, err error) {
	defer recoverDecoder(&err)
	return dec.DecodeAll(src, dst)
}

// zstdCorrupt reports errors that only a malformed stream causes, never a
// full output buffer, so that decoding stops at once rather than retrying.
func zstdCorrupt(err error) bool {
	for _, e := range []error{
		zstd.ErrMagicMismatch, zstd.ErrReservedBlockType, zstd.ErrCompressedSizeTooBig,
		zstd.ErrBlockTooSmall, zstd.ErrUnexpectedBlockSize, zstd.ErrWindowSizeExceeded,
		zstd.ErrWindowSizeTooSmall, zstd.ErrUnknownDictionary, zstd.ErrFrameSizeExceeded,
		zstd.ErrFrameSizeMismatch, zstd.ErrCRCMismatch, io.ErrUnexpectedEOF,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
