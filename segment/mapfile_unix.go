//go:build unix

package segment

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"ringlog/internal/fsutil"
)

// mapFile is an index file mapped into memory with MAP_SHARED. The mapping
// has a fixed length, at least the largest size the file may reach, and is
// never moved: readers on other goroutines may hold slices of it while the
// writer appends entries, and a truncated file only shrinks below pages
// nobody reads (entries past the published count are never touched).
type mapFile struct {
	f    *os.File
	mem  []byte
	size int64 // current file size
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
	capacity = max(capacity, st.Size())
	page := int64(os.Getpagesize())
	capacity = (capacity + page - 1) / page * page
	if capacity == 0 {
		capacity = page
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(capacity), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	// Entries are appended one at a time and looked up by binary search:
	// readahead on a fault would read (for a preallocated file: zero-fill)
	// pages far ahead of the one touched, which measured as the largest
	// kernel cost of appending.
	if err := unix.Madvise(mem, unix.MADV_RANDOM); err != nil {
		unix.Munmap(mem)
		f.Close()
		return nil, fmt.Errorf("madvise %s: %w", path, err)
	}
	return &mapFile{f: f, mem: mem, size: st.Size()}, nil
}

// resize sets the file size; n must not exceed the mapping.
func (m *mapFile) resize(n int64) error {
	if n > int64(len(m.mem)) {
		return fmt.Errorf("resize %s to %d beyond its %d-byte mapping", m.f.Name(), n, len(m.mem))
	}
	if n == m.size {
		return nil
	}
	if n > m.size {
		// Growing allocates the blocks for real: a store through the
		// mapping into a hole on a full disk would raise SIGBUS, which no
		// error handling can catch.
		if err := allocate(m.f, m.size, n-m.size); err != nil {
			return fmt.Errorf("allocate %s: %w", m.f.Name(), err)
		}
	} else if err := m.f.Truncate(n); err != nil {
		return err
	}
	m.size = n
	return nil
}

// sync writes dirty pages of the mapping and the file's metadata to disk.
func (m *mapFile) sync() error {
	if m.size > 0 {
		if err := unix.Msync(m.mem[:m.size], unix.MS_SYNC); err != nil {
			return fmt.Errorf("msync %s: %w", m.f.Name(), err)
		}
	}
	return m.f.Sync()
}

func (m *mapFile) close() error {
	var err error
	if m.mem != nil {
		err = unix.Munmap(m.mem)
		m.mem = nil
	}
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}
