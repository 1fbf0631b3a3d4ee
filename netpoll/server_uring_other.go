//go:build !linux

package netpoll

import "errors"

// probeUring: io_uring exists only on Linux.
func probeUring() string { return "io_uring exists only on Linux" }

func startUring(*Server) (engine, error) {
	return nil, errors.New("netpoll: io_uring exists only on Linux")
}
