package bench

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// readFileCache reads every regular file under dir once, so that the
// page cache holds the peer's data before a consume that the report calls
// cached. A broker that writes through the page cache (Kafka, NATS,
// ringlog with -writes buffered) has it there already, and the read only
// costs the suite's time; ringlog's direct writes (-writes auto on
// io_uring, its default) leave only a partition's latest appends in
// memory (its tail cache), so without this its first consume would read
// the disk, which the cold consume measures apart.
func readFileCache(dir string) error {
	buf := make([]byte, 1<<20)
	return eachFile(dir, func(f *os.File) error {
		_, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		return err
	})
}

// eachFile opens every regular file under dir in turn and calls fn with
// it; files deleted under the walk (a segment retired, a NATS block
// compacted) are skipped.
func eachFile(dir string, fn func(*os.File) error) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		defer f.Close()
		return fn(f)
	})
}
