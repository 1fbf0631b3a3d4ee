package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// The write API. Every method may be called on any node: the request goes
// to the raft leader (locally or through the forwarding RPC), is retried
// on a leader change until ctx expires (30s when ctx has no deadline), and
// returns once this node has applied the entry, so Image shows the write.
// A retry after the old leader lost leadership can find its own first
// attempt applied (CreateTopic then answers TOPIC_ALREADY_EXISTS), as in
// Kafka.

// BrokerInfo describes a broker registering with the quorum.
type BrokerInfo struct {
	ID   int32
	Addr string // host:port of its inter-broker listener
	Rack string // broker.rack, or empty
	// Listeners are its advertised listeners by name (advertised.listeners):
	// clients are told the address of the listener they came in on.
	Listeners map[string]string
	// Offline, when set, returns the partitions whose replica on the
	// broker is offline (logs that did not open): each registration
	// carries them, so that the controller never elects the new
	// incarnation to lead one of them.
	Offline func() []TopicIDPartition
	// RecoveredLogEnds, when set, returns where the logs that the broker
	// recovered from an unclean shutdown at its start end (the last
	// leader epoch in each, and its LEO), so that a partition whose whole
	// ISR lost power waits for the longest log (election.go). The
	// heartbeat loop asks it until a registration succeeds and never
	// after: a broker registering again after a fence has served since.
	RecoveredLogEnds func() []ReplicaLogEnd
}

// CreateTopicRequest is one topic of a CreateTopics request.
type CreateTopicRequest struct {
	Name string
	// Partitions and ReplicationFactor may be -1 for the configured
	// defaults; both must be -1 (or match) when Assignments is set.
	Partitions        int32
	ReplicationFactor int16
	// Assignments, if set, gives each partition's replicas explicitly.
	Assignments [][]int32
	Configs     map[string]string
	// ValidateOnly checks the request on the leader and returns the topic
	// as it would be created, without creating it.
	ValidateOnly bool
	// ID, when set, is the topic's id instead of a new random one: a
	// broker adopting the topics it held before it had a quorum keeps
	// their ids (INVALID_REQUEST if another topic has it).
	ID TopicID
	// MaxTotal, when positive, is the most partitions the cluster may hold
	// with the new topic's (ringlog.max.partitions of the broker asking):
	// beyond it the creation is POLICY_VIOLATION.
	MaxTotal int32
}

// AlterPartitionRequest is a partition leader's ISR change (Kafka's
// AlterPartition). The controller checks every field against its state.
type AlterPartitionRequest struct {
	Topic          string
	Partition      int32
	BrokerID       int32 // the leader sending it
	BrokerEpoch    int64
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	// ISREpochs, when set, holds the broker epoch of each ISR member as the
	// leader knew it when it judged that member in sync (-1: not checked).
	// A member joining the ISR whose registration has another epoch is
	// refused with INELIGIBLE_REPLICA: the leader judged an incarnation
	// that is gone (Kafka's NewIsrWithEpochs, KIP-903).
	ISREpochs []int64
}

// submit runs cmd on the leader and waits until this node applied it.
func (c *Controller) submit(ctx context.Context, cmd *command) (reply, error) {
	if c.ctx.Err() != nil {
		return reply{}, ErrClosed
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRequestTimeout)
		defer cancel()
	}
	body := cmd.encode()
	if len(body) > maxCommandBytes {
		return reply{}, errf(ErrInvalidRequest, "%s of %d bytes, at most %d", cmd.typ, len(body), maxCommandBytes)
	}
	backoff := 5 * time.Millisecond
	for {
		var r reply
		var err error
		addr, id := c.raft.LeaderWithID()
		switch {
		case c.raft.State() == raft.Leader:
			// lead may fill in fields: it gets its own copy.
			cp, derr := decodeCommand(body)
			if derr != nil {
				return reply{}, derr
			}
			r, err = c.lead(ctx, cp)
		case id != "" && string(id) != fmt.Sprint(c.cfg.NodeID):
			r, err = c.forward(ctx, string(addr), body)
		default:
			err = errf(ErrNotController, "no raft leader known to node %d", c.cfg.NodeID)
		}
		if err == nil {
			if r.index > 0 {
				err = c.WaitApplied(ctx, r.index)
			}
			return r, err
		}
		var te *transportError
		if !errors.Is(err, ErrNotController) && !errors.As(err, &te) {
			return r, err
		}
		if c.ctx.Err() != nil {
			return reply{}, ErrClosed
		}
		select {
		case <-ctx.Done():
			return reply{}, fmt.Errorf("%w: %s: %w (last: %w)", ErrRequestTimedOut, cmd.typ, ctx.Err(), err)
		case <-c.ctx.Done():
			return reply{}, ErrClosed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// RegisterBroker registers a broker incarnation and returns its broker
// epoch. It unfences the broker; a broker that was registered and unfenced
// is first fenced (see doc.go). RegisterAndHeartbeat calls it.
func (c *Controller) RegisterBroker(ctx context.Context, info BrokerInfo) (int64, error) {
	if info.ID < 0 || info.Addr == "" {
		return 0, errf(ErrInvalidRequest, "broker id %d, address %q", info.ID, info.Addr)
	}
	var offline []TopicIDPartition
	if info.Offline != nil {
		offline = canonicalOffline(info.Offline())
	}
	var ends []ReplicaLogEnd
	if info.RecoveredLogEnds != nil {
		ends = slices.Clone(info.RecoveredLogEnds())
		slices.SortFunc(ends, func(a, b ReplicaLogEnd) int {
			if c := slices.Compare(a.ID[:], b.ID[:]); c != 0 {
				return c
			}
			return int(a.Partition - b.Partition)
		})
	}
	r, err := c.submit(ctx, &command{typ: cmdRegisterBroker, brokerID: info.ID, addr: info.Addr, rack: info.Rack, configs: maps.Clone(info.Listeners),
		offline: offline, ends: ends})
	if err != nil {
		return 0, err
	}
	d := &decoder{b: r.payload}
	epoch := d.i64()
	if err := d.done(); err != nil {
		return 0, fmt.Errorf("controller: register reply: %w", err)
	}
	return epoch, nil
}

// ReportOfflineReplicas tells the quorum which partitions' replicas on
// broker brokerID are offline, the whole set (empty: none), as a broker
// whose disk failed under some of its logs reports its offline log
// directories (KIP-858). The controller takes the replicas out of their
// ISRs (not as the last member) and moves the leadership of those the
// broker led to another in-sync replica, or leaves them leaderless.
// brokerEpoch must be the broker's current epoch (STALE_BROKER_EPOCH or
// BROKER_ID_NOT_REGISTERED otherwise).
func (c *Controller) ReportOfflineReplicas(ctx context.Context, brokerID int32, brokerEpoch int64, offline []TopicIDPartition) error {
	_, err := c.submit(ctx, &command{typ: cmdOfflineReplicas, brokerID: brokerID, epoch: brokerEpoch, offline: canonicalOffline(offline)})
	return err
}

// canonicalOffline sorts a set of partitions and drops repeats.
func canonicalOffline(v []TopicIDPartition) []TopicIDPartition {
	v = slices.Clone(v)
	sortTopicIDPartitions(v)
	return slices.Compact(v)
}

// heartbeat tells the leader the broker is alive.
func (c *Controller) heartbeat(ctx context.Context, id int32, epoch int64) error {
	_, err := c.submit(ctx, &command{typ: cmdHeartbeat, brokerID: id, epoch: epoch})
	return err
}

// CreateTopic creates a topic: the leader checks the name, the counts
// (replication factor at most the unfenced brokers) and the assignments,
// chooses the topic id and places the replicas. It returns the topic as
// created (or, with ValidateOnly, as it would be).
func (c *Controller) CreateTopic(ctx context.Context, req CreateTopicRequest) (*Topic, error) {
	if req.Partitions > maxPartitions || len(req.Assignments) > maxPartitions {
		return nil, errf(ErrInvalidPartitions, "%d partitions, at most %d", max(int(req.Partitions), len(req.Assignments)), maxPartitions)
	}
	if err := validateConfigs(req.Configs, nil); err != nil {
		return nil, err
	}
	r, err := c.submit(ctx, &command{
		typ: cmdCreateTopic, topic: req.Name, partitions: req.Partitions, rf: req.ReplicationFactor,
		assignments: req.Assignments, configs: req.Configs, validateOnly: req.ValidateOnly, topicID: req.ID,
		maxTotal: max(req.MaxTotal, 0),
	})
	if err != nil {
		return nil, err
	}
	d := &decoder{b: r.payload}
	t := decodeTopic(d, snapshotVersion)
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("controller: create reply: %w", err)
	}
	return t, nil
}

// DeleteTopic deletes a topic.
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	_, err := c.submit(ctx, &command{typ: cmdDeleteTopic, topic: name})
	return err
}

// CreatePartitions grows a topic to count partitions (never shrinks it).
// assignments, if set, gives the replicas of each new partition. maxTotal,
// when positive, is the most partitions the cluster may hold afterwards
// (as CreateTopicRequest.MaxTotal).
func (c *Controller) CreatePartitions(ctx context.Context, topic string, count int32, assignments [][]int32, maxTotal int32) error {
	_, err := c.submit(ctx, &command{typ: cmdCreatePartitions, topic: topic, partitions: count, assignments: assignments,
		maxTotal: max(maxTotal, 0)})
	return err
}

// AlterConfigs sets and deletes a topic's config keys in one change.
// Setting unclean.leader.election.enable=true elects leaders for the
// topic's leaderless partitions at once.
func (c *Controller) AlterConfigs(ctx context.Context, topic string, set map[string]string, deletes []string) error {
	if err := validateConfigs(set, deletes); err != nil {
		return err
	}
	_, err := c.submit(ctx, &command{typ: cmdAlterConfigs, topic: topic, configs: maps.Clone(set), deletes: slices.Clone(deletes)})
	return err
}

// AlterPartition changes a partition's ISR on behalf of its leader and
// returns the partition's new state. Errors: FENCED_LEADER_EPOCH (the
// leader epoch moved on), INVALID_UPDATE_VERSION (the partition epoch
// did), INELIGIBLE_REPLICA (a member is not a replica or is fenced),
// STALE_BROKER_EPOCH, INVALID_REQUEST (not the leader; the ISR lacks the
// leader), UNKNOWN_TOPIC_OR_PARTITION.
func (c *Controller) AlterPartition(ctx context.Context, req AlterPartitionRequest) (Partition, error) {
	r, err := c.submit(ctx, &command{
		typ: cmdAlterPartition, topic: req.Topic, partitions: req.Partition, brokerID: req.BrokerID,
		epoch: req.BrokerEpoch, leaderEpoch: req.LeaderEpoch, partitionEpoch: req.PartitionEpoch, isr: req.ISR, isrEpochs: req.ISREpochs,
	})
	if err != nil {
		return Partition{}, err
	}
	d := &decoder{b: r.payload}
	p := decodePartition(d, snapshotVersion)
	if err := d.done(); err != nil {
		return Partition{}, fmt.Errorf("controller: alter partition reply: %w", err)
	}
	return p, nil
}

// ElectPreferredLeaders moves leadership of the partitions listed (all
// when the list is empty) to their preferred replica where it is in the
// ISR and live. The map holds an error per partition listed: nil,
// ErrElectionNotNeeded, ErrPreferredLeaderNotAvail or
// ErrUnknownTopicOrPartition; for an empty list it holds every partition
// but those that needed no election (ErrElectionNotNeeded), as Kafka's
// ElectLeaders answers a null list.
func (c *Controller) ElectPreferredLeaders(ctx context.Context, partitions []TopicPartition) (map[TopicPartition]error, error) {
	r, err := c.submit(ctx, &command{typ: cmdElectPreferred, elect: slices.Clone(partitions)})
	if err != nil {
		return nil, err
	}
	return decodeElectResults(r.payload)
}

// ElectUncleanLeaders elects a leader for each leaderless partition listed
// (all when the list is empty) among its live replicas, in the ISR or not.
// The map holds an error per partition listed: nil, ErrElectionNotNeeded
// (it has a leader), ErrEligibleLeadersNotAvail or
// ErrUnknownTopicOrPartition; for an empty list it holds every partition
// but those that have a leader.
func (c *Controller) ElectUncleanLeaders(ctx context.Context, partitions []TopicPartition) (map[TopicPartition]error, error) {
	r, err := c.submit(ctx, &command{typ: cmdElectUnclean, elect: slices.Clone(partitions)})
	if err != nil {
		return nil, err
	}
	return decodeElectResults(r.payload)
}

// AllocateProducerIDs takes the next block of producer ids for a broker
// incarnation (Kafka's AllocateProducerIds, KIP-730): ids start..start+
// length-1 belong to that broker alone, in the whole cluster and forever,
// so that two idempotent producers never share an id whichever brokers
// they asked. brokerEpoch must be the broker's current epoch
// (STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED otherwise). A retried
// call may have taken a block on its first attempt too: that block is
// never handed out, which costs nothing but ids.
//
// floor, when positive, makes the block start at or above it (the ids
// below are skipped for good): a broker that handed out ids on its own
// before it had a quorum passes the end of what it used.
func (c *Controller) AllocateProducerIDs(ctx context.Context, brokerID int32, brokerEpoch, floor int64) (start, length int64, err error) {
	r, err := c.submit(ctx, &command{typ: cmdAllocateProducerIDs, brokerID: brokerID, epoch: brokerEpoch, floor: max(floor, 0)})
	if err != nil {
		return 0, 0, err
	}
	d := &decoder{b: r.payload}
	start, length = d.i64(), int64(d.i32())
	if err := d.done(); err != nil {
		return 0, 0, fmt.Errorf("controller: allocate producer ids reply: %w", err)
	}
	if start < 0 || length <= 0 || start > math.MaxInt64-length {
		return 0, 0, errf(ErrUnknown, "allocate producer ids reply: block %d+%d", start, length)
	}
	return start, length, nil
}

// ControlledShutdown fences a broker incarnation now, at its own request
// (Kafka's controlled shutdown: having stopped its heartbeats, the broker
// asks so that its leaderships move before it goes rather than a session
// timeout after; heartbeats of that incarnation still in flight do not
// unfence it). It returns the index of the entry, which WaitApplied waits
// for. STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED when epoch is not
// the broker's current one.
func (c *Controller) ControlledShutdown(ctx context.Context, brokerID int32, epoch int64) (uint64, error) {
	r, err := c.submit(ctx, &command{typ: cmdControlledShutdown, brokerID: brokerID, epoch: epoch})
	return r.index, err
}

// Sync waits until this node's Image reflects every write committed before
// the call (it writes a no-op entry through the leader and waits for it).
// A broker calls it after start before it serves metadata.
func (c *Controller) Sync(ctx context.Context) error {
	_, err := c.submit(ctx, &command{typ: cmdNoop})
	return err
}

// RegisterAndHeartbeat starts the broker's session with the quorum: one
// goroutine registers the broker and then heartbeats every
// BrokerHeartbeatInterval, re-registering when the quorum answers that its
// epoch is stale or unknown, until ctx is done or the controller closes.
// Failed attempts are retried at the next tick. The broker is live when
// Image().Broker(id) is registered and not Fenced.
func (c *Controller) RegisterAndHeartbeat(ctx context.Context, info BrokerInfo) error {
	if info.ID < 0 || info.Addr == "" {
		return errf(ErrInvalidRequest, "broker id %d, address %q", info.ID, info.Addr)
	}
	c.brokersMu.Lock()
	defer c.brokersMu.Unlock()
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	if c.brokers[info.ID] {
		return fmt.Errorf("controller: broker %d already has a heartbeat loop", info.ID)
	}
	c.brokers[info.ID] = true
	c.wg.Add(1)
	go c.brokerLoop(ctx, info)
	return nil
}

// Registered returns the broker epoch that this process's heartbeat loop
// for broker id last registered, 0 before its first registration. A
// broker that restarted must not act on the image until it shows that
// epoch: until then the image still names its previous incarnation, and
// whatever that one led (its log may since have lost its tail) would be
// led again, followers truncating to it.
func (c *Controller) Registered(id int32) int64 {
	if e, ok := c.registered.Load(id); ok {
		return e.(int64)
	}
	return 0
}

func (c *Controller) brokerLoop(ctx context.Context, info BrokerInfo) {
	defer c.wg.Done()
	defer func() {
		c.brokersMu.Lock()
		delete(c.brokers, info.ID)
		c.brokersMu.Unlock()
	}()
	interval := c.cfg.BrokerHeartbeatInterval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var epoch int64
	// failingSince is when heartbeats began to fail (zero while they
	// succeed); warned tells whether this streak was logged. A heartbeat
	// that fails for longer than the session timeout leaves the broker
	// fenced by the leader, and the reason must be in the log.
	var failingSince time.Time
	warned := false
	for {
		actx, cancel := context.WithTimeout(ctx, interval)
		stop := context.AfterFunc(c.ctx, cancel)
		if epoch == 0 {
			e, err := c.RegisterBroker(actx, info)
			if err == nil {
				epoch = e
				c.registered.Store(info.ID, e)
				info.RecoveredLogEnds = nil // reported once, by this incarnation
				c.log.Info("controller: broker registered", "broker", info.ID, "epoch", epoch)
			} else if ctx.Err() == nil && c.ctx.Err() == nil {
				c.log.Warn("controller: broker registration failed", "broker", info.ID, "error", err)
			}
		} else if err := c.heartbeat(actx, info.ID, epoch); err != nil {
			if errors.Is(err, ErrStaleBrokerEpoch) || errors.Is(err, ErrBrokerIDNotRegistered) {
				c.log.Warn("controller: broker must register again", "broker", info.ID, "error", err)
				epoch = 0
			} else if now := time.Now(); failingSince.IsZero() {
				failingSince = now
			} else if !warned && now.Sub(failingSince) > c.cfg.BrokerSessionTimeout && ctx.Err() == nil && c.ctx.Err() == nil {
				warned = true
				c.log.Warn("controller: broker heartbeats failing", "broker", info.ID, "epoch", epoch,
					"for", now.Sub(failingSince).Round(time.Millisecond), "error", err)
			}
		} else {
			if warned {
				c.log.Info("controller: broker heartbeats succeed again", "broker", info.ID, "epoch", epoch)
			}
			failingSince, warned = time.Time{}, false
		}
		stop()
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-c.ctx.Done():
			return
		case <-tick.C:
		}
	}
}
