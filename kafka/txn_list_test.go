package kafka_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestListTransactionsPattern: kadm's ListTransactionsByTxPattern (v2,
// KIP-1152) lists the transactional ids the pattern matches whole, as
// Kafka's RE2/J Matcher.matches does; an invalid pattern, unbalanced
// parentheses included, is INVALID_REGULAR_EXPRESSION; a pattern longer
// than a protocol string closes the connection, as Kafka cannot decode it.
func TestListTransactionsPattern(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "lt", 1, nil)
	ids := []string{"lt-a-1", "lt-a-2", "lt-b-1"}
	for _, id := range ids {
		produceTxn(t, b.client(kgo.TransactionalID(id), kgo.DefaultProduceTopic("lt")), true, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := b.admin()
	for _, tt := range []struct {
		pattern string
		want    []string
	}{
		{"lt-a-.*", []string{"lt-a-1", "lt-a-2"}},
		{"lt-.-1", []string{"lt-a-1", "lt-b-1"}},
		{"lt-a", nil}, // a whole-id match, not a search
		{"a-1", nil},
		{"", ids}, // no pattern: every id
		{"(?i)LT-B-1|lt-a-2", []string{"lt-a-2", "lt-b-1"}},
	} {
		list, err := adm.ListTransactionsByTxPattern(ctx, nil, nil, tt.pattern)
		if err != nil {
			t.Fatalf("pattern %q: %v", tt.pattern, err)
		}
		var got []string
		for _, l := range list.Sorted() {
			if strings.HasPrefix(l.TxnID, "lt-") {
				got = append(got, l.TxnID)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("pattern %q listed %v, want %v", tt.pattern, got, tt.want)
		}
	}
	for _, bad := range []string{"(", "a)|(b", `\8`} {
		if _, err := adm.ListTransactionsByTxPattern(ctx, nil, nil, bad); !errors.Is(err, kerr.InvalidRegularExpression) {
			t.Errorf("pattern %q: %v, want INVALID_REGULAR_EXPRESSION", bad, err)
		}
	}

	cl := b.client()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrListTransactionsRequest()
	long := strings.Repeat("a", 32768)
	req.TransactionalIDPattern = &long
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if _, err := req.RequestWith(short, cl.DiscoveredBrokers()[0]); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a 32,768-byte pattern: %v, want the connection closed", err)
	}
}
