package mirror

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
)

// startAuthorizedBroker starts a broker with the authorizer on; the test's
// own plaintext clients (User:ANONYMOUS) are super users.
func startAuthorizedBroker(t *testing.T) string {
	t.Helper()
	cfg := testbroker.Config(t.TempDir())
	cfg.Authorizer = true
	cfg.SuperUsers = []string{"User:ANONYMOUS"}
	return testbroker.StartBroker(t, cfg).Addr
}

// topicACLs lists the ACLs on the literal topic name on addr, as
// "PERMISSION OPERATION principal@host", sorted.
func topicACLs(t *testing.T, addr, topic string) []string {
	t.Helper()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeTopic
	req.ResourceName = &topic
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(context.Background(), client(t, addr))
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("describe ACLs of %s: %v", topic, err)
	}
	var out []string
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, fmt.Sprintf("%s %s %s@%s", a.PermissionType, a.Operation, a.Principal, a.Host))
		}
	}
	slices.Sort(out)
	return out
}

// TestMirrorSyncsTopicACLs: MM2's sync.topic.acls.enabled between two
// brokers with the authorizer on. The ACLs of a mirrored topic's literal
// name are created on its remote topic, but an ALLOW WRITE (only the
// mirror writes there) and with ALLOW ALL turned into ALLOW READ; DENY
// bindings are copied as MM2 copies them; a prefixed binding and an
// unmirrored topic's are not. An ACL added later arrives at the next
// sync.topic.acls.interval.seconds.
func TestMirrorSyncsTopicACLs(t *testing.T) {
	t.Parallel()
	a, b := startAuthorizedBroker(t), startAuthorizedBroker(t)
	admA := kadm.NewClient(client(t, a))
	ctx := context.Background()
	createTopic(t, admA, "acl-t", 1, nil)
	createTopic(t, admA, "other", 1, nil)
	allow := func(principal, topic string, pattern kadm.ACLPattern, ops ...kadm.ACLOperation) *kadm.ACLBuilder {
		return kadm.NewACLs().Allow(principal).AllowHosts("*").Topics(topic).Operations(ops...).ResourcePatternType(pattern)
	}
	for _, acl := range []*kadm.ACLBuilder{
		allow("User:alice", "acl-t", kadm.ACLPatternLiteral, kadm.OpRead, kadm.OpDescribe),
		allow("User:bob", "acl-t", kadm.ACLPatternLiteral, kadm.OpWrite),
		allow("User:carol", "acl-t", kadm.ACLPatternLiteral, kadm.OpAll),
		kadm.NewACLs().Deny("User:dave").DenyHosts("10.0.0.1").Topics("acl-t").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
		allow("User:erin", "acl-", kadm.ACLPatternPrefixed, kadm.OpRead),
		allow("User:alice", "other", kadm.ACLPatternLiteral, kadm.OpRead),
	} {
		rs, err := admA.CreateACLs(ctx, acl)
		if err == nil {
			for _, r := range rs {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatalf("create ACLs on A: %v", err)
		}
	}
	runMirror(t, map[string]string{
		"clusters": "A, B", "A.bootstrap.servers": a, "B.bootstrap.servers": b,
		"A->B.enabled": "true", "A->B.topics": "acl-t", "emit.checkpoints.enabled": "false",
		"sync.topic.acls.interval.seconds": "0.3",
	})
	want := []string{
		"ALLOW DESCRIBE User:alice@*", "ALLOW READ User:alice@*", "ALLOW READ User:carol@*", "DENY READ User:dave@10.0.0.1",
	}
	var got []string
	testkit.WaitFor(t, 10*time.Second, "A.acl-t's ACLs on B", func() bool {
		got = topicACLs(t, b, "A.acl-t")
		return len(got) >= len(want)
	})
	if !slices.Equal(got, want) {
		t.Fatalf("A.acl-t on B has ACLs %q, want %q", got, want)
	}
	if other := topicACLs(t, b, "A.other"); len(other) > 0 {
		t.Fatalf("A.other (not mirrored) has ACLs on B: %q", other)
	}
	if _, err := admA.CreateACLs(ctx, allow("User:frank", "acl-t", kadm.ACLPatternLiteral, kadm.OpRead)); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "an ACL added later on B", func() bool {
		return slices.Contains(topicACLs(t, b, "A.acl-t"), "ALLOW READ User:frank@*")
	})
}
