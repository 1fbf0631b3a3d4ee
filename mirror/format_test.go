package mirror

import (
	"bytes"
	"encoding/hex"
	"testing"
)

// MM2's bytes, as Kafka's Schema.write lays them out (checked by hand
// against OffsetSync.java and Heartbeat.java: STRING is an int16 length).
func TestFormatBytes(t *testing.T) {
	s := OffsetSync{Topic: "t", Partition: 2, Upstream: 5, Downstream: 7}
	if got, want := hex.EncodeToString(s.Key()), "00017400000002"; got != want {
		t.Errorf("offset sync key %s, want %s", got, want)
	}
	if got, want := hex.EncodeToString(s.Value()), "00000000000000050000000000000007"; got != want {
		t.Errorf("offset sync value %s, want %s", got, want)
	}
	h := Heartbeat{SourceAlias: "A", TargetAlias: "B", TimestampMs: 1}
	if got, want := hex.EncodeToString(h.Key()), "000141000142"; got != want {
		t.Errorf("heartbeat key %s, want %s", got, want)
	}
	if got, want := hex.EncodeToString(h.Value()), "00000000000000000001"; got != want {
		t.Errorf("heartbeat value %s, want %s", got, want)
	}
	if got, want := string(OffsetKey("A", "t", 3)), `["MirrorSourceConnector",{"cluster":"A","partition":3,"topic":"t"}]`; got != want {
		t.Errorf("offset key %s, want %s", got, want)
	}
	// Java's HashMap orders the fields its own way: any order decodes.
	sp, off, ok, err := DecodeOffset([]byte(`["MirrorSourceConnector",{"topic":"t","partition":3,"cluster":"A"}]`), []byte(`{"offset":41}`))
	if err != nil || !ok || sp != (sourcePartition{"A", 3, "t"}) || off != 41 {
		t.Errorf("DecodeOffset: %+v %d %v %v", sp, off, ok, err)
	}
	if _, _, ok, err := DecodeOffset([]byte(`["OtherConnector",{}]`), []byte(`{"offset":1}`)); ok || err != nil {
		t.Errorf("another connector's record: ok %v err %v, want skipped", ok, err)
	}
	for _, bad := range [][2]string{{`[`, `{}`}, {`["MirrorSourceConnector",{"topic":""}]`, `{"offset":1}`}, {string(OffsetKey("A", "t", 0)), `{"offset":1.5}`}, {string(OffsetKey("A", "t", 0)), `{}`}} {
		if _, _, _, err := DecodeOffset([]byte(bad[0]), []byte(bad[1])); err == nil {
			t.Errorf("DecodeOffset(%s, %s): no error", bad[0], bad[1])
		}
	}
	c := Checkpoint{Group: "g", Topic: "A.t", Partition: 1, Upstream: 2, Downstream: 3, Metadata: ""}
	if got, want := hex.EncodeToString(c.Key()), "0001"+"67"+"0003"+"412e74"+"00000001"; got != want {
		t.Errorf("checkpoint key %s, want %s", got, want)
	}
	if got, want := hex.EncodeToString(c.Value()), "0000"+"0000000000000002"+"0000000000000003"+"0000"; got != want {
		t.Errorf("checkpoint value %s, want %s", got, want)
	}
	if _, err := DecodeOffsetSync([]byte{0, 9, 't'}, s.Value()); err == nil {
		t.Error("DecodeOffsetSync: a STRING longer than its bytes decoded")
	}
}

func FuzzDecodeOffsetSync(f *testing.F) {
	s := OffsetSync{Topic: "orders", Partition: 1, Upstream: 10, Downstream: 20}
	f.Add(s.Key(), s.Value())
	f.Add([]byte{0xff, 0xff}, []byte{})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		s, err := DecodeOffsetSync(key, value)
		if err != nil {
			return
		}
		// What decodes encodes to the bytes it was read from (less any
		// trailing bytes Kafka's Schema.read ignores too).
		if k := s.Key(); !bytes.HasPrefix(key, k) {
			t.Fatalf("key %x re-encodes to %x", key, k)
		}
		if v := s.Value(); !bytes.HasPrefix(value, v) {
			t.Fatalf("value %x re-encodes to %x", value, v)
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	h := Heartbeat{SourceAlias: "A", TargetAlias: "B", TimestampMs: 99}
	f.Add(h.Key(), h.Value())
	f.Add([]byte{0, 1}, []byte{0, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		h, err := DecodeHeartbeat(key, value)
		if err != nil {
			return
		}
		if k := h.Key(); !bytes.HasPrefix(key, k) {
			t.Fatalf("key %x re-encodes to %x", key, k)
		}
		if v := h.Value(); !bytes.HasPrefix(value, v) {
			t.Fatalf("value %x re-encodes to %x", value, v)
		}
	})
}

func FuzzDecodeOffset(f *testing.F) {
	f.Add(OffsetKey("A", "t", 0), OffsetValue(5))
	f.Add([]byte(`["MirrorSourceConnector",{"topic":"t","partition":3,"cluster":"A"}]`), []byte(nil))
	f.Add([]byte(`[1,2,3]`), []byte(`{"offset":-1}`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		sp, off, ok, err := DecodeOffset(key, value)
		if err != nil || !ok {
			return
		}
		sp2, off2, ok2, err2 := DecodeOffset(OffsetKey(sp.Cluster, sp.Topic, sp.Partition), OffsetValue(off))
		if err2 != nil || !ok2 || sp2 != sp || off2 != off {
			t.Fatalf("%+v@%d re-decodes to %+v@%d (%v, %v)", sp, off, sp2, off2, ok2, err2)
		}
	})
}

func FuzzDecodeCheckpoint(f *testing.F) {
	c := Checkpoint{Group: "g", Topic: "A.t", Partition: 1, Upstream: 50, Downstream: 54, Metadata: "m"}
	f.Add(c.Key(), c.Value())
	f.Add([]byte{0, 1, 'g', 0, 0}, []byte{0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c, err := DecodeCheckpoint(key, value)
		if err != nil {
			return
		}
		if k := c.Key(); !bytes.HasPrefix(key, k) {
			t.Fatalf("key %x re-encodes to %x", key, k)
		}
		if v := c.Value(); !bytes.HasPrefix(value, v) {
			t.Fatalf("value %x re-encodes to %x", value, v)
		}
	})
}
