//go:build !linux

package ioring

func depthOf(IO) (Depth, bool) { return Depth{}, false }
