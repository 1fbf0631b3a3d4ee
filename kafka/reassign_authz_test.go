package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/testkit/testbroker"
)

// TestReassignmentsNeedClusterAuthorization: with an authorizer and no
// ACL, AlterPartitionReassignments (ALTER on the cluster) is refused
// request-wide and on every partition, as Kafka's error response is, and
// ListPartitionReassignments (DESCRIBE on the cluster) request-wide; with
// allow.everyone.if.no.acl.found both are served.
func TestReassignmentsNeedClusterAuthorization(t *testing.T) {
	for _, allow := range []bool{false, true} {
		// Started without the package's group probe, which an
		// authorizer with no ACLs refuses.
		cfg := testbroker.Config(t.TempDir())
		cfg.Authorizer, cfg.AllowEveryoneIfNoACL = true, allow
		b := testbroker.StartBroker(t, cfg)
		w := dialWire(t, b.Addr)
		alter := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		alter.Version, alter.TimeoutMillis = 1, 5000
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = "missing"
		rt.Partitions = []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{0}}, {Partition: 1}}
		alter.Topics = append(alter.Topics, rt)
		ar := w.roundTrip(alter).(*kmsg.AlterPartitionAssignmentsResponse)
		list := w.roundTrip(kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse)
		want := kerr.ClusterAuthorizationFailed.Code
		wantPart := want
		if allow {
			want, wantPart = 0, kerr.UnknownTopicOrPartition.Code
		}
		if ar.ErrorCode != want || len(ar.Topics) != 1 || len(ar.Topics[0].Partitions) != 2 {
			t.Fatalf("allow.everyone.if.no.acl.found=%v: alter answered %+v", allow, ar)
		}
		for _, p := range ar.Topics[0].Partitions {
			if p.ErrorCode != wantPart {
				t.Fatalf("allow.everyone.if.no.acl.found=%v: partition %d: %v, want %v", allow, p.Partition, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(wantPart))
			}
		}
		if list.ErrorCode != want {
			t.Fatalf("allow.everyone.if.no.acl.found=%v: list answered %v", allow, kerr.ErrorForCode(list.ErrorCode))
		}
	}
}
