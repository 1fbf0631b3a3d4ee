package streams

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// purger deletes a windowed store's windows older than its retention:
// those whose time (the window start; a session's end) is at or before
// stream time minus retention, as Kafka's segmented stores expire them.
// Each deletion is a tombstone in the changelog, so a restore does not
// bring them back and compaction drops them there too.
//
// Kafka drops whole segments of retention/2 (at least a minute); pebble
// has no time segments here, so a purge walks the store's keys, at most
// once per max(retention/2, 1 s) of stream time. Each window is thus
// visited a bounded number of times in its life (about
// retention/interval), the cost Kafka pays when it writes a window into
// a segment and drops the segment.
type purger struct {
	st        *taskStore
	retention int64 // ms
	interval  int64 // ms of stream time between two purges
	next      int64 // stream time of the next purge; 0: at the first record
	timeOf    func(key []byte) (int64, bool)
}

func newPurger(st *taskStore, retention int64, timeOf func([]byte) (int64, bool)) *purger {
	return &purger{st: st, retention: retention, interval: max(retention/2, time.Second.Milliseconds()), timeOf: timeOf}
}

// windowStartOf reads the window start ending a TimeWindows or sliding
// store key.
func windowStartOf(k []byte) (int64, bool) {
	if len(k) < 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k[len(k)-8:])), true
}

// sessionEndOf reads the session end of a session store key (key, end,
// start).
func sessionEndOf(k []byte) (int64, bool) {
	if len(k) < 16 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k[len(k)-16 : len(k)-8])), true
}

// maybe purges when stream time has moved an interval past the last
// purge (the first record of a task purges what expired while it was
// down).
func (p *purger) maybe() {
	t := p.st.t
	if t.err != nil || t.streamTime < p.next {
		return
	}
	p.next = t.streamTime + p.interval
	cutoff := t.streamTime - p.retention
	var expired [][]byte
	err := rangeStore(t.batch, p.st.name, func(k, _ []byte) bool {
		if ts, ok := p.timeOf(k); ok && ts <= cutoff {
			expired = append(expired, append([]byte(nil), k...))
		}
		return true
	})
	if err != nil {
		t.fail(fmt.Errorf("%s: purge: %w", p.st.name, err))
		return
	}
	at := time.UnixMilli(t.streamTime)
	for _, k := range expired {
		p.st.delete(k, at)
	}
}

// scanStore calls fn for the store's keys in [lower, upper) (store key
// bytes, without the store prefix; upper nil: to the store's end), in
// order, until fn returns false; reads see the task's writes since the
// last commit.
func (s *taskStore) scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	ub := prefixEnd(storePrefix(prefixData, s.name))
	if upper != nil {
		ub = dataKey(s.name, upper)
	}
	it, err := s.t.batch.NewIter(&pebble.IterOptions{LowerBound: dataKey(s.name, lower), UpperBound: ub})
	if err != nil {
		return err
	}
	n := len(storePrefix(prefixData, s.name))
	for ok := it.First(); ok; ok = it.Next() {
		if !fn(it.Key()[n:], it.Value()) {
			break
		}
	}
	return errors.Join(it.Error(), it.Close())
}
