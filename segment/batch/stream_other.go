//go:build !amd64

package batch

// streamMin is stream_amd64.go's bound, kept for the tests' lengths.
const streamMin = 256

// streamCopy is copy(dst, src): non-temporal stores are written for amd64
// only (stream_amd64.go).
func streamCopy(dst, src []byte) int { return copy(dst, src) }
