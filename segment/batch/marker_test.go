package batch

import (
	"bytes"
	"errors"
	"testing"
)

// TestMarkerBatchLayout checks the control batch against the bytes Kafka's
// EndTransactionMarker writes: key 0x0000 0x0001 for a COMMIT, value
// version 0 and the coordinator epoch, attributes transactional|control,
// base sequence -1, one record.
func TestMarkerBatchLayout(t *testing.T) {
	b := MarkerBatch(nil, 42, 3, Marker{Commit: true, CoordinatorEpoch: 7}, 1700000000000)
	h, err := Validate(b, Stored)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Control() || !h.Transactional() || h.BaseSequence != -1 || h.NumRecords != 1 || h.LastOffsetDelta != 0 ||
		h.ProducerID != 42 || h.ProducerEpoch != 3 || h.MaxTimestamp != 1700000000000 || h.Codec() != None {
		t.Fatalf("header %+v", h)
	}
	if _, err := Validate(b, Strict); !errors.Is(err, ErrControl) {
		t.Fatalf("a producer may not send a marker: %v", err)
	}
	var key, value []byte
	if err := Records(h, b, 0, func(r *Record) error {
		key, value = bytes.Clone(r.Key), bytes.Clone(r.Value)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 1}; !bytes.Equal(key, want) {
		t.Fatalf("key %x, want %x", key, want)
	}
	if want := []byte{0, 0, 0, 0, 0, 7}; !bytes.Equal(value, want) {
		t.Fatalf("value %x, want %x", value, want)
	}
	m, err := ParseMarker(h, b)
	if err != nil || m != (Marker{Commit: true, CoordinatorEpoch: 7}) {
		t.Fatalf("ParseMarker: %+v, %v", m, err)
	}
	abort := MarkerBatch(nil, 42, 3, Marker{CoordinatorEpoch: -1}, 0)
	ha, _ := ParseHeader(abort)
	if m, err := ParseMarker(ha, abort); err != nil || m != (Marker{CoordinatorEpoch: -1}) {
		t.Fatalf("abort: %+v, %v", m, err)
	}
}

// TestParseMarkerRecordVersions: a later version's longer key and value are
// read for the fields this version knows; short or negative-version ones,
// and control types other than ABORT and COMMIT, are refused.
func TestParseMarkerRecordVersions(t *testing.T) {
	for _, c := range []struct {
		key, value []byte
		ok         bool
		want       Marker
	}{
		{[]byte{0, 0, 0, 0}, []byte{0, 0, 0, 0, 0, 5}, true, Marker{CoordinatorEpoch: 5}},
		{[]byte{0, 1, 0, 1, 9}, []byte{0, 1, 0, 0, 0, 5, 1, 2}, true, Marker{Commit: true, CoordinatorEpoch: 5}},
		{[]byte{0, 0, 0}, []byte{0, 0, 0, 0, 0, 5}, false, Marker{}},
		{[]byte{0, 0, 0, 2}, []byte{0, 0, 0, 0, 0, 5}, false, Marker{}},
		{[]byte{0xff, 0xff, 0, 1}, []byte{0, 0, 0, 0, 0, 5}, false, Marker{}},
		{[]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0}, false, Marker{}},
		{[]byte{0, 0, 0, 1}, nil, false, Marker{}},
	} {
		m, err := ParseMarkerRecord(c.key, c.value)
		if c.ok != (err == nil) || m != c.want {
			t.Errorf("key %x value %x: %+v, %v", c.key, c.value, m, err)
		}
		if err != nil && !errors.Is(err, ErrMarker) {
			t.Errorf("error %v is not ErrMarker", err)
		}
	}
}

// FuzzParseMarker: any bytes as a batch never panic, every error wraps one
// sentinel, and a marker that decodes encodes again to a batch that
// decodes to the same marker.
func FuzzParseMarker(f *testing.F) {
	f.Add(MarkerBatch(nil, 1, 0, Marker{Commit: true, CoordinatorEpoch: 3}, 5))
	f.Add(MarkerBatch(nil, 1, 0, Marker{}, 5))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, resealIfLong(b)} {
			h, err := ParseHeader(in)
			if err != nil {
				continue
			}
			m, err := ParseMarker(h, in)
			if err != nil {
				checkSentinel(t, err)
				continue
			}
			again := MarkerBatch(nil, h.ProducerID, h.ProducerEpoch, m, h.MaxTimestamp)
			h2, err := Validate(again, Stored)
			if err != nil {
				t.Fatalf("re-encoded marker invalid: %v", err)
			}
			if m2, err := ParseMarker(h2, again); err != nil || m2 != m {
				t.Fatalf("round trip: %+v, %v; was %+v", m2, err, m)
			}
		}
	})
}

func resealIfLong(b []byte) []byte {
	if len(b) < HeaderSize {
		return b
	}
	return reseal(bytes.Clone(b))
}
