package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"ringlog/internal/fsutil"
)

// StoreFile is the raft log and stable store (bolt) in Config.Dir.
const StoreFile = "raft.db"

// closeTimeout bounds raft's shutdown beyond the transport's I/O timeout:
// raft.Shutdown waits for its goroutines, and one may be inside an RPC to
// a peer that stopped answering (a paused process keeps its connections
// open) until that RPC's deadline.
const closeTimeout = 5 * time.Second

// localAddr is the raft address of a local quorum's voter.
const localAddr = raft.ServerAddress("local")

// transportTimeout is the I/O deadline of one raft RPC.
func transportTimeout(cfg Config) time.Duration { return max(4*cfg.ElectionTimeout, time.Second) }

// maxSnapshotBytes bounds a snapshot read back from disk.
const maxSnapshotBytes = 1 << 30

// Controller is one node of the metadata quorum. All methods may be called
// from any goroutine.
type Controller struct {
	cfg  Config
	log  *slog.Logger
	raft *raft.Raft
	// raftReady is closed once raft is set: the listener, which the
	// transport needs first, may hand over a forwarded request before.
	raftReady chan struct{}
	trans     raft.Transport
	netTrans  *raft.NetworkTransport // nil for a local quorum
	mux       *mux
	store     *raftboltdb.BoltStore

	image    atomic.Pointer[Image]
	live     liveness
	progress quorumProgress

	// ctx is cancelled by Close: background loops and RPC handlers stop.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	rpcMu   sync.Mutex
	rpcIdle map[string][]net.Conn

	brokersMu sync.Mutex
	brokers   map[int32]bool // ids with a RegisterAndHeartbeat loop
	// registered holds the epoch each heartbeat loop last registered
	// (int32 id -> int64), for Registered.
	registered sync.Map

	// fresh is set when open found no raft state and bootstrapped the
	// quorum: this node's log starts now.
	fresh bool

	closeOnce sync.Once
	closeErr  error
	// transferOnClose hands leadership to another voter before shutting
	// down; tests turn it off to simulate a crash.
	transferOnClose bool
	// queueTime observes each proposal's submit-to-apply time (metrics.go).
	queueTime atomic.Pointer[func(time.Duration)]
}

// Open starts a controller node: it opens the raft store under cfg.Dir,
// bootstraps the cluster from cfg.Voters on first start, listens on the
// node's voter address and joins the quorum. It returns without waiting
// for a leader; Sync waits until this node's Image is current.
func Open(cfg Config) (*Controller, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	c := &Controller{
		cfg:             cfg,
		log:             cfg.Logger.With("node", cfg.NodeID),
		rpcIdle:         map[string][]net.Conn{},
		brokers:         map[int32]bool{},
		transferOnClose: true,
		raftReady:       make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.image.Store(emptyImage())
	if err := c.open(); err != nil {
		c.cancel()
		c.release()
		return nil, err
	}
	c.wg.Add(1)
	go c.leaderLoop()
	if !cfg.local() {
		c.wg.Add(1)
		go c.quorumLoop()
	}
	return c, nil
}

func (c *Controller) open() (err error) {
	cfg := &c.cfg
	ln := cfg.Listener
	addr := cfg.ownAddr()
	if cfg.local() {
		if ln != nil {
			ln.Close()
			ln = nil
		}
	} else if ln == nil {
		if ln, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
	}
	defer func() {
		// Once the mux exists, release closes the listener.
		if err != nil && c.mux == nil && ln != nil {
			ln.Close()
		}
	}()
	if err := fsutil.MkdirAllDurable(cfg.Dir, fsutil.DirPerm); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(cfg.Dir, StoreFile),
		// A second process on the same directory fails instead of
		// waiting forever for the file lock.
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return fmt.Errorf("controller: raft store: %w", err)
	}
	c.store = store
	// bolt syncs its file, never the directory entry that names it: a
	// store created and written (a term, a vote, entries) but not named
	// durably is gone after a power loss, and with it everything the
	// quorum committed (issue 20).
	if err := fsutil.SyncDir(cfg.Dir); err != nil {
		return fmt.Errorf("controller: raft store: %w", err)
	}
	var quiet []string
	if cfg.local() {
		quiet = []string{"heartbeat timeout reached, starting election"}
	}
	hl := newHCLog(c.log, "raft", quiet...)
	logs, err := raft.NewLogCache(256, store)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	snaps, err := newSnapshotStore(cfg.Dir, hl)
	if err != nil {
		return fmt.Errorf("controller: snapshot store: %w", err)
	}
	if cfg.local() {
		// No peer ever sends or receives: the transport only has to exist.
		_, c.trans = raft.NewInmemTransport(localAddr)
	} else {
		c.mux = newMux(ln, addr, cfg.TLS, c.member, c.serveRPC, c.serveQuorum, c.log)
		c.netTrans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  c.mux,
			MaxPool: 3,
			Timeout: transportTimeout(*cfg),
			Logger:  hl,
		})
		c.trans = c.netTrans
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(cfg.NodeID)))
	rc.HeartbeatTimeout = cfg.ElectionTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.ElectionTimeout / 2
	// Followers learn the commit index from the next AppendEntries; when
	// writes pause that is at most 2 x CommitTimeout later, which is what a
	// write forwarded by a follower waits on top of the commit.
	rc.CommitTimeout = 20 * time.Millisecond
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.Logger = hl

	has, err := raft.HasExistingState(logs, store, snaps)
	if err != nil {
		return fmt.Errorf("controller: raft state: %w", err)
	}
	c.fresh = !has
	if has {
		conf, err := storedConfiguration(logs, snaps)
		if err != nil {
			return err
		}
		seed, err := cfg.checkStoredQuorum(conf)
		if err != nil {
			return err
		}
		if seed {
			c.log.Info("controller: seeding a cluster with this node's single-node quorum: its topics, offsets and configs are the cluster's",
				"node_id", cfg.NodeID, "addr", addr, "cluster_id", cfg.ClusterID)
		}
	}
	// Only a static voter bootstraps: any other node (a broker-only node,
	// a controller to be added) starts with no configuration, never
	// campaigns, and waits for the leader, which adds it when it
	// heartbeats (quorum.go).
	if !has && cfg.staticVoter() {
		var servers []raft.Server
		for _, v := range cfg.Voters {
			a := raft.ServerAddress(v.Addr)
			if cfg.local() {
				a = localAddr
			}
			servers = append(servers, raft.Server{
				Suffrage: raft.Voter,
				ID:       raft.ServerID(strconv.Itoa(int(v.ID))),
				Address:  a,
			})
		}
		err := raft.BootstrapCluster(rc, logs, store, snaps, c.trans, raft.Configuration{Servers: servers})
		if err != nil {
			return fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, (*fsm)(c), logs, store, snaps, c.trans)
	if err != nil {
		return fmt.Errorf("controller: raft: %w", err)
	}
	c.raft = r
	close(c.raftReady)
	return nil
}

// Close leaves the quorum cleanly: a leader first hands leadership to
// another voter (bounded by a few election timeouts), then the loops stop,
// raft shuts down, connections close and the store is closed. Each wait is
// bounded; Close returns within about 15 seconds whatever the peers do.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		if c.transferOnClose && c.raft.State() == raft.Leader && c.voterCount() > 1 {
			if err := waitFuture(c.raft.LeadershipTransfer(), 4*c.cfg.ElectionTimeout); err != nil {
				c.log.Warn("controller: leadership transfer on close", "error", err)
			}
		}
		// Under brokersMu so that no heartbeat loop starts after the
		// cancel (its wg.Add would race with the Wait).
		c.brokersMu.Lock()
		c.cancel()
		c.brokersMu.Unlock()
		c.wg.Wait()
		if err := waitFuture(c.raft.Shutdown(), transportTimeout(c.cfg)+closeTimeout); err != nil {
			c.closeErr = fmt.Errorf("controller: raft shutdown: %w", err)
		}
		c.release()
	})
	return c.closeErr
}

// release closes what open opened, in reverse order.
func (c *Controller) release() {
	if c.netTrans != nil {
		c.netTrans.Close()
		c.netTrans.CloseStreams()
	} else if t, ok := c.trans.(io.Closer); ok {
		t.Close()
	}
	if c.mux != nil {
		c.mux.Close()
	}
	c.closeRPCPool()
	if c.store != nil {
		if err := c.store.Close(); err != nil && c.closeErr == nil {
			c.closeErr = fmt.Errorf("controller: raft store: %w", err)
		}
	}
}

// waitFuture waits for a raft future at most d.
func waitFuture(f raft.Future, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("no answer within %v", d)
	}
}

// Fresh reports whether this node started a new quorum: no raft state was
// on disk, so whatever the broker holds was written without it.
func (c *Controller) Fresh() bool { return c.fresh }

// Image returns the current state. It never blocks.
func (c *Controller) Image() *Image { return c.image.Load() }

// LeaderID returns the node id of the current raft leader as this node
// knows it (Kafka's ControllerID in Metadata), or -1 if none.
func (c *Controller) LeaderID() int32 {
	_, id := c.raft.LeaderWithID()
	n, err := strconv.ParseInt(string(id), 10, 32)
	if id == "" || err != nil {
		return -1
	}
	return int32(n)
}

// WaitApplied waits until this node has applied the raft entry at index,
// so that Image shows it. Every write method already waits for its own
// entry before it returns.
func (c *Controller) WaitApplied(ctx context.Context, index uint64) error {
	for {
		img := c.Image()
		if img.Index >= index {
			return nil
		}
		select {
		case <-img.superseded:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for index %d (at %d): %w", ErrRequestTimedOut, index, img.Index, ctx.Err())
		case <-c.ctx.Done():
			return ErrClosed
		}
	}
}

// publish makes next the current image and wakes the waiters of the old.
// Only the raft FSM goroutine and Close call it, never at once.
func (c *Controller) publish(next *Image) {
	old := c.image.Swap(next)
	close(old.superseded)
}

// successor returns a copy of img with a fresh superseded channel.
func (img *Image) successor() *Image {
	next := *img
	next.superseded = make(chan struct{})
	return &next
}

// fsm is the raft.FSM view of a Controller. raft calls Apply, Snapshot and
// Restore from its one FSM goroutine; Persist runs on another goroutine
// and only reads an immutable Image.
type fsm Controller

func (f *fsm) Apply(l *raft.Log) any {
	c := (*Controller)(f)
	cur := c.image.Load()
	cmd, err := decodeCommand(l.Data)
	if err != nil {
		// Every voter decodes the same bytes the same way: the entry is
		// skipped everywhere and the state stays identical.
		c.log.Error("controller: undecodable raft entry skipped", "index", l.Index, "error", err)
		next := cur.successor()
		next.Index = l.Index
		c.publish(next)
		return result{err: err}
	}
	next, res := apply(cur, l.Index, cmd)
	if checkInvariants {
		if err := checkImage(next); err != nil {
			panic(fmt.Sprintf("controller: %s at index %d broke an invariant: %v", cmd.typ, l.Index, err))
		}
	}
	c.publish(next)
	return res
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return fsmSnapshot{(*Controller)(f).image.Load()}, nil
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	c := (*Controller)(f)
	b, err := io.ReadAll(io.LimitReader(rc, maxSnapshotBytes+1))
	if err != nil {
		return fmt.Errorf("controller: reading snapshot: %w", err)
	}
	if len(b) > maxSnapshotBytes {
		return fmt.Errorf("%w: snapshot larger than %d bytes", ErrCorrupt, maxSnapshotBytes)
	}
	img, err := decodeImage(b)
	if err != nil {
		return fmt.Errorf("controller: snapshot: %w", err)
	}
	c.publish(img)
	return nil
}

type fsmSnapshot struct{ img *Image }

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(encodeImage(s.img)); err != nil {
		return errors.Join(err, sink.Cancel())
	}
	return sink.Close()
}

func (s fsmSnapshot) Release() {}
