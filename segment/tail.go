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
	"sync"
	"sync/atomic"
	"time"

	"ringlog/ioring"
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
		ioring.Unstage(sb.b)
	}
}

// tailCacheBytes bounds a segment's tail cache: the memory its chunks hold
// (their buffers' capacities).
const tailCacheBytes = 2 << 20

// TailBudget bounds the memory of the tail caches of the logs that share
// it (Options.TailBudget; an engine's partitions share one). Each cache
// that holds something may hold its share, Bytes divided by the number
// of such caches and at most 2 MiB; an append whose chunk is larger than
// the share is not cached (its readers read the file). When the caches
// together hold more than Bytes (shares shrink as caches join, and an
// idle cache does not append to shrink itself), the append that found it
// so trims the caches above their share, oldest chunks first. So the
// total stays within Bytes but for the appends in between. Without a
// budget (nil) each cache holds up to 2 MiB.
type TailBudget struct {
	// Bytes is the memory the caches may hold together.
	Bytes int64
	held  atomic.Int64 // what the caches hold together
	mu    sync.Mutex
	// caches are the caches counted in the shares: those that held
	// something since they were last dropped.
	caches map[*tailCache]struct{}
	n      atomic.Int64 // len(caches)
}

// share is what one cache may hold now; joining counts the cache asking
// among those that share.
func (b *TailBudget) share(joining bool) int64 {
	if b == nil {
		return tailCacheBytes
	}
	n := b.n.Load()
	if joining {
		n++
	}
	return min(tailCacheBytes, b.Bytes/max(n, 1))
}

// Held is the memory the caches sharing b hold now.
func (b *TailBudget) Held() int64 {
	if b == nil {
		return 0
	}
	return b.held.Load()
}

func (b *TailBudget) join(c *tailCache) {
	b.mu.Lock()
	if b.caches == nil {
		b.caches = map[*tailCache]struct{}{}
	}
	b.caches[c] = struct{}{}
	b.n.Store(int64(len(b.caches)))
	b.mu.Unlock()
}

func (b *TailBudget) leave(c *tailCache) {
	b.mu.Lock()
	delete(b.caches, c)
	b.n.Store(int64(len(b.caches)))
	b.mu.Unlock()
}

// reclaim trims every cache above its share while the caches hold more
// than Bytes.
func (b *TailBudget) reclaim() {
	if b.held.Load() <= b.Bytes {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	share := b.share(false)
	for c := range b.caches {
		c.trim(b, share)
		if b.held.Load() <= b.Bytes {
			return
		}
	}
}

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

// tailCache is published for readers; the writer replaces it, and a
// budget's reclaim may trim it, each by compare-and-swap. budget is the
// budget the cache is counted in (nil: none, or not counted), written by
// the writer only.
type tailCache struct {
	p      atomic.Pointer[tailChunks]
	budget *TailBudget
}

// maxTailChunks bounds a cache's list, which every append copies: many
// small appends (markers, small batches) made it long, each append
// copying thousands of entries.
const maxTailChunks = 64

// tailCopyBytes is the capacity of the buffer a small append that follows
// another is copied into; the small appends after it are copied after it
// in the same buffer while it has room, one chunk for all of them.
const tailCopyBytes = 16 << 10

// add appends a chunk for [pos, pos+len(data)), which must follow the last
// one (else the cache starts over from it), and drops the oldest chunks
// beyond the cache's share of budget (TailBudget; nil: 2 MiB) or beyond
// maxTailChunks. buf is the staging buffer data lies in. It reports
// whether buf is kept (the caller must not give it back then).
//
// A small append (a quarter of its buffer or less) is copied instead,
// after the last chunk's bytes when that chunk is a copy with room left:
// the bytes go past the length any published list gives that chunk, so
// no reader sees them before the new list is published.
func (c *tailCache) add(budget *TailBudget, pos int64, data, buf []byte) bool {
	small := int64(len(data))*4 < int64(cap(buf))
	need := int64(cap(buf))
	if small {
		need = int64(len(data))
	}
	limit := budget.share(c.budget == nil)
	if need > limit {
		// Not even this chunk fits the share: nothing is cached.
		c.drop()
		return false
	}
	var kept *stageBuf
	if !small {
		kept = &stageBuf{b: buf}
		kept.refs.n.Store(1)
	}
	if c.budget == nil && budget != nil {
		c.budget = budget
		budget.join(c)
	}
	for {
		old := c.p.Load()
		var keep, dropped []tailChunk
		var total, before int64
		if old != nil {
			before = old.mem
			if n := len(old.chunks); n > 0 && old.chunks[n-1].pos+int64(len(old.chunks[n-1].data)) == pos {
				keep, total = old.chunks, old.mem
			} else {
				dropped = old.chunks
			}
		}
		ch := tailChunk{pos: pos, data: data, mem: need, buf: kept}
		if small {
			if n := len(keep); n > 0 && keep[n-1].buf == nil && len(keep[n-1].data)+len(data) <= cap(keep[n-1].data) {
				last := keep[n-1]
				ch = tailChunk{pos: last.pos, data: append(last.data, data...), mem: last.mem}
				keep, total = keep[:n-1], total-last.mem
			} else {
				// Room for the small appends to follow only when one came
				// before: a marker between two large batches (transactions)
				// gets a buffer of its size.
				room := int64(len(data))
				if n := len(keep); n > 0 && keep[n-1].buf == nil {
					room = max(room, min(tailCopyBytes, limit))
				}
				cp := make([]byte, len(data), room)
				copy(cp, data)
				ch.data, ch.mem = cp, int64(cap(cp))
			}
		}
		for len(keep) > 0 && (total+ch.mem > limit || len(keep)+1 > maxTailChunks) {
			total -= keep[0].mem
			dropped = append(dropped, keep[0])
			keep = keep[1:]
		}
		chunks := make([]tailChunk, 0, len(keep)+1)
		chunks = append(append(chunks, keep...), ch)
		next := &tailChunks{chunks: chunks, mem: total + ch.mem}
		if !c.p.CompareAndSwap(old, next) {
			continue // a reclaim trimmed it meanwhile
		}
		releaseChunks(dropped)
		if c.budget != nil {
			c.budget.held.Add(next.mem - before)
			c.budget.reclaim()
		}
		return kept != nil
	}
}

// trim drops the oldest chunks while the cache holds more than limit (b's
// reclaim, under its lock; any goroutine).
func (c *tailCache) trim(b *TailBudget, limit int64) {
	for {
		old := c.p.Load()
		if old == nil || old.mem <= limit {
			return
		}
		keep, total := old.chunks, old.mem
		for len(keep) > 0 && total > limit {
			total -= keep[0].mem
			keep = keep[1:]
		}
		var next *tailChunks
		if len(keep) > 0 {
			next = &tailChunks{chunks: keep, mem: total}
		}
		if c.p.CompareAndSwap(old, next) {
			releaseChunks(old.chunks[:len(old.chunks)-len(keep)])
			b.held.Add(total - old.mem)
			return
		}
	}
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

// drop empties the cache (a truncation, a roll's cut, a close, an append
// the share has no room for) and takes it out of its budget.
func (c *tailCache) drop() {
	old := c.p.Swap(nil)
	if c.budget != nil {
		if old != nil {
			c.budget.held.Add(-old.mem)
		}
		c.budget.leave(c)
		c.budget = nil
	}
	if old != nil {
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

// TailIdle is how long a log's tail cache outlives its last append
// (DropIdleTail): the readers it serves (consumers keeping up, in-sync
// followers) read an append within moments; a partition no longer written
// gives the budget back rather than holding its share for good.
const TailIdle = 30 * time.Second

// DropIdleTail empties the active segment's tail cache when its last
// append is idle or more old (owner only; the engine's shards call it
// with TailIdle every 100 ms). Its readers then read the file, as past
// the cache.
func (l *Log) DropIdleTail(idle time.Duration) {
	if l.closed || l.active == nil || l.tailAt.IsZero() || l.opts.Now().Sub(l.tailAt) < idle {
		return
	}
	l.active.cache.drop()
	l.tailAt = time.Time{}
}
