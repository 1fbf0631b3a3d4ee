package controller

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"ringlog/replication"
)

// The seeded simulation of the quorum's state machine with brokers around
// it (issue 14): no raft, no sockets, no goroutines, no clock. A seeded
// RNG picks each step: brokers register, heartbeat, crash, are fenced,
// restart, join and are unregistered (and some retired); partitions are
// reassigned (targets replaced and cancelled half way, a whole broker
// drained), leaders elected (preferred; unclean on the topic that
// enables it, whose records are not checked), partitions added; leaders append records, followers
// fetch them, leaders propose ISR changes whose requests are lost, whose
// answers are lost, and which arrive twice; brokers learn the image late
// (a deposed leader keeps serving the followers that have not heard); the
// controllers apply the log at their own pace, snapshot, crash and
// restore (snapshot plus the log's tail), and voters join (by snapshot
// install) and leave. Every decision is taken by the code production
// runs: the state machine's apply on each encoded command, and for each
// leader replication.Leader (HW, ISR proposals), applied to each broker's
// view of the image as replication/node applies it, with node's handling
// of AlterPartition's answers (AlterPartitionOutcome). The model beside
// it is only what has no code of its own here: each replica's log
// (records with the leader epoch that wrote them), a follower's
// truncation to the longest prefix it shares with its leader (what the
// epoch walk arrives at; replication's own simulation drives the walk),
// and the committed records.
//
// A record is committed once the HW of any broker that believes it leads
// covers it: that is when an acks=all producer is answered. After every
// command the simulation checks the image's invariants (checkImage), that
// a failed command changed nothing, that a new leader came from the ISR
// and that a reassignment completed only with its whole target in sync;
// after every step, that a snapshot round trip gives the same image, that
// every controller's image at an index is the one the log gives there,
// that a partition with a live ISR member (any live replica, with unclean
// election) has a leader, that every ISR
// member (so every leader the quorum can elect) holds every committed
// record, that no HW ever covers a log that differs from what was
// committed, and that a reassignment in progress is target ++ removing
// with its adding replicas in the target. At the end every broker comes
// back and the cluster settles: every partition must have a leader, every
// reassignment must have completed, and every replica must be back in
// the ISR.
//
// Replay one seed with a trace of every step:
//
//	go test ./replication/controller -run 'TestSimulation$' -sim.seed N -v
//
// and run many more with -sim.long (or RINGLOG_SIM_LONG=1).

var (
	simSeed = flag.Int64("sim.seed", -1, "replay one seed of the controller simulation, with a trace")
	simLong = flag.Bool("sim.long", false, "run the controller simulation's long variant")
)

const (
	simSeeds      = 200
	simSteps      = 300
	simLongSeeds  = 2000
	simLongSteps  = 1000
	simBrokers    = 6 // ids 0..5; 0..3 start registered
	simLagTimeMax = 100 * time.Millisecond
)

// TestSimulation runs simSeeds seeded schedules (many more with
// -sim.long), or the one -sim.seed names with a trace.
func TestSimulation(t *testing.T) {
	seeds, steps, replay := simSeeds, simSteps, ""
	if *simLong || envSet("RINGLOG_SIM_LONG") {
		seeds, steps, replay = simLongSeeds, simLongSteps, " -sim.long"
	}
	if *simSeed >= 0 {
		runSim(t, uint64(*simSeed), steps, true, replay)
		return
	}
	if testing.Short() {
		seeds = simSeeds / 4
	}
	var total simStats
	for seed := range uint64(seeds) {
		st, ok := runSim(t, seed, steps, false, replay)
		if !ok {
			return
		}
		total.add(st)
	}
	t.Logf("%d seeds x %d steps: %+v", seeds, steps, total)
}

// runSim runs one schedule and reports whether it kept every invariant;
// a failure names the seed to replay.
func runSim(t *testing.T, seed uint64, steps int, trace bool, replay string) (simStats, bool) {
	t.Helper()
	s := newSim(t, seed, trace)
	err := s.run(steps)
	for _, c := range s.committed {
		s.stats.committed += len(c)
	}
	if trace {
		t.Logf("%+v", s.stats)
	}
	if err != nil {
		t.Errorf("seed %d: %v\nreplay: go test ./replication/controller -run 'TestSimulation$' -sim.seed %d%s -v", seed, err, seed, replay)
		return s.stats, false
	}
	return s.stats, true
}

// simRec is one record of a replica's log: the leader epoch that wrote
// it and an id unique in the whole run, so two logs are equal exactly
// where they hold the same records.
type simRec struct {
	epoch int32
	id    uint64
}

// simReplica is one broker's replica of one partition.
type simReplica struct {
	log []simRec
	hw  int64
	// leader is the replication state while the broker's view names it
	// the leader (replication/node's part.leader).
	leader *replication.Leader
	// partitionEpoch is the partition epoch of the broker's view last
	// applied (node: pt.partitionEpoch).
	partitionEpoch int32
}

// simBroker is one broker process: its logs survive a crash (a process
// crash keeps the page cache; a power loss, which does not, is the
// cluster power-loss test's and unclean recovery's subject), its view of
// the image and its leaders do not.
type simBroker struct {
	id    int32
	up    bool
	epoch int64  // the registration epoch of this incarnation; 0 before it registered
	view  *Image // the image it applied last; nil while down
	parts map[TopicPartition]*simReplica
}

// simController is one member of the quorum: the image it applied up to
// its own index, and its latest snapshot.
type simController struct {
	id        int32
	img       *Image
	snap      []byte
	snapIndex uint64
}

// simAlter is an AlterPartition in flight from a leader to the quorum.
type simAlter struct {
	broker int32
	epoch  int64 // the sender's broker epoch when it sent
	tp     TopicPartition
	change replication.ISRChange
	leader *replication.Leader // the leader state that proposed it
	dup    bool                // a second copy of a request: its answer goes nowhere
}

type sim struct {
	t     testing.TB
	seed  uint64
	rng   *rand.Rand
	trace bool
	step  int
	now   time.Time

	// log holds the committed entries, encoded: log[i] is at index i+1.
	// img is the image after all of them, hashes[i] the hash of the
	// encoded image at index i (hashes[0]: the empty image).
	log    [][]byte
	img    *Image
	hashes [][32]byte
	// checked is the last image whose snapshot round trip was checked.
	checked *Image

	ctls    []*simController
	nextCtl int32
	brokers []*simBroker
	tps     []TopicPartition
	alters  []simAlter
	// resend are the leaders whose pending change got no answer: their
	// next ISR check sends it again.
	resend  map[*replication.Leader]bool
	nextRec uint64

	// committed is, per partition, the longest log prefix an HW covered.
	committed map[TopicPartition][]simRec
	// targets are the reassignments in progress as the simulation asked
	// for them.
	targets map[TopicPartition][]int32

	stats simStats
}

// simStats counts what a run did, to show the schedules reach the
// cases they are meant to (printed with -v).
type simStats struct {
	produced, committed, leaderships, truncations          int
	reassigned, completed, cancelled, unregistered, fenced int
	altersApplied, altersRefused, ctlRestores, ctlJoins    int
}

func (a *simStats) add(b simStats) {
	a.produced += b.produced
	a.committed += b.committed
	a.leaderships += b.leaderships
	a.truncations += b.truncations
	a.reassigned += b.reassigned
	a.completed += b.completed
	a.cancelled += b.cancelled
	a.unregistered += b.unregistered
	a.fenced += b.fenced
	a.altersApplied += b.altersApplied
	a.altersRefused += b.altersRefused
	a.ctlRestores += b.ctlRestores
	a.ctlJoins += b.ctlJoins
}

func newSim(t testing.TB, seed uint64, trace bool) *sim {
	s := &sim{
		t: t, seed: seed, trace: trace,
		rng:       rand.New(rand.NewPCG(seed, 0xc0117011e5)),
		now:       time.Unix(1e9, 0),
		img:       emptyImage(),
		committed: map[TopicPartition][]simRec{},
		targets:   map[TopicPartition][]int32{},
		resend:    map[*replication.Leader]bool{},
	}
	s.hashes = append(s.hashes, sha256.Sum256(encodeImage(s.img)))
	for range 3 {
		s.ctls = append(s.ctls, &simController{id: s.nextCtl, img: emptyImage()})
		s.nextCtl++
	}
	for id := range int32(simBrokers) {
		s.brokers = append(s.brokers, &simBroker{id: id, parts: map[TopicPartition]*simReplica{}})
	}
	return s
}

func (s *sim) logf(format string, args ...any) {
	if s.trace {
		s.t.Logf("%4d %s", s.step, fmt.Sprintf(format, args...))
	}
}

// propose commits c to the log and applies it, as the active controller
// does once raft committed it: through its encoding, as a log entry.
func (s *sim) propose(c *command) (result, error) {
	b := c.encode()
	dc, err := decodeCommand(b)
	if err != nil {
		return result{}, fmt.Errorf("decode %s: %w", c.typ, err)
	}
	s.log = append(s.log, b)
	next, res := apply(s.img, uint64(len(s.log)), dc)
	if err := checkImage(next); err != nil {
		return res, fmt.Errorf("%s broke an invariant of the image: %w", c.typ, err)
	}
	enc := encodeImage(next)
	if res.err != nil && string(enc[snapshotHeaderBytes:]) != string(encodeImage(s.img)[snapshotHeaderBytes:]) {
		return res, fmt.Errorf("failed %s (%v) changed the state", c.typ, res.err)
	}
	if res.err == nil {
		if err := s.checkTransition(dc, res, s.img, next); err != nil {
			return res, fmt.Errorf("%s: %w", c.typ, err)
		}
	}
	s.img = next
	s.hashes = append(s.hashes, sha256.Sum256(enc))
	s.logf("controller: %s broker %d → %v", c.typ, c.brokerID, res.err)
	return res, nil
}

// run creates the topics and takes steps random steps, checking every
// invariant after each, then heals the cluster and checks it settles.
func (s *sim) run(steps int) error {
	if err := s.setup(); err != nil {
		return err
	}
	for s.step = 1; s.step <= steps; s.step++ {
		if err := s.randomStep(); err != nil {
			return fmt.Errorf("step %d: %w", s.step, err)
		}
		if err := s.check(); err != nil {
			return fmt.Errorf("after step %d: %w", s.step, err)
		}
	}
	if err := s.settle(); err != nil {
		return fmt.Errorf("settling: %w", err)
	}
	return nil
}

func (s *sim) setup() error {
	for id := range int32(4) {
		b := s.brokers[id]
		b.up = true
		if err := s.heartbeat(b); err != nil {
			return err
		}
	}
	// Three topics of replication factor 3: b with min.insync.replicas 2,
	// c with unclean leader election (its records may be lost: only
	// its leaders are checked).
	for i, name := range []string{"a", "b", "c"} {
		var as [][]int32
		for p := range 3 {
			as = append(as, []int32{int32(p) % 4, int32(p+1) % 4, int32(p+2) % 4})
			s.tps = append(s.tps, TopicPartition{name, int32(p)})
		}
		configs := map[string]string{}
		switch i {
		case 1:
			configs["min.insync.replicas"] = "2"
		case 2:
			configs[configUncleanLeaderElection] = "true"
		}
		res, err := s.propose(&command{typ: cmdCreateTopic, topic: name, topicID: TopicID{0: byte(i + 1)}, partitions: -1, rf: -1,
			configs: configs, assignments: as})
		if err != nil {
			return err
		}
		if res.err != nil {
			return fmt.Errorf("create %s: %w", name, res.err)
		}
	}
	for _, b := range s.brokers {
		if b.up {
			if err := s.deliver(b); err != nil {
				return err
			}
		}
	}
	return s.check()
}

// randomStep takes one step the RNG picks.
func (s *sim) randomStep() error {
	s.now = s.now.Add(time.Duration(s.rng.IntN(30)) * time.Millisecond)
	b := s.brokers[s.rng.IntN(len(s.brokers))]
	tp := s.tps[s.rng.IntN(len(s.tps))]
	switch x := s.rng.IntN(1000); {
	case x < 160:
		if l := s.pickBroker(func(b *simBroker) bool { return b.up && b.parts[tp] != nil && b.parts[tp].leader != nil }); l != nil {
			return s.produce(l, tp)
		}
	case x < 400:
		if f := s.pickBroker(func(b *simBroker) bool { return b.up && b.parts[tp] != nil && b.parts[tp].leader == nil }); f != nil {
			return s.fetch(f, tp)
		}
	case x < 470:
		if l := s.pickBroker(func(b *simBroker) bool { return b.up && b.parts[tp] != nil && b.parts[tp].leader != nil }); l != nil {
			return s.isrCheck(l, tp)
		}
	case x < 560:
		if len(s.alters) > 0 {
			return s.processAlter(s.rng.IntN(len(s.alters)), true)
		}
	case x < 580:
		if len(s.alters) > 0 {
			s.dropAlter(s.rng.IntN(len(s.alters)))
		}
	case x < 700:
		if b.up {
			return s.deliver(b)
		}
	case x < 730:
		if b.up {
			return s.heartbeat(b)
		}
	case x < 760:
		if b.up && s.rng.IntN(2) == 0 {
			s.crash(b)
		}
	case x < 790:
		if !b.up {
			return s.restart(b)
		}
	case x < 820:
		return s.fence(b)
	case x < 835:
		return s.unregister(b)
	case x < 875:
		return s.reassign(tp)
	case x < 885:
		return s.drain(b)
	case x < 889:
		_, err := s.propose(&command{typ: cmdElectPreferred})
		return err
	case x < 893:
		// An unclean election may lose records: only of topic c.
		var elect []TopicPartition
		for _, tp := range s.tps {
			if tp.Topic == "c" {
				elect = append(elect, tp)
			}
		}
		_, err := s.propose(&command{typ: cmdElectUnclean, elect: elect})
		return err
	case x < 900:
		return s.createPartition(tp.Topic)
	case x < 935:
		return s.ctlCatchUp(s.ctls[s.rng.IntN(len(s.ctls))])
	case x < 955:
		s.ctlSnapshot(s.ctls[s.rng.IntN(len(s.ctls))])
	case x < 975:
		return s.ctlCrash(s.ctls[s.rng.IntN(len(s.ctls))])
	case x < 985:
		return s.ctlAddVoter()
	case x < 995:
		s.ctlRemoveVoter()
	default:
		s.now = s.now.Add(simLagTimeMax + time.Duration(s.rng.IntN(100))*time.Millisecond)
	}
	return nil
}

// pickBroker returns a random broker of those f accepts, nil for none.
func (s *sim) pickBroker(f func(*simBroker) bool) *simBroker {
	var bs []*simBroker
	for _, b := range s.brokers {
		if f(b) {
			bs = append(bs, b)
		}
	}
	if len(bs) == 0 {
		return nil
	}
	return bs[s.rng.IntN(len(bs))]
}

func envSet(name string) bool {
	v := strings.TrimSpace(os.Getenv(name))
	return v != "" && v != "0"
}
