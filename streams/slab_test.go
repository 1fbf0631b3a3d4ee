package streams

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestProduceSlab: the bytes serializeTo hands out keep their contents
// while later values are appended after them, a value larger than a
// chunk's room included (it moves to a new array); records are distinct
// and zeroed; and a String or Int64 value costs no allocation of its own
// (one per chunk), where Serialize allocates each.
func TestProduceSlab(t *testing.T) {
	var s produceSlab
	type given struct {
		b    []byte
		want []byte
	}
	var out []given
	str, i64 := appenderOf(String), appenderOf(Int64)
	if str == nil || i64 == nil {
		t.Fatal("String and Int64 have no appender")
	}
	for i := range 5000 {
		v := fmt.Sprintf("w%04d", i)
		if i%997 == 0 {
			v = strings.Repeat("x", slabBytes+i) // larger than any chunk
		}
		b, err := serializeTo(&s, str, String, "t", v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, given{b, []byte(v)})
		n, err := serializeTo(&s, i64, Int64, "t", int64(i))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Int64.Serialize("t", int64(i))
		out = append(out, given{n, want})
	}
	for i, g := range out {
		if !bytes.Equal(g.b, g.want) {
			t.Fatalf("value %d changed after it was handed out: %q, want %q", i, g.b, g.want)
		}
		if cap(g.b) != len(g.b) {
			t.Fatalf("value %d has room after it (cap %d, len %d): an append to it would write over the next", i, cap(g.b), len(g.b))
		}
	}
	// A Serde without an appender (Bytes, or a user's) goes through
	// Serialize.
	if appenderOf(Bytes) != nil {
		t.Fatal("Bytes has an appender")
	}
	in := []byte("abc")
	if b, err := serializeTo(&s, nil, Bytes, "t", in); err != nil || &b[0] != &in[0] {
		t.Fatalf("Bytes: %q, %v: want its Serialize's result", b, err)
	}

	seen := map[any]bool{}
	for range 3 * slabRecords {
		r := s.record()
		if seen[r] || r.Topic != "" || r.Key != nil {
			t.Fatalf("record %p handed out twice or not zeroed", r)
		}
		seen[r] = true
		r.Topic, r.Key = "t", []byte("k")
	}

	allocs := testing.AllocsPerRun(10_000, func() {
		if _, err := serializeTo(&s, str, String, "t", "w1234"); err != nil {
			t.Fatal(err)
		}
		if _, err := serializeTo(&s, i64, Int64, "t", 1234); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0.1 {
		t.Fatalf("%.2f allocations per key and value serialized, want about one per chunk", allocs)
	}
}

// TestDataKeyLayout: dataKey, built in one allocation, is the data
// prefix rangeStore and wipe scan by, then the key bytes.
func TestDataKeyLayout(t *testing.T) {
	for _, c := range []struct{ store, key string }{{"counts", "w0001"}, {"s", ""}, {strings.Repeat("n", 300), "k"}} {
		got := dataKey(c.store, []byte(c.key))
		want := append(storePrefix(prefixData, c.store), c.key...)
		if !bytes.Equal(got, want) {
			t.Errorf("dataKey(%q, %q) = %x, want %x", c.store, c.key, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { keySink = dataKey("counts", []byte("w0001")) }); n != 1 {
		t.Errorf("dataKey: %.0f allocations, want 1", n)
	}
}

var keySink []byte // keeps dataKey's result on the heap, as in use
