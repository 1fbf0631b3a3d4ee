package controller

import (
	"context"
	"maps"
)

// UnregisterBroker removes broker id's registration (Kafka's
// UnregisterBroker, KIP-631) and takes it out of the quorum's
// configuration when it is a non-voter (a broker-only node); a voter's
// vote is changed by RemoveVoter only. As in Kafka's controller, a live
// broker is not refused: its next heartbeat finds its epoch unknown and
// it registers again. Errors: BROKER_ID_NOT_REGISTERED; INVALID_REQUEST
// while the broker is a replica of some partition. Kafka lets that
// through and leaves the partitions naming an unknown broker; ringlog's
// state keeps every replica a registered broker (the elections and the
// placement rely on it, checkImage asserts it), so the replicas must be
// moved first.
func (c *Controller) UnregisterBroker(ctx context.Context, id int32) error {
	if _, err := c.submit(ctx, &command{typ: cmdUnregisterBroker, brokerID: id}); err != nil {
		return err
	}
	return c.removeNode(ctx, id)
}

// unregisterBroker is the state machine's side of UnregisterBroker.
func (t *tx) unregisterBroker(c *command) result {
	if _, ok := t.broker(c.brokerID); !ok {
		return result{err: errf(ErrBrokerIDNotRegistered, "broker %d is not currently registered", c.brokerID)}
	}
	n := 0
	for _, tp := range t.topicMap() {
		for _, p := range tp.Partitions {
			for _, r := range p.Replicas {
				if r == c.brokerID {
					n++
				}
			}
		}
	}
	if n > 0 {
		return result{err: errf(ErrInvalidRequest, "broker %d is a replica of %d partitions: reassign them before unregistering it", c.brokerID, n)}
	}
	if t.brokers == nil {
		t.brokers = maps.Clone(t.base.brokers)
	}
	delete(t.brokers, c.brokerID)
	return result{}
}
