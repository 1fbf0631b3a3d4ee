package controller

import (
	"strings"
	"testing"
)

func qname(s string) *string { return &s }

// TestClientQuotas: valid alterations apply, invalid ones are answered
// with Kafka's messages and change nothing, removals drop a key (and an
// entity left with none), and a snapshot keeps the quotas.
func TestClientQuotas(t *testing.T) {
	s := newFSMState(t)
	alice := QuotaEntity{{QuotaUser, qname("alice")}}
	aliceApp := QuotaEntity{{QuotaClientID, qname("app")}, {QuotaUser, qname("alice")}}
	userDefault := QuotaEntity{{QuotaUser, nil}}
	ip := QuotaEntity{{QuotaIP, qname("10.0.0.1")}}
	res := s.ok(&command{typ: cmdAlterClientQuotas, quotas: []QuotaAlteration{
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1 << 20}, {Key: QuotaRequestPercentage, Value: 12.5}}},
		{Entity: aliceApp, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Value: 2e6}}},
		{Entity: userDefault, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 5e6}}},
		{Entity: ip, Ops: []QuotaOp{{Key: QuotaConnectionCreationRate, Value: 10}}},
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1.5}}},
		{Entity: ip, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 10}}},
		{Entity: QuotaEntity{{QuotaIP, qname("not-an-ip")}}, Ops: []QuotaOp{{Key: QuotaConnectionCreationRate, Value: 1}}},
		{Entity: QuotaEntity{{QuotaClientID, qname("x")}, {QuotaIP, qname("10.0.0.2")}}, Ops: nil},
		{Entity: QuotaEntity{{"group", qname("g")}}, Ops: nil},
		{Entity: QuotaEntity{{QuotaUser, qname("")}}, Ops: nil},
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Value: -1}}},
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaConsumerByteRate, Value: 1e30}}},
		{Entity: nil},
	}})
	d := &decoder{b: res.payload}
	var msgs []string
	for range d.count(1) {
		msgs = append(msgs, d.str())
	}
	if err := d.done(); err != nil {
		t.Fatal(err)
	}
	want := []string{"", "", "", "",
		"producer_byte_rate cannot be a fractional value.",
		"Invalid configuration key producer_byte_rate",
		"not-an-ip is not a valid IP or resolvable host.",
		"Invalid quota entity combination",
		"Unhandled client quota entity type: group",
		"Empty user not supported",
		"Quota consumer_byte_rate must be greater than 0",
		"Proposed value for consumer_byte_rate is too large for a LONG.",
		"Invalid empty client quota entity",
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d answers: %q", len(msgs), msgs)
	}
	for i := range want {
		if (want[i] == "") != (msgs[i] == "") || !strings.HasPrefix(msgs[i], want[i]) {
			t.Errorf("alteration %d: %q, want %q", i, msgs[i], want[i])
		}
	}
	if v, ok := s.img.Quota(alice); !ok || v[QuotaProducerByteRate] != 1<<20 || v[QuotaRequestPercentage] != 12.5 {
		t.Fatalf("alice: %v %v", v, ok)
	}
	if len(s.img.Quotas()) != 4 {
		t.Fatalf("quotas: %+v", s.img.Quotas())
	}
	img, err := decodeImage(encodeImage(s.img))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := img.Quota(userDefault); !ok || v[QuotaProducerByteRate] != 5e6 {
		t.Fatalf("the snapshot lost the default user's quota: %v", img.Quotas())
	}
	s.ok(&command{typ: cmdAlterClientQuotas, quotas: []QuotaAlteration{
		{Entity: alice, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Remove: true}}},
		{Entity: ip, Ops: []QuotaOp{{Key: QuotaConnectionCreationRate, Remove: true}}},
	}})
	if v, _ := s.img.Quota(alice); len(v) != 1 || v[QuotaRequestPercentage] != 12.5 {
		t.Fatalf("alice after the removal: %v", v)
	}
	if _, ok := s.img.Quota(ip); ok {
		t.Fatal("an entity without values is kept")
	}
}
