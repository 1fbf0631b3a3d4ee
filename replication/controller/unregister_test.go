package controller

import (
	"errors"
	"testing"
)

// TestUnregisterBroker: a registered broker that holds no replica leaves
// the image, fenced or live (Kafka does not refuse a live one: it
// registers again); an unknown one is BROKER_ID_NOT_REGISTERED and one
// that is a replica INVALID_REQUEST, both changing nothing.
func TestUnregisterBroker(t *testing.T) {
	s := newFSMState(t)
	s.register(1, "")
	s.register(2, "")
	s.register(3, "")
	s.create("t", nil, []int32{1, 2})
	s.fence(3)
	if res := s.apply(&command{typ: cmdUnregisterBroker, brokerID: 9}); !errors.Is(res.err, ErrBrokerIDNotRegistered) {
		t.Fatalf("unknown broker: %v", res.err)
	}
	if res := s.apply(&command{typ: cmdUnregisterBroker, brokerID: 2}); !errors.Is(res.err, ErrInvalidRequest) {
		t.Fatalf("a replica's broker: %v", res.err)
	}
	s.ok(&command{typ: cmdUnregisterBroker, brokerID: 3})
	if _, ok := s.img.Broker(3); ok || len(s.img.Brokers()) != 2 {
		t.Fatalf("broker 3 still registered: %+v", s.img.Brokers())
	}
	// Registered again, it is a new incarnation.
	epoch := s.register(3, "")
	if b, ok := s.img.Broker(3); !ok || b.Fenced || b.Epoch != epoch {
		t.Fatalf("broker 3 registered again: %+v", b)
	}
	s.ok(&command{typ: cmdUnregisterBroker, brokerID: 3}) // live
	if _, ok := s.img.Broker(3); ok {
		t.Fatal("live broker 3 still registered")
	}
}
