package fetcher

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors. Errors the leader answers are kerr values wrapped with
// %w, so that errors.Is(err, kerr.FencedLeaderEpoch) works on what Paused
// and Stats report.
var (
	// ErrFrameTooLarge: the leader sent a frame longer than
	// Config.FrameBytesMax. The connection is closed before the body is
	// read, and the stream reconnects.
	ErrFrameTooLarge = errors.New("fetcher: frame too large")
	// ErrProtocol: the leader's bytes do not follow the protocol (a frame
	// too short for its header, a correlation id out of order, a response
	// that does not decode).
	ErrProtocol = errors.New("fetcher: protocol violation")
	// ErrUnsupported: the leader serves no version this stream can use
	// (Fetch v4+, OffsetForLeaderEpoch v3+).
	ErrUnsupported = errors.New("fetcher: leader supports no usable version")
	// ErrRequestTimeout: a response did not arrive within max wait plus
	// Config.RequestTimeout; the connection is considered dead.
	ErrRequestTimeout = errors.New("fetcher: request timed out")
	// ErrCorruptBatch: a record batch header in a response is impossible
	// (a length shorter than the header, a magic other than 2).
	ErrCorruptBatch = errors.New("fetcher: corrupt batch header")
	// ErrBatchTooLarge: the partition's first batch did not fit in
	// PartitionBytesMax and the leader did not send it whole anyway (KIP-74
	// says it should), so the partition cannot make progress.
	ErrBatchTooLarge = errors.New("fetcher: batch larger than the fetch limit")
	// ErrNoTopicID: the leader only serves Fetch v13+, which names topics
	// by id, and the partition was added without one.
	ErrNoTopicID = errors.New("fetcher: partition has no topic id")
	// ErrBadOffset: a handler's done reported a negative offset.
	ErrBadOffset = errors.New("fetcher: handler returned a negative offset")
	// ErrAuthentication: the leader refused the stream's SASL
	// authentication (a wrong password, a user it does not know, a
	// mechanism it does not enable), or the TLS handshake failed. The
	// stream reconnects with backoff, as after any connection error.
	ErrAuthentication = errors.New("fetcher: authentication failed")
	// ErrClosed: the stream is closed.
	ErrClosed = errors.New("fetcher: stream closed")

	// errReauthenticate ends a connection whose SASL session is about to
	// expire; it is not counted as a disconnection.
	errReauthenticate = errors.New("fetcher: SASL session expiring")
)

// leaderError wraps an error code from a response.
func leaderError(code int16) error {
	return fmt.Errorf("fetcher: leader answered %w", kerr.ErrorForCode(code))
}

// pausesPartition reports whether an error code stops fetching the
// partition until the caller acts (new leader, new epoch, topic gone).
// Retrying on our own would either spin against a broker that will never
// serve us or, worse, fetch under an epoch the cluster has moved past.
func pausesPartition(code int16) bool {
	switch code {
	case kerr.NotLeaderForPartition.Code,
		kerr.FencedLeaderEpoch.Code,
		kerr.UnknownLeaderEpoch.Code,
		kerr.UnknownTopicOrPartition.Code,
		kerr.UnknownTopicID.Code,
		kerr.InconsistentTopicID.Code:
		return true
	}
	return false
}
