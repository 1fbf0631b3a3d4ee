package controller

import (
	"fmt"
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
	store, err := raft.NewFileSnapshotStoreWithLogger(dir, snapshotRetain, logger)
	if err != nil {
		return nil, err
	}
	// raft's own name for the folder (file_snapshot.go's snapPath).
	snaps := filepath.Join(dir, "snapshots")
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
	// raft names the directory of a snapshot under way <id>.tmp.
	if err := fsutil.SyncDir(filepath.Join(s.dir, sink.ID()+".tmp")); err != nil {
		sink.Cancel()
		return nil, fmt.Errorf("controller: snapshot %s: %w", sink.ID(), err)
	}
	return sink, nil
}
