package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"sync/atomic"

	"ringlog/internal/fsutil"
)

// The aborted-transactions index (KIP-98), Kafka's TransactionIndex: one
// `<base>.txnindex` file beside each segment, one entry per transaction
// aborted by a marker written into that segment, in the order of the
// markers. A read_committed consumer gets the entries overlapping what it
// fetched (Fetch's aborted_transactions) and drops the records of those
// producers from each first offset up to the ABORT marker.
//
//	entry (34 bytes, big-endian, Kafka's AbortedTxn):
//	  version int16 (0) | producerId int64 | firstOffset int64 |
//	  lastOffset int64 (the marker's offset) | lastStableOffset int64
//
// lastStableOffset is the partition's last stable offset once the
// transaction ended: with it, a reader knows that no transaction aborted
// later can start below it, and stops looking (AbortedTxns).
//
// The entries live in memory too (an immutable slice readers load
// atomically): aborts are rare and an entry is 34 bytes, and a fetch must
// not read a file per segment to learn that there are none. The file is
// opened only to append, rewrite and sync it, so a segment holds no fourth
// descriptor. Every segment has the file, empty when nothing was aborted
// in it: a missing file then means one that was lost, not one never
// needed.
//
// Durability: the index is derived from the log. Open trusts the file only
// for segments below the recovery point (synced with their segment by the
// roll's background sync) and after a clean shutdown (synced by Close);
// for the others, and for a file missing or torn, it marks the index stale
// and the log's owner rebuilds it from the batches (TxnIndexStale,
// RebuildTxnIndexes), because only the owner knows where each aborted
// transaction started (producer state).

const (
	txnIndexSuffix  = ".txnindex"
	txnEntrySize    = 34
	txnEntryVersion = 0
)

// AbortedTxn is one entry of a segment's aborted-transactions index.
type AbortedTxn struct {
	ProducerID  int64
	FirstOffset int64
	// LastOffset is the offset of the ABORT marker.
	LastOffset int64
	// LastStableOffset is the partition's last stable offset after the
	// abort.
	LastStableOffset int64
}

// ErrTxnIndex means a .txnindex file does not hold valid entries for its
// segment; Open rebuilds such a file rather than failing.
var ErrTxnIndex = errors.New("segment: invalid transaction index")

func appendTxnEntry(b []byte, e AbortedTxn) []byte {
	b = binary.BigEndian.AppendUint16(b, txnEntryVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(e.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(e.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(e.LastOffset))
	return binary.BigEndian.AppendUint64(b, uint64(e.LastStableOffset))
}

// decodeTxnIndex parses a .txnindex file of the segment holding offsets
// [base, next). Every entry must be version 0, name a producer, start no
// later than it ends, end inside the segment, in marker order, and have a
// last stable offset no further than just after its marker. The entries
// allocated are bounded by len(b)/34: the bytes are the only source of the
// count.
func decodeTxnIndex(b []byte, base, next int64) ([]AbortedTxn, error) {
	if len(b)%txnEntrySize != 0 {
		return nil, fmt.Errorf("%w: %d bytes, not a whole number of %d-byte entries", ErrTxnIndex, len(b), txnEntrySize)
	}
	if len(b) == 0 {
		return nil, nil
	}
	out := make([]AbortedTxn, 0, len(b)/txnEntrySize)
	prev := int64(math.MinInt64)
	for len(b) > 0 {
		if v := int16(binary.BigEndian.Uint16(b)); v != txnEntryVersion {
			return nil, fmt.Errorf("%w: entry %d has version %d", ErrTxnIndex, len(out), v)
		}
		e := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		}
		switch {
		case e.ProducerID < 0, e.FirstOffset < 0, e.FirstOffset > e.LastOffset:
			return nil, fmt.Errorf("%w: entry %d %+v", ErrTxnIndex, len(out), e)
		case e.LastOffset < base || e.LastOffset >= next:
			return nil, fmt.Errorf("%w: entry %d ends at %d, outside the segment's [%d, %d)", ErrTxnIndex, len(out), e.LastOffset, base, next)
		case e.LastOffset <= prev:
			return nil, fmt.Errorf("%w: entry %d ends at %d, not after %d", ErrTxnIndex, len(out), e.LastOffset, prev)
		case e.LastStableOffset < 0 || e.LastStableOffset > e.LastOffset+1:
			return nil, fmt.Errorf("%w: entry %d has last stable offset %d", ErrTxnIndex, len(out), e.LastStableOffset)
		}
		prev = e.LastOffset
		out = append(out, e)
		b = b[txnEntrySize:]
	}
	return out, nil
}

// txnIndex is a segment's aborted-transactions index. The owner changes
// it; readers load entries.
type txnIndex struct {
	path    string
	entries txnEntries
	// Owned by the writer.
	stale bool // to be rebuilt from the log (Open)
	dirty bool // written since the last sync
}

// txnEntries publishes an index's entries to readers: a slice never
// modified below its length once stored.
type txnEntries struct{ p atomic.Pointer[[]AbortedTxn] }

func (a *txnEntries) load() []AbortedTxn {
	if v := a.p.Load(); v != nil {
		return *v
	}
	return nil
}

func (a *txnEntries) store(v []AbortedTxn) { a.p.Store(&v) }

// create makes the file, empty, if there is none, and reports whether it
// had to (a segment whose index was lost when it should be there).
func (x *txnIndex) create() (created bool, err error) {
	f, err := os.OpenFile(x.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, fsutil.FilePerm)
	if errors.Is(err, os.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, f.Close()
}

// load reads the file for the segment [base, next); a file that does not
// decode leaves the index empty and stale.
func (x *txnIndex) load(base, next int64) error {
	b, err := os.ReadFile(x.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			x.entries.store(nil)
			x.stale = true
			return nil
		}
		return err
	}
	es, err := decodeTxnIndex(b, base, next)
	if err != nil {
		x.entries.store(nil)
		x.stale = true
		return nil
	}
	x.entries.store(es)
	return nil
}

// append adds an entry at the end of the file (not synced: see the
// package's durability rule above).
func (x *txnIndex) append(e AbortedTxn) error {
	cur := x.entries.load()
	f, err := os.OpenFile(x.path, os.O_WRONLY|os.O_CREATE, fsutil.FilePerm)
	if err != nil {
		return err
	}
	_, werr := f.WriteAt(appendTxnEntry(nil, e), int64(len(cur))*txnEntrySize)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("segment: append to %s: %w", x.path, err)
	}
	// A reader holding the previous slice sees only its own length: the
	// element appended beyond it is never read through it.
	x.entries.store(append(cur, e))
	x.dirty = true
	return nil
}

// rewrite replaces the file's content with es and syncs it.
func (x *txnIndex) rewrite(es []AbortedTxn) error {
	b := make([]byte, 0, len(es)*txnEntrySize)
	for _, e := range es {
		b = appendTxnEntry(b, e)
	}
	f, err := os.OpenFile(x.path, os.O_WRONLY|os.O_CREATE, fsutil.FilePerm)
	if err != nil {
		return err
	}
	_, werr := f.WriteAt(b, 0)
	err = errors.Join(werr, f.Truncate(int64(len(b))), f.Sync(), f.Close())
	if err != nil {
		return fmt.Errorf("segment: rewrite %s: %w", x.path, err)
	}
	x.entries.store(slices.Clip(slices.Clone(es)))
	x.dirty, x.stale = false, false
	return nil
}

// truncateTo drops the entries of markers at or above offset.
func (x *txnIndex) truncateTo(offset int64) error {
	es := x.entries.load()
	n := sort.Search(len(es), func(i int) bool { return es[i].LastOffset >= offset })
	if n == len(es) {
		return nil
	}
	return x.rewrite(es[:n])
}

// sync makes the file durable if it was written since the last sync.
func (x *txnIndex) sync() error {
	if !x.dirty {
		return nil
	}
	f, err := os.OpenFile(x.path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("segment: sync %s: %w", x.path, err)
	}
	x.dirty = false
	return nil
}

// openForSync opens the file for a sync op in the ring, or returns nil when
// nothing needs syncing. The caller closes it once the op completes.
func (x *txnIndex) openForSync() (*os.File, error) {
	if !x.dirty {
		return nil, nil
	}
	f, err := os.OpenFile(x.path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	x.dirty = false // a failed sync fails the log anyway
	return f, nil
}

// AppendAbortedTxn records that e's transaction was aborted by the marker
// at e.LastOffset, which must be in the log already, in the segment that
// holds it (owner only). Entries must come in marker order.
func (l *Log) AppendAbortedTxn(e AbortedTxn) error {
	if err := l.usable(); err != nil {
		return err
	}
	s := l.segs[segmentFor(l.segs, e.LastOffset)]
	if e.LastOffset < s.base || e.LastOffset >= s.next() {
		return fmt.Errorf("%w: marker offset %d is not in the log", ErrOutOfRange, e.LastOffset)
	}
	if es := s.txn.entries.load(); len(es) > 0 && es[len(es)-1].LastOffset >= e.LastOffset {
		return fmt.Errorf("%w: aborted transaction ending at %d after one ending at %d", ErrTxnIndex, e.LastOffset, es[len(es)-1].LastOffset)
	}
	if err := s.txn.append(e); err != nil {
		l.fail(err)
		return err
	}
	return nil
}

// AbortedTxns returns the aborted transactions that overlap the offsets
// [from, upper): those whose marker is at or after from and whose first
// offset is below upper, in marker order, as a read_committed fetch of
// that range needs them. Any goroutine may call it.
func (l *Log) AbortedTxns(from, upper int64) []AbortedTxn {
	set := l.acquire()
	if set == nil {
		return nil
	}
	defer set.release()
	var out []AbortedTxn
	for i := segmentFor(set.segs, from); i < len(set.segs); i++ {
		for _, e := range set.segs[i].txn.entries.load() {
			if e.LastOffset < from {
				continue
			}
			if e.FirstOffset < upper {
				out = append(out, e)
			}
			// Every transaction that started below upper had ended when
			// this one did: later entries start at or above upper.
			if e.LastStableOffset >= upper {
				return out
			}
		}
	}
	return out
}

// TxnIndexStale returns the base offset of the first segment whose
// aborted-transactions index Open could not trust, or -1 when every index
// is sound (owner only). The owner then replays the log from a point where
// it knows the open transactions, at or below that base, and hands the
// entries to RebuildTxnIndexes.
func (l *Log) TxnIndexStale() int64 {
	for _, s := range l.segs {
		if s.txn.stale {
			return s.base
		}
	}
	return -1
}

// RebuildTxnIndexes replaces the index of every stale segment with the
// entries of es whose marker lies in it (es in marker order, covering at
// least every stale segment), and syncs each (owner only).
func (l *Log) RebuildTxnIndexes(es []AbortedTxn) error {
	for i, s := range l.segs {
		if !s.txn.stale {
			continue
		}
		end := int64(math.MaxInt64)
		if i+1 < len(l.segs) {
			end = l.segs[i+1].base
		}
		lo := sort.Search(len(es), func(j int) bool { return es[j].LastOffset >= s.base })
		hi := sort.Search(len(es), func(j int) bool { return es[j].LastOffset >= end })
		if err := s.txn.rewrite(es[lo:hi]); err != nil {
			l.fail(err)
			return err
		}
	}
	return nil
}

// writeFileSynced creates (or replaces the content of) the file at path
// with b and syncs it.
func writeFileSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fsutil.FilePerm)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("segment: write %s: %w", path, err)
	}
	return nil
}
