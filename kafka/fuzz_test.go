package kafka

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzRequest feeds request frames (the bytes after the 4-byte size prefix,
// as netpoll hands them to Serve) to the whole decoding path: header,
// API and version checks, size limits, the APIs' own pre-decoding checks
// (checkProduceShape) and kmsg decoding, then Produce's batch header
// checks. The invariants:
//
//   - nothing panics;
//   - an accepted request re-encodes, and decode-encode-decode is stable;
//   - checkProduceShape never refuses a Produce body that kmsg decodes
//     (it may only refuse for size);
//   - decoding allocates at most a bounded multiple of the frame's size.
//
// The committed corpus in testdata/fuzz/FuzzRequest holds real requests of
// every API served, encoded by kmsg, and broken ones; RINGLOG_FUZZ_CORPUS=1
// go test -run TestWriteFuzzCorpus rewrites it.
func FuzzRequest(f *testing.F) {
	s := NewServer(Config{}, nil) // parsing touches no engine
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, a, req, err := s.parseRequest(frame)
		checkAllocs(t, s, frame)
		switch {
		case errors.Is(err, errApiVersionsUnsupported):
			if h.key != int16(kmsg.ApiVersions) {
				t.Fatalf("unsupported ApiVersions answer for key %d", h.key)
			}
		case err != nil:
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("error %v does not wrap errBadRequest", err)
			}
		default:
			if a == nil || req == nil || req.Key() != h.key || h.version < a.min || h.version > a.max {
				t.Fatalf("accepted %s v%d outside its registration", kmsg.NameForKey(h.key), h.version)
			}
			checkRoundTrip(t, req)
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				for _, rt := range p.Topics {
					for _, rp := range rt.Partitions {
						checkProduceBatches(rp.Records, p.TransactionID != nil)
					}
				}
			}
		}
		checkProduceShapeAgrees(t, s, frame)
	})
}

// Allocation allowed per frame byte, plus a constant: kmsg allocates a
// structure of tens of bytes for an array element or a tagged field of two
// or three bytes, and Go's maps and slices round up. Measured: up to 32
// times for arrays of minimal elements, 45 to 55 times for a section of
// distinct empty tagged fields (kept in a map). The bound is twice that,
// so that it flags what is worse than kmsg's known costs.
const (
	allocFactor = 128
	allocSlack  = 64 << 10
)

// checkAllocs measures what parsing frame allocates. The counter is the
// process's: it is read only in a fuzzing worker, where nothing else runs
// (in a plain go test run, the brokers of earlier tests still allocate in
// the background). Parsing is deterministic, so only an excess seen on
// three tries in a row counts, against the runtime's own noise.
func checkAllocs(t *testing.T, s *Server, frame []byte) {
	if f := flag.Lookup("test.fuzzworker"); f == nil || f.Value.String() != "true" {
		return
	}
	limit := uint64(allocFactor*len(frame) + allocSlack)
	var alloc uint64
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s.parseRequest(frame)
		runtime.ReadMemStats(&after)
		if alloc = after.TotalAlloc - before.TotalAlloc; alloc <= limit {
			return
		}
	}
	h, _, _ := parseHeader(frame)
	t.Fatalf("%s v%d: %d bytes allocated for a %d-byte frame", kmsg.NameForKey(h.key), h.version, alloc, len(frame))
}

// checkRoundTrip re-encodes a decoded request and decodes it again: the
// second encoding must equal the first.
func checkRoundTrip(t *testing.T, req kmsg.Request) {
	enc := req.AppendTo(nil)
	again := kmsg.RequestForKey(req.Key())
	again.SetVersion(req.GetVersion())
	if err := again.ReadFrom(enc); err != nil {
		t.Fatalf("%s v%d: re-encoded request does not decode: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if enc2 := again.AppendTo(nil); !bytes.Equal(enc, enc2) {
		t.Fatalf("%s v%d: decode-encode-decode is not stable:\n%x\n%x", kmsg.NameForKey(req.Key()), req.GetVersion(), enc, enc2)
	}
}

// checkProduceShapeAgrees runs checkProduceShape and kmsg on any frame
// whose header names Produce at a served version: the shape check may
// refuse for size, never a body kmsg decodes.
func checkProduceShapeAgrees(t *testing.T, s *Server, frame []byte) {
	h, body, err := parseHeader(frame)
	if err != nil || h.key != int16(kmsg.Produce) || h.version < 0 || h.version > 13 {
		return
	}
	if h.version >= 9 {
		if body, err = SkipTags(body); err != nil {
			return
		}
	}
	shapeErr := checkProduceShape(s, h.version, body)
	if shapeErr != nil && !errors.Is(shapeErr, errBadRequest) {
		t.Fatalf("shape error %v does not wrap errBadRequest", shapeErr)
	}
	if shapeErr != nil && len(body) > s.cfg.MaxRequestBytes/producePartitionCost {
		return // may be a refusal for size, which kmsg would not make
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = h.version
	decErr := decode(req, body)
	if decErr == nil && shapeErr != nil {
		t.Fatalf("produce v%d: kmsg decodes what checkProduceShape refuses (%v)", h.version, shapeErr)
	}
}

// TestWriteFuzzCorpus writes the seed corpus of FuzzRequest when
// RINGLOG_FUZZ_CORPUS=1; otherwise it checks that the committed corpus has
// every seed.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRequest")
	write := os.Getenv("RINGLOG_FUZZ_CORPUS") == "1"
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, frame := range SeedRequests(t) {
		path := filepath.Join(dir, name)
		content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(frame)) + ")\n"
		if write {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Errorf("seed %s missing or stale in %s (RINGLOG_FUZZ_CORPUS=1 rewrites it): %v", name, dir, err)
		}
	}
}
