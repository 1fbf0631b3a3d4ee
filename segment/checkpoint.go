package segment

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"ringlog/internal/fsutil"
)

// Small files kept beside the segments. Each is rewritten whole: written
// to a temporary name, synced, renamed over the old one, and the directory
// synced, so that a crash leaves either the old or the new content.
const (
	checkpointFile  = "log-checkpoint"
	epochFile       = "leader-epoch-checkpoint"
	cleanMarkerFile = "clean-shutdown"
	tmpSuffix       = fsutil.TmpSuffix
	// maxCheckpointBytes bounds what is read from a checkpoint file: a
	// mutated or foreign file must not make the broker allocate at will.
	maxCheckpointBytes = 1 << 20
)

// readSmallFile reads a checkpoint file, refusing one larger than the
// bound. A missing file is (nil, nil).
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxCheckpointBytes {
		return nil, fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, path, st.Size())
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, err
	}
	return b, nil
}

// logCheckpoint is the log start offset and the recovery point (the base
// offset of the first segment that may hold data not yet synced).
type logCheckpoint struct {
	logStart      int64
	recoveryPoint int64
}

func (c logCheckpoint) encode() []byte {
	return fmt.Appendf(nil, "0\n%d %d\n", c.logStart, c.recoveryPoint)
}

func readLogCheckpoint(dir string) (logCheckpoint, bool, error) {
	b, err := readSmallFile(filepath.Join(dir, checkpointFile))
	if err != nil || b == nil {
		return logCheckpoint{}, false, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "0" {
		return logCheckpoint{}, false, fmt.Errorf("%w: %s: unknown format", ErrCorrupt, checkpointFile)
	}
	f := strings.Fields(lines[1])
	if len(f) != 2 {
		return logCheckpoint{}, false, fmt.Errorf("%w: %s: want two offsets", ErrCorrupt, checkpointFile)
	}
	ls, err1 := strconv.ParseInt(f[0], 10, 64)
	rp, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || ls < 0 || rp < 0 {
		return logCheckpoint{}, false, fmt.Errorf("%w: %s: bad offsets %q", ErrCorrupt, checkpointFile, lines[1])
	}
	return logCheckpoint{ls, rp}, true, nil
}

// parseEpochFile reads Kafka's leader-epoch-checkpoint format:
//
//	0              version
//	2              number of entries
//	0 0            epoch start-offset
//	3 150
func parseEpochFile(b []byte) ([]EpochEntry, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	v, ok := line()
	if !ok || v != "0" {
		return nil, fmt.Errorf("%w: %s: unknown version %q", ErrCorrupt, epochFile, v)
	}
	c, _ := line()
	n, err := strconv.Atoi(c)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: %s: bad count %q", ErrCorrupt, epochFile, c)
	}
	// The count comes from a file: grow the slice as lines are read rather
	// than trusting it for an allocation.
	var out []EpochEntry
	for range n {
		l, ok := line()
		if !ok {
			return nil, fmt.Errorf("%w: %s: %d entries announced, %d found", ErrCorrupt, epochFile, n, len(out))
		}
		f := strings.Fields(l)
		if len(f) != 2 {
			return nil, fmt.Errorf("%w: %s: bad entry %q", ErrCorrupt, epochFile, l)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, fmt.Errorf("%w: %s: bad entry %q", ErrCorrupt, epochFile, l)
		}
		if k := len(out); k > 0 && (int32(e) <= out[k-1].Epoch || o < out[k-1].StartOffset) {
			return nil, fmt.Errorf("%w: %s: entry %q out of order", ErrCorrupt, epochFile, l)
		}
		out = append(out, EpochEntry{Epoch: int32(e), StartOffset: o})
	}
	return out, nil
}

func encodeEpochFile(entries []EpochEntry) []byte {
	b := fmt.Appendf(nil, "0\n%d\n", len(entries))
	for _, e := range entries {
		b = fmt.Appendf(b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b
}
