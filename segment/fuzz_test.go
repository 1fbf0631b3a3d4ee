package segment

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

var (
	fuzzTemplateOnce sync.Once
	fuzzTemplate     string
	fuzzTemplateErr  error
)

// fuzzTemplateDir builds, once per process, a small cleanly closed log with
// two segments to mutate.
func fuzzTemplateDir(t testing.TB) string {
	fuzzTemplateOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ringlog-fuzz-template")
		if err != nil {
			fuzzTemplateErr = err
			return
		}
		cfg := fuzzConfig()
		l, err := Open(dir, cfg, Options{})
		if err != nil {
			fuzzTemplateErr = err
			return
		}
		for i := range 24 {
			if _, err := l.Append([][]byte{mkBatch(t, 1+i%3, 40, int64(100+i), i)}, AppendOptions{LeaderEpoch: int32(i / 8)}); err != nil {
				fuzzTemplateErr = err
				return
			}
		}
		fuzzTemplateErr = l.Close()
		fuzzTemplate = dir
	})
	if fuzzTemplateErr != nil {
		t.Fatal(fuzzTemplateErr)
	}
	return fuzzTemplate
}

func fuzzConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 2048
	c.SegmentIndexBytes = 1024
	c.IndexIntervalBytes = 256
	return c
}

// FuzzOpenMutated opens a log directory whose files were mutated by the
// fuzzer's program: a list of 5-byte steps (file, operation, position u16,
// value). Opening must fail with an error or succeed; never panic or hang.
// Without the clean-shutdown marker every file is validated, so every batch
// read back must be valid.
func FuzzOpenMutated(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 100, 0xff})           // flip a byte of the first .log
	f.Add([]byte{3, 2, 0, 50, 0})               // truncate the second .log
	f.Add([]byte{1, 1, 0, 8, 0x7f})             // set a byte of an index
	f.Add([]byte{6, 4, 0, 0, 0})                // remove the clean marker
	f.Add([]byte{6, 4, 0, 0, 0, 3, 3, 0, 0, 9}) // no marker, garbage after the tail
	f.Add([]byte{7, 1, 0, 2, '9', 8, 1, 0, 0, '3'})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 5*64 {
			return
		}
		dir := filepath.Join(t.TempDir(), "log")
		copyDir(t, fuzzTemplateDir(t), dir)
		files := []string{
			segmentName(0) + logSuffix, segmentName(0) + indexSuffix, segmentName(0) + timeIndexSuffix,
		}
		ents, _ := os.ReadDir(dir)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		slices.Sort(names)
		files = append(files, names...)
		for len(prog) >= 5 {
			name := filepath.Join(dir, files[int(prog[0])%len(files)])
			pos := int64(binary.BigEndian.Uint16(prog[2:4]))
			val := prog[4]
			switch prog[1] % 5 {
			case 0, 1: // flip or set a byte
				if fh, err := os.OpenFile(name, os.O_RDWR, 0); err == nil {
					if st, _ := fh.Stat(); st != nil && st.Size() > 0 {
						p := pos % st.Size()
						b := []byte{val}
						if prog[1]%5 == 0 {
							fh.ReadAt(b, p)
							b[0] ^= val | 1
						}
						fh.WriteAt(b, p)
					}
					fh.Close()
				}
			case 2: // truncate
				if st, err := os.Stat(name); err == nil && st.Size() > 0 {
					os.Truncate(name, pos%st.Size())
				}
			case 3: // append garbage
				if fh, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0); err == nil {
					fh.Write(slices.Repeat([]byte{val}, int(pos%512)))
					fh.Close()
				}
			case 4: // remove
				os.Remove(name)
			}
			prog = prog[5:]
		}
		_, markerErr := os.Stat(filepath.Join(dir, cleanMarkerFile))
		l, err := Open(dir, fuzzConfig(), Options{})
		if err != nil {
			return
		}
		defer l.Close()
		b, err := l.ReadBatches(l.LogStartOffset(), 1<<20, l.LEO())
		if err == nil && errors.Is(markerErr, os.ErrNotExist) {
			if err := splitBatchesErr(b); err != nil {
				t.Fatalf("recovered log returned: %v", err)
			}
		}
		l.OffsetForTimestamp(110, l.LEO())
		l.EndOffsetForEpoch(1)
		if _, err := l.Append([][]byte{mkBatch(t, 1, 10, 1, 1)}, AppendOptions{LeaderEpoch: 9}); err == nil && errors.Is(markerErr, os.ErrNotExist) {
			if _, err := parseBatches(readAll(t, l)); err != nil {
				t.Fatalf("after an append: %v", err)
			}
		}
	})
}
