package txn

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/segment/batch"
)

// FuzzReplay feeds arbitrary keys and values to the replay of
// __transaction_state, which reads what is on disk (and what a client may
// have produced to the topic): it must never panic, what it accepts must
// encode and decode again to the same value, and replaying it through a
// real batch must give the same state.
func FuzzReplay(f *testing.F) {
	ongoing := &transit{producerID: 7, prevProducerID: -1, nextProducerID: -1, epoch: 3, lastEpoch: -1, timeoutMs: 60000,
		state: stateOngoing, partitions: []engine.TP{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}},
		startMs: 5, updateMs: 6}
	empty := &transit{producerID: 7, prevProducerID: 3, nextProducerID: 9, epoch: 0, lastEpoch: -1, timeoutMs: 1, state: stateEmpty,
		startMs: -1, updateMs: 6, clientTV: 2}
	v0 := kmsg.NewTxnMetadataValue()
	v0.ProducerID, v0.State, v0.Topics = 1, stateOngoing, []kmsg.TxnMetadataValueTopic{{Topic: "t", Partitions: []int32{0}}}
	for _, r := range []struct{ key, value []byte }{
		{txnKey("tx"), txnValue(ongoing)},
		{txnKey("tx"), txnValue(empty)},
		{txnKey("tx"), v0.AppendTo(nil)},
		{txnKey("tx"), nil},
		{[]byte{0, 1}, []byte{0, 1}},
	} {
		f.Add(r.key, r.value, r.value == nil)
	}
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		st := newLoadState()
		if err := st.apply(key, value); err != nil {
			return
		}
		id, ok, _ := decodeKey(key)
		if ok && value != nil {
			m := st.txns[id]
			// Decode, encode, decode: the same metadata.
			tr := &transit{producerID: m.producerID, prevProducerID: m.prevProducerID, nextProducerID: m.nextProducerID,
				epoch: m.epoch, timeoutMs: m.timeoutMs, state: m.state, partitions: sortedPartitions(m.partitions),
				startMs: m.startMs, updateMs: m.updateMs, clientTV: m.clientTV}
			again, err := decodeValue(id, txnValue(tr))
			if err != nil {
				t.Fatalf("re-encoded value does not decode: %v", err)
			}
			if again.producerID != m.producerID || again.epoch != m.epoch || again.state != m.state || len(again.partitions) != len(m.partitions) ||
				again.startMs != m.startMs || again.updateMs != m.updateMs || again.clientTV != m.clientTV || again.nextProducerID != m.nextProducerID {
				t.Fatalf("decode-encode-decode differs: %+v then %+v", m, again)
			}
			if !bytes.Equal(txnValue(tr), txnValue(&transit{producerID: again.producerID, prevProducerID: again.prevProducerID,
				nextProducerID: again.nextProducerID, epoch: again.epoch, timeoutMs: again.timeoutMs, state: again.state,
				partitions: sortedPartitions(again.partitions), startMs: again.startMs, updateMs: again.updateMs, clientTV: again.clientTV})) {
				t.Fatal("encoding is not stable")
			}
		}
		b, err := buildBatch(key, value, time.Unix(1, 0))
		if err != nil {
			return
		}
		through := newLoadState()
		it := batch.Split(b)
		for it.Next() {
			if err := replayBatch(it.Batch(), through); err != nil {
				t.Fatal(err)
			}
		}
		if through.bad != 0 || len(through.txns) != len(st.txns) {
			t.Fatalf("replay through a batch differs: %d bad, %d/%d ids", through.bad, len(through.txns), len(st.txns))
		}
	})
}

// TestValueMatchesKafka checks the bytes of a value against Kafka's
// TransactionLogValue v1 written field by field: a reader of Kafka's
// format reads ours.
func TestValueMatchesKafka(t *testing.T) {
	tr := &transit{producerID: 0x0102030405060708, prevProducerID: -1, nextProducerID: -1, epoch: 9, timeoutMs: 60000,
		state: stateOngoing, partitions: []engine.TP{{Topic: "ab", Partition: 3}}, startMs: 10, updateMs: 11, clientTV: 0}
	want := []byte{
		0, 1, // version
		1, 2, 3, 4, 5, 6, 7, 8, // producer id
		0, 9, // epoch
		0, 0, 0xea, 0x60, // timeout
		1,           // Ongoing
		2,           // one topic (compact array: n+1)
		3, 'a', 'b', // compact string
		2, 0, 0, 0, 3, // [3]
		0,                       // the topic's tags
		0, 0, 0, 0, 0, 0, 0, 11, // last update
		0, 0, 0, 0, 0, 0, 0, 10, // start
		0, // no tagged fields: every one at its default
	}
	if got := txnValue(tr); !bytes.Equal(got, want) {
		t.Fatalf("value\n got %v\nwant %v", got, want)
	}
	if got, want := txnKey("ab"), []byte{0, 0, 0, 2, 'a', 'b'}; !bytes.Equal(got, want) {
		t.Fatalf("key %v, want %v", got, want)
	}
}
