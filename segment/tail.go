package segment

// The tail cache of a direct-written segment (Options.DirectWrites): the
// batches of its latest appends, kept in the staging buffers they were
// written from, so that a reader at the log's end (a consumer keeping up,
// a follower) gets them from memory instead of reading the disk. Direct
// writes leave nothing in the page cache; without it each such fetch read
// the disk in the network loop's sendfile, and the end-to-end bench's
// consumers fell behind the producers (ARCHITECTURE.md, "Direct writes").
//
// The cache is a correctness-free addition: a chunk holds bytes the file
// also holds (published only after their write completed), and readers
// fall back to the file for whatever no chunk covers or they could not
// pin. A chunk is never written after it is published. Its staging buffer
// goes back to the pool (for a later append) only once the cache dropped
// it and the last reader released it (stageBuf's count; a reader that
// finds it at zero reads the file instead): without that reuse every
// append allocated a new buffer, and the garbage collector's churn took
// back a part of what direct writes saved (400 MB from 2 kgo producers:
// 51 and 60 ticks of broker CPU against 40 to 58 uncached, peak RSS 337
// and 399 MiB against 193 to 284; pinned and reused, 55 and 57 ticks,
// 308 and 341 MiB).

import (
	"sync/atomic"

	"ringlog/segment/batch"
)

// stageBuf is a staging buffer held by a tail cache; refs counts the
// cache's reference and the readers'.
type stageBuf struct {
	b    []byte
	refs pins
}

// acquire pins the buffer for a reader; false when it went back to the
// pool.
func (sb *stageBuf) acquire() bool { return sb.refs.tryAcquire() }

// release drops a reference; the last one gives the buffer back.
func (sb *stageBuf) release() {
	if sb.refs.drop() {
		putStage(sb.b)
	}
}

// tailCacheBytes bounds a segment's tail cache: the memory its chunks hold
// (their buffers' capacities).
const tailCacheBytes = 2 << 20

// tailChunk is the bytes of [pos, pos+len(data)) of the segment's file.
type tailChunk struct {
	pos  int64
	data []byte
	mem  int64     // what the chunk's buffer holds in memory
	buf  *stageBuf // the staging buffer data lies in; nil for a copy
}

// tailChunks is an immutable list of contiguous chunks, oldest first.
type tailChunks struct {
	chunks []tailChunk
	mem    int64
}

// tailCache is published for readers; the writer replaces it.
type tailCache struct{ p atomic.Pointer[tailChunks] }

// add appends a chunk for [pos, pos+len(data)), which must follow the last
// one (else the cache starts over from it), and drops the oldest chunks
// beyond tailCacheBytes. buf is the staging buffer data lies in. It
// reports whether buf is kept (the caller must not give it back then).
func (c *tailCache) add(pos int64, data, buf []byte) bool {
	ch := tailChunk{pos: pos, data: data, mem: int64(cap(buf))}
	if int64(len(data))*4 < ch.mem {
		// A small append in a large buffer: keep a copy of its size.
		ch.data = append([]byte(nil), data...)
		ch.mem = int64(cap(ch.data))
	} else {
		ch.buf = &stageBuf{b: buf}
		ch.buf.refs.n.Store(1)
	}
	old := c.p.Load()
	var keep, dropped []tailChunk
	var total int64
	if old != nil && len(old.chunks) > 0 {
		last := old.chunks[len(old.chunks)-1]
		if last.pos+int64(len(last.data)) == pos {
			keep, total = old.chunks, old.mem
		} else {
			dropped = old.chunks
		}
	}
	for len(keep) > 0 && total+ch.mem > tailCacheBytes {
		total -= keep[0].mem
		dropped = append(dropped, keep[0])
		keep = keep[1:]
	}
	chunks := make([]tailChunk, 0, len(keep)+1)
	chunks = append(append(chunks, keep...), ch)
	c.p.Store(&tailChunks{chunks: chunks, mem: total + ch.mem})
	releaseChunks(dropped)
	return ch.buf != nil
}

// header reads the batch header at pos from the chunk holding it whole,
// pinned while it is read; false when no chunk does (or it went back to
// the pool meanwhile). A nil list holds nothing.
func (tc *tailChunks) header(pos int64) (batch.Header, bool) {
	if tc == nil {
		return batch.Header{}, false
	}
	for _, c := range tc.chunks {
		if pos < c.pos || pos+batch.HeaderSize > c.pos+int64(len(c.data)) {
			continue
		}
		if c.buf != nil {
			if !c.buf.acquire() {
				return batch.Header{}, false
			}
			defer c.buf.release()
		}
		h, err := batch.ParseHeader(c.data[pos-c.pos : pos-c.pos+batch.HeaderSize])
		return h, err == nil
	}
	return batch.Header{}, false
}

// releaseChunks drops the cache's references to chunks it no longer lists.
func releaseChunks(chunks []tailChunk) {
	for _, c := range chunks {
		if c.buf != nil {
			c.buf.release()
		}
	}
}

// drop empties the cache (a truncation, a roll's cut).
func (c *tailCache) drop() {
	if old := c.p.Swap(nil); old != nil {
		releaseChunks(old.chunks)
	}
}

// regions appends to res the regions of [pos, pos+n) of s: from the tail
// cache where its chunks cover the range from some point to its end (each
// chunk pinned until res is released), from the file before that, and
// from the file altogether when a chunk went back to the pool meanwhile.
func (s *segment) regions(res *ReadResult, pos, n int64) {
	end := pos + n
	filePart := end
	var cached []tailChunk
	if tc := s.cache.p.Load(); tc != nil && len(tc.chunks) > 0 {
		first := tc.chunks[0].pos
		last := tc.chunks[len(tc.chunks)-1]
		if last.pos+int64(len(last.data)) >= end && first < end {
			filePart = max(pos, first)
			cached = tc.chunks
		}
	}
	var mem []Region
	var pinned []*stageBuf
	for _, c := range cached {
		cEnd := c.pos + int64(len(c.data))
		from, to := max(filePart, c.pos), min(end, cEnd)
		if from >= to {
			continue
		}
		if c.buf != nil {
			if !c.buf.acquire() {
				for _, b := range pinned {
					b.release()
				}
				mem, pinned, filePart = nil, nil, end
				break
			}
			pinned = append(pinned, c.buf)
		}
		mem = append(mem, Region{Pos: from, Len: to - from, Mem: c.data[from-c.pos : to-c.pos : to-c.pos]})
	}
	if filePart > pos {
		if s.noReadahead.Load() {
			// Without the kernel's readahead, sendfile would bring the
			// region in a pipe's worth (64 KiB) at a time, each read
			// waited for: ask for all of it at once.
			willNeed(s.log, pos, filePart-pos)
		}
		res.Regions = append(res.Regions, Region{File: s.log, Pos: pos, Len: filePart - pos})
	}
	res.Regions = append(res.Regions, mem...)
	res.pinned = append(res.pinned, pinned...)
}
