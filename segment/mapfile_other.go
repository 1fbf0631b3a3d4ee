//go:build !unix

package segment

import (
	"fmt"
	"os"

	"ringlog/internal/fsutil"
)

// mapFile keeps an index file in a heap buffer where mmap is unavailable
// (Windows): entries are written to memory and the valid prefix is written
// back to the file on sync and close. The buffer has a fixed length for the
// same reason as the mmap variant: readers may hold slices of it.
type mapFile struct {
	f    *os.File
	mem  []byte
	size int64
}

func openMapFile(path string, capacity int64) (*mapFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fsutil.FilePerm)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	mem := make([]byte, max(capacity, st.Size(), 1))
	if _, err := f.ReadAt(mem[:st.Size()], 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return &mapFile{f: f, mem: mem, size: st.Size()}, nil
}

func (m *mapFile) resize(n int64) error {
	if n > int64(len(m.mem)) {
		return fmt.Errorf("resize %s to %d beyond its %d-byte buffer", m.f.Name(), n, len(m.mem))
	}
	if err := m.f.Truncate(n); err != nil {
		return err
	}
	m.size = n
	return nil
}

func (m *mapFile) sync() error {
	if _, err := m.f.WriteAt(m.mem[:m.size], 0); err != nil {
		return err
	}
	return m.f.Sync()
}

func (m *mapFile) close() error {
	err := m.sync()
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	m.mem = nil
	return err
}
