//go:build !linux

package ioring

import "errors"

// opState is empty where io_uring does not exist.
type opState struct{}

// Probe reports why io_uring cannot be used: it is Linux-only.
func Probe() string { return "io_uring exists only on Linux" }

func newUring(Config) (IO, error) { return nil, errors.New("io_uring exists only on Linux") }
