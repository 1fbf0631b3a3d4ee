package group

import (
	"bytes"
	"encoding/hex"
	"maps"
	"slices"
	"testing"
)

// The KIP-848 records of __consumer_offsets, byte for byte.

// TestConsumerRecordsFormat checks the encodings against bytes written
// out by hand from Kafka 4.0's schemas (ConsumerGroup*.json): keys not
// flexible, values flexible from version 0.
func TestConsumerRecordsFormat(t *testing.T) {
	inst, regex := "i", "a.*"
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"metadata key", consumerKey(consumerGroupMetadataKey, "g"), "0003" + "0001" + "67"},
		{"member key", consumerMemberKey(consumerCurrentAssignmentKy, "g", "m"), "0008" + "0001" + "67" + "0001" + "6d"},
		// version 0, epoch 5, no tags
		{"epoch value", int32Value(5), "0000" + "00000005" + "00"},
		// version, [topics: uuid, name, partitions, [racks], tags], tags
		{"partition metadata", partitionMetadataValue(map[string]topicMeta{"t": {id: [16]byte{1}, partitions: 3}}),
			"0000" + "02" + "01000000000000000000000000000000" + "0274" + "00000003" + "01" + "00" + "00"},
		// version, instance, rack (null), client id, host, [topics],
		// regex, rebalance timeout, assignor (null), tags
		{"member metadata", memberMetadataValue(&memberMetadata{instanceID: &inst, clientID: "c", clientHost: "/h",
			topics: []string{"t"}, regex: &regex, rebalanceTimeoutMs: 300}),
			"0000" + "0269" + "00" + "0263" + "032f68" + "02" + "0274" + "04612e2a" + "0000012c" + "00" + "00"},
		{"target member", targetMemberValue(asg([16]byte{2}, 1, 4)),
			"0000" + "02" + "02000000000000000000000000000000" + "03" + "00000001" + "00000004" + "00" + "00"},
		{"current assignment", currentAssignmentValue(&currentAssignment{epoch: 7, prevEpoch: 6, state: memberUnrevoked,
			assigned: asg([16]byte{2}, 0), revoking: assignment{}}),
			"0000" + "00000007" + "00000006" + "01" + "02" + "02000000000000000000000000000000" + "02" + "00000000" + "00" + "01" + "00"},
	} {
		if got := hex.EncodeToString(c.got); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestConsumerRecordsRoundTrip(t *testing.T) {
	inst, rack, regex, assignor := "i", "r", "x|y", "range"
	m := &memberMetadata{instanceID: &inst, rackID: &rack, clientID: "c", clientHost: "/h", topics: []string{"a", "b"},
		regex: &regex, rebalanceTimeoutMs: 5000, assignor: &assignor}
	gotM, err := readMemberMetadataValue(memberMetadataValue(m))
	if err != nil || !equalMeta(gotM, m) {
		t.Fatalf("member metadata: %+v, %v", gotM, err)
	}
	meta := map[string]topicMeta{"a": {id: [16]byte{1}, partitions: 3}, "b": {id: [16]byte{2}, partitions: 1}}
	if got, err := readPartitionMetadataValue(partitionMetadataValue(meta)); err != nil || !maps.Equal(got, meta) {
		t.Fatalf("partition metadata: %v, %v", got, err)
	}
	a := asg([16]byte{9}, 3, 1, 2)
	a.add([16]byte{1}, 0)
	if got, err := readTargetMemberValue(targetMemberValue(a)); err != nil || !got.equal(a) {
		t.Fatalf("target: %v, %v", got, err)
	}
	c := &currentAssignment{epoch: 4, prevEpoch: 3, state: memberUnreleased, assigned: a, revoking: asg([16]byte{9}, 7)}
	if got, err := readCurrentAssignmentValue(currentAssignmentValue(c)); err != nil || !got.equal(c) {
		t.Fatalf("current assignment: %+v, %v", got, err)
	}
	// Tagged fields of later versions (Kafka 4.1's MetadataHash on the
	// group epoch, 4.0's ClassicMemberMetadata) are skipped.
	tagged := append(int32Value(9)[:6:6], 1, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8)
	if v, err := readInt32Value(tagged); err != nil || v != 9 {
		t.Fatalf("value with a tagged field: %d, %v", v, err)
	}
	// Short and lying inputs are errors, not panics.
	for _, b := range [][]byte{nil, {0}, {0, 0, 0}, {0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, {0, 1, 0, 0, 0, 0, 0}} {
		if _, err := readCurrentAssignmentValue(b); err == nil {
			t.Errorf("%x decoded", b)
		}
	}
}

// FuzzConsumerRecords feeds arbitrary keys and values to the decoders of
// the KIP-848 records: they never panic, never allocate beyond what the
// input justifies (counts are bounded by the bytes left), and what they
// accept encodes back to something that decodes to the same.
func FuzzConsumerRecords(f *testing.F) {
	inst := "i"
	for _, v := range [][]byte{
		int32Value(3),
		partitionMetadataValue(map[string]topicMeta{"t": {id: [16]byte{1}, partitions: 3}}),
		memberMetadataValue(&memberMetadata{instanceID: &inst, clientID: "c", topics: []string{"t"}}),
		targetMemberValue(asg([16]byte{2}, 1, 4)),
		currentAssignmentValue(&currentAssignment{epoch: 7, state: memberUnrevoked, assigned: asg([16]byte{2}, 0), revoking: assignment{}}),
	} {
		f.Add(consumerMemberKey(consumerMemberMetadataKey, "g", "m"), v)
	}
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if k, err := readConsumerKey(key); err == nil {
			var again []byte
			switch k.typ {
			case consumerMemberMetadataKey, consumerTargetMemberKey, consumerCurrentAssignmentKy:
				again = consumerMemberKey(k.typ, k.group, k.memberID)
			default:
				again = consumerKey(k.typ, k.group)
			}
			if !bytes.Equal(again, key) {
				t.Fatalf("key %x re-encodes as %x", key, again)
			}
		}
		if v, err := readInt32Value(value); err == nil {
			if w, err := readInt32Value(int32Value(v)); err != nil || w != v {
				t.Fatal("epoch value unstable")
			}
		}
		if m, err := readPartitionMetadataValue(value); err == nil {
			if again, err := readPartitionMetadataValue(partitionMetadataValue(m)); err != nil || !maps.Equal(again, m) {
				t.Fatalf("partition metadata unstable: %v / %v", m, again)
			}
		}
		if m, err := readMemberMetadataValue(value); err == nil {
			if again, err := readMemberMetadataValue(memberMetadataValue(m)); err != nil || !equalMeta(again, m) {
				t.Fatalf("member metadata unstable: %+v / %+v", m, again)
			}
		}
		if a, err := readTargetMemberValue(value); err == nil {
			if again, err := readTargetMemberValue(targetMemberValue(a)); err != nil || !again.equal(a) {
				t.Fatalf("target unstable: %v / %v", a, again)
			}
		}
		if c, err := readCurrentAssignmentValue(value); err == nil {
			if again, err := readCurrentAssignmentValue(currentAssignmentValue(c)); err != nil || !again.equal(c) {
				t.Fatalf("current assignment unstable: %+v / %+v", c, again)
			}
			if n := c.assigned.count() + c.revoking.count(); n > len(value) {
				t.Fatalf("%d partitions from %d bytes", n, len(value))
			}
		}
		st := newLoadState()
		_ = st.apply(slices.Clone(key), value)
	})
}
