package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"ringlog/internal/fsutil"
)

// The high watermarks of a replicated engine outlive a restart in
// replication-offset-checkpoint, Kafka's file of the same name and format:
//
//	0\n
//	<count>\n
//	<topic> <partition> <high watermark>\n   (count lines)
//
// It is written every HWCheckpointInterval when a high watermark moved, on
// a topic deletion, and at Close. After a start a partition's high
// watermark is its checkpointed value (within the log start offset and the
// LEO), or its log start offset when it has none: never above what was
// committed, so consumers are never shown records that a truncation may
// take back; the replication layer moves it up again from there.
const (
	hwCheckpointFile = "replication-offset-checkpoint"
	// maxHWCheckpointBytes bounds what is read: a damaged or foreign file
	// must not make the broker allocate at will.
	maxHWCheckpointBytes = 64 << 20
)

func encodeHWCheckpoint(hws map[TP]int64) []byte {
	tps := slices.SortedFunc(maps.Keys(hws), func(a, b TP) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, hws[tp])
	}
	return b.Bytes()
}

func decodeHWCheckpoint(data []byte) (map[TP]int64, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("engine: %s: %s", hwCheckpointFile, fmt.Sprintf(format, args...))
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<16)
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return sc.Text(), true
	}
	if v, ok := line(); !ok || v != "0" {
		return nil, bad("version %q, want 0", v)
	}
	v, _ := line()
	count, err := strconv.Atoi(v)
	// Every entry takes at least 6 bytes: no count beyond what the file
	// can hold is believed.
	if err != nil || count < 0 || count > len(data)/6 {
		return nil, bad("count %q", v)
	}
	hws := make(map[TP]int64, count)
	for i := range count {
		v, ok := line()
		f := strings.Fields(v)
		if !ok || len(f) != 3 {
			return nil, bad("entry %d: %q", i, v)
		}
		part, perr := strconv.ParseInt(f[1], 10, 32)
		hw, herr := strconv.ParseInt(f[2], 10, 64)
		if ValidateTopicName(f[0]) != nil || perr != nil || herr != nil || part < 0 || hw < 0 {
			return nil, bad("entry %d: %q", i, v)
		}
		hws[TP{f[0], int32(part)}] = hw
	}
	if err := sc.Err(); err != nil {
		return nil, bad("%v", err)
	}
	if v, ok := line(); ok {
		return nil, bad("%q after %d entries", v, count)
	}
	return hws, nil
}

// loadHWCheckpoint reads the checkpoint; a missing file is an empty one.
func loadHWCheckpoint(dir string) (map[TP]int64, error) {
	path := filepath.Join(dir, hwCheckpointFile)
	st, err := os.Stat(path)
	if os.IsNotExist(err) {
		return map[TP]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	if st.Size() > maxHWCheckpointBytes {
		return nil, fmt.Errorf("engine: %s is %d bytes", hwCheckpointFile, st.Size())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeHWCheckpoint(data)
}

// hwCheckpointer writes the checkpoint of a replicated engine.
type hwCheckpointer struct {
	e    *Core
	mu   sync.Mutex // serialises writes
	last map[TP]int64
	stop chan struct{}
	done chan struct{}
}

func startHWCheckpointer(e *Core) *hwCheckpointer {
	c := &hwCheckpointer{e: e, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

func (c *hwCheckpointer) run() {
	defer close(c.done)
	t := time.NewTicker(c.e.cfg.HWCheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if err := c.write(); err != nil {
				c.e.log.Error("high watermark checkpoint", "err", err)
			}
		}
	}
}

// write saves the high watermarks of the partitions now open, unless
// none changed since the last write. Any goroutine may call it.
func (c *hwCheckpointer) write() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := *c.e.parts.Load()
	hws := make(map[TP]int64, len(parts))
	for tp, p := range parts {
		hws[tp] = p.hw.Load()
	}
	if c.last != nil && maps.Equal(hws, c.last) {
		return nil
	}
	if err := fsutil.WriteFileAtomic(c.e.cfg.Dir, hwCheckpointFile, encodeHWCheckpoint(hws)); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	c.last = hws
	return nil
}

// close stops the periodic writes; the caller writes the last one.
func (c *hwCheckpointer) close() {
	close(c.stop)
	<-c.done
}
