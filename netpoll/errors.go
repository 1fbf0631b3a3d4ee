package netpoll

import "errors"

// Sentinel errors. Connection-level errors are reasons a connection was
// closed; they reach the log (at debug level) and never the handler, which
// only learns that the connection is gone (Handler.Closed).
var (
	ErrConfig           = errors.New("netpoll: invalid config")
	ErrClosed           = errors.New("netpoll: server closed")
	ErrFrameTooLarge    = errors.New("netpoll: frame length above MaxFrameBytes")
	ErrFrameNegative    = errors.New("netpoll: negative frame length")
	ErrMalformedFrame   = errors.New("netpoll: malformed frame")
	ErrSplitter         = errors.New("netpoll: splitter answer breaks the Splitter contract")
	ErrFrameTruncated   = errors.New("netpoll: connection closed inside a frame")
	ErrShortRegion      = errors.New("netpoll: file region shorter than promised")
	ErrBadRegion        = errors.New("netpoll: negative file region position or length")
	ErrResponseTooLarge = errors.New("netpoll: response larger than a 4-byte size prefix can describe")
	ErrInboundOverflow  = errors.New("netpoll: client kept sending while its connection was paused")
	ErrIdle             = errors.New("netpoll: connection idle for IdleTimeout")
	ErrWriteTimeout     = errors.New("netpoll: responses waiting and no byte written for WriteTimeout")
	ErrHandshake        = errors.New("netpoll: TLS handshake failed")
	ErrEngineStopped    = errors.New("netpoll: engine stopped on its own")
)
