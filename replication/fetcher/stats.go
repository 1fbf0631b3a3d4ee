package fetcher

import (
	"sort"

	"ringlog/engine"
)

// counters are the stream's counters, guarded by Stream.mu.
type counters struct {
	connects, disconnects int64
	requests              int64 // Fetch and OffsetForLeaderEpoch
	fetches, longPolls    int64
	truncations           int64 // OffsetForLeaderEpoch requests
	retries               int64
	// incrementalFetches counts Fetch requests sent in a session after
	// its first (KIP-227); sessionResets the answers that sent a lane
	// back to a full fetch (the leader lost or refused the session).
	incrementalFetches, sessionResets int64
	recordBytes                       int64
	inflightPeak                      int64
	lastConnErr                       error
}

// Stats is a snapshot of a stream.
type Stats struct {
	Connected bool
	// FetchVersion and OffsetForLeaderEpochVersion are the highest
	// versions negotiated on the current connection (-1 when none).
	FetchVersion, OffsetForLeaderEpochVersion int16
	Connects, Disconnects                     int64
	LastConnError                             error
	// Requests counts requests written: Fetches (of which LongPolls had a
	// max wait) and Truncations (OffsetForLeaderEpoch).
	Requests, Fetches, LongPolls, Truncations int64
	// IncrementalFetches counts the Fetches that were incremental in a
	// fetch session (KIP-227: naming only what changed); SessionResets the
	// answers (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, ...)
	// that made a session's next Fetch a full one. FetchBytesSent counts
	// the bytes of the Fetch request frames written, length prefixes included.
	IncrementalFetches, SessionResets, FetchBytesSent int64
	// Retries counts partition answers that were retriable errors.
	Retries int64
	// BytesReceived counts response frames, length prefixes included;
	// RecordBytes the whole batches handed to Records.
	BytesReceived, RecordBytes int64
	// InFlight is the number of requests written and not answered;
	// InFlightPeak the most there ever were.
	InFlight, InFlightPeak int64
	// Partitions is sorted by topic and partition.
	Partitions []PartitionStats
}

// PartitionStats is one partition's state.
type PartitionStats struct {
	TP          engine.TP
	State       string // idle, fetching, truncating, handler, backoff
	Paused      bool
	FetchOffset int64
	// HW and LeaderLogStart are the leader's, from its last answer (-1
	// before one).
	HW, LeaderLogStart int64
	// Lag is HW minus FetchOffset, 0 when not known or not behind.
	Lag int64
	// Err is the pause reason, else the last retriable error.
	Err error
}

// Stats returns a snapshot. It is safe to call from any goroutine.
func (s *Stream) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		FetchVersion:                -1,
		OffsetForLeaderEpochVersion: -1,
		Connects:                    s.stats.connects,
		Disconnects:                 s.stats.disconnects,
		LastConnError:               s.stats.lastConnErr,
		Requests:                    s.stats.requests,
		Fetches:                     s.stats.fetches,
		LongPolls:                   s.stats.longPolls,
		Truncations:                 s.stats.truncations,
		Retries:                     s.stats.retries,
		IncrementalFetches:          s.stats.incrementalFetches,
		SessionResets:               s.stats.sessionResets,
		FetchBytesSent:              s.fetchBytesOut.Load(),
		BytesReceived:               s.bytesIn.Load(),
		RecordBytes:                 s.stats.recordBytes,
		InFlight:                    int64(len(s.inflight)),
		InFlightPeak:                s.stats.inflightPeak,
	}
	if s.conn != nil {
		st.Connected = true
		st.FetchVersion, st.OffsetForLeaderEpochVersion = s.conn.versions.fetch, s.conn.versions.ofle
	}
	for _, pt := range s.parts {
		if pt.removed {
			continue
		}
		ps := PartitionStats{
			TP:             pt.spec.TP,
			State:          pt.state.String(),
			Paused:         pt.paused,
			FetchOffset:    pt.fetchOff,
			HW:             pt.hw,
			LeaderLogStart: pt.leaderLogStart,
			Err:            pt.lastErr,
		}
		if pt.paused {
			ps.Err = pt.pauseErr
		}
		if pt.hw >= 0 && pt.hw > pt.fetchOff {
			ps.Lag = pt.hw - pt.fetchOff
		}
		st.Partitions = append(st.Partitions, ps)
	}
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i].TP, st.Partitions[j].TP
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return st
}
