// Package framepool keeps large network frame buffers for reuse: buffers
// whose capacities are powers of two, MinSize and up, one sync.Pool per
// size, so that a connection streaming large frames (produce requests into
// netpoll, fetch responses into a follower) does not have the runtime zero
// (and, once the scavenger has returned them, fault in) megabytes of fresh
// memory per frame, nor collect them afterwards. A buffer goes back with
// Put only when nothing refers to its bytes any more; one that is never
// put back is collected as any other memory.
package framepool

import (
	"math/bits"
	"sync"
)

const (
	minShift = 16 // MinSize
	maxShift = 27 // 128 MiB, above the largest frame allowed (int32 but sane)

	// MinSize is the smallest pooled capacity: below it Get allocates
	// exactly.
	MinSize = 1 << minShift
)

// pools holds one pool per power of two; each buffer's capacity is exactly
// its class's size.
var pools [maxShift - minShift + 1]sync.Pool

// class returns the pool index for a buffer of at least n bytes, or -1
// when n is below the pooled sizes or above the largest class.
func class(n int) int {
	if n < MinSize || n > 1<<maxShift {
		return -1
	}
	return bits.Len(uint(n-1)) - minShift // the smallest power of two >= n
}

// Get returns an empty buffer with room for n bytes: a pooled one of the
// class of n when n is in the pooled range (capacity n rounded up to a
// power of two), else an exact allocation. Its bytes may hold an earlier
// frame's; the caller overwrites them before it reads them.
func Get(n int) []byte {
	c := class(n)
	if c < 0 {
		return make([]byte, 0, n)
	}
	if p, _ := pools[c].Get().(*[]byte); p != nil {
		return (*p)[:0]
	}
	return make([]byte, 0, 1<<(c+minShift))
}

// Pooled reports whether a buffer of capacity n belongs in a pool: n is
// exactly a class size.
func Pooled(n int) bool {
	c := class(n)
	return c >= 0 && n == 1<<(c+minShift)
}

// Put gives a buffer back to its pool. Buffers whose capacity is not
// exactly a class size (exact allocations) are left to the collector.
func Put(b []byte) {
	if !Pooled(cap(b)) {
		return
	}
	b = b[:0]
	pools[class(cap(b))].Put(&b)
}
