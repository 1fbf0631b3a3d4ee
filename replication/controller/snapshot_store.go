package controller

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"ringlog/internal/fsutil"
)

// snapshotRetain is how many raft snapshots are kept on disk.
const snapshotRetain = 2

// durableSnapshots is raft's file snapshot store with the directory syncs
// it lacks. raft syncs a snapshot's files and, after renaming the
// snapshot's directory into place, the snapshots/ directory; it never
// syncs the snapshot's own directory, so after a power loss the renamed
// directory can lack meta.json or state.bin, while raft has already
// compacted its log past the snapshot on the strength of it (a gap raft
// cannot start from). Nor does it sync the parent of snapshots/ when it
// creates it.
type durableSnapshots struct {
	*raft.FileSnapshotStore
	dir string // snapshots/ itself
}

// newSnapshotStore opens the store under dir/snapshots, durably.
func newSnapshotStore(dir string, logger hclog.Logger) (*durableSnapshots, error) {
	// raft's own name for the folder (file_snapshot.go's snapPath). It is
	// made here with the data directory's mode, before raft would make it
	// 0755 (it keeps a folder that exists).
	snaps := filepath.Join(dir, "snapshots")
	if err := fsutil.MkdirAllDurable(snaps, fsutil.DirPerm); err != nil {
		return nil, err
	}
	store, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotRetain, logger)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{snaps, dir} {
		if err := fsutil.SyncDir(d); err != nil {
			return nil, err
		}
	}
	return &durableSnapshots{FileSnapshotStore: store, dir: snaps}, nil
}

// Create starts a snapshot and makes the entries of its files durable in
// its directory before raft writes into them (raft creates both files
// here, and later only rewrites them in place).
func (s *durableSnapshots) Create(version raft.SnapshotVersion, index, term uint64,
	configuration raft.Configuration, configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	// raft names the directory of a snapshot under way <id>.tmp, and
	// makes it 0755 and its files 0644 (umask permitting): they get the
	// data directory's modes before anything is written into them.
	tmp := filepath.Join(s.dir, sink.ID()+".tmp")
	if err := restrict(tmp); err != nil {
		sink.Cancel()
		return nil, fmt.Errorf("controller: snapshot %s: %w", sink.ID(), err)
	}
	if err := fsutil.SyncDir(tmp); err != nil {
		sink.Cancel()
		return nil, fmt.Errorf("controller: snapshot %s: %w", sink.ID(), err)
	}
	return sink, nil
}

// restrict gives dir and the files in it the modes of the data directory
// (fsutil.DirPerm, fsutil.FilePerm).
func restrict(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			if err := os.Chmod(filepath.Join(dir, e.Name()), fsutil.FilePerm); err != nil {
				return err
			}
		}
	}
	return os.Chmod(dir, fsutil.DirPerm)
}
