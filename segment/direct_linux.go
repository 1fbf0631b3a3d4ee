package segment

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// openDirect opens path for direct writes (O_DIRECT) and returns the file
// with the alignment its direct writes keep in their offsets and lengths
// (directAlign), and the one direct I/O needs of the buffers' addresses.
// When the file system offers no direct I/O it returns a reason instead
// (and no error).
func openDirect(path string) (f *os.File, align, memAlign int64, why string, err error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_DIOALIGN|unix.STATX_BASIC_STATS, &stx); err != nil {
		return nil, 0, 0, "", &os.PathError{Op: "statx", Path: path, Err: err}
	}
	if stx.Mask&unix.STATX_DIOALIGN == 0 || stx.Dio_offset_align == 0 {
		return nil, 0, 0, "the file system reports no direct I/O alignment (statx STATX_DIOALIGN)", nil
	}
	f, err = os.OpenFile(path, os.O_WRONLY|unix.O_DIRECT, 0)
	if errors.Is(err, unix.EINVAL) {
		return nil, 0, 0, "the file system refuses O_DIRECT", nil
	}
	if err != nil {
		return nil, 0, 0, "", err
	}
	return f, directAlign(int64(stx.Dio_offset_align), int64(stx.Blksize)), int64(max(stx.Dio_mem_align, 1)), "", nil
}

// directAlign is the alignment direct writes keep: the file system's block
// (blksize) when it is a power of two of at most 64 KiB and a multiple of
// what the device takes (dioAlign), else dioAlign. ext4 runs a direct
// write into unwritten blocks that is aligned to the device's sector (512
// bytes) but not to its block as unaligned: under the inode's exclusive
// lock, which a non-blocking try refuses, so io_uring hands it to an io-wq
// worker, and waited for there until the device is done.
func directAlign(dioAlign, blksize int64) int64 {
	if blksize > dioAlign && blksize <= 64<<10 && blksize&(blksize-1) == 0 && blksize%dioAlign == 0 {
		return blksize
	}
	return dioAlign
}

// adviseRandom turns the kernel's readahead off for f (POSIX_FADV_RANDOM),
// or back on. A direct-written active segment's file runs ahead of its
// data (reserved blocks, zeros): readahead, up to the disk's read_ahead_kb
// past each read (8 MiB on the machines the suite runs on), would fill the
// page cache with those zeros. Reads then bring in what they ask for.
func adviseRandom(f *os.File, on bool) error {
	advice := unix.FADV_NORMAL
	if on {
		advice = unix.FADV_RANDOM
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, advice)
}

// willNeed starts reading [pos, pos+n) of f into the page cache
// (POSIX_FADV_WILLNEED), in one request; a failure only loses the hint.
func willNeed(f *os.File, pos, n int64) {
	_ = unix.Fadvise(int(f.Fd()), pos, n, unix.FADV_WILLNEED)
}

// reserve allocates the blocks of [off, off+n) of f and extends its size
// (fallocate), ahead of direct writes.
func reserve(f *os.File, off, n int64) error { return allocate(f, off, n) }
