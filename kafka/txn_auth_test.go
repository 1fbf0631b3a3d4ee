package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/kafka"
)

// TestTxnBrokerOnlyAPIs: WriteTxnMarkers and AddPartitionsToTxn v4+ act
// as a broker (CLUSTER_ACTION): on a listener that is not the
// inter-broker one they are refused with CLUSTER_AUTHORIZATION_FAILED
// (a client must not end another producer's transaction, nor hold its
// partitions' last stable offsets); on the inter-broker listener a marker
// is written and read back as the producer's transaction's end.
func TestTxnBrokerOnlyAPIs(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) {
		c.Listeners = []broker.Listener{{Name: "CLIENT", Protocol: kafka.Plaintext, Addr: "127.0.0.1:0"}}
	}})
	createTopic(t, b, "guarded", 1, nil)
	markers := func() *kmsg.WriteTxnMarkersRequest {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = 1234, 0, false
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "guarded", Partitions: []int32{0}}}
		req.Markers = append(req.Markers, m)
		return req
	}
	code := func(r *kmsg.WriteTxnMarkersResponse) int16 {
		if len(r.Markers) != 1 || len(r.Markers[0].Topics) != 1 || len(r.Markers[0].Topics[0].Partitions) != 1 {
			t.Fatalf("WriteTxnMarkers answer: %+v", r)
		}
		return r.Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	client := dialWire(t, b.B.ListenerAddr("CLIENT"))
	if c := code(client.roundTrip(markers()).(*kmsg.WriteTxnMarkersResponse)); c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("WriteTxnMarkers from a client listener: %v", kerr.ErrorForCode(c))
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.VerifyOnly = "someone", 1234, true
	tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "guarded", Partitions: []int32{0}}}
	add.Transactions = append(add.Transactions, tx)
	if r := client.roundTrip(add).(*kmsg.AddPartitionsToTxnResponse); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("AddPartitionsToTxn v4 from a client listener: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	inter := dialWire(t, b.Addr)
	if c := code(inter.roundTrip(markers()).(*kmsg.WriteTxnMarkersResponse)); c != 0 {
		t.Fatalf("WriteTxnMarkers from the inter-broker listener: %v", kerr.ErrorForCode(c))
	}
	if st := engineState(t, b, engine.TP{Topic: "guarded", Partition: 0}); st.LEO != 1 {
		t.Fatalf("LEO %d after the marker, want 1", st.LEO)
	}
}
