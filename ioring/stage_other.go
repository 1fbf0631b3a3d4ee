//go:build !linux

package ioring

// newChunk returns a chunk of the staging arena, from the Go heap.
func newChunk() []byte { return alignedBytes(stageChunkBytes, stageAlign) }
