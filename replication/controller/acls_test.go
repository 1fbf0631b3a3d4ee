package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"ringlog/internal/acl"
)

func binding(name string, pt acl.PatternType, principal string, op acl.Operation, perm acl.Permission) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: name, PatternType: pt, Principal: principal,
		Host: acl.WildcardHost, Operation: op, Permission: perm}
}

// TestACLCommands: CreateAcls adds each binding once, DeleteAcls removes
// what its filters match and answers each filter with its matches, and a
// snapshot keeps the set.
func TestACLCommands(t *testing.T) {
	s := newFSMState(t)
	readA := binding("orders", acl.PatternLiteral, "User:a", acl.OpRead, acl.PermissionAllow)
	writeB := binding("logs-", acl.PatternPrefixed, "User:b", acl.OpWrite, acl.PermissionAllow)
	denyA := binding("orders", acl.PatternLiteral, "User:a", acl.OpWrite, acl.PermissionDeny)
	s.ok(&command{typ: cmdCreateAcls, acls: []acl.Binding{readA, writeB}})
	s.ok(&command{typ: cmdCreateAcls, acls: []acl.Binding{denyA, readA}}) // readA again: kept once
	if got := s.img.ACLs().Bindings(); len(got) != 3 {
		t.Fatalf("bindings %v, want 3", got)
	}
	img0 := s.img
	a := acl.NewAuthorizer(nil, false, img0.ACLs)
	if !a.Authorize("User:a", "h", acl.OpRead, acl.ResourceTopic, "orders") || a.Authorize("User:a", "h", acl.OpWrite, acl.ResourceTopic, "orders") {
		t.Fatal("the image's set does not decide as its bindings say")
	}

	img, err := decodeImage(encodeImage(s.img))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(img.ACLs().Bindings(), s.img.ACLs().Bindings()) {
		t.Fatalf("snapshot: %v, want %v", img.ACLs().Bindings(), s.img.ACLs().Bindings())
	}

	// Invalid bindings are refused whole.
	bad := readA
	bad.PatternType = acl.PatternMatch
	if res := s.apply(&command{typ: cmdCreateAcls, acls: []acl.Binding{writeB, bad}}); !errors.Is(res.err, ErrInvalidRequest) {
		t.Fatalf("a MATCH binding: %v", res.err)
	}

	userA := "User:a"
	filters := []acl.Filter{
		{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Principal: &userA, Operation: acl.OpAny, Permission: acl.PermissionAny},
		{ResourceType: acl.ResourceTopic, PatternType: acl.PatternLiteral, Operation: acl.OpWrite, Permission: acl.PermissionDeny},
		{ResourceType: acl.ResourceGroup, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny},
	}
	res := s.ok(&command{typ: cmdDeleteAcls, aclFilters: filters})
	d := &decoder{b: res.payload}
	var got [][]acl.Binding
	for range d.count(1) {
		got = append(got, decodeBindings(d))
	}
	if err := d.done(); err != nil {
		t.Fatal(err)
	}
	want := [][]acl.Binding{{readA, denyA}, {denyA}, nil} // in snapshot order
	if len(got) != 3 || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) || len(got[2]) != 0 {
		t.Fatalf("DeleteAcls answered %v, want %v", got, want)
	}
	if left := s.img.ACLs().Bindings(); !slices.Equal(left, []acl.Binding{writeB}) {
		t.Fatalf("left %v, want only %v", left, writeB)
	}
	if res := s.apply(&command{typ: cmdDeleteAcls, aclFilters: []acl.Filter{{ResourceType: acl.ResourceUnknown}}}); !errors.Is(res.err, ErrInvalidRequest) {
		t.Fatalf("an UNKNOWN filter: %v", res.err)
	}
}

// TestACLsThroughTheQuorum: bindings created on one node are in every
// node's image, across a restart.
func TestACLsThroughTheQuorum(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b := binding("t", acl.PatternLiteral, "User:x", acl.OpRead, acl.PermissionAllow)
	if err := nodes[2].c.CreateAcls(ctx, []acl.Binding{b}); err != nil {
		t.Fatal(err)
	}
	deleted, err := nodes[1].c.DeleteAcls(ctx, []acl.Filter{{ResourceType: acl.ResourceTopic, PatternType: acl.PatternMatch,
		Operation: acl.OpWrite, Permission: acl.PermissionAny}})
	if err != nil || len(deleted) != 1 || len(deleted[0]) != 0 {
		t.Fatalf("a DeleteAcls that matches nothing: %v, %v", deleted, err)
	}
	nodes[0].close(t)
	nodes[0].open(t)
	for _, nd := range nodes {
		if err := nd.c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := nd.c.Image().ACLs().Bindings(); !slices.Equal(got, []acl.Binding{b}) {
			t.Fatalf("node %d: %v", nd.cfg.NodeID, got)
		}
	}
}
