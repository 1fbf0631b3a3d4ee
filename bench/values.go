package bench

import (
	"math/rand/v2"
	"time"
)

// Record values are cut from a corpus of pseudo-words (seeded, so every run
// and every peer gets the same bytes): text-like data that zstd compresses
// to roughly a third, as real payloads often do, rather than constant bytes
// that any codec erases or random bytes that none can touch. The corpus
// holds no newline, so the same values serve kcat, which reads one record
// per line.
type values struct {
	corpus []byte
	base   time.Time // stamps count from here (monotonic clock)
}

const corpusBytes = 1 << 20

func newValues() *values {
	r := rand.New(rand.NewPCG(6, 2026))
	words := make([][]byte, 512)
	for i := range words {
		w := make([]byte, 2+r.IntN(9))
		for j := range w {
			w[j] = byte('a' + r.IntN(26))
		}
		words[i] = w
	}
	c := make([]byte, 0, corpusBytes+16)
	for len(c) < corpusBytes {
		c = append(c, words[r.IntN(len(words))]...)
		c = append(c, ' ')
	}
	return &values{corpus: c[:corpusBytes], base: time.Now()}
}

// stampLen is the size of the time stamp at the start of every value.
const stampLen = 16

// now is the current time as a stamp: nanoseconds since v.base.
func (v *values) now() int64 { return int64(time.Since(v.base)) }

// make returns a new value of size bytes (at least stampLen) for record
// seq, stamped with at: the time the record was planned to be sent (open
// loop) or was sent (closed loop). A new slice per record, as an
// application hands its client: the client may hold it until acknowledged.
func (v *values) make(seq int64, size int, at int64) []byte {
	b := make([]byte, size)
	off := int((seq * 7919) % int64(len(v.corpus)-size))
	copy(b, v.corpus[off:off+size])
	putStamp(b, at)
	return b
}

// line is value seq without a stamp, for kcat's input files.
func (v *values) line(seq int64, size int) []byte {
	off := int((seq * 7919) % int64(len(v.corpus)-size))
	return v.corpus[off : off+size]
}

const hexDigits = "0123456789abcdef"

// putStamp writes at as 16 hex digits: printable, so that a value stays a
// valid kcat line.
func putStamp(b []byte, at int64) {
	u := uint64(at)
	for i := stampLen - 1; i >= 0; i-- {
		b[i] = hexDigits[u&15]
		u >>= 4
	}
}

// stamp reads the time stamp of a value; ok is false when there is none.
func stamp(b []byte) (int64, bool) {
	if len(b) < stampLen {
		return 0, false
	}
	var u uint64
	for _, c := range b[:stampLen] {
		switch {
		case c >= '0' && c <= '9':
			u = u<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			u = u<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return int64(u), true
}
