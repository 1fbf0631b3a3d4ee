package txn

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/segment/batch"
)

// The records of __transaction_state, in Kafka's formats (TransactionLogKey
// and TransactionLogValue, see doc.go), so that Kafka's tools read our
// topic and a data directory holds what an operator expects.
const (
	// txnKeyVersion is TransactionLogKey's only version.
	txnKeyVersion = 0
	// txnValueVersion 1 is the flexible version Kafka 4 writes once
	// transaction.version is 1 or more, with KIP-890's tagged fields
	// (previous and next producer id, the client's transaction version)
	// and KIP-939's next producer epoch. Version 0 is read too.
	txnValueVersion = 1
)

// errRecord marks a record of __transaction_state that cannot be decoded.
var errRecord = errors.New("txn: undecodable __transaction_state record")

// maxInflate bounds what replaying one compressed batch may decompress.
const maxInflate = 64 << 20

// maxPartitionsPerTxn bounds the partitions one transaction may hold: a
// record naming more is refused on replay and a request adding more is
// refused. Kafka has no such limit; a transaction's record must fit the
// topic's max.message.bytes anyway, and 100,000 partitions of names a few
// bytes long is far beyond any real transaction.
const maxPartitionsPerTxn = 100_000

func txnKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: txnKeyVersion, TransactionalID: id}
	return k.AppendTo(nil)
}

// txnValue encodes t as Kafka's TransactionLogValue. An Empty transaction
// has no partition list (null), as Kafka writes it.
func txnValue(t *transit) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = txnValueVersion
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis = t.producerID, t.epoch, t.timeoutMs
	v.State = t.state
	v.LastUpdateTimestamp, v.StartTimestamp = t.updateMs, t.startMs
	v.PreviousProducerID, v.NextProducerID = t.prevProducerID, t.nextProducerID
	v.ClientTransactionVersion = t.clientTV
	if t.state != kmsg.TransactionStateEmpty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range t.partitions {
			if n := len(v.Topics); n > 0 && v.Topics[n-1].Topic == tp.Topic {
				v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
				continue
			}
			v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: tp.Topic, Partitions: []int32{tp.Partition}})
		}
	}
	return v.AppendTo(nil)
}

// decodeKey reads a TransactionLogKey: the transactional id, or ok false
// for a key of another version (Kafka's UnknownKey, skipped).
func decodeKey(key []byte) (id string, ok bool, err error) {
	if len(key) < 2 {
		return "", false, fmt.Errorf("%w: key of %d bytes", errRecord, len(key))
	}
	if version := int16(key[0])<<8 | int16(key[1]); version != txnKeyVersion {
		return "", false, nil
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", false, fmt.Errorf("%w: key: %w", errRecord, err)
	}
	return k.TransactionalID, true, nil
}

// decodeValue reads a TransactionLogValue into the metadata of id. It
// checks what the coordinator relies on: a known state, a producer id and
// epoch, partitions only when the state is not Empty, and their count.
func decodeValue(id string, value []byte) (*txnMeta, error) {
	if len(value) < 2 {
		return nil, fmt.Errorf("%w: value of %d bytes", errRecord, len(value))
	}
	if version := int16(value[0])<<8 | int16(value[1]); version < 0 || version > txnValueVersion {
		return nil, fmt.Errorf("%w: value version %d", errRecord, version)
	}
	var v kmsg.TxnMetadataValue
	// kmsg bounds every array count by the bytes left, so what it
	// allocates is a small multiple of the value's size.
	if err := v.ReadFrom(value); err != nil {
		return nil, fmt.Errorf("%w: value: %w", errRecord, err)
	}
	if v.State < kmsg.TransactionStateEmpty || v.State > kmsg.TransactionStatePrepareEpochFence {
		return nil, fmt.Errorf("%w: state %d", errRecord, v.State)
	}
	if v.ProducerID < 0 {
		return nil, fmt.Errorf("%w: producer id %d", errRecord, v.ProducerID)
	}
	m := &txnMeta{id: id, producerID: v.ProducerID, prevProducerID: v.PreviousProducerID, nextProducerID: v.NextProducerID,
		epoch: v.ProducerEpoch, lastEpoch: -1, timeoutMs: v.TimeoutMillis, state: v.State,
		startMs: v.StartTimestamp, updateMs: v.LastUpdateTimestamp, clientTV: v.ClientTransactionVersion}
	if v.State != kmsg.TransactionStateEmpty {
		n := 0
		for _, t := range v.Topics {
			n += len(t.Partitions)
		}
		if n > maxPartitionsPerTxn {
			return nil, fmt.Errorf("%w: %d partitions", errRecord, n)
		}
		m.partitions = make(map[engine.TP]struct{}, n)
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				m.partitions[engine.TP{Topic: t.Topic, Partition: p}] = struct{}{}
			}
		}
	}
	return m, nil
}

// buildBatch encodes one record into an uncompressed RecordBatch v2 with
// no producer id, as the coordinator writes it (one record per write: a
// transition is one transactional id's).
func buildBatch(key, value []byte, now time.Time) ([]byte, error) {
	ms := now.UnixMilli()
	h := batch.Header{PartitionLeaderEpoch: -1, BaseTimestamp: ms, MaxTimestamp: ms,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	return batch.Build(nil, h, batch.None, []batch.Record{{Key: key, Value: value}})
}

// loadState is what replaying a partition of __transaction_state builds:
// the last value of every transactional id, as compaction would leave it.
type loadState struct {
	txns    map[string]*txnMeta
	bad     int
	lastErr error
}

func newLoadState() *loadState { return &loadState{txns: map[string]*txnMeta{}} }

// replayBatch applies the records of one stored batch to st. Control
// batches carry no transaction state. A record that does not decode is
// counted and skipped: one bad record (a client produced to the topic)
// must not make every transactional id of the partition unavailable.
func replayBatch(b []byte, st *loadState) error {
	h, err := batch.Validate(b, batch.Stored)
	if err != nil {
		return fmt.Errorf("%w: %w", errRecord, err)
	}
	if h.Control() {
		return nil
	}
	return batch.Records(h, b, maxInflate, func(r *batch.Record) error {
		if err := st.apply(r.Key, r.Value); err != nil {
			st.bad++
			st.lastErr = err
		}
		return nil
	})
}

// apply records one key and value (nil: a tombstone, an expired id). The
// key and value alias the log's read buffer: decoding copies the strings.
func (st *loadState) apply(key, value []byte) error {
	id, ok, err := decodeKey(key)
	if err != nil || !ok {
		return err
	}
	if value == nil {
		delete(st.txns, id)
		return nil
	}
	m, err := decodeValue(id, value)
	if err != nil {
		return err
	}
	st.txns[id] = m
	return nil
}

// sortedPartitions returns the set's partitions in topic, then partition
// order (records and answers list them so).
func sortedPartitions(set map[engine.TP]struct{}) []engine.TP {
	tps := make([]engine.TP, 0, len(set))
	for tp := range set {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b engine.TP) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return tps
}
