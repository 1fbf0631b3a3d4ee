//go:build !linux

package main

import (
	"errors"
	"runtime"
)

// tuneItems: the settings tune checks (sysctls in /proc/sys, transparent
// huge pages and I/O schedulers in sysfs, io_uring) are Linux's.
func tuneItems(tuneOptions) ([]tuneItem, error) {
	return nil, errors.New("ringlog tune is Linux-only: it checks /proc/sys, /sys and io_uring, which " + runtime.GOOS + " does not have (docs/tuning.md)")
}
