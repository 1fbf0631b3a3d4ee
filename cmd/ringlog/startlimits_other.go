//go:build !linux

package main

import (
	"log/slog"

	"ringlog/broker"
)

// logStartLimits: the counts it needs (/proc/self/fd, /proc/self/maps,
// vm.max_map_count) are Linux's; other systems get no line.
func logStartLimits(*slog.Logger, broker.Config) {}
