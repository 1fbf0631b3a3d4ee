package engine

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ringlog/internal/fsutil"
	"ringlog/internal/procs"
	"ringlog/ioring"
	"ringlog/segment"
)

// Config sets up a Core.
type Config struct {
	// Dir is the first of Kafka's log.dirs: it holds partition folders
	// and the broker's own files (meta.properties, topics.json, the
	// high-watermark checkpoint). LogDirs are the others, which hold
	// partition folders only (logdirs.go: JBOD).
	Dir     string
	LogDirs []string
	// Shards is the number of shards; 0 means GOMAXPROCS without the Ps
	// added for threads that wait in io_uring_enter (internal/procs): the
	// machine's CPUs, however many loops other brokers of the process run.
	Shards int
	// IO picks the I/O path (auto probes io_uring); IOWrites how the
	// io_uring path writes (see ioring.WriteMode).
	IO       ioring.Mode
	IOWrites ioring.WriteMode
	// Writes says how the partitions' appends reach the disk
	// (ringlog.writes): WritesDirect with O_DIRECT
	// (segment.Options.DirectWrites), WritesAuto so when the shards' disk
	// path is io_uring, WritesBuffered (or "") through the page cache.
	// Where a log directory's file system has no direct I/O its logs
	// write through the page cache, and the start-up log says why.
	Writes Writes
	// TailCacheBytes bounds the memory of the direct-written partitions'
	// tail caches together (segment.TailBudget; ringlog.tail.cache.bytes):
	// each active segment's share of it, at most 2 MiB. Default
	// DefaultTailCacheBytes.
	TailCacheBytes int64
	// RingOwners makes each shard an io_uring ring owner (ioring.Owner)
	// when the disk path is io_uring and the kernel has what an owner
	// needs: the shard's loop then waits in io_uring_enter, not on a Go
	// channel, its disk I/O goes on that ring, its rounds overlap (a
	// partition's appends are written while the previous round's writes
	// of other partitions are in flight), and other layers (netpoll's
	// IOUringShards) may put their I/O on its ring and their work on its
	// thread (RingOwners). Otherwise shards wait on their inbox, each
	// round waits for its writes, and RingOwners returns nil. The broker
	// sets it.
	RingOwners bool
	// WrapIO, when set, wraps the IO each shard opened: how tests inject
	// disk faults (a write or a sync that fails with EIO) through the
	// interface the shards write with.
	WrapIO func(ioring.IO) ioring.IO
	// Topic is the broker's default topic configuration.
	Topic TopicConfig
	// NumPartitions is num.partitions, for topics created without a count.
	NumPartitions int32
	// MaxPartitions is ringlog.max.partitions: the most partitions the
	// broker holds (every broker of a cluster holds every partition, so it
	// bounds the cluster's count too). A CreateTopics, CreatePartitions or
	// automatic creation beyond it is refused (ErrTooManyPartitions, the
	// controller's POLICY_VIOLATION). 0 means DefaultMaxPartitions;
	// negative means no bound.
	MaxPartitions int
	// RetentionCheckInterval is log.retention.check.interval.ms (5 min).
	RetentionCheckInterval time.Duration
	// ProducerIDExpiration is producer.id.expiration.ms (1 day).
	ProducerIDExpiration time.Duration
	// Cleaner configures log compaction (log.cleaner.*).
	Cleaner CleanerConfig
	// NodeID is this broker's id (node.id).
	NodeID int32
	// ClusterID is cluster.id, Kafka's Uuid in base64 (22 characters, as
	// kafka-storage random-uuid prints it). The first start records it in
	// meta.properties; a data directory recorded with another cluster id is
	// refused (ErrInconsistentClusterID), as Kafka refuses it. Empty keeps
	// the id recorded, or records a random one at first start: a single
	// broker is a cluster of its own.
	ClusterID string
	// ProducerIDBlock, when set, is where producer ids come from: it
	// returns the ids start..end-1, which no other broker hands out (the
	// metadata quorum's AllocateProducerIDs, KIP-730). AllocateProducerID
	// calls it whenever its block is used up, and nothing is persisted in
	// the data directory. When nil, blocks are reserved in the directory's
	// producer-ids file, which is unique to one broker only. It is called
	// from AllocateProducerID's goroutine with the producer-id mutex held
	// (concurrent callers wait for the one block), may block, and must not
	// call the engine's AllocateProducerID. floor is where the block must
	// start at or above: the end of the last block, or of the ids a
	// producer-ids file says this directory handed out before it had a
	// quorum (0: none).
	ProducerIDBlock func(floor int64) (start, end int64, err error)
	// OnAppended is the replication layer (replication.go): it is called
	// on a partition's shard goroutine after each write to it completed
	// (and was synced, under the flush policy always), producer or
	// replica, with the LEO after it: how a leader learns its own LEO
	// without polling, to move the high watermark (SetHW). It must be cheap
	// and must not block; it may call SetHW, but nothing that waits for a
	// shard. The layer also gives partitions their roles (BecomeLeader,
	// BecomeFollower); until then they take no appends.
	//
	// Nil means no replication layer: every partition leads itself from
	// the moment it opens, alone in its ISR, and its high watermark follows
	// its LEO (an embedded engine, engine.Open). The semantics are the
	// same either way (roles, acks=all answered once the high watermark
	// covers the append): only who moves the high watermark differs.
	OnAppended func(tp TP, leo int64)
	// OnOffline, when set, is told that a partition went offline at run
	// time (its disk failed: offline.go), with the error every call on it
	// answers from now on. It runs on the partition's shard goroutine and
	// must not block (the replication layer queues a report to its
	// controller). Partitions offline since the start are not told: they
	// are in OfflinePartitions before OpenCore returns.
	OnOffline func(tp TP, err error)
	// HWCheckpointInterval is replica.high.watermark.checkpoint.interval.ms
	// (5 s): how often a replicated engine persists its high watermarks.
	HWCheckpointInterval time.Duration
	// MoveHook, when set, is called at each step of a move between log
	// directories (MoveStep, move.go), on the goroutine that takes it (the
	// shard's, for the steps of the swap): how tests stop a move at a step
	// to look at what a crash there would leave. It may block.
	MoveHook func(tp TP, step MoveStep)
	Logger   *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.Shards <= 0 {
		c.Shards = procs.Base()
	}
	if c.IO == "" {
		c.IO = ioring.ModeAuto
	}
	if c.Topic.Log.SegmentBytes == 0 {
		c.Topic = DefaultTopicConfig()
	}
	if c.NumPartitions <= 0 {
		c.NumPartitions = 1
	}
	if c.MaxPartitions == 0 {
		c.MaxPartitions = DefaultMaxPartitions
	}
	if c.TailCacheBytes <= 0 {
		c.TailCacheBytes = DefaultTailCacheBytes
	}
	if c.RetentionCheckInterval <= 0 {
		c.RetentionCheckInterval = 5 * time.Minute
	}
	if c.HWCheckpointInterval <= 0 {
		c.HWCheckpointInterval = 5 * time.Second
	}
	if c.ProducerIDExpiration <= 0 {
		c.ProducerIDExpiration = 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Cleaner.setDefaults()
}

// Writes is how appends reach the disk (Config.Writes).
type Writes string

const (
	// WritesBuffered writes through the page cache, as Kafka does; ""
	// means the same.
	WritesBuffered Writes = "buffered"
	// WritesDirect writes with O_DIRECT from a staging buffer, blocks
	// reserved ahead (segment/direct.go).
	WritesDirect Writes = "direct"
	// WritesAuto is WritesDirect when the shards' disk path is io_uring
	// (the write goes in the ring; on the portable path a direct write
	// would hold the shard's thread until the device has the bytes), else
	// WritesBuffered.
	WritesAuto Writes = "auto"
)

// ParseWrites reads ringlog.writes: buffered, direct or auto.
func ParseWrites(v string) (Writes, error) {
	switch w := Writes(v); w {
	case WritesBuffered, WritesDirect, WritesAuto:
		return w, nil
	}
	return "", fmt.Errorf("unknown writes %q (want auto, buffered or direct)", v)
}

// DefaultTailCacheBytes is Config.TailCacheBytes's default: the 2 MiB
// tail caches of 128 partitions written at once, a 16th of them each for
// 2,048.
const DefaultTailCacheBytes = 256 << 20

// Core owns the partitions of one broker, spread over shards. All its
// exported methods may be called from any goroutine.
type Core struct {
	cfg    Config
	log    *slog.Logger
	shards []*shard
	// tails is the budget of the partitions' tail caches (direct writes).
	tails  *segment.TailBudget
	choice ioring.Choice
	// direct is Config.Writes resolved: the logs' appends are direct
	// writes (where their file system allows); writesWhy says why, and
	// writes what the log directories got (logWrites).
	direct    bool
	writesWhy string
	writes    string
	// owners is the group of the shards' ring owners (Config.RingOwners),
	// nil without; ownersWhy says why shards are not owners.
	owners    *ioring.OwnerGroup
	ownersWhy string
	clusterID string

	mu     sync.Mutex // serialises topic changes and topics.json writes
	topics atomic.Pointer[map[string]*topic]
	parts  atomic.Pointer[map[TP]*partition]
	// topicsVersion counts the changes of topics (TopicsVersion).
	topicsVersion atomic.Uint64

	pidMu   sync.Mutex
	pidNext int64 // next producer id to hand out
	pidEnd  int64 // end of the block persisted as used

	closed  atomic.Bool
	cleaner *cleaner

	// A replicated engine's high watermarks: as checkpointed, read while
	// the partitions open at start; and the checkpoint's writer.
	hwAtOpen map[TP]int64
	hwCkpt   *hwCheckpointer

	// Logs opened after a clean shutdown and logs that needed recovery,
	// counted at start-up.
	opensClean, opensRecovered atomic.Int64
	// Logs that did not open and whose partitions are offline.
	opensOffline atomic.Int64

	// unlock releases the data directory's lock (Close, or Open when it
	// fails before it started the shards).
	unlock func() error
	// dirs are the log directories, Config.Dir first (logdirs.go); found
	// is where the start's scan found each partition folder, nil once
	// the partitions opened.
	dirs  []*logDir
	found map[string]*logDir
	// moves counts the moves between log directories under way.
	moves sync.WaitGroup
	// resume is the destination of each move a restart interrupted
	// (recoverMoves), started again once the logs are open.
	resume, resumeFrom map[TP]string
}

// Open opens (creating when absent) the data directory, starts the shards
// and recovers every partition log on its shard. The directory is locked
// until Close: a second engine on it fails with fsutil.ErrDirLocked before
// it reads anything.
func OpenCore(cfg Config) (_ *Core, err error) {
	cfg.setDefaults()
	if err := fsutil.MkdirAllDurable(cfg.Dir, fsutil.DirPerm); err != nil {
		return nil, err
	}
	unlock, err := fsutil.LockDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e := &Core{cfg: cfg, log: cfg.Logger, tails: &segment.TailBudget{Bytes: cfg.TailCacheBytes}}
	e.dirs = []*logDir{{path: cfg.Dir, unlock: unlock}}
	e.unlock = e.unlockDirs
	defer func() {
		if err != nil && !e.closed.Load() {
			e.unlockDirs() // (Close, on the later error paths, released it)
		}
	}()
	empty := map[string]*topic{}
	e.topics.Store(&empty)
	emptyParts := map[TP]*partition{}
	e.parts.Store(&emptyParts)
	fresh, err := e.loadMeta()
	if err != nil {
		return nil, err
	}
	if err := removeDeletedDirs(cfg.Dir); err != nil {
		return nil, err
	}
	if err := e.openDirs(fresh); err != nil {
		return nil, err
	}
	if e.found, err = e.scanDirs(); err != nil {
		return nil, err
	}
	for i := range cfg.Shards {
		s, err := newShard(e, i)
		if err != nil {
			// The shards made so far never ran: stopping them would wait
			// for loops that are not there. Their I/O paths are all they
			// hold.
			for _, s := range e.shards {
				s.io.Close()
			}
			return nil, fmt.Errorf("engine: shard %d: %w", i, err)
		}
		if i == 0 {
			e.choice = s.choice
			e.log.Info("I/O path", "kind", s.choice.Kind, "reason", s.choice.Reason)
		}
		e.shards = append(e.shards, s)
	}
	switch cfg.Writes {
	case WritesDirect:
		e.direct, e.writesWhy = true, "asked for"
	case WritesAuto:
		if e.direct = e.choice.Kind == ioring.Uring; e.direct {
			e.writesWhy = "auto: the disk path is io_uring"
		} else {
			e.writesWhy = "auto: the disk path is " + string(e.choice.Kind)
		}
	default:
		e.writesWhy = "asked for"
	}
	if cfg.RingOwners {
		switch {
		case e.choice.Kind != ioring.Uring:
			// The portable path has no ring to own: nothing to warn of.
			e.ownersWhy = "the disk path is not io_uring"
		default:
			if e.ownersWhy = ioring.ProbeOwner(); e.ownersWhy != "" {
				e.log.Warn("shards are no io_uring ring owners", "reason", e.ownersWhy)
			}
		}
		if e.ownersWhy == "" {
			e.owners = ioring.NewOwnerGroup()
		}
	}
	for _, s := range e.shards {
		go s.run()
	}
	hws, err := loadHWCheckpoint(cfg.Dir)
	if err != nil {
		e.Close()
		return nil, err
	}
	e.hwAtOpen = hws
	if err := e.loadTopics(); err != nil {
		e.Close()
		return nil, err
	}
	e.hwAtOpen, e.found = nil, nil
	e.hwCkpt = startHWCheckpointer(e)
	e.logWrites()
	e.log.Info("logs opened", "clean", e.opensClean.Load(), "recovered", e.opensRecovered.Load(), "offline", e.opensOffline.Load())
	e.resumeMoves()
	e.cleaner = startCleaner(e)
	return e, nil
}

// OpenStats says how many logs opened cleanly (clean-shutdown marker) and
// how many were recovered (scanned) when the engine started.
func (e *Core) OpenStats() (clean, recovered int64) {
	return e.opensClean.Load(), e.opensRecovered.Load()
}

// logWrites says how appends reach each log directory's disk: with
// direct writes (Config.Writes), direct where its file system offers
// direct I/O, else through the page cache, and why. A fallback is a
// warning when direct writes were asked for, news under auto.
func (e *Core) logWrites() {
	e.writes = string(WritesBuffered)
	if !e.direct {
		e.log.Info("writes", "kind", "buffered", "reason", e.writesWhy)
		return
	}
	direct, buffered := 0, 0
	for _, d := range e.dirs {
		if d.offline.Load() != nil {
			continue
		}
		switch why := segment.ProbeDirect(d.path); {
		case why == "":
			direct++
			e.log.Info("writes", "kind", "direct", "dir", d.path, "reason", e.writesWhy, "tail_cache_bytes", e.cfg.TailCacheBytes)
		case e.cfg.Writes == WritesAuto:
			buffered++
			e.log.Info("writes", "kind", "buffered", "dir", d.path, "reason", "auto: the file system has no direct I/O: "+why)
		default:
			buffered++
			e.log.Warn("direct writes unavailable: the log directory's partitions write through the page cache", "dir", d.path, "reason", why)
		}
	}
	switch {
	case direct > 0 && buffered > 0:
		e.writes = "direct on some log directories"
	case direct > 0:
		e.writes = string(WritesDirect)
	}
}

// TailCacheHeld is the memory the direct-written partitions' tail caches
// hold together (Config.TailCacheBytes bounds it).
func (e *Core) TailCacheHeld() int64 { return e.tails.Held() }

// Writes says how the partitions' appends reach the disk, Config.Writes
// resolved and each log directory's file system probed: "direct",
// "buffered", or "direct on some log directories".
func (e *Core) Writes() string { return e.writes }

// IOChoice says which I/O path the shards use and why.
func (e *Core) IOChoice() ioring.Choice { return e.choice }

// ClusterID is the id recorded in the data directory's meta.properties.
func (e *Core) ClusterID() string { return e.clusterID }

// NodeID is this broker's id.
func (e *Core) NodeID() int32 { return e.cfg.NodeID }

// Dir is the data directory.
func (e *Core) Dir() string { return e.cfg.Dir }

// Defaults returns the broker's default topic configuration.
func (e *Core) Defaults() TopicConfig { return e.cfg.Topic }

// NumPartitions is the default partition count.
func (e *Core) NumPartitions() int32 { return e.cfg.NumPartitions }

// DefaultMaxPartitions is ringlog.max.partitions' default. Each partition
// holds three open files and two memory mappings per segment: Linux's
// default vm.max_map_count (65530) allows about 32,000 segments in all, so
// 10,000 partitions leave each a few segments, and their descriptors fit a
// LimitNOFILE of 65536. An operator who raises the bound raises those
// limits with it, as Kafka's documentation asks for brokers with many
// partitions.
const DefaultMaxPartitions = 10000

// MaxPartitions is the most partitions the broker holds (Config's); a
// negative value means no bound.
func (e *Core) MaxPartitions() int { return e.cfg.MaxPartitions }

// checkPartitionCapLocked refuses adding n partitions beyond MaxPartitions.
// Called with e.mu held (the count cannot change under it).
func (e *Core) checkPartitionCapLocked(n int) error {
	have := len(*e.parts.Load())
	if e.cfg.MaxPartitions >= 0 && have+n > e.cfg.MaxPartitions {
		return fmt.Errorf("%w: the broker holds %d partitions; %d more would pass ringlog.max.partitions=%d", ErrTooManyPartitions, have, n, e.cfg.MaxPartitions)
	}
	return nil
}

// Close stops the shards after the appends already queued, and closes every
// log cleanly (clean-shutdown markers, producer snapshots), so that the
// next Open skips recovery.
func (e *Core) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	if e.cleaner != nil {
		// Before the shards: a clean in progress is abandoned (the old
		// segments stay) and the cleaner makes no more shard calls.
		e.cleaner.close()
	}
	if e.hwCkpt != nil {
		e.hwCkpt.close()
	}
	// Moves between directories stop where they are; the next start
	// removes their future logs.
	for _, p := range *e.parts.Load() {
		if m := p.move.Load(); m != nil {
			m.stop.Store(true)
		}
	}
	e.moves.Wait()
	err := e.stopShards()
	// Waiters wake to find the engine closed, rather than wait for data
	// that will not come.
	for _, p := range *e.parts.Load() {
		p.notify()
	}
	if e.hwCkpt != nil {
		// The last high watermarks, now that no shard moves them.
		err = errors.Join(err, e.hwCkpt.write())
	}
	if e.unlock != nil {
		err = errors.Join(err, e.unlock())
	}
	return err
}

// unlockDirs releases the locks of every log directory.
func (e *Core) unlockDirs() error {
	var errs []error
	for _, d := range e.dirs {
		if d.unlock != nil {
			errs = append(errs, d.unlock())
			d.unlock = nil
		}
	}
	return errors.Join(errs...)
}

func (e *Core) stopShards() error {
	var errs []error
	for _, s := range e.shards {
		errs = append(errs, s.stop())
	}
	if e.owners != nil {
		// Every shard's goroutine ended: their rings can go.
		errs = append(errs, e.owners.Close())
	}
	return errors.Join(errs...)
}

// RingOwners returns the shards' ring owners, one per shard in shard
// order, once every shard has set its own up; nil when the shards are no
// owners (Config.RingOwners unset, the disk path portable, the kernel
// without what an owner needs: RingOwnersWhy says which). Work posted to
// an owner runs on its shard's thread, and requests registered on its
// ring are completed there; none of it may block for long. The owners
// stop with the engine: whoever registered on them detaches first.
func (e *Core) RingOwners() []*ioring.Owner {
	if e.owners == nil {
		return nil
	}
	var os []*ioring.Owner
	for _, s := range e.shards {
		<-s.ownerReady
		o := s.owner.Load()
		if o == nil {
			return nil
		}
		os = append(os, o)
	}
	return os
}

// RingOwnersWhy says why RingOwners is nil ("" when it is not, or when
// Config.RingOwners was not asked).
func (e *Core) RingOwnersWhy() string {
	if e.owners != nil && e.RingOwners() == nil {
		return "a shard could not set its ring owner up (see the log)"
	}
	return e.ownersWhy
}

// shardFor spreads a topic's partitions over consecutive shards.
func (e *Core) shardFor(tp TP) *shard {
	h := fnv.New32a()
	h.Write([]byte(tp.Topic))
	return e.shards[(int(h.Sum32()%uint32(len(e.shards)))+int(tp.Partition))%len(e.shards)]
}

// partition returns tp's partition for a call that uses its log: an
// offline partition answers the error that took it offline (ErrStorage).
func (e *Core) partition(tp TP) (*partition, error) {
	p, err := e.hosted(tp)
	if err != nil {
		return nil, err
	}
	if err := p.offlineErr(); err != nil {
		return nil, err
	}
	return p, nil
}

// hosted returns tp's partition, offline or not.
func (e *Core) hosted(tp TP) (*partition, error) {
	if e.closed.Load() {
		// Every call after Close says so (the logs under it are closed).
		return nil, ErrClosed
	}
	if p := (*e.parts.Load())[tp]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, tp.Topic, tp.Partition)
}

// meta.properties, as Kafka writes it: the cluster id and the node id.
const metaFile = "meta.properties"

// ErrInconsistentClusterID refuses a data directory recorded with another
// cluster id than the configured one (Kafka's INCONSISTENT_CLUSTER_ID): its
// logs belong to another cluster, and serving them would mix the two.
var ErrInconsistentClusterID = errors.New("engine: inconsistent cluster id")

// loadMeta reads meta.properties, checks it against the configuration and
// writes it at first start. The cluster id recorded wins over none
// configured; a configured one must match it. fresh says the file was not
// there: the broker's first start on this directory. A file written before
// JBOD gets its directory.id (KIP-858) added.
func (e *Core) loadMeta() (fresh bool, err error) {
	if id := e.cfg.ClusterID; id != "" && !validClusterID(id) {
		return false, fmt.Errorf("engine: cluster id %q: want Kafka's form, 22 characters of base64url (16 bytes)", id)
	}
	path := filepath.Join(e.cfg.Dir, metaFile)
	props, err := readProps(path)
	if err != nil && !os.IsNotExist(err) {
		return false, err
	}
	fresh = os.IsNotExist(err)
	e.clusterID = props["cluster.id"]
	if v, ok := props["node.id"]; ok {
		if id, err := strconv.Atoi(v); err == nil && int32(id) != e.cfg.NodeID {
			return false, fmt.Errorf("engine: %s belongs to node %d, this is node %d", e.cfg.Dir, id, e.cfg.NodeID)
		}
	}
	dirID, hasDirID := parseDirID(props["directory.id"])
	switch {
	case e.clusterID != "" && e.cfg.ClusterID != "" && e.clusterID != e.cfg.ClusterID:
		return false, fmt.Errorf("%w: %s records cluster id %s, the broker is configured with cluster id %s "+
			"(cluster.id, or derived from the controller voters): set cluster.id (-cluster-id) to %s to serve this directory, "+
			"or start with an empty one", ErrInconsistentClusterID, path, e.clusterID, e.cfg.ClusterID, e.clusterID)
	case e.clusterID == "" || !hasDirID:
		if e.clusterID == "" {
			e.clusterID = e.cfg.ClusterID
		}
		if e.clusterID == "" {
			var id [16]byte
			rand.Read(id[:])
			e.clusterID = base64.RawURLEncoding.EncodeToString(id[:])
		}
		if !hasDirID {
			dirID = newDirID()
		}
		data := fmt.Sprintf("version=1\ncluster.id=%s\nnode.id=%d\ndirectory.id=%s\n", e.clusterID, e.cfg.NodeID, formatDirID(dirID))
		if err := fsutil.WriteFileAtomic(e.cfg.Dir, metaFile, []byte(data)); err != nil {
			return false, err
		}
	}
	e.dirs[0].id = dirID
	// With a ProducerIDBlock hook the blocks come from the cluster; a
	// producer-ids file left by a past without a quorum is only the floor
	// of the first one, so that no id it handed out is handed out again.
	return fresh, e.loadProducerIDs()
}

// validClusterID reports whether id is a Kafka Uuid as its toString writes
// it: 16 bytes in unpadded base64url.
func validClusterID(id string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(id)
	return err == nil && len(b) == 16
}

// Producer ids are handed out from blocks. A single broker reserves its
// blocks in the producer-ids file: the end of the current block is
// persisted before any id of it is used, so ids are never reused after a
// restart. A broker of a cluster takes its blocks from
// Config.ProducerIDBlock and persists nothing: the quorum never hands out a
// block twice, and the rest of a block is abandoned at a restart.
const (
	producerIDFile  = "producer-ids"
	producerIDBlock = 1000
)

// ErrNoProducerIDBlock is AllocateProducerID's error when
// Config.ProducerIDBlock failed (the quorum is unreachable, say): the
// producer should retry, as Kafka's brokers answer
// COORDINATOR_LOAD_IN_PROGRESS while they wait for a block.
var ErrNoProducerIDBlock = errors.New("engine: no producer id block available")

func (e *Core) loadProducerIDs() error {
	b, err := os.ReadFile(filepath.Join(e.cfg.Dir, producerIDFile))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if err == nil {
		n, perr := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if perr != nil || n < 0 {
			return fmt.Errorf("engine: %s: bad content %q", producerIDFile, b)
		}
		e.pidNext, e.pidEnd = n, n
	}
	return nil
}

// AllocateProducerID returns a new producer id (InitProducerId for an
// idempotent producer).
func (e *Core) AllocateProducerID() (int64, error) {
	e.pidMu.Lock()
	defer e.pidMu.Unlock()
	if e.pidNext >= e.pidEnd {
		if hook := e.cfg.ProducerIDBlock; hook != nil {
			start, end, err := hook(e.pidEnd)
			if err != nil {
				return 0, fmt.Errorf("%w: %w", ErrNoProducerIDBlock, err)
			}
			// Blocks only grow: one starting below the end of the last
			// would hand an id out twice.
			if start < e.pidEnd || end <= start {
				return 0, fmt.Errorf("%w: block [%d, %d) after ids up to %d", ErrNoProducerIDBlock, start, end, e.pidEnd)
			}
			e.pidNext, e.pidEnd = start, end
		} else {
			end := e.pidNext + producerIDBlock
			if err := fsutil.WriteFileAtomic(e.cfg.Dir, producerIDFile, []byte(strconv.FormatInt(end, 10)+"\n")); err != nil {
				return 0, fmt.Errorf("%w: %w", ErrStorage, err)
			}
			e.pidEnd = end
		}
	}
	id := e.pidNext
	e.pidNext++
	return id, nil
}
