package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"ringlog/internal/fsutil"
	"ringlog/segment"
)

// Moving a replica between log directories (KIP-113's AlterReplicaLogDirs)
// while it serves. Kafka fills a future log by fetching from the current
// one (ReplicaAlterLogDirsThread) and swaps them once it caught up; ringlog
// copies files, since both logs are on one machine and byte-identical:
//
//  1. On the shard: the future folder <dst>/<topic>-<p>.<unique>-future is
//     created (its parent synced) and the move recorded; the cleaner leaves
//     the partition alone while it runs (Kafka pauses cleaning too).
//  2. Off the shard: every file of the segments closed at that moment is
//     copied, and the active segment's .log up to its size then (between
//     rounds the file holds exactly the committed bytes); each copy is
//     synced. Appends go on meanwhile.
//  3. On the shard, between rounds: the current log is closed cleanly (a
//     producer snapshot, trimmed indexes, the clean-shutdown marker); what
//     changed since is copied (the new bytes of .log files, every other
//     file of the active segment and every checkpoint whole; after a
//     truncation during the move, every file whole) and files gone from
//     the source are removed; the files and the future folder are synced.
//  4. The swap: the current folder is renamed to <topic>-<p>.<unique>-delete
//     and its directory synced, then the future folder to <dst>/<topic>-<p>
//     and its directory synced; the copy is opened (cleanly: the marker came
//     with it) and installed as the partition's log; the old folder is
//     removed.
//
// Crash rule, applied when the engine opens (recoverMoves): a folder
// <topic>-<p> found in any directory is the log, and every future folder of
// the partition is an unfinished copy, removed. With no <topic>-<p> anywhere
// and every directory online, the crash came between the two renames of
// step 4, after the copy was complete and synced: the future folder is
// renamed into place (the -delete folder is removed like any other). With a
// directory offline the future folder is left as it is (the current log
// may be in the offline directory). So every crash leaves exactly one
// complete log. A restart resumes a move, as Kafka does: the unfinished
// copy is removed and the move starts again to the directory that held it
// (resumeMoves), from the first segment.

const futureSuffix = "-future"

// ErrMoveCancelled ends a move that another AlterReplicaLogDir, a deletion
// or the partition going offline replaced.
var errMoveCancelled = errors.New("engine: move cancelled")

// move is a replica's move to another log directory under way.
type move struct {
	dst    *logDir
	future string // the future folder being filled
	// Set by the copying goroutine before it hands the swap to the shard
	// (the shard's do orders them): how many bytes of each file were
	// copied, and the active segment's base when they were (segment files
	// below it belonged to closed segments).
	copied     map[string]int64
	closedBase int64
	// copiedEnd is the offset below which the copy holds the log, for
	// DescribeLogDirs' lag of the future log.
	copiedEnd atomic.Int64
	// truncated is set on the shard when the log is truncated during the
	// move: bytes copied may have been cut and written again, so the swap
	// copies every file whole.
	truncated atomic.Bool
	stop      atomic.Bool
	// gone is the old folder, removed by the copying goroutine after the
	// swap.
	gone string
}

// MoveStep names the points of a move that Config.MoveHook sees.
type MoveStep string

// The steps of a move, in order.
const (
	MoveStarted       MoveStep = "started"        // the future folder exists, empty
	MoveCopiedClosed  MoveStep = "copied-closed"  // the background copy is done
	MoveCopied        MoveStep = "copied"         // on the shard: the future folder is complete and synced
	MoveSourceRenamed MoveStep = "source-renamed" // the current folder is renamed to -delete
	MoveFutureRenamed MoveStep = "future-renamed" // the future folder is in place, not opened yet
	MoveDone          MoveStep = "done"           // the copy serves
)

// AlterReplicaLogDir moves tp's log to the log directory path (absolute,
// as LogDirs names it) while it serves; it returns once the move started
// (or at once when the log is there already, which cancels a move to
// elsewhere, as Kafka does). Errors: ErrLogDirNotFound for a path that is
// not one of the broker's directories, ErrStorage when the destination,
// any directory (a future log is not created while one is offline, as in
// Kafka) or the partition is offline, ErrUnknownTopicOrPartition.
func (e *Core) AlterReplicaLogDir(tp TP, path string) error {
	if e.closed.Load() {
		return ErrClosed
	}
	// Kafka's order: the destination (unknown, then offline), the
	// partition (unknown, then offline), then any directory offline.
	d, err := e.dirByPath(path)
	if err != nil {
		return err
	}
	if err := d.offlineErr(); err != nil {
		return err
	}
	p, err := e.partition(tp)
	if err != nil {
		return err
	}
	for _, od := range e.dirs {
		if err := od.offlineErr(); err != nil {
			return err
		}
	}
	var started *move
	err = p.shard.do(func() error {
		if p.deleted.Load() {
			return unknownPartition(p.tp)
		}
		if err := p.offlineErr(); err != nil {
			return err
		}
		if cur := p.move.Load(); cur != nil {
			if cur.dst == d {
				return nil
			}
			if err := p.shard.cancelMove(p); err != nil {
				return err
			}
		}
		if p.ldir.Load() == d {
			return nil
		}
		name := filepath.Base(p.dir)
		m := &move{dst: d, future: filepath.Join(d.path, name+"."+strconv.FormatInt(time.Now().UnixNano(), 36)+futureSuffix)}
		if err := fsutil.MkdirAllDurable(m.future, fsutil.DirPerm); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
		p.move.Store(m)
		started = m
		return nil
	})
	if err != nil || started == nil {
		return err
	}
	e.moves.Add(1)
	go e.runMove(p, started)
	return nil
}

// cancelMove abandons p's move, its future folder removed (shard only).
func (s *shard) cancelMove(p *partition) error {
	m := p.move.Swap(nil)
	if m == nil {
		return nil
	}
	m.stop.Store(true)
	if err := os.RemoveAll(m.future); err != nil {
		return fmt.Errorf("%w: remove %s: %w", ErrStorage, m.future, err)
	}
	return fsutil.SyncDir(m.dst.path)
}

func (e *Core) moveHook(p *partition, step MoveStep) {
	if h := e.cfg.MoveHook; h != nil {
		h(p.tp, step)
	}
}

// runMove copies p's closed segments to the future folder, then has the
// shard finish the move.
func (e *Core) runMove(p *partition, m *move) {
	defer e.moves.Done()
	e.moveHook(p, MoveStarted)
	err := e.copyClosed(p, m)
	if err == nil {
		e.moveHook(p, MoveCopiedClosed)
		err = p.shard.do(func() error { return p.shard.finishMove(p, m) })
	}
	if err != nil {
		if !errors.Is(err, errMoveCancelled) && !errors.Is(err, ErrClosed) {
			e.log.Error("move to another log directory failed; the partition stays where it is", "partition", p.tp, "to", m.dst.path, "err", err)
		}
		_ = p.shard.post(func() {
			if p.move.Load() == m {
				if err := p.shard.cancelMove(p); err != nil {
					e.log.Error("remove an abandoned future log", "dir", m.future, "err", err)
				}
			}
		})
		return
	}
	e.log.Info("partition moved to another log directory", "partition", p.tp, "to", m.dst.path)
	if err := os.RemoveAll(m.gone); err != nil {
		e.log.Error("remove a moved partition's old folder (the next start does)", "dir", m.gone, "err", err)
	}
	e.moveHook(p, MoveDone)
}

// segmentFile splits a segment file's name into its base offset and
// suffix; ok is false for other files (checkpoints, snapshots).
func segmentFile(name string) (base int64, suffix string, ok bool) {
	if len(name) < 21 || name[20] != '.' {
		return 0, "", false
	}
	b, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return b, name[20:], true
}

// copyClosed is step 2, off the shard, in passes: each copies the
// segments closed since the last one and the active .log's new bytes, and
// a pass that finds no segment rolled since the last ends it, so that the
// shard's part (step 3) copies about one pass's appends, not every segment
// rolled during a long copy. At most movePasses passes.
func (e *Core) copyClosed(p *partition, m *move) error {
	m.copied = map[string]int64{}
	prev := int64(-1)
	for range movePasses {
		var src, active string
		var activeBase, activeSize int64
		err := p.shard.do(func() error {
			if p.move.Load() != m {
				return errMoveCancelled
			}
			if err := p.offlineErr(); err != nil {
				return err
			}
			src = p.dir
			activeBase = p.log().ActiveBase()
			active = fmt.Sprintf("%020d.log", activeBase)
			// The log's size, not the file's: with direct writes the file
			// runs ahead of its batches (reserved blocks, zeros).
			activeSize = p.log().ActiveSize()
			return nil
		})
		if err != nil {
			return err
		}
		if activeBase == prev {
			return nil // nothing rolled since the last pass
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, ent := range ents {
			if m.stop.Load() {
				return errMoveCancelled
			}
			name := ent.Name()
			base, suffix, ok := segmentFile(name)
			if !ok || base > activeBase || (base == activeBase && name != active) {
				continue // the swap copies them
			}
			c, copied := m.copied[name]
			if copied && base < prev {
				continue // closed when an earlier pass copied it
			}
			from, limit := int64(0), int64(-1)
			if copied && suffix == ".log" && !m.truncated.Load() {
				from = c // appends only add to it
			}
			if name == active {
				limit = activeSize
			}
			n, err := copyFile(filepath.Join(src, name), filepath.Join(m.future, name), from, limit, &m.stop)
			if os.IsNotExist(err) {
				continue // retention removed it meanwhile
			}
			if err != nil {
				return err
			}
			m.copied[name] = n
		}
		m.closedBase, prev = activeBase, activeBase
		m.copiedEnd.Store(activeBase)
	}
	return nil
}

// movePasses bounds the background copy's passes.
const movePasses = 4

// copyFile copies src to dst from byte from (dst is truncated there, and
// created when from is 0) up to limit bytes of src (-1: all), syncs dst and
// returns src's bytes now in dst.
func copyFile(src, dst string, from, limit int64, stop *atomic.Bool) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	flags := os.O_WRONLY | os.O_CREATE
	if from == 0 {
		flags |= os.O_TRUNC
	}
	out, err := os.OpenFile(dst, flags, fsutil.FilePerm)
	if err != nil {
		return 0, err
	}
	if err := out.Truncate(from); err != nil {
		out.Close()
		return 0, err
	}
	var r io.Reader = io.NewSectionReader(in, from, 1<<62)
	if limit >= 0 {
		r = io.NewSectionReader(in, from, max(limit-from, 0))
	}
	buf := make([]byte, 1<<20)
	n := from
	for {
		if stop != nil && stop.Load() {
			out.Close()
			return 0, errMoveCancelled
		}
		k, rerr := r.Read(buf)
		if k > 0 {
			if _, err := out.WriteAt(buf[:k], n); err != nil {
				out.Close()
				return 0, err
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			out.Close()
			return 0, rerr
		}
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return 0, err
	}
	return n, out.Close()
}

// finishMove is steps 3 and 4, on the shard between rounds: nothing of p
// is in flight.
func (s *shard) finishMove(p *partition, m *move) error {
	if p.move.Load() != m {
		return errMoveCancelled
	}
	if p.deleted.Load() {
		return unknownPartition(p.tp)
	}
	if err := p.offlineErr(); err != nil {
		return err
	}
	old := p.log()
	if err := p.writeSnapshot(); err != nil {
		return storageError(err)
	}
	if err := old.Close(); err != nil {
		// The disk under the current log failed as it closed.
		s.takeOffline(p, err)
		return err
	}
	src, name := p.dir, filepath.Base(p.dir)
	// Until the swap, a failure leaves the log where it was: reopened.
	if err := s.copyTail(p, m); err != nil {
		return s.reopen(p, src, err)
	}
	s.e.moveHook(p, MoveCopied)
	// The copy is complete: from here on the future folder may be the
	// only whole log, so nothing (takeOffline's cancelMove) may remove it.
	p.move.Store(nil)
	gone := deletedDir(src, p.tp, "moved"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(src, gone); err != nil {
		return s.reopen(p, src, errors.Join(err, os.RemoveAll(m.future)))
	}
	if err := fsutil.SyncDir(filepath.Dir(src)); err != nil {
		// Named either way after a crash, and either way is a whole log.
		s.takeOffline(p, err)
		return err
	}
	s.e.moveHook(p, MoveSourceRenamed)
	dst := filepath.Join(m.dst.path, name)
	if err := os.Rename(m.future, dst); err != nil {
		if rerr := os.Rename(gone, src); rerr != nil {
			// The next start finds no current folder and promotes the
			// complete future one.
			s.takeOffline(p, errors.Join(err, rerr))
			return err
		}
		// The old folder is back: the copy is garbage again.
		return s.reopen(p, src, errors.Join(err, os.RemoveAll(m.future)))
	}
	if err := fsutil.SyncDir(m.dst.path); err != nil {
		s.takeOffline(p, err)
		return err
	}
	s.e.moveHook(p, MoveFutureRenamed)
	l, err := segment.Open(dst, p.topic.config.Log, s.logOptions())
	if err != nil {
		s.takeOffline(p, err)
		return err
	}
	p.dir = dst
	p.ldir.Store(m.dst)
	p.cur.Store(l)
	m.gone = gone
	return nil
}

// reopen opens p's log again at dir after a move failed before its swap,
// and drops the move (its future folder removed, when still recorded).
func (s *shard) reopen(p *partition, dir string, cause error) error {
	l, err := segment.Open(dir, p.topic.config.Log, s.logOptions())
	if err != nil {
		s.takeOffline(p, errors.Join(cause, err))
		return cause
	}
	p.cur.Store(l)
	_ = s.cancelMove(p)
	return cause
}

// copyTail is step 3's copy, with the current log closed.
func (s *shard) copyTail(p *partition, m *move) error {
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	truncated := m.truncated.Load()
	for _, ent := range ents {
		name := ent.Name()
		have[name] = true
		if !ent.Type().IsRegular() {
			continue
		}
		from := int64(0)
		c, copied := m.copied[name]
		base, suffix, seg := segmentFile(name)
		switch {
		case copied && !truncated && suffix == ".log":
			from = c // the rest of it; appends only add
		case copied && !truncated && seg && base < m.closedBase:
			continue // a closed segment's index: unchanged since
		}
		n, err := copyFile(filepath.Join(p.dir, name), filepath.Join(m.future, name), from, -1, nil)
		if err != nil {
			return err
		}
		if st, err := ent.Info(); err == nil && st.Size() != n {
			return fmt.Errorf("engine: copy of %s: %d bytes, the file has %d", name, n, st.Size())
		}
	}
	ents, err = os.ReadDir(m.future)
	if err != nil {
		return err
	}
	for _, ent := range ents {
		if !have[ent.Name()] {
			// Removed from the source since it was copied (retention).
			if err := os.Remove(filepath.Join(m.future, ent.Name())); err != nil {
				return err
			}
		}
	}
	return fsutil.SyncDir(m.future)
}

// recoverMoves applies the crash rule (above) to the future folders found
// in the online directories; found is where each partition folder is, and
// learns the ones promoted.
func (e *Core) recoverMoves(found map[string]*logDir, futures map[string][]string) error {
	anyOffline := false
	for _, d := range e.dirs {
		anyOffline = anyOffline || d.offlineErr() != nil
	}
	for name, paths := range futures {
		switch {
		case found[name] != nil:
			for _, f := range paths {
				e.log.Info("removing an unfinished move's future log", "dir", f, "log", filepath.Join(found[name].path, name))
				if dst := filepath.Dir(f); dst != found[name].path {
					// One move at a time per partition: two futures are
					// a move replaced while its folder was being
					// removed, and the newer name (a later time) wins.
					if tp, ok := partitionOf(name); ok && (e.resume[tp] == "" || filepath.Base(f) > filepath.Base(e.resumeFrom[tp])) {
						if e.resume == nil {
							e.resume, e.resumeFrom = map[TP]string{}, map[TP]string{}
						}
						e.resume[tp], e.resumeFrom[tp] = dst, f
					}
				}
				if err := os.RemoveAll(f); err != nil {
					return err
				}
				if err := fsutil.SyncDir(filepath.Dir(f)); err != nil {
					return err
				}
			}
		case anyOffline:
			e.log.Warn("a future log is kept while a log directory is offline", "dir", paths[0])
		case len(paths) > 1:
			return fmt.Errorf("engine: partition %s has no log and %d future logs (%s): keep one, renamed to %s",
				name, len(paths), strings.Join(paths, ", "), name)
		default:
			parent := filepath.Dir(paths[0])
			e.log.Info("finishing a move that a crash interrupted: the complete future log takes its place", "dir", paths[0])
			if err := os.Rename(paths[0], filepath.Join(parent, name)); err != nil {
				return err
			}
			if err := fsutil.SyncDir(parent); err != nil {
				return err
			}
			for _, d := range e.dirs {
				if d.path == parent {
					found[name] = d
				}
			}
		}
	}
	return nil
}

// resumeMoves starts again the moves a restart interrupted (recoverMoves),
// once the logs are open. A move that cannot start (its partition deleted
// or offline, its destination offline) is logged and left: the log stays
// where it is, complete.
func (e *Core) resumeMoves() {
	for tp, dst := range e.resume {
		if err := e.AlterReplicaLogDir(tp, dst); err != nil {
			e.log.Warn("a move a restart interrupted cannot start again", "topic", tp.Topic, "partition", tp.Partition, "dir", dst, "err", err)
			continue
		}
		e.log.Info("resuming a move a restart interrupted", "topic", tp.Topic, "partition", tp.Partition, "dir", dst)
	}
	e.resume, e.resumeFrom = nil, nil
}

// partitionOf parses a partition folder's name.
func partitionOf(name string) (TP, bool) {
	if !isPartitionDir(name) {
		return TP{}, false
	}
	i := strings.LastIndexByte(name, '-')
	n, _ := strconv.ParseInt(name[i+1:], 10, 32)
	return TP{Topic: name[:i], Partition: int32(n)}, true
}

// futureOf returns the partition folder name of a future folder's name.
func futureOf(name string) (string, bool) {
	rest, ok := strings.CutSuffix(name, futureSuffix)
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 || !isPartitionDir(rest[:i]) {
		return "", false
	}
	return rest[:i], true
}
