package fetcher

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func lenFrame(n int32, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(n))
	return append(b, body...)
}

func TestReadFrame(t *testing.T) {
	body := bytes.Repeat([]byte{7}, 300<<10) // spans several buffer growths
	for _, tc := range []struct {
		name string
		in   []byte
		max  int
		want []byte
		err  error
	}{
		{"whole", lenFrame(int32(len(body)), body), 1 << 20, body, nil},
		{"small", lenFrame(4, []byte{1, 2, 3, 4}), 100, []byte{1, 2, 3, 4}, nil},
		{"above the limit", lenFrame(101, nil), 100, nil, ErrFrameTooLarge},
		{"negative length", lenFrame(-5, nil), 100, nil, ErrProtocol},
		{"shorter than a header", lenFrame(3, []byte{1, 2, 3}), 100, nil, ErrProtocol},
		{"truncated body", lenFrame(1000, []byte{1, 2}), 1 << 20, nil, io.ErrUnexpectedEOF},
		{"truncated length", []byte{0, 0}, 100, nil, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readFrame(bytes.NewReader(tc.in), tc.max)
			if !errors.Is(err, tc.err) || !bytes.Equal(got, tc.want) {
				t.Errorf("readFrame: %d bytes, %v; want %d, %v", len(got), err, len(tc.want), tc.err)
			}
		})
	}
}

// TestReadFrameLyingLength: a length of 90 MiB (under the limit) followed
// by a few bytes and EOF allocates in proportion to what arrived, not to
// the length.
func TestReadFrameLyingLength(t *testing.T) {
	in := lenFrame(90<<20, make([]byte, 100))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := readFrame(bytes.NewReader(in), 100<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("readFrame: %v, want unexpected EOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("a lying 90 MiB length cost %d bytes", got)
	}
}

// TestDecodeResponseHeader: a response header that is cut, answers another
// request or has malformed tags is a protocol error. (The tag sections
// themselves are tested with internal/kwire, which reads them.)
func TestDecodeResponseHeader(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	body := resp.AppendTo(nil)
	frame := func(corr uint32, tags ...byte) []byte {
		return append(append(binary.BigEndian.AppendUint32(nil, corr), tags...), body...)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		ok    bool
	}{
		{"good", frame(1, 0), true},
		{"an unknown header tag", frame(1, 1, 5, 2, 0xa, 0xb), true},
		{"cut in the correlation id", []byte{0, 0, 1}, false},
		{"another correlation id", frame(2, 0), false},
		{"tag size past the end", frame(1, 1, 5, 0x7f), false},
		{"no header tags", frame(1)[:4], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrFetchRequest()
			req.Version = 12
			_, err := decodeResponse(&request{kind: req, corr: 1, version: 12}, tc.frame)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrProtocol)) {
				t.Errorf("decodeResponse: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// FuzzDecodeFetchResponse: whatever a leader sends as a Fetch response
// body, decoding returns an error or a response; it never panics, and
// trimming each partition's records never panics either.
func FuzzDecodeFetchResponse(f *testing.F) {
	for _, v := range []int16{4, 12, 16} {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = v
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.RecordBatches = cat(mkBatch(0, 5), mkBatch(1, 5)[:20])
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		body := binary.BigEndian.AppendUint32(nil, 1) // correlation id
		if v >= 12 {
			body = append(body, 0) // header tags
		}
		f.Add(v, resp.AppendTo(body))
	}
	f.Fuzz(func(t *testing.T, version int16, frame []byte) {
		if version < 4 || version > 16 {
			return
		}
		req := kmsg.NewPtrFetchRequest()
		req.Version = version
		r, err := decodeResponse(&request{kind: req, corr: 1, version: version}, frame)
		if err != nil {
			return
		}
		for _, t := range r.(*kmsg.FetchResponse).Topics {
			for _, p := range t.Partitions {
				wholeBatches(p.RecordBatches)
			}
		}
	})
}
