package engine

import (
	"slices"
	"strings"

	"ringlog/segment"
)

// RecoveredLog is where a partition's log ended when the engine's start
// recovered it from an unclean shutdown (no clean-shutdown marker: a
// crash or a power loss, after which the log may have lost its unsynced
// tail). A replicated engine's broker reports these when it registers,
// so that the controller can elect the longest log of a partition whose
// whole ISR went down together (KIP-966's unclean recovery).
type RecoveredLog struct {
	TP TP
	// LastEpoch is the last leader epoch in the log (-1: none).
	LastEpoch int32
	LEO       int64
}

func recoveredEnd(tp TP, l *segment.Log) *RecoveredLog {
	r := &RecoveredLog{TP: tp, LastEpoch: -1, LEO: l.LEO()}
	if eps := l.Epochs(); len(eps) > 0 {
		r.LastEpoch = eps[len(eps)-1].Epoch
	}
	return r
}

// RecoveredLogs lists, sorted, the partitions whose logs this start
// recovered from an unclean shutdown and that serve (not offline, not
// deleted), each as it ended after recovery. It never waits.
func (e *Core) RecoveredLogs() []RecoveredLog {
	var out []RecoveredLog
	for _, p := range *e.parts.Load() {
		if p.recovered != nil && p.offlineErr() == nil && !p.deleted.Load() {
			out = append(out, *p.recovered)
		}
	}
	slices.SortFunc(out, func(a, b RecoveredLog) int {
		if c := strings.Compare(a.TP.Topic, b.TP.Topic); c != 0 {
			return c
		}
		return int(a.TP.Partition - b.TP.Partition)
	})
	return out
}
