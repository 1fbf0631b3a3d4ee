package streams

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The local state of one task (or of the global stores) is one pebble
// database, at <StateDir>/<app>/<task id>/ (or .../global/). Its keys:
//
//	data:        'd' | len(store) u16 BE | store | key bytes      -> value bytes
//	checkpoint:  'c' | len(store) u16 BE | store | partition u32  -> next changelog offset u64 BE
//
// The key bytes are the key serde's output, as in the changelog record
// (a windowed store, next, will append the window start, u64 big endian,
// so that one key's windows are adjacent and ordered in time, as Kafka's
// WindowKeySchema does). Data and checkpoints are written in one pebble
// batch, so a checkpoint never names changelog records the data lacks.
//
// A task's writes between two commits are held in an indexed batch (reads
// see them); they reach the database only once the commit that made them
// durable in Kafka (outputs and changelog flushed; under exactly-once,
// the transaction committed) succeeded. The database therefore never
// holds state a changelog reader would not see, and a crash needs no
// wipe: restore resumes at the checkpoint.
const (
	prefixData       = 'd'
	prefixCheckpoint = 'c'
)

// stateDB is a task's pebble database.
type stateDB struct {
	db  *pebble.DB
	dir string
}

func openStateDB(dir string) (*stateDB, error) {
	// The changelog is the durable copy, as Kafka Streams runs RocksDB
	// without its WAL: pebble's WAL still orders writes, but nothing
	// waits for an fsync.
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("streams: open state %s: %w", dir, err)
	}
	return &stateDB{db: db, dir: dir}, nil
}

func (s *stateDB) close() error { return s.db.Close() }

func storePrefix(kind byte, store string) []byte {
	p := make([]byte, 0, 3+len(store))
	p = append(p, kind)
	p = binary.BigEndian.AppendUint16(p, uint16(len(store)))
	return append(p, store...)
}

// dataKey is one allocation (storePrefix then an append would often be
// two): every store read and write builds one.
func dataKey(store string, key []byte) []byte {
	k := make([]byte, 0, 3+len(store)+len(key))
	k = append(k, prefixData)
	k = binary.BigEndian.AppendUint16(k, uint16(len(store)))
	k = append(k, store...)
	return append(k, key...)
}

func checkpointKey(store string, partition int32) []byte {
	return binary.BigEndian.AppendUint32(storePrefix(prefixCheckpoint, store), uint32(partition))
}

// checkpoint returns the next changelog offset to restore from, -1 if
// none was written.
func (s *stateDB) checkpoint(store string, partition int32) (int64, error) {
	v, closer, err := s.db.Get(checkpointKey(store, partition))
	if errors.Is(err, pebble.ErrNotFound) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("streams: checkpoint of %s/%d: %d bytes", store, partition, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func putCheckpoint(b *pebble.Batch, store string, partition int32, next int64) error {
	return b.Set(checkpointKey(store, partition), binary.BigEndian.AppendUint64(nil, uint64(next)), nil)
}

// wipe deletes a store's data and checkpoints (a changelog shorter than
// the checkpoint: the topic was recreated).
func (s *stateDB) wipe(store string) error {
	b := s.db.NewBatch()
	for _, p := range [][]byte{storePrefix(prefixData, store), storePrefix(prefixCheckpoint, store)} {
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return err
		}
	}
	return b.Commit(pebble.NoSync)
}

func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// get reads key from r (the task's pending batch or the database).
func get(r pebble.Reader, store string, key []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(dataKey(store, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	return out, true, closer.Close()
}

// rangeStore calls fn for each key and value of store in r, in key order.
func rangeStore(r pebble.Reader, store string, fn func(k, v []byte) bool) error {
	return rangeStorePrefix(r, store, nil, fn)
}

// rangeStorePrefix calls fn for each key of store that starts with
// prefix, and its value, in key order.
func rangeStorePrefix(r pebble.Reader, store string, prefix []byte, fn func(k, v []byte) bool) error {
	p := storePrefix(prefixData, store)
	lower := append(append([]byte(nil), p...), prefix...)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if !fn(it.Key()[len(p):], it.Value()) {
			break
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// quietLogger keeps pebble's informational lines out of the
// application's output; errors reach the caller through return values.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
