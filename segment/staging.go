package segment

import (
	"errors"

	"ringlog/ioring"
	"ringlog/segment/batch"
)

// Staging is an append being assembled (Log.Stage, Staging.Add,
// Log.PrepareStaged). On a log with direct writes each batch is copied, as
// it is added, into the staging buffer the write goes out of, and checked
// right behind the copy: the CRC is summed a chunk at a time over what the
// copy just read, and the walk of the records reads the batch the copy
// left in the processor's caches (the copy's stores go around them:
// batch.CopySum). Checked before the copy (a produce request of megabytes,
// read from the socket well before), the CRC and the walk read the batch
// from memory again: measured on issue 13's produce load they took 23% of
// the broker's CPU, against 11% checked behind the copy (ARCHITECTURE.md,
// "Checked in the stage"). On a log that writes through the page cache the
// batches stay where they are and are checked there.
type Staging struct {
	// size bounds the bytes of the batches added.
	size int64
	// buf is the staging buffer of a direct write (nil: the batches stay
	// in the caller's memory): lead bytes of the segment's last partial
	// block, then the batches up to n.
	buf     []byte
	lead, n int
	batches [][]byte
}

// ErrStagingFull is returned by Staging.Add for a batch past the size the
// staging was made for.
var ErrStagingFull = errors.New("segment: staging full")

// Stage starts an append of at most size bytes of batches to the log's
// active segment (owner only). It is given to PrepareStaged, or let go
// with Release.
func (l *Log) Stage(size int64) (*Staging, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	d, err := l.directSeg(l.active)
	if err != nil {
		return nil, err
	}
	st := &Staging{size: size}
	if d != nil {
		// Room for the batches behind a partial block of up to align
		// bytes, and the padding to the block's end.
		st.buf = ioring.Stage((size+2*d.align-1)/d.align*d.align, l.dio.memAlign)
		st.lay(d.partial)
	}
	return st, nil
}

// lay puts partial in front of the batches in the staging buffer, moving
// them when its length changed (the segment rolled after the staging
// began: the new one has no partial block).
func (st *Staging) lay(partial []byte) {
	if len(partial) != st.lead {
		n := len(partial) + copy(st.buf[len(partial):], st.buf[st.lead:st.n])
		at := len(partial)
		for i, b := range st.batches {
			st.batches[i] = st.buf[at : at+len(b) : at+len(b)]
			at += len(b)
		}
		st.lead, st.n = len(partial), n
	}
	copy(st.buf, partial)
}

// Add takes b as the next batch: it is copied into the staging buffer of a
// direct write, and check (when not nil) is run on b, byte for byte what
// the log will write, with its batch.Checksum (summed as it was copied, by
// batch.CopySum); when it fails, b is not taken and check's error is
// returned. Add returns the bytes the log will write (the copy's).
func (st *Staging) Add(b []byte, check func(b []byte, sum uint32) error) ([]byte, error) {
	if st.Bytes()+int64(len(b)) > st.size {
		return nil, ErrStagingFull
	}
	var sum uint32
	out := b // what the log writes: b, or its copy in the staging buffer
	switch {
	case st.buf != nil && check != nil:
		out = st.buf[st.n : st.n+len(b) : st.n+len(b)]
		_, sum = batch.CopySum(out, b)
	case st.buf != nil:
		out = st.buf[st.n : st.n+copy(st.buf[st.n:], b) : st.n+len(b)]
	case check != nil:
		sum = batch.Checksum(b)
	}
	if check != nil {
		// The batch as given, not its copy: CopySum left it in the
		// caches and wrote the copy around them.
		if err := check(b, sum); err != nil {
			return nil, err
		}
	}
	st.n += len(out)
	st.batches = append(st.batches, out)
	return out, nil
}

// Len is the number of batches taken.
func (st *Staging) Len() int { return len(st.batches) }

// Bytes is the size of the batches taken.
func (st *Staging) Bytes() int64 {
	if st.buf != nil {
		return int64(st.n - st.lead)
	}
	return int64(st.n)
}

// Truncate drops the batches taken after the first k.
func (st *Staging) Truncate(k int) {
	for _, b := range st.batches[k:] {
		st.n -= len(b)
	}
	clear(st.batches[k:])
	st.batches = st.batches[:k]
}

// Release gives back the staging buffer of a staging that is not passed to
// PrepareStaged.
func (st *Staging) Release() {
	if st.buf != nil {
		ioring.Unstage(st.buf)
		st.buf = nil
	}
}
