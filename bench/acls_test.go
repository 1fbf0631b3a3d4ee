package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// The bindings are n exactly, distinct, ANONYMOUS's four first and the
// others of other principals.
func TestACLBindings(t *testing.T) {
	for _, n := range []int{100, 1000} {
		bs := aclBindings(n)
		if len(bs) != n {
			t.Fatalf("%d bindings, want %d", len(bs), n)
		}
		seen := map[string]bool{}
		for i, b := range bs {
			k := strings.Join([]string{b.ResourceType.String(), b.ResourceName, b.ResourcePatternType.String(),
				b.Principal, b.Operation.String(), b.PermissionType.String()}, "|")
			if seen[k] {
				t.Errorf("binding %d twice: %s", i, k)
			}
			seen[k] = true
			if anon := b.Principal == "User:ANONYMOUS"; anon != (i < 4) {
				t.Errorf("binding %d is %s's", i, b.Principal)
			}
		}
	}
}

// An authorizer peer runs the broker with its authorizer on: after its
// bindings are made, User:ANONYMOUS on the clients' listener creates and
// produces to a topic of the suite's prefix and is refused one outside
// it (it is no super user, and allow.everyone.if.no.acl.found is off).
func TestACLPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	bin := testkit.Binary(t)
	spec, _ := peerSpecByKey(acl100Peer)
	p := &peer{spec: spec}
	if err := p.start(bin, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.acl.create(ctx, peerStartTimeout); err != nil {
		t.Fatal(err)
	}
	t.Logf("bindings made in %v", time.Since(t0))
	start := time.Now()
	d, err := newKafkaDriver(p.seeds(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	if err := d.createTopic(ctx, "bench-acl", 2); err != nil {
		t.Fatal(err)
	}
	vals := newValues()
	res, err := d.produce(ctx, produceSpec{topic: "bench-acl", partitions: 2, size: 100, acks: 1, compression: "none",
		producers: 1, duration: time.Second, records: 100, vals: vals})
	if err != nil || res.records != 100 {
		t.Fatalf("ANONYMOUS produced %d records: %v", res.records, err)
	}
	err = d.createTopic(ctx, "other", 1)
	if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("creating a topic outside bench-: %v, want an authorization error", err)
	}
	t.Logf("%v: created, produced, refused", time.Since(start))
	// A produce outside the prefix is refused too.
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.seeds()...), kgo.DefaultProduceTopic("other"),
		kgo.RecordDeliveryTimeout(5*time.Second), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce to a topic outside bench-: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	t.Logf("%v: produce refused", time.Since(start))
	if !strings.Contains(p.settings, "authorizer on") {
		t.Errorf("settings do not say the authorizer is on: %q", p.settings)
	}
}

// Issue 15's targets are each authorizer peer's records/s over ringlog
// io_uring's in the base produce table.
func TestACLTargets(t *testing.T) {
	s := fakeSuite(t)
	base := s.findTable(partProduce, baseLike(kindProduce, 1024, false))
	for i := range base.rows[acl1000Peer].samples {
		smp := &base.rows[acl1000Peer].samples[i]
		smp.records = smp.records * 95 / 100
		smp.bytes = smp.bytes * 95 / 100
	}
	var b bytes.Buffer
	s.writeTargets(&b)
	for _, want := range []string{
		"| authorizer on, 100 ACLs: produce 1 KiB records/s ≥ 0.97x the authorizer off | 1.00x (2.00k against 2.00k records/s; broker CPU 250 against 250 s/GB) | met |",
		"| authorizer on, 1,000 ACLs: produce 1 KiB records/s ≥ 0.97x the authorizer off | 0.95x (1.90k against 2.00k records/s; broker CPU 263 against 250 s/GB) | **not met** |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("targets lack %q:\n%s", want, b.String())
		}
	}
	for _, tb := range s.tables {
		if r := tb.rows[acl100Peer]; r != nil {
			r.samples, r.status, r.reason = nil, statusUnavailable, "not selected (-peers)"
		}
	}
	b.Reset()
	s.writeTargets(&b)
	if l := lineWith(b.String(), "authorizer on, 100 ACLs"); !strings.Contains(l, "| — | not measured: ringlog ACLs 100 unavailable |") {
		t.Errorf("without the peer: %q", l)
	}
}
