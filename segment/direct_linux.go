package segment

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// openDirect opens path for direct writes (O_DIRECT) and returns the file
// with the alignment direct I/O needs of its offsets and lengths, and of
// the buffers' addresses. When the file system offers no direct I/O it
// returns a reason instead (and no error).
func openDirect(path string) (f *os.File, align, memAlign int64, why string, err error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_DIOALIGN, &stx); err != nil {
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
	return f, int64(stx.Dio_offset_align), int64(max(stx.Dio_mem_align, 1)), "", nil
}
