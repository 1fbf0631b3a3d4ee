package netpoll

import (
	"math/bits"
	"sync"
)

// Frame bodies of frameChunkMin bytes and more are cut from pooled
// buffers whose capacities are powers of two, frameChunkMin and up, so that
// a connection streaming large produce requests does not have the runtime
// zero (and, once the scavenger has returned them, fault in) megabytes of
// fresh memory per request, nor collect them afterwards. A buffer goes back
// to the pool only when the handler says its frame is finished with
// (Conn.Recycle); a frame the handler never recycles is collected as any
// other memory.
const (
	framePoolMinShift = 16 // frameChunkMin
	framePoolMaxShift = 27 // 128 MiB, above the largest frame allowed (int32 but sane)
)

// framePools holds one pool per power of two; each buffer's capacity is
// exactly its class's size.
var framePools [framePoolMaxShift - framePoolMinShift + 1]sync.Pool

// frameClass returns the pool index for a buffer of at least n bytes, or -1
// when n is below the pooled sizes or above the largest class.
func frameClass(n int) int {
	if n < 1<<framePoolMinShift || n > 1<<framePoolMaxShift {
		return -1
	}
	shift := bits.Len(uint(n - 1)) // the smallest power of two >= n
	return shift - framePoolMinShift
}

// getFrameBuf returns an empty buffer with room for n bytes: a pooled one
// of the class of n when n is in the pooled range (capacity n rounded up to
// a power of two), else an exact allocation. Its bytes may hold an earlier
// frame's; they are overwritten before they are read.
func getFrameBuf(n int) []byte {
	c := frameClass(n)
	if c < 0 {
		return make([]byte, 0, n)
	}
	if p, _ := framePools[c].Get().(*[]byte); p != nil {
		return (*p)[:0]
	}
	return make([]byte, 0, 1<<(c+framePoolMinShift))
}

// pooledCap reports whether a buffer of capacity n belongs in a pool: n is
// exactly a class size.
func pooledCap(n int) bool {
	c := frameClass(n)
	return c >= 0 && n == 1<<(c+framePoolMinShift)
}

// putFrameBuf gives a buffer back to its pool. Buffers whose capacity is
// not exactly a class size (exact allocations) are left to the collector.
func putFrameBuf(b []byte) {
	if !pooledCap(cap(b)) {
		return
	}
	b = b[:0]
	framePools[frameClass(cap(b))].Put(&b)
}
