package batch

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// The fuzz targets' invariants: no input panics; every error wraps exactly
// one sentinel; what Validate accepts re-encodes to the same bytes; what
// Records decodes, encoded again and decoded again, gives the same records;
// a rewrite of an accepted batch leaves it acceptable; and what Decompress
// returns is within its limit and survives a round trip. Allocation is bounded
// by the small limits the targets pass (a runaway allocation would exhaust
// the fuzzer's memory and be reported as a crash).

// fuzzLimit is the decompression limit of FuzzValidate: small, so that the
// fuzzer spends its time on structure rather than on inflating bytes.
const fuzzLimit = 1 << 16

func FuzzValidate(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, HeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzValidate(t, b)
		// Nearly every mutation breaks the CRC, which would keep the
		// fuzzer from the checks behind it; the same bytes with the
		// CRC made right reach them.
		if len(b) >= HeaderSize {
			fuzzValidate(t, reseal(bytes.Clone(b)))
		}

		if h, err := ParseHeader(b); err == nil {
			fuzzRecords(t, h, b)
		}

		it := Split(b)
		total := 0
		for it.Next() {
			total += len(it.Batch())
			if _, err := Validate(it.Batch(), Stored); err != nil {
				checkSentinel(t, err)
			}
		}
		if it.Pos() != total || (it.Err() == nil && total != len(b)) {
			t.Fatalf("Split consumed %d of %d bytes, Pos %d, err %v", total, len(b), it.Pos(), it.Err())
		}
		if it.Err() != nil {
			checkSentinel(t, it.Err())
		}
	})
}

// fuzzValidate checks Validate's invariants on b under both modes, and that
// SetMaxTimestamp keeps an accepted batch acceptable.
func fuzzValidate(t *testing.T, b []byte) {
	for _, mode := range []Mode{Strict, Stored} {
		h, err := Validate(b, mode)
		if sh, serr := ValidateSum(b, mode, Checksum(b)); sh != h || fmt.Sprint(serr) != fmt.Sprint(err) {
			t.Fatalf("%s: ValidateSum %+v %v; Validate %+v %v", mode, sh, serr, h, err)
		}
		if err != nil {
			checkSentinel(t, err)
			continue
		}
		if h.Size() != len(b) {
			t.Fatalf("%s: accepted %d bytes as a batch of %d", mode, len(b), h.Size())
		}
		if got := AppendHeader(nil, h); !bytes.Equal(got, b[:HeaderSize]) {
			t.Fatalf("%s: header re-encodes as %x, was %x", mode, got, b[:HeaderSize])
		}
		if got, err := Encode(nil, h, b[HeaderSize:]); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s: Encode gives different bytes (%v)", mode, err)
		}
	}
	fuzzValidateProduced(t, b)
	if _, err := Validate(b, Stored); err == nil {
		c := bytes.Clone(b)
		if err := SetMaxTimestamp(c, 1234567, true); err != nil {
			t.Fatalf("SetMaxTimestamp: %v", err)
		}
		if _, err := Validate(c, Stored); err != nil {
			t.Fatalf("valid batch invalid after SetMaxTimestamp: %v", err)
		}
	}
}

// fuzzValidateProduced checks that ValidateProduced accepts what Validate
// under Strict and then CheckRecords accept, with the same header and error
// sentinel, and that its timestamp bounds hold every record's timestamp.
func fuzzValidateProduced(t *testing.T, b []byte) {
	h, ts, err := ValidateProduced(b, fuzzLimit)
	// Staged (segment.Staging): copied with CopySum and validated with
	// its sum, the same batch gets the same answer.
	c := make([]byte, len(b))
	if n, sum := CopySum(c, b); n != len(b) || !bytes.Equal(c, b) || sum != Checksum(b) {
		t.Fatalf("CopySum: %d of %d bytes, sum %#x, Checksum %#x", n, len(b), sum, Checksum(b))
	} else if sh, sts, serr := ValidateProducedSum(c, fuzzLimit, sum); sh != h || sts != ts || fmt.Sprint(serr) != fmt.Sprint(err) {
		t.Fatalf("ValidateProducedSum: %+v %+v %v; ValidateProduced: %+v %+v %v", sh, sts, serr, h, ts, err)
	}
	wantH, wantErr := Validate(b, Strict)
	wantMax := int64(0)
	if wantErr == nil && wantH.Codec() != None {
		wantMax, wantErr = CheckRecords(wantH, b, Strict, fuzzLimit)
	} else if wantErr == nil {
		wantMax, wantErr = MaxRecordTimestamp(wantH, b, fuzzLimit)
	}
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("ValidateProduced: %v; Validate and CheckRecords: %v", err, wantErr)
	}
	if err != nil {
		checkSentinel(t, err)
		for _, s := range sentinels {
			if errors.Is(wantErr, s) && !errors.Is(err, s) {
				t.Fatalf("ValidateProduced: %v; Validate and CheckRecords: %v", err, wantErr)
			}
		}
		return
	}
	if h != wantH || ts.Max != wantMax || ts.Min > ts.Max {
		t.Fatalf("ValidateProduced: %+v %+v; Validate: %+v, max %d", h, ts, wantH, wantMax)
	}
	err = Records(h, b, fuzzLimit, func(r *Record) error {
		at := h.MaxTimestamp
		if !h.LogAppendTime() {
			at = h.BaseTimestamp + r.TimestampDelta
		}
		if at < ts.Min || at > ts.Max {
			t.Fatalf("record %d at %d outside the bounds %+v", r.OffsetDelta, at, ts)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Records of a batch ValidateProduced accepted: %v", err)
	}
}

// fuzzRecords checks Records on a batch whose header parses, and that what it
// decodes survives an encode-decode round trip.
func fuzzRecords(t *testing.T, h Header, b []byte) {
	var recs []Record
	err := Records(h, b, fuzzLimit, func(r *Record) error {
		recs = append(recs, cloneRecord(r))
		return nil
	})
	if err != nil {
		checkSentinel(t, err)
		return
	}
	if len(recs) != int(h.NumRecords) {
		t.Fatalf("Records gave %d records, header says %d", len(recs), h.NumRecords)
	}
	h2 := h
	h2.Attributes &^= AttrCodecMask
	nb, err := Build(nil, h2, None, recs)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	h2, err = ParseHeader(nb)
	if err != nil {
		t.Fatalf("rebuilt header: %v", err)
	}
	var again []Record
	err = Records(h2, nb, 0, func(r *Record) error {
		again = append(again, cloneRecord(r))
		return nil
	})
	if err != nil {
		t.Fatalf("Records of the rebuilt batch: %v", err)
	}
	if len(again) != len(recs) {
		t.Fatalf("%d records after the round trip, %d before", len(again), len(recs))
	}
	for i := range recs {
		if d := sameRecord(again[i], recs[i]); d != "" {
			t.Fatalf("record %d after the round trip: %s", i, d)
		}
	}
}

func FuzzDecompress(f *testing.F) {
	f.Add(uint8(Gzip), uint32(100), []byte{})
	f.Fuzz(func(t *testing.T, codec uint8, limit uint32, data []byte) {
		c := Codec(codec % 8)
		lim := int(limit % (1 << 20))
		out, err := Decompress(c, data, lim)
		if err != nil {
			checkSentinel(t, err)
			return
		}
		if len(out) > lim {
			t.Fatalf("%s: %d bytes over a limit of %d", c, len(out), lim)
		}
		z, err := Compress(c, nil, out)
		if err != nil {
			t.Fatalf("%s: Compress: %v", c, err)
		}
		back, err := Decompress(c, z, len(out))
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("%s: round trip of %d bytes gave %d, %v", c, len(out), len(back), err)
		}
	})
}

// updateCorpus rewrites the committed seed corpus from seedBatches and
// seedStreams: go test ./segment/batch -run TestSeedCorpus -update-corpus
var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz seed files")

// TestSeedCorpus checks that the committed seeds are those the code below
// makes (regenerating them on request), so that the corpus cannot drift
// from what it claims to contain.
func TestSeedCorpus(t *testing.T) {
	files := map[string]string{}
	for name, b := range seedBatches(t) {
		files[filepath.Join("FuzzValidate", name)] = fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
	}
	for name, s := range seedStreams(t) {
		files[filepath.Join("FuzzDecompress", name)] = fmt.Sprintf("go test fuzz v1\nuint8(%d)\nuint32(%d)\n[]byte(%q)\n", s.codec, s.limit, s.data)
	}
	for name, want := range files {
		path := filepath.Join("testdata", "fuzz", name)
		if *updateCorpus {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("seed %s: %v (regenerate with -update-corpus)", name, err)
		}
		if string(got) != want {
			t.Fatalf("seed %s differs from what the test builds (regenerate with -update-corpus)", name)
		}
	}
}

// seedBatches are FuzzValidate's seeds: a valid batch of each codec, the
// shapes that only the log holds, and hand-broken batches, each kept small so
// that mutations land on structure.
func seedBatches(t testing.TB) map[string][]byte {
	rng := rand.New(rand.NewPCG(21, 22))
	seeds := map[string][]byte{}
	for _, c := range allCodecs {
		seeds["valid-"+c.String()] = clientBatch(t, batchSpec{codec: c, baseTimestamp: 1000, producerID: 4, baseSequence: 0}, genRecords(rng, 4, 8))
	}
	plain := seeds["valid-none"]

	compacted := Header{BaseOffset: 10, LastOffsetDelta: 5, NumRecords: 2, ProducerID: -1, BaseSequence: -1}
	seeds["stored-compacted"], _ = Encode(nil, compacted, append(okRecord(1), okRecord(4)...))
	emptied := Header{BaseOffset: 20, LastOffsetDelta: 3, ProducerID: 9, BaseSequence: 0}
	seeds["stored-empty"], _ = Encode(nil, emptied, nil)
	seeds["stored-control"] = clientBatch(t, batchSpec{attributes: AttrControl | AttrTransactional, producerID: 9}, genRecords(rng, 1, 6))
	seeds["two-batches"] = append(bytes.Clone(plain), seeds["valid-lz4"]...)

	broken := func(name string, edit func([]byte) []byte) { seeds["broken-"+name] = edit(bytes.Clone(plain)) }
	broken("crc", func(b []byte) []byte { b[CRCPos] ^= 0xff; return b })
	broken("magic", func(b []byte) []byte { b[MagicPos] = 1; return b })
	broken("truncated", func(b []byte) []byte { return b[:len(b)-3] })
	broken("trailing", func(b []byte) []byte { return append(b, 0, 0) })
	broken("length", sealed(put32(LengthPos, LengthMin-1)))
	broken("count", sealed(put32(NumRecordsPos, 9)))
	broken("codec", sealed(put16(AttributesPos, 6)))
	seeds["broken-varint"] = rawBatch(t, 1, rec([]byte{0}, vi(0), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, vi(-1), vi(-1), vi(0)))
	seeds["broken-header-key"] = rawBatch(t, 1, rec([]byte{0}, vi(0), vi(0), vi(-1), vi(-1), vi(1), vi(-1), vi(-1)))
	return seeds
}

// fuzzStream is one FuzzDecompress seed.
type fuzzStream struct {
	codec uint8
	limit uint32
	data  []byte
}

// seedStreams are FuzzDecompress's seeds: a stream of each codec, the
// framings that only some clients write, and a bomb.
func seedStreams(t testing.TB) map[string]fuzzStream {
	text := []byte("records records records, keys and values and headers")
	seeds := map[string]fuzzStream{}
	for _, c := range allCodecs {
		seeds["stream-"+c.String()] = fuzzStream{uint8(c), 1 << 10, mustCompress(t, c, text)}
	}
	seeds["snappy-xerial"] = fuzzStream{uint8(Snappy), 1 << 10, xerial(text, 16)}
	var stream bytes.Buffer
	zw, err := zstd.NewWriter(&stream)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = zw.Write(text)
	_ = zw.Close()
	seeds["zstd-no-content-size"] = fuzzStream{uint8(Zstd), 1 << 10, stream.Bytes()}
	seeds["gzip-over-limit"] = fuzzStream{uint8(Gzip), 100, mustCompress(t, Gzip, make([]byte, 4096))}
	return seeds
}

// TestSeedsMeanWhatTheySay guards the corpus itself: the valid seeds must be
// accepted, or the fuzzer would start from error paths only, and the broken
// ones refused.
func TestSeedsMeanWhatTheySay(t *testing.T) {
	for name, b := range seedBatches(t) {
		_, strictErr := Validate(b, Strict)
		_, storedErr := Validate(b, Stored)
		switch {
		case strings.HasPrefix(name, "valid-"):
			if strictErr != nil || storedErr != nil {
				t.Fatalf("seed %s: Strict %v, Stored %v", name, strictErr, storedErr)
			}
		case strings.HasPrefix(name, "stored-"):
			if strictErr == nil || storedErr != nil {
				t.Fatalf("seed %s: Strict %v, Stored %v", name, strictErr, storedErr)
			}
		default:
			if strictErr == nil {
				t.Fatalf("seed %s: accepted under Strict", name)
			}
		}
	}
}
