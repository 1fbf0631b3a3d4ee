package batch

import "unsafe"

// copyNT copies n bytes (a multiple of 64) to a dst aligned to 64 bytes
// with non-temporal stores (stream_amd64.s).
//
//go:noescape
func copyNT(dst, src *byte, n int)

// streamMin is the shortest copy streamCopy streams: below it the
// alignment's head and tail are most of it.
const streamMin = 256

// streamCopy is copy(dst, src) for a destination nothing reads soon (a
// direct write's staging buffer, which the device reads): the whole cache
// lines of dst are written with non-temporal stores, so that the copy does
// not first read each of them from memory and does not push the source,
// which the checks read next, out of the caches. The copy's head up to
// dst's first line boundary and its tail are copied as usual.
func streamCopy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < streamMin {
		return copy(dst, src[:n])
	}
	head := int(-uintptr(unsafe.Pointer(&dst[0])) & 63)
	copy(dst[:head], src[:head])
	body := (n - head) &^ 63
	copyNT(&dst[head], &src[head], body)
	copy(dst[head+body:n], src[head+body:n])
	return n
}
