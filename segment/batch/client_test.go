package batch

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var allCodecs = []Codec{None, Gzip, Snappy, LZ4, Zstd}

// TestClientBatches feeds Validate, CheckRecords and Records with batches
// that franz-go built and compressed, for every codec and a range of shapes,
// and checks that exactly the records put in come back out.
func TestClientBatches(t *testing.T) {
	shapes := []struct {
		name      string
		n         int
		valueSize int
	}{
		{"one record", 1, 10},
		{"100 small records", 100, 40},
		// 300 records of up to 2 KiB make about 300 KiB: several LZ4
		// blocks, several zstd blocks, several xerial-sized chunks.
		{"300 records over 256 KiB", 300, 2048},
	}
	for _, c := range allCodecs {
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/%s", c, s.name), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(c), uint64(s.n)))
				in := genRecords(rng, s.n, s.valueSize)
				spec := batchSpec{codec: c, baseTimestamp: 1_700_000_000_000, producerID: 99, producerEpoch: 2, baseSequence: 1000}
				b := clientBatch(t, spec, in)

				h, err := Validate(b, Strict)
				if err != nil {
					t.Fatalf("Validate(Strict): %v", err)
				}
				if _, err := Validate(b, Stored); err != nil {
					t.Fatalf("Validate(Stored): %v", err)
				}
				if h.Codec() != c || h.NumRecords != int32(s.n) {
					t.Fatalf("header %+v", h)
				}
				maxTS, err := CheckRecords(h, b, Strict, 1<<22)
				if err != nil {
					t.Fatalf("CheckRecords: %v", err)
				}
				if maxTS != h.MaxTimestamp {
					t.Fatalf("max record timestamp %d, producer said %d", maxTS, h.MaxTimestamp)
				}

				got := collect(t, h, b, 1<<22)
				if len(got) != len(in) {
					t.Fatalf("%d records, want %d", len(got), len(in))
				}
				for i := range in {
					if d := sameRecord(got[i], fromClient(in[i])); d != "" {
						t.Fatalf("record %d: %s", i, d)
					}
				}

				// Our encoder must write the same bytes as franz-go's:
				// each record, and the whole batch around the same
				// records section.
				var raw []byte
				for i := range got {
					raw = AppendRecord(raw, &got[i])
					if want := clientRecord(in[i]); !bytes.HasSuffix(raw, want) {
						t.Fatalf("AppendRecord(%d) differs from kmsg", i)
					}
				}
				ours, err := Encode(nil, h, b[HeaderSize:])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(ours, b) {
					t.Fatalf("Encode differs from kmsg's batch")
				}
				if c == None {
					built, err := Build(nil, h, None, got)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(built, b) {
						t.Fatalf("Build differs from kmsg's batch")
					}
				}
			})
		}
	}
}

// TestBuildReadByClient goes the other way: batches that Build compresses
// are decoded by franz-go (kmsg for the batch, kgo's decompressor for the
// records), as a consumer would.
func TestBuildReadByClient(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	kin := genRecords(rng, 200, 300)
	var in []Record
	for i := range kin {
		kin[i].OffsetDelta = int32(i)
		in = append(in, fromClient(kin[i]))
	}
	dec := kgo.DefaultDecompressor()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			h := Header{BaseOffset: 5, PartitionLeaderEpoch: 1, LastOffsetDelta: int32(len(in) - 1), BaseTimestamp: 10, MaxTimestamp: 2000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
			b, err := Build([]byte("prefix"), h, c, in)
			if err != nil {
				t.Fatal(err)
			}
			if string(b[:6]) != "prefix" {
				t.Fatal("Build overwrote dst")
			}
			b = b[6:]
			if _, err := Validate(b, Strict); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b); err != nil {
				t.Fatalf("kmsg: %v", err)
			}
			raw, err := dec.Decompress(rb.Records, kgo.CompressionCodecType(c))
			if err != nil {
				t.Fatalf("kgo decompress: %v", err)
			}
			for i := range kin {
				var kr kmsg.Record
				if err := kr.ReadFrom(raw); err != nil {
					t.Fatalf("kmsg record %d: %v", i, err)
				}
				raw = raw[kr.Length+int32(uvarintLen(zigzag32(kr.Length))):]
				kr.Length = 0
				if d := sameRecord(fromClient(kr), in[i]); d != "" {
					t.Fatalf("record %d: %s", i, d)
				}
			}
			if len(raw) != 0 {
				t.Fatalf("%d bytes after the records", len(raw))
			}
		})
	}
}

// TestControlBatch reads a transaction commit marker, the batch a
// coordinator writes with WriteTxnMarkers: accepted from the log, refused
// from a producer.
func TestControlBatch(t *testing.T) {
	key := []byte{0, 0, 0, 1}         // version 0, type 1 = COMMIT
	value := []byte{0, 0, 0, 0, 0, 5} // version 0, coordinatorEpoch 5
	in := []kmsg.Record{{Key: key, Value: value}}
	b := clientBatch(t, batchSpec{attributes: AttrControl | AttrTransactional, producerID: 8, producerEpoch: 1, baseSequence: -1}, in)
	if _, err := Validate(b, Strict); !errors.Is(err, ErrControl) {
		t.Fatalf("Strict = %v, want ErrControl", err)
	}
	h, err := Validate(b, Stored)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, h, b, 0)
	if len(got) != 1 || !bytes.Equal(got[0].Key, key) || !bytes.Equal(got[0].Value, value) {
		t.Fatalf("marker read as %+v", got)
	}
}

// TestRecordsLimit checks that Records refuses to inflate a batch past its
// limit, and that an error from the callback ends the walk unchanged.
func TestRecordsLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	b := clientBatch(t, batchSpec{codec: Zstd, producerID: -1, baseSequence: -1}, genRecords(rng, 50, 1000))
	h, err := Validate(b, Strict)
	if err != nil {
		t.Fatal(err)
	}
	if err := Records(h, b, 1000, func(*Record) error { return nil }); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Records with a small limit = %v, want ErrTooLarge", err)
	}
	stop := errors.New("stop")
	calls := 0
	err = Records(h, b, 1<<20, func(*Record) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("callback error: %v after %d calls", err, calls)
	}
	// A header that claims more bytes than b holds is refused, not read
	// past.
	if err := Records(h, b[:len(b)-1], 1<<20, func(*Record) error { return nil }); !errors.Is(err, ErrShort) {
		t.Fatalf("short b: %v", err)
	}
}

// TestConcurrentUse runs the codecs, with their pools and the shared zstd
// coder, from many goroutines at once; under -race it checks the package's
// claim to be safe from any goroutine.
func TestConcurrentUse(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	var batches [][]byte
	for _, c := range allCodecs {
		batches = append(batches, clientBatch(t, batchSpec{codec: c, producerID: -1, baseSequence: -1}, genRecords(rng, 30, 200)))
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			var err error
			defer func() { errs <- err }()
			for i := range 20 {
				b := batches[(g+i)%len(batches)]
				h, verr := Validate(b, Strict)
				if verr != nil {
					err = verr
					return
				}
				if _, err = CheckRecords(h, b, Strict, 1<<20); err != nil {
					return
				}
				z, cerr := Compress(h.Codec(), nil, b)
				if cerr != nil {
					err = cerr
					return
				}
				out, derr := Decompress(h.Codec(), z, len(b))
				if derr != nil || !bytes.Equal(out, b) {
					err = fmt.Errorf("%s round trip: %v", h.Codec(), derr)
					return
				}
			}
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
