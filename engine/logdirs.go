package engine

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"ringlog/internal/fsutil"
)

// JBOD: Kafka's log.dirs with several directories (KIP-112 for failures,
// KIP-113 for moves, KIP-858 for directory ids). The first directory,
// Config.Dir, is the broker's own: it holds meta.properties, topics.json,
// producer-ids, the high-watermark checkpoint of every partition and (the
// broker's) the controller's raft state, as it did with one directory. Every
// directory, the first included, holds partition folders and a
// meta.properties of its own with the cluster id, the node id and a random
// directory.id (KIP-858), written at its first use.
//
// Each partition lives in exactly one directory, found by scanning them all
// at start: a partition folder in two directories is refused (a clear error
// naming both), since neither copy can be told to be the newer. A new
// partition goes to the directory holding the fewest partitions, ties to the
// one listed first: Kafka's LogManager.nextLogDirs rule (partition counts,
// not bytes; a byte rule would send every new partition to a fresh disk).
//
// A directory that cannot be used at start (missing, unreadable, its
// meta.properties unreadable) is offline: the partitions not found in any
// other directory are hosted offline (ErrStorage), as Kafka's JBOD takes a
// failed disk's replicas offline and serves the rest. A missing directory
// other than the first is not created again once the broker has started
// before (the first directory's meta.properties exists): a disk that did
// not mount leaves its mount point empty or absent, and creating the
// directory on the root file system would start its partitions empty. An
// operator who adds a directory creates it. The first directory is the
// broker's identity and must be usable, or the start fails.

// logDir is one of the broker's log directories.
type logDir struct {
	path string
	// id is the directory.id of its meta.properties (zero while offline
	// since the start and never read).
	id [16]byte
	// offline, once set, is why the directory cannot be used (wraps
	// ErrStorage).
	offline atomic.Pointer[error]
	unlock  func() error
}

func (d *logDir) offlineErr() error {
	if e := d.offline.Load(); e != nil {
		return *e
	}
	return nil
}

// LogDir describes one of the broker's log directories.
type LogDir struct {
	// Path is the directory as configured, made absolute.
	Path string
	// ID is its directory.id (KIP-858), zero when offline since the start.
	ID [16]byte
	// Err is why it is offline (wraps ErrStorage); nil when it serves.
	Err error
}

// LogDirs lists the broker's log directories in configured order; the
// first is the broker's own (metadata, checkpoints). It never waits.
func (e *Core) LogDirs() []LogDir {
	out := make([]LogDir, 0, len(e.dirs))
	for _, d := range e.dirs {
		path, err := filepath.Abs(d.path)
		if err != nil {
			path = d.path
		}
		out = append(out, LogDir{Path: path, ID: d.id, Err: d.offlineErr()})
	}
	return out
}

// ErrLogDirNotFound is a log directory the broker does not have (Kafka's
// LOG_DIR_NOT_FOUND).
var ErrLogDirNotFound = errors.New("engine: log directory not found")

// dirByPath finds one of the broker's directories by the absolute path a
// client names (as LogDirs reports them; Kafka compares absolute paths too).
func (e *Core) dirByPath(path string) (*logDir, error) {
	for _, d := range e.dirs {
		abs, err := filepath.Abs(d.path)
		if err == nil && filepath.IsAbs(path) && abs == filepath.Clean(path) {
			return d, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrLogDirNotFound, path)
}

// openDirs locks and checks every directory of the configuration after
// the first (whose meta.properties loadMeta has read): fresh is whether
// the broker starts for the first time (the first directory had no
// meta.properties).
func (e *Core) openDirs(fresh bool) error {
	seen := map[string]bool{}
	for _, p := range append([]string{e.cfg.Dir}, e.cfg.LogDirs...) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("engine: log directory %s: %w", p, err)
		}
		if seen[abs] {
			return fmt.Errorf("engine: log directory %s is listed twice in log.dirs", p)
		}
		seen[abs] = true
	}
	for _, p := range e.cfg.LogDirs {
		d := &logDir{path: p}
		e.dirs = append(e.dirs, d)
		if err := e.openDir(d, fresh); err != nil {
			if errors.Is(err, fsutil.ErrDirLocked) || errors.Is(err, ErrInconsistentClusterID) || errors.Is(err, errWrongNode) {
				return err
			}
			err := fmt.Errorf("%w: log directory %s is offline: %w", ErrStorage, p, err)
			d.offline.Store(&err)
			e.log.Error("log directory offline: the partitions found in no other directory are offline", "dir", p, "err", err)
		}
	}
	return nil
}

// openDir makes d usable: created at the broker's first start, locked, its
// meta.properties read (and written when absent), deletions that a crash
// interrupted finished.
func (e *Core) openDir(d *logDir, fresh bool) error {
	if _, err := os.Stat(d.path); err != nil {
		if !os.IsNotExist(err) || !fresh {
			return err
		}
		if err := fsutil.MkdirAllDurable(d.path, fsutil.DirPerm); err != nil {
			return err
		}
	}
	unlock, err := fsutil.LockDir(d.path)
	if err != nil {
		return fmt.Errorf("engine: %s: %w", d.path, err)
	}
	d.unlock = unlock
	id, err := e.dirMeta(d.path)
	if err != nil {
		return err
	}
	d.id = id
	return removeDeletedDirs(d.path)
}

var errWrongNode = errors.New("engine: data directory of another node")

// dirMeta reads the meta.properties of a log directory other than the
// first, checks its cluster and node ids and returns its directory.id,
// writing the file (with a new id) when it has none.
func (e *Core) dirMeta(dir string) ([16]byte, error) {
	props, err := readProps(filepath.Join(dir, metaFile))
	if err != nil && !os.IsNotExist(err) {
		return [16]byte{}, err
	}
	if v, ok := props["node.id"]; ok {
		if id, err := strconv.Atoi(v); err == nil && int32(id) != e.cfg.NodeID {
			return [16]byte{}, fmt.Errorf("%w: %s belongs to node %d, this is node %d", errWrongNode, dir, id, e.cfg.NodeID)
		}
	}
	if v, ok := props["cluster.id"]; ok && v != e.clusterID {
		return [16]byte{}, fmt.Errorf("%w: %s records cluster id %s, the broker's is %s", ErrInconsistentClusterID, dir, v, e.clusterID)
	}
	if id, ok := parseDirID(props["directory.id"]); ok && props["cluster.id"] != "" {
		return id, nil
	}
	id := newDirID()
	data := fmt.Sprintf("version=1\ncluster.id=%s\nnode.id=%d\ndirectory.id=%s\n", e.clusterID, e.cfg.NodeID, formatDirID(id))
	if err := fsutil.WriteFileAtomic(dir, metaFile, []byte(data)); err != nil {
		return [16]byte{}, err
	}
	return id, nil
}

// readProps reads a Java properties file of key=value lines.
func readProps(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseProps(b), nil
}

// parseProps parses key=value lines; blank lines, comments and lines
// without '=' are skipped (meta.properties as Kafka writes it).
func parseProps(b []byte) map[string]string {
	props := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			props[k] = v
		}
	}
	return props
}

// newDirID is a random directory id. Kafka reserves the ids whose first
// eight bytes are zero (Uuid.ZERO_UUID, UNASSIGNED, LOST, MIGRATING), so a
// random one that starts so is drawn again.
func newDirID() [16]byte {
	for {
		var id [16]byte
		rand.Read(id[:])
		if [8]byte(id[:8]) != ([8]byte{}) {
			return id
		}
	}
}

func formatDirID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func parseDirID(s string) ([16]byte, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 16 {
		return [16]byte{}, false
	}
	return [16]byte(b), true
}

// removeDeletedDirs finishes deletions that a crash interrupted.
func removeDeletedDirs(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, ent := range ents {
		if ent.IsDir() && strings.HasSuffix(ent.Name(), deleteSuffix) {
			if err := os.RemoveAll(filepath.Join(dir, ent.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// isPartitionDir reports whether name is a partition folder's name,
// "<topic>-<partition>".
func isPartitionDir(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 32)
	return err == nil && n >= 0 && ValidateTopicName(name[:i]) == nil
}

// scanDirs finds the directory of every partition folder in the online
// directories, and finishes or undoes the moves between directories that a
// crash interrupted (recoverMoves). A folder in two directories fails the
// start.
func (e *Core) scanDirs() (map[string]*logDir, error) {
	found := map[string]*logDir{}
	futures := map[string][]string{}
	for _, d := range e.dirs {
		if d.offlineErr() != nil {
			continue
		}
		ents, err := os.ReadDir(d.path)
		if err != nil {
			if d == e.dirs[0] {
				return nil, err
			}
			err := fmt.Errorf("%w: log directory %s is offline: %w", ErrStorage, d.path, err)
			d.offline.Store(&err)
			e.log.Error("log directory offline", "dir", d.path, "err", err)
			continue
		}
		for _, ent := range ents {
			if name, ok := futureOf(ent.Name()); ok && ent.IsDir() {
				futures[name] = append(futures[name], filepath.Join(d.path, ent.Name()))
				continue
			}
			if !ent.IsDir() || !isPartitionDir(ent.Name()) {
				continue
			}
			if other := found[ent.Name()]; other != nil {
				return nil, fmt.Errorf("engine: partition %s is in two log directories, %s and %s: "+
					"remove the copy that is not wanted", ent.Name(), other.path, d.path)
			}
			found[ent.Name()] = d
		}
	}
	return found, e.recoverMoves(found, futures)
}

// placeDir picks the directory of a partition being opened (e.mu held, or
// at start). At start (fresh false) it is the directory holding the
// partition's folder; a partition found nowhere while a directory is
// offline may be there, so it gets none (nil: hosted offline, with the
// error). Otherwise, and for new partitions, it is the online directory
// with the fewest partitions, counting those of pending (being opened with
// it), ties to the first listed.
func (e *Core) placeDir(name string, fresh bool, pending []*partition) (*logDir, error) {
	if !fresh && e.found != nil {
		if d := e.found[name]; d != nil {
			return d, nil
		}
		for _, d := range e.dirs {
			if err := d.offlineErr(); err != nil {
				return nil, err
			}
		}
	}
	counts := make(map[*logDir]int, len(e.dirs))
	for _, p := range *e.parts.Load() {
		counts[p.ldir.Load()]++
	}
	for _, p := range pending {
		counts[p.ldir.Load()]++
	}
	var best *logDir
	for _, d := range e.dirs {
		if d.offlineErr() != nil {
			continue
		}
		if best == nil || counts[d] < counts[best] {
			best = d
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w: every log directory is offline", ErrStorage)
	}
	return best, nil
}

// clearLeftovers moves aside, in every online directory other than keep, a
// folder of the partition's name left by a deletion that did not finish, so
// that a new partition never meets an old copy in another directory at the
// next start.
func (e *Core) clearLeftovers(name string, keep *logDir, unique string) error {
	for _, d := range e.dirs {
		if d == keep || d.offlineErr() != nil {
			continue
		}
		dir := filepath.Join(d.path, name)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		i := strings.LastIndexByte(name, '-')
		n, _ := strconv.ParseInt(name[i+1:], 10, 32)
		if err := os.Rename(dir, deletedDir(dir, TP{Topic: name[:i], Partition: int32(n)}, unique)); err != nil {
			return err
		}
		if err := fsutil.SyncDir(d.path); err != nil {
			return err
		}
	}
	return nil
}
