package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/testkit/testbroker"
)

// TestQuorumAPIsNeedClusterACLs: with an authorizer and no ACL, the
// quorum's APIs are refused with CLUSTER_AUTHORIZATION_FAILED before
// anything is done (Kafka's KafkaApis: DESCRIBE on the cluster for
// DescribeQuorum, ALTER for AddRaftVoter, RemoveRaftVoter and
// UnregisterBroker); without one, DescribeQuorum answers a single broker
// as its quorum's one voter, AddRaftVoter of a node that never joins
// times out, RemoveRaftVoter of a node that is no voter is
// VOTER_NOT_FOUND, and UnregisterBroker of an unknown broker
// BROKER_ID_NOT_REGISTERED.
func TestQuorumAPIsNeedClusterACLs(t *testing.T) {
	for _, authorizer := range []bool{true, false} {
		cfg := testbroker.Config(t.TempDir())
		cfg.Authorizer = authorizer
		b := testbroker.StartBroker(t, cfg)
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()

		dq := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		dq.Topics = append(dq.Topics, rt)
		dqr, err := dq.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		add := kmsg.NewPtrAddRaftVoterRequest()
		add.VoterID, add.TimeoutMillis = 5, 1000
		l := kmsg.NewAddRaftVoterRequestListener()
		l.Name, l.Host, l.Port = "CONTROLLER", "127.0.0.1", 1
		add.Listeners = append(add.Listeners, l)
		addr, err := add.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		rm := kmsg.NewPtrRemoveRaftVoterRequest()
		rm.VoterID = 5
		rmr, err := rm.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		un := kmsg.NewPtrUnregisterBrokerRequest()
		un.BrokerID = 9
		unr, err := un.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if authorizer {
			denied := kerr.ClusterAuthorizationFailed.Code
			if dqr.ErrorCode != denied || addr.ErrorCode != denied || rmr.ErrorCode != denied || unr.ErrorCode != denied {
				t.Fatalf("with an authorizer and no ACL: DescribeQuorum %d, AddRaftVoter %d, RemoveRaftVoter %d, UnregisterBroker %d",
					dqr.ErrorCode, addr.ErrorCode, rmr.ErrorCode, unr.ErrorCode)
			}
			continue
		}
		if dqr.ErrorCode != 0 || len(dqr.Topics) != 1 || len(dqr.Topics[0].Partitions) != 1 {
			t.Fatalf("DescribeQuorum: %+v", dqr)
		}
		p := dqr.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.LeaderID != cfg.NodeID || len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != cfg.NodeID ||
			p.CurrentVoters[0].LogEndOffset < p.HighWatermark || p.HighWatermark <= 0 || len(p.Observers) != 0 {
			t.Fatalf("DescribeQuorum of a single broker: %+v", p)
		}
		// Node 5 never joins: the quorum waits for it the request's
		// timeout, as Kafka's leader waits for a new voter to catch up.
		if addr.ErrorCode != kerr.RequestTimedOut.Code {
			t.Fatalf("AddRaftVoter of a node that never joined: %d", addr.ErrorCode)
		}
		if rmr.ErrorCode != kerr.VoterNotFound.Code {
			t.Fatalf("RemoveRaftVoter of a node that is no voter: %d", rmr.ErrorCode)
		}
		if unr.ErrorCode != kerr.BrokerIDNotRegistered.Code {
			t.Fatalf("UnregisterBroker of an unknown broker: %d", unr.ErrorCode)
		}
	}
}
