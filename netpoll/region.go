package netpoll

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// copyChunkBytes is the unit in which file regions are copied when sendfile
// is not available: one pread, one write.
const copyChunkBytes = 64 << 10

// sendfileChunkMax bounds one sendfile call (Linux moves at most
// 0x7ffff000 bytes per call anyway).
const sendfileChunkMax = 1 << 30

var chunkPool = sync.Pool{New: func() any {
	b := make([]byte, copyChunkBytes)
	return &b
}}

// readChunk reads the first min(n, copyChunkBytes) bytes of the region into
// a pooled buffer; the caller returns it with putChunk. A file shorter than
// the region is ErrShortRegion: the frame's size prefix is already out.
func readChunk(f *os.File, pos, n int64) (*[]byte, []byte, error) {
	bp := chunkPool.Get().(*[]byte)
	b := (*bp)[:min(n, int64(len(*bp)))]
	k, err := f.ReadAt(b, pos)
	if k < len(b) {
		chunkPool.Put(bp)
		if err == nil || errors.Is(err, io.EOF) {
			err = ErrShortRegion
		}
		return nil, nil, fmt.Errorf("netpoll: read %s at %d: %w", f.Name(), pos, err)
	}
	return bp, b, nil
}

func putChunk(bp *[]byte) { chunkPool.Put(bp) }

// copyRegion writes the region to w, c's socket or TLS connection, by
// pread and write, counting the bytes as copied. It returns the bytes
// written.
func copyRegion(w io.Writer, f *os.File, pos, n int64, c *Conn) (int64, error) {
	st := &c.srv.st
	var done int64
	for done < n {
		bp, b, err := readChunk(f, pos+done, n-done)
		if err != nil {
			return done, err
		}
		k, err := w.Write(b)
		putChunk(bp)
		done += int64(k)
		st.copiedBytes.Add(int64(k))
		if k > 0 {
			c.markWrite()
		}
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
