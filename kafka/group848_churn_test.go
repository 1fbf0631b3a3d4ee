package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupChurn848 runs the churn of group_churn_test.go with KIP-848's
// consumer group protocol: kgo members with ServerSideBalancer, the
// broker's uniform assignor, incremental reconciliation. The same
// promises hold (every record consumed, committed offsets never going
// back, no partition owned by two members at once, checked from the
// members' assignment callbacks at their member epochs), and members that
// die are fenced by the broker's session timeout.
func TestGroupChurn848(t *testing.T) {
	t.Parallel() // rebalance timers: about a tenth of a core for 10 s
	runChurnWith(t, kgo.CooperativeStickyBalancer(), churnRecords(), true)
}

// TestGroupChurn848Range is the same with the range assignor.
func TestGroupChurn848Range(t *testing.T) {
	t.Parallel() // rebalance timers: about a tenth of a core for 10 s
	if testing.Short() {
		t.Skip("the uniform assignor's run covers the protocol in -short")
	}
	runChurnWith(t, kgo.RangeBalancer(), churnRecords(), true)
}
