package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestErrorCodesAreKafkas(t *testing.T) {
	for code, e := range errorsByCode {
		k := kerr.ErrorForCode(code)
		var ke *kerr.Error
		if !errors.As(k, &ke) || ke.Message != e.Name {
			t.Errorf("code %d: ours is %s, Kafka's %v", code, e.Name, k)
		}
	}
}

func TestErrorCodeAndRemoteErrors(t *testing.T) {
	wrapped := errf(ErrFencedLeaderEpoch, "t-0: leader epoch 1, current 2")
	if got := ErrorCode(wrapped); got != 74 {
		t.Fatalf("code %d", got)
	}
	// Through the RPC encoding and back: same message, same sentinel.
	_, err := decodeResponse(encodeResponse(reply{}, wrapped))
	if !errors.Is(err, ErrFencedLeaderEpoch) || err.Error() != wrapped.Error() {
		t.Fatalf("remote error %v", err)
	}
	for _, tc := range []struct {
		err  error
		code int16
	}{
		{nil, 0},
		{ErrClosed, 41},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), 7},
		{fmt.Errorf("x: %w", ErrCorrupt), 42},
		{errors.New("other"), -1},
	} {
		if got := ErrorCode(tc.err); got != tc.code {
			t.Errorf("%v: code %d, want %d", tc.err, got, tc.code)
		}
	}
}
