//go:build !linux

package bench

import (
	"errors"
	"os/exec"
	"time"
)

// Outside Linux there is no /proc: broker CPU, peak RSS and cache drops
// are reported as unavailable, and the rest of the suite still runs.

var errNoProc = errors.New("bench: needs Linux's /proc")

func procCPU(pid int) (user, sys time.Duration, err error) { return 0, 0, errNoProc }
func procThreadCPU(pid int) (map[int]time.Duration, error) { return nil, errNoProc }
func procResetPeakRSS(pid int) error                       { return errNoProc }
func procPeakRSS(pid int) (int64, error)                   { return 0, errNoProc }

// procAlive cannot tell without /proc: a node that died fails the next run.
func procAlive(pid int) bool { return true }

func selfCPU() time.Duration             { return 0 }
func setParentDeathSignal(cmd *exec.Cmd) {}
func dropFileCache(dir string) error     { return errNoProc }
func fsType(dir string) string           { return "unknown" }

const cacheDropMethod = "not available outside Linux"

func syncFS(dir string) {}
