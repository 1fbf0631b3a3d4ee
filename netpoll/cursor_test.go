package netpoll

import (
	"bytes"
	"os"
	"testing"
)

// drain runs a cursor to the end the way a writer does, writing at most step
// bytes per call, and returns the wire bytes and the responses finished.
func drain(t *testing.T, w *cursor, data []byte, step int64) ([]byte, int) {
	var out []byte
	finished := 0
	done := func(*Response) { finished++ }
	for !w.empty() {
		if iov, n := w.gather(); n > 0 {
			k := min(int64(n), step)
			for i := int64(0); i < k; {
				b := iov[0][:min(int64(len(iov[0])), k-i)]
				out = append(out, b...)
				i += int64(len(b))
				iov = iov[1:]
			}
			w.advance(k, done)
			continue
		}
		_, pos, n, ok := w.region()
		if !ok {
			// Empty segments only: a response without prefix or parts.
			w.advance(0, done)
			continue
		}
		k := min(n, step)
		out = append(out, data[pos:pos+k]...)
		w.advance(k, done)
	}
	return out, finished
}

// TestCursor walks responses with a 4-byte prefix (LengthPrefixed) and
// without one (Lines), where an empty response is no bytes at all and must
// still finish.
func TestCursor(t *testing.T) {
	for _, sp := range []Splitter{LengthPrefixed{}, Lines{}} {
		testCursor(t, sp)
	}
}

func testCursor(t *testing.T, sp Splitter) {
	f, data := testFile(t, 1<<20)
	mk := func(build func(r *Response)) *Response {
		r := &Response{}
		build(r)
		if err := r.seal(sp); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, step := range []int64{1, 3, 4, 4096, 1 << 40} {
		// Large parts (beyond gatherBytesMax) only with large steps: a
		// byte-at-a-time walk over them would take minutes.
		large := int64(1)
		if step >= 4096 {
			large = 100
		}
		rs := []*Response{
			mk(func(r *Response) { r.AppendBytes([]byte("hello")) }),
			mk(func(r *Response) {}), // empty: just the prefix, if any
			mk(func(r *Response) {
				r.AppendBytes([]byte("A"))
				r.AppendRegion(f, 10, 1000)
				r.AppendBytes([]byte("B"))
				r.AppendRegion(f, 5000, 3000*large)
			}),
			mk(func(r *Response) { r.AppendBytes(bytes.Repeat([]byte("x"), int(6000*large))) }),
			mk(func(r *Response) { r.AppendRegion(f, 0, 7) }),
			mk(func(r *Response) {}), // empty, last
		}
		checkCursor(t, rs, data, step)
	}
}

func checkCursor(t *testing.T, rs []*Response, data []byte, step int64) {
	var want []byte
	for _, r := range rs {
		want = append(want, r.head...)
		for _, p := range r.parts {
			if p.f == nil {
				want = append(want, p.b...)
			} else {
				want = append(want, data[p.pos:p.pos+p.n]...)
			}
		}
	}
	var w cursor
	w.push(rs[:2])
	w.push(rs[2:])
	got, finished := drain(t, &w, data, step)
	if !bytes.Equal(got, want) {
		t.Errorf("step %d: wire bytes differ (%d vs %d)", step, len(got), len(want))
	}
	if finished != len(rs) {
		t.Errorf("step %d: %d responses finished, want %d", step, finished, len(rs))
	}
}

func TestCursorDropCountsUnsent(t *testing.T) {
	f, _ := testFile(t, 4096)
	r1, r2 := &Response{}, &Response{}
	r1.AppendBytes([]byte("0123456789"))
	r1.AppendRegion(f, 0, 100)
	r2.AppendBytes([]byte("zz"))
	for _, r := range []*Response{r1, r2} {
		if err := r.seal(LengthPrefixed{}); err != nil {
			t.Fatal(err)
		}
	}
	var w cursor
	w.push([]*Response{r1, r2})
	w.advance(4+10+30, func(*Response) { t.Fatal("nothing is finished yet") })
	var unsent []int64
	w.drop(func(_ *Response, n int64) { unsent = append(unsent, n) })
	if len(unsent) != 2 || unsent[0] != 70 || unsent[1] != 6 {
		t.Fatalf("unsent %v, want [70 6]", unsent)
	}
	if !w.empty() {
		t.Fatal("cursor not empty after drop")
	}
}

func TestResponseSeal(t *testing.T) {
	var r Response
	r.AppendRegion(os.Stdin, -1, 10)
	if err := r.seal(LengthPrefixed{}); err != ErrBadRegion {
		t.Fatalf("seal with a negative region position: %v", err)
	}
	var big Response
	big.AppendRegion(os.Stdin, 0, 1<<31)
	if err := big.seal(LengthPrefixed{}); err != ErrResponseTooLarge {
		t.Fatalf("seal of a 2 GiB response: %v", err)
	}
}
