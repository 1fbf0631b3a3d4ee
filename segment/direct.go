package segment

import (
	"fmt"
	"io"
	"os"

	"ringlog/ioring"
)

// Direct writes (Options.DirectWrites): the active segment's appends go to
// the file with O_DIRECT, from a staging buffer of the log's, instead of
// being copied into the page cache.
//
// Why: a buffered append pays the kernel's copy into page-cache pages it
// allocates for the file, and on a virtual machine whose freed memory is
// handed back to the host (free page reporting) each of those pages is
// also a fault in the host: measured on the machine kind the suite runs on,
// 0.37 to 3.3 s of CPU per GB written into a new file, against 0.08 s/GB
// for the same writes over pages already cached, and 0.2 s/GB for 64 KiB
// direct writes into preallocated blocks through io_uring (ARCHITECTURE.md,
// "Direct writes"). A direct write is also one the kernel completes without
// an io-wq worker, where ext4 hands every buffered io_uring write to one.
//
// How, and what it keeps of the buffered path's contract:
//   - The file's layout is the same: batches back to back from 0; readers
//     read it through the page cache as before (Read, sendfile), below the
//     published size only. The kernel keeps the page cache coherent with
//     direct writes (it drops the cached pages a direct write covers,
//     before and after the write). The kernel's readahead is off on the
//     active segment's file while it runs ahead of its data
//     (POSIX_FADV_RANDOM): it would fill the page cache with the reserved
//     zeros, up to read_ahead_kb past each read (8 MiB here); a read
//     brings in what it asks for.
//   - A direct write covers whole blocks of the file system's direct I/O
//     alignment (statx STATX_DIOALIGN): an append writes from the start of
//     the block holding the segment's end, so the bytes of that block
//     already written (kept in memory: partial) are written again,
//     unchanged, then the batches, then zeros to the block's end. The
//     zeros are overwritten by the next append; the published size never
//     counts them.
//   - An append is answered once its write completed: the data is then in
//     the device's hands, not in memory the process would lose with it (a
//     SIGKILL loses nothing acknowledged, as with the page cache).
//     FlushAlways links an fdatasync to the write as before.
//   - Blocks are reserved ahead of the writes (fallocate in steps of
//     directPrealloc, never past segment.bytes unless one append is larger),
//     so that no direct write extends the file: ext4 completes such a write
//     in the ring, where an extending one takes the inode's lock
//     exclusively and is handed to a worker. The file's size thus runs
//     ahead of the data: a rolled segment is cut to its data before its
//     sync, the active one at a clean shutdown, and after a crash recovery
//     cuts the zeros as it cuts any torn tail (a batch of length 0 with
//     nothing valid after it).
//   - A file system without direct I/O (tmpfs, FUSE) leaves the log on
//     buffered writes; DirectWritesOff says why.

// directPrealloc is how far ahead of a direct write blocks are reserved.
const directPrealloc = 8 << 20

// segDirect is the direct-write state of an active segment, made at its
// first direct append.
type segDirect struct {
	f     *os.File // the segment's .log opened with O_DIRECT, write only
	align int64    // offsets and lengths of direct writes are multiples of it
	// allocated is the file's size: blocks reserved up to it.
	allocated int64
	// partial holds the segment's bytes from the last multiple of align
	// at or below written up to written (fewer than align); partialOK says
	// it matches the file (false after a truncation or a failed write:
	// read it again).
	partial   []byte
	partialOK bool
}

// directState is a log's direct-write state.
type directState struct {
	// off says why the log writes through the page cache although
	// Options.DirectWrites asked otherwise; "" while direct writes are on.
	off      string
	memAlign int64
}

// DirectWritesOff is "" when the log's appends are direct writes or
// Options.DirectWrites is off, else why the log fell back to buffered
// writes (owner only).
func (l *Log) DirectWritesOff() string { return l.dio.off }

// directSeg returns s's direct-write state, opened at the segment's
// first direct append with its last partial block read back when it is not
// known, or nil when the log writes through the page cache.
func (l *Log) directSeg(s *segment) (*segDirect, error) {
	if !l.opts.DirectWrites || l.dio.off != "" {
		return nil, nil
	}
	d := s.direct
	if d == nil {
		f, align, memAlign, why, err := openDirect(s.path(logSuffix))
		if err != nil {
			return nil, fmt.Errorf("segment: open %s for direct writes: %w", s.path(logSuffix), err)
		}
		if why != "" {
			l.dio.off = why
			return nil, nil
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if err := adviseRandom(s.log, true); err != nil {
			f.Close()
			return nil, fmt.Errorf("segment: advise %s: %w", s.path(logSuffix), err)
		}
		d = &segDirect{f: f, align: align, allocated: fi.Size()}
		s.direct = d
		s.noReadahead.Store(true)
		l.dio.memAlign = max(l.dio.memAlign, memAlign)
	}
	if !d.partialOK {
		from := s.written / d.align * d.align
		d.partial = append(d.partial[:0], make([]byte, s.written-from)...)
		if _, err := s.log.ReadAt(d.partial, from); err != nil && err != io.EOF {
			return nil, fmt.Errorf("segment: read the last block of %s: %w", s.path(logSuffix), err)
		}
		d.partialOK = true
	}
	return d, nil
}

// directWrite returns the op that appends st's batches to s (direct state
// d) with a direct write: from the start of the block holding s's end, the
// bytes of that block already written, the batches, zeros to the block's
// end. It reserves blocks ahead of the write. st has a staging buffer:
// Stage found the log writing directly, and a log whose direct writes went
// off never takes them up again.
func (l *Log) directWrite(s *segment, d *segDirect, st *Staging) (ioring.Op, error) {
	st.lay(d.partial)
	start := s.written - int64(len(d.partial))
	padded := (int64(st.n) + d.align - 1) / d.align * d.align
	stage := st.buf[:padded]
	clear(stage[st.n:])
	if end := start + padded; end > d.allocated {
		limit := max(end, (l.cfg.SegmentBytes+d.align-1)/d.align*d.align)
		target := max(min(end+directPrealloc, limit), end)
		if err := reserve(s.log, d.allocated, target-d.allocated); err != nil {
			return ioring.Op{}, fmt.Errorf("segment: reserve blocks of %s: %w", s.path(logSuffix), err)
		}
		d.allocated = target
	}
	return ioring.Op{Kind: ioring.OpWrite, File: d.f, Offset: start, Bufs: [][]byte{stage}, Direct: true}, nil
}

// done records a direct append that completed: the segment now ends at
// end, and the bytes of its last partial block are kept for the next
// write. w is the write op.
func (d *segDirect) done(w *ioring.Op, end int64) {
	from := end / d.align * d.align
	stage := w.Bufs[0]
	d.partial = append(d.partial[:0], stage[from-w.Offset:end-w.Offset]...)
	d.partialOK = true
}

// trimmed records that the file was cut to size: the blocks reserved past
// it are gone and the last partial block is read again at the next write.
func (d *segDirect) trimmed(size int64) {
	d.allocated = size
	d.partialOK = false
}

// trimDirect cuts the blocks reserved past s's data and closes its direct
// file: s is no longer written (a roll, a clean shutdown). The caller
// syncs s.log afterwards, which makes the size durable.
func (s *segment) trimDirect() error {
	d := s.direct
	if d == nil {
		return nil
	}
	s.direct = nil
	s.cache.drop()
	var err error
	if d.allocated > s.written {
		err = s.log.Truncate(s.written)
	}
	s.noReadahead.Store(false)
	if aerr := adviseRandom(s.log, false); err == nil {
		err = aerr
	}
	if cerr := d.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ProbeDirect tells whether logs in dir can be written with direct I/O
// (Options.DirectWrites): "" when they can, else why not. It creates and
// removes a file there.
func ProbeDirect(dir string) string {
	f, err := os.CreateTemp(dir, "direct-probe-*"+tmpSuffix)
	if err != nil {
		return err.Error()
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	df, _, _, why, err := openDirect(name)
	if err != nil {
		return err.Error()
	}
	if why != "" {
		return why
	}
	df.Close()
	return ""
}
