package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
)

// codecInputs are the shapes that stress codecs differently: nothing, a few
// bytes, incompressible bytes, and a long run that compresses a thousandfold.
func codecInputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(9, 10))
	random := make([]byte, 300<<10)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	text := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog "), 5000)
	return map[string][]byte{
		"empty":  {},
		"short":  []byte("x"),
		"random": random,
		"text":   text,
		"zeros":  make([]byte, 1<<20),
	}
}

// TestCodecRoundTrip compresses and decompresses every input with every
// codec, checks the limit boundaries, and checks that franz-go's consumer-side
// decompressor reads what Compress writes.
func TestCodecRoundTrip(t *testing.T) {
	kdec := kgo.DefaultDecompressor()
	for name, in := range codecInputs() {
		for _, c := range allCodecs {
			t.Run(c.String()+"/"+name, func(t *testing.T) {
				z, err := Compress(c, []byte("dst"), in)
				if err != nil {
					t.Fatal(err)
				}
				if string(z[:3]) != "dst" {
					t.Fatal("Compress overwrote dst")
				}
				z = z[3:]
				out, err := Decompress(c, z, len(in))
				if err != nil {
					t.Fatalf("Decompress at limit %d: %v", len(in), err)
				}
				if !bytes.Equal(out, in) {
					t.Fatalf("round trip changed %d bytes into %d", len(in), len(out))
				}
				if len(in) > 0 {
					if _, err := Decompress(c, z, len(in)-1); !errors.Is(err, ErrTooLarge) {
						t.Fatalf("Decompress at limit %d: %v, want ErrTooLarge", len(in)-1, err)
					}
				}
				if c != None {
					kout, err := kdec.Decompress(z, kgo.CompressionCodecType(c))
					if err != nil || !bytes.Equal(kout, in) {
						t.Fatalf("franz-go reads our %s as %d bytes, %v", c, len(kout), err)
					}
				}
			})
		}
	}
}

// xerial frames data the way snappy-java's SnappyOutputStream does.
func xerial(data []byte, blockSize int) []byte {
	out := append([]byte{}, xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1) // version
	out = binary.BigEndian.AppendUint32(out, 1) // minimum compatible version
	for len(data) > 0 {
		n := min(blockSize, len(data))
		block := snappy.Encode(nil, data[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		data = data[n:]
	}
	return out
}

// TestXerialSnappy decodes the Java producer's framing, and refuses broken
// frames of it.
func TestXerialSnappy(t *testing.T) {
	in := codecInputs()["text"]
	z := xerial(in, 32<<10)
	out, err := Decompress(Snappy, z, len(in))
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("xerial: %d bytes, %v", len(out), err)
	}
	if _, err := Decompress(Snappy, z, len(in)-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("xerial over limit: %v", err)
	}
	if out, err := Decompress(Snappy, xerial(nil, 1), 0); err != nil || len(out) != 0 {
		t.Fatalf("xerial with no blocks: %q, %v", out, err)
	}

	broken := map[string][]byte{
		"header cut":          z[:10],
		"block length cut":    append(xerial(nil, 1), 0, 0),
		"block length past":   append(xerial(nil, 1), 0, 0, 1, 0, 1),
		"block length signed": append(xerial(nil, 1), 0xff, 0xff, 0xff, 0xff),
		"block corrupt":       append(xerial(nil, 1), 0, 0, 0, 3, 0x10, 0xff, 0xff),
	}
	for name, b := range broken {
		if _, err := Decompress(Snappy, b, 1<<20); !errors.Is(err, ErrDecompress) {
			t.Fatalf("%s: %v, want ErrDecompress", name, err)
		}
	}
}

// TestDecompressGarbage feeds each codec bytes that are not its format.
func TestDecompressGarbage(t *testing.T) {
	garbage := [][]byte{
		nil,
		{0},
		[]byte("definitely not compressed"),
		bytes.Repeat([]byte{0xff}, 100),
	}
	for _, c := range allCodecs[1:] {
		for _, g := range garbage {
			_, err := Decompress(c, g, 1<<20)
			if c == Snappy && len(g) == 1 && g[0] == 0 {
				// A lone zero byte is the valid raw block of nothing.
				if err != nil {
					t.Fatalf("snappy empty block: %v", err)
				}
				continue
			}
			if !errors.Is(err, ErrDecompress) {
				t.Fatalf("%s on %q: %v, want ErrDecompress", c, g, err)
			}
			checkSentinel(t, err)
		}
	}
	if _, err := Decompress(Codec(5), []byte{1}, 10); !errors.Is(err, ErrCodec) {
		t.Fatalf("codec 5: %v", err)
	}
	if _, err := Compress(Codec(-1), nil, []byte{1}); !errors.Is(err, ErrCodec) {
		t.Fatalf("codec -1: %v", err)
	}
}

// TestDecompressionBombs checks that inputs which inflate a
// thousandfold, or claim to, are refused at the limit without allocating
// much more than the limit.
func TestDecompressionBombs(t *testing.T) {
	const limit = 1 << 20
	huge := make([]byte, 64<<20)
	var zstdStream bytes.Buffer
	zw, _ := zstd.NewWriter(&zstdStream)
	_, _ = zw.Write(huge)
	_ = zw.Close()

	bombs := map[string]struct {
		c Codec
		z []byte
	}{
		"gzip":               {Gzip, mustCompress(t, Gzip, huge)},
		"lz4":                {LZ4, mustCompress(t, LZ4, huge)},
		"zstd frame size":    {Zstd, mustCompress(t, Zstd, huge)},
		"zstd stream":        {Zstd, zstdStream.Bytes()},
		"snappy xerial":      {Snappy, xerial(huge, 64<<10)},
		"snappy raw claims":  {Snappy, append(binary.AppendUvarint(nil, 1<<31), 0)},
		"snappy raw lies":    {Snappy, append(binary.AppendUvarint(nil, limit/2), 0, 0, 0)},
		"snappy raw honest":  {Snappy, mustCompress(t, Snappy, huge[:4<<20])},
		"none over the edge": {None, huge[:limit+1]},
	}
	for name, bomb := range bombs {
		t.Run(name, func(t *testing.T) {
			// The first call builds pooled and shared coders, which
			// live for the process; measure a call after it.
			_, _ = Decompress(bomb.c, bomb.z, limit)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Decompress(bomb.c, bomb.z, limit)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrDecompress) {
				t.Fatalf("%v, want ErrTooLarge or ErrDecompress", err)
			}
			// Growth by doubling ends at limit+1, after smaller
			// generations of the buffer that add up to about as much
			// again. zstd without a declared size is the worst: each
			// attempt may overflow its buffer by one block before the
			// decoder notices (see decompressZstd).
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%v; allocated %d bytes", err, alloc)
			if alloc > 7*limit/2 {
				t.Fatalf("allocated %d bytes for a limit of %d", alloc, limit)
			}
		})
	}
}

func mustCompress(t testing.TB, c Codec, in []byte) []byte {
	t.Helper()
	z, err := Compress(c, nil, in)
	if err != nil {
		t.Fatal(err)
	}
	return z
}

// TestZstdFrames covers the zstd shapes a client may send: several frames
// back to back, and a frame without a content size (Java's streaming
// encoder writes those).
func TestZstdFrames(t *testing.T) {
	a, b := []byte("first frame "), bytes.Repeat([]byte("second "), 10000)
	two := append(mustCompress(t, Zstd, a), mustCompress(t, Zstd, b)...)
	out, err := Decompress(Zstd, two, len(a)+len(b))
	if err != nil || !bytes.Equal(out, append(append([]byte{}, a...), b...)) {
		t.Fatalf("two frames: %d bytes, %v", len(out), err)
	}
	if _, err := Decompress(Zstd, two, len(a)+len(b)-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("two frames over the limit: %v", err)
	}

	var stream bytes.Buffer
	zw, _ := zstd.NewWriter(&stream)
	_, _ = zw.Write(b)
	_ = zw.Close()
	out, err = Decompress(Zstd, stream.Bytes(), len(b))
	if err != nil || !bytes.Equal(out, b) {
		t.Fatalf("stream without content size: %d bytes, %v", len(out), err)
	}
}

// TestCodecString checks Kafka's names and the unknown form.
func TestCodecString(t *testing.T) {
	want := []string{"none", "gzip", "snappy", "lz4", "zstd", "Codec(5)", "Codec(6)", "Codec(7)"}
	for c := range Codec(8) {
		if c.String() != want[c] {
			t.Fatalf("%d: %q", c, c.String())
		}
		if c.Valid() != (c <= Zstd) {
			t.Fatalf("%d: Valid() = %v", c, c.Valid())
		}
	}
}

// panicReader stands for a decoder with a bug that panics on some input.
type panicReader struct{}

func (panicReader) Read([]byte) (int, error) { panic("index out of range") }

// TestDecoderPanicContained checks that a panic inside a decoder becomes
// ErrDecompress instead of taking the process down.
func TestDecoderPanicContained(t *testing.T) {
	_, err := readLimited(guardedReader{panicReader{}}, nil, 0, 100)
	if !errors.Is(err, ErrDecompress) {
		t.Fatalf("%v, want ErrDecompress", err)
	}
	checkSentinel(t, err)
}

// TestZstdStreamOutgrowsFirstAttempt is the regression test for a zstd
// stream without a declared size that inflates past the first buffer: the
// decoder reports a full buffer inside a compressed block with the same
// error as corruption, which an earlier version returned as ErrDecompress
// instead of retrying with more room.
func TestZstdStreamOutgrowsFirstAttempt(t *testing.T) {
	for _, size := range []int{100 << 10, 3 << 20} {
		in := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		var stream bytes.Buffer
		zw, _ := zstd.NewWriter(&stream)
		_, _ = zw.Write(in)
		_ = zw.Close()
		out, err := Decompress(Zstd, stream.Bytes(), 4<<20)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("%d bytes from a %d-byte stream: got %d, %v", size, stream.Len(), len(out), err)
		}
	}
}
