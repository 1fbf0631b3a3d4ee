//go:build !linux

package netpoll

import "time"

type cpuMeter struct{}

func startCPU() *cpuMeter { return &cpuMeter{} }

// stop reports 0: the per-thread CPU time the measure needs is Linux's.
func (*cpuMeter) stop() time.Duration { return 0 }
