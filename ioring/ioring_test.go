package ioring

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// implementations returns every IO this platform has, so that each
// behavioural test runs against all of them.
func implementations(t *testing.T, cfg Config) map[string]IO {
	t.Helper()
	ios := map[string]IO{"portable": NewPortable()}
	if runtime.GOOS == "linux" {
		if reason := Probe(); reason != "" {
			t.Fatalf("io_uring probe failed on Linux: %s", reason)
		}
		// Both ways of writing through the ring: data copied inline with
		// only the sync in the ring, and everything in the ring.
		for name, mode := range map[string]WriteMode{"uring-inline": WritesInline, "uring-ring": WritesInRing} {
			c := cfg
			c.Writes = mode
			u, err := newUring(c)
			if err != nil {
				t.Fatalf("newUring: %v", err)
			}
			ios[name] = u
		}
	}
	for _, io := range ios {
		t.Cleanup(func() {
			if err := io.Close(); err != nil {
				t.Errorf("close %s: %v", io.Kind(), err)
			}
		})
	}
	return ios
}

func forEach(t *testing.T, cfg Config, fn func(t *testing.T, io IO)) {
	for name, io := range implementations(t, cfg) {
		t.Run(name, func(t *testing.T) { fn(t, io) })
	}
}

func tempFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func pattern(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*31 + i*7)
	}
	return b
}

func TestWriteSyncChainsInOrder(t *testing.T) {
	forEach(t, Config{}, func(t *testing.T, io IO) {
		f := tempFile(t, "log")
		var want []byte
		var ops []*Op
		off := int64(0)
		for i := range 50 {
			a, b := pattern(i, 100+i), pattern(i+1000, 3000-i)
			ops = append(ops, &Op{Kind: OpWrite, File: f, Offset: off, Bufs: [][]byte{a, b}, Sync: SyncData, Tag: i})
			want = append(append(want, a...), b...)
			off += int64(len(a) + len(b))
		}
		if err := Do(io, ops...); err != nil {
			t.Fatal(err)
		}
		for i, o := range ops {
			if o.Err != nil || o.N != o.Len() || o.Tag != i {
				t.Fatalf("op %d: N=%d want %d err=%v tag=%v", i, o.N, o.Len(), o.Err, o.Tag)
			}
		}
		got, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("file content differs: %d bytes, want %d", len(got), len(want))
		}
		// A second round appends a full fsync and a plain sync op.
		tail := pattern(7, 4096)
		if err := Do(io, &Op{Kind: OpWrite, File: f, Offset: off, Bufs: [][]byte{tail}, Sync: SyncFull}, &Op{Kind: OpSync, File: f}); err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		if st.Size() != off+4096 {
			t.Fatalf("size %d, want %d", st.Size(), off+4096)
		}
	})
}

// TestTenThousandOpsThroughSmallRing pushes far more ops than the ring has
// entries in one Submit: the back-pressure path must hold the caller,
// complete everything and lose nothing.
func TestTenThousandOpsThroughSmallRing(t *testing.T) {
	forEach(t, Config{Entries: 64}, func(t *testing.T, io IO) {
		f := tempFile(t, "many")
		const n, size = 10000, 64
		ops := make([]*Op, 0, n+n/10)
		for i := range n {
			op := &Op{Kind: OpWrite, File: f, Offset: int64(i * size), Bufs: [][]byte{pattern(i, size)}}
			if i%1000 == 999 {
				op.Sync = SyncData
			}
			ops = append(ops, op)
			if i%10 == 0 {
				ops = append(ops, &Op{Kind: OpNop})
			}
		}
		if err := io.Submit(ops...); err != nil {
			t.Fatal(err)
		}
		seen := make(map[*Op]bool, len(ops))
		for len(seen) < len(ops) {
			out, err := io.Wait(nil, 1, -1)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range out {
				if seen[o] {
					t.Fatalf("op returned twice")
				}
				seen[o] = true
				if o.Err != nil {
					t.Fatalf("op failed: %v", o.Err)
				}
			}
		}
		if io.InFlight() != 0 {
			t.Fatalf("InFlight = %d after all completed", io.InFlight())
		}
		got, _ := os.ReadFile(f.Name())
		for i := range n {
			if !bytes.Equal(got[i*size:(i+1)*size], pattern(i, size)) {
				t.Fatalf("block %d differs", i)
			}
		}
	})
}

// TestWritevMoreThanIovMax writes one op of 3000 buffers: more than one
// writev can carry, so the op is a chain of writev parts.
func TestWritevMoreThanIovMax(t *testing.T) {
	forEach(t, Config{}, func(t *testing.T, io IO) {
		f := tempFile(t, "iov")
		var bufs [][]byte
		var want []byte
		for i := range 3000 {
			b := pattern(i, 1+i%13)
			bufs = append(bufs, b)
			want = append(want, b...)
		}
		op := &Op{Kind: OpWrite, File: f, Offset: 10, Bufs: bufs, Sync: SyncData}
		if err := Do(io, op); err != nil {
			t.Fatal(err)
		}
		if op.N != len(want) {
			t.Fatalf("N=%d want %d", op.N, len(want))
		}
		got, _ := os.ReadFile(f.Name())
		if !bytes.Equal(got[10:], want) {
			t.Fatal("content differs")
		}
	})
}

func TestRead(t *testing.T) {
	forEach(t, Config{}, func(t *testing.T, io IO) {
		f := tempFile(t, "r")
		data := pattern(3, 10000)
		if _, err := f.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		full := &Op{Kind: OpRead, File: f, Offset: 100, Bufs: [][]byte{make([]byte, 500)}}
		short := &Op{Kind: OpRead, File: f, Offset: 9900, Bufs: [][]byte{make([]byte, 500)}}
		past := &Op{Kind: OpRead, File: f, Offset: 20000, Bufs: [][]byte{make([]byte, 10)}}
		if err := Do(io, full, short, past); err != nil {
			t.Fatal(err)
		}
		if full.N != 500 || !bytes.Equal(full.Bufs[0], data[100:600]) {
			t.Fatalf("full read: N=%d", full.N)
		}
		if short.N != 100 || !bytes.Equal(short.Bufs[0][:100], data[9900:]) {
			t.Fatalf("short read: N=%d", short.N)
		}
		if past.N != 0 {
			t.Fatalf("read past EOF: N=%d", past.N)
		}
	})
}

// errnoOf is filled per platform: the errno behind an op error.
func wantErr(t *testing.T, o *Op, target error, what string) {
	t.Helper()
	if !errors.Is(o.Err, target) {
		t.Fatalf("%s: err = %v, want %v", what, o.Err, target)
	}
}

func TestErrorsReachTheirCaller(t *testing.T) {
	forEach(t, Config{}, func(t *testing.T, io IO) {
		good := tempFile(t, "good")
		closed := tempFile(t, "closed")
		closed.Close()
		ro, err := os.Open(good.Name())
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		ops := []*Op{
			{Kind: OpWrite, File: good, Offset: 0, Bufs: [][]byte{[]byte("first")}, Sync: SyncData, Tag: "good1"},
			{Kind: OpWrite, File: closed, Offset: 0, Bufs: [][]byte{[]byte("x")}, Tag: "closed"},
			{Kind: OpWrite, File: ro, Offset: 0, Bufs: [][]byte{[]byte("x")}, Sync: SyncData, Tag: "readonly"},
			{Kind: OpWrite, File: nil, Offset: 0, Bufs: [][]byte{[]byte("x")}, Tag: "nil"},
			{Kind: OpWrite, File: good, Offset: 5, Bufs: [][]byte{[]byte("second")}, Tag: "good2"},
		}
		if err := io.Submit(ops...); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(ops); {
			out, err := io.Wait(nil, len(ops)-n, -1)
			if err != nil {
				t.Fatal(err)
			}
			n += len(out)
		}
		if ops[0].Err != nil || ops[4].Err != nil {
			t.Fatalf("good ops failed: %v, %v", ops[0].Err, ops[4].Err)
		}
		for _, o := range ops[1:4] {
			if o.Err == nil {
				t.Fatalf("%v: no error", o.Tag)
			}
		}
		testPlatformErrors(t, io)
		got, _ := os.ReadFile(good.Name())
		if string(got) != "firstsecond" {
			t.Fatalf("good file holds %q", got)
		}
	})
}

func TestClosedIO(t *testing.T) {
	for kind, io := range implementations(t, Config{}) {
		if err := io.Close(); err != nil {
			t.Fatal(err)
		}
		if err := io.Submit(&Op{Kind: OpNop}); !errors.Is(err, ErrClosed) {
			t.Fatalf("%s: submit after close: %v", kind, err)
		}
		if err := io.Close(); err != nil {
			t.Fatalf("%s: second close: %v", kind, err)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"auto", "uring", "portable"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Fatalf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMode("epoll"); err == nil {
		t.Fatal("ParseMode accepted epoll")
	}
	io, c, err := Open(ModePortable, Config{})
	if err != nil || io.Kind() != Portable || c.Kind != Portable {
		t.Fatalf("Open(portable) = %v %v %v", io, c, err)
	}
	io.Close()
}

func ExampleDo() {
	io, choice, err := Open(ModeAuto, Config{})
	if err != nil {
		panic(err)
	}
	defer io.Close()
	f, _ := os.CreateTemp("", "example")
	defer os.Remove(f.Name())
	// A write and its fdatasync, one submission.
	op := &Op{Kind: OpWrite, File: f, Bufs: [][]byte{[]byte("hello")}, Sync: SyncData}
	if err := Do(io, op); err != nil {
		panic(err)
	}
	fmt.Println(op.N, choice.Kind != "")
	// Output: 5 true
}
