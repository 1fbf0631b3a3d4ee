package streams

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzSerdes: the built-in serdes decode bytes from topics: they never
// panic, refuse what is not theirs with ErrSerde, and what they decode
// encodes back to the same bytes (Int64, String, Bytes) or decodes again
// to the same value (JSON).
func FuzzSerdes(f *testing.F) {
	for _, s := range [][]byte{nil, {}, {0, 0, 0, 0, 0, 0, 0, 42}, []byte(`{"a":1}`), []byte(`[`), []byte("héllo")} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := Int64.Deserialize("t", b); err != nil {
			if !errors.Is(err, ErrSerde) || len(b) == 8 {
				t.Fatalf("int64 of %x: %v", b, err)
			}
		} else if out, _ := Int64.Serialize("t", n); !bytes.Equal(out, b) {
			t.Fatalf("int64 %x -> %d -> %x", b, n, out)
		}
		if s, _ := String.Deserialize("t", b); s != string(b) {
			t.Fatalf("string %x", b)
		}
		if c, _ := Bytes.Deserialize("t", b); !bytes.Equal(c, b) {
			t.Fatalf("bytes %x", b)
		}
		j := JSON[map[string]any]()
		if v, err := j.Deserialize("t", b); err == nil {
			enc, err := j.Serialize("t", v)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Deserialize("t", enc); err != nil {
				t.Fatalf("json %q re-encoded as %q: %v", b, enc, err)
			}
		} else if !errors.Is(err, ErrSerde) {
			t.Fatalf("json %q: %v", b, err)
		}
	})
}
