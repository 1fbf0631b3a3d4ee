package acl

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func allow(rt ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: WildcardHost, Operation: op, Permission: PermissionAllow}
}

func deny(rt ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
	b := allow(rt, name, pt, principal, op)
	b.Permission = PermissionDeny
	return b
}

// TestAuthorize walks Kafka's rules one by one.
func TestAuthorize(t *testing.T) {
	const alice, bob = "User:alice", "User:bob"
	bindings := []Binding{
		allow(ResourceTopic, "orders", PatternLiteral, alice, OpRead),
		allow(ResourceTopic, "logs-", PatternPrefixed, alice, OpWrite),
		deny(ResourceTopic, "logs-secret", PatternLiteral, alice, OpWrite),
		allow(ResourceTopic, "*", PatternLiteral, bob, OpDescribe),
		allow(ResourceTopic, "public", PatternLiteral, WildcardPrincipal, OpAll),
		deny(ResourceTopic, "public", PatternLiteral, bob, OpDelete),
		allow(ResourceTopic, "cfg", PatternLiteral, alice, OpAlterConfigs),
		deny(ResourceTopic, "cfg", PatternLiteral, alice, OpRead),
		{ResourceType: ResourceGroup, ResourceName: "g", PatternType: PatternLiteral, Principal: alice, Host: "10.0.0.1", Operation: OpRead, Permission: PermissionAllow},
		allow(ResourceCluster, ClusterName, PatternLiteral, bob, OpIdempotentWrite),
	}
	cases := []struct {
		principal, host string
		op              Operation
		rt              ResourceType
		name            string
		want, wantOpen  bool // want: allow.everyone.if.no.acl.found=false; wantOpen: true
	}{
		{alice, "1.2.3.4", OpRead, ResourceTopic, "orders", true, true},
		{alice, "1.2.3.4", OpWrite, ResourceTopic, "orders", false, false},       // bindings exist, none applies
		{alice, "1.2.3.4", OpDescribe, ResourceTopic, "orders", true, true},      // READ implies DESCRIBE
		{bob, "1.2.3.4", OpRead, ResourceTopic, "orders", false, false},          // bob's wildcard is DESCRIBE only
		{bob, "1.2.3.4", OpDescribe, ResourceTopic, "orders", true, true},        // wildcard resource
		{alice, "1.2.3.4", OpWrite, ResourceTopic, "logs-app", true, true},       // prefixed
		{alice, "1.2.3.4", OpWrite, ResourceTopic, "logs-secret", false, false},  // DENY wins over ALLOW
		{alice, "1.2.3.4", OpDescribe, ResourceTopic, "logs-secret", true, true}, // a DENY of WRITE implies nothing
		{alice, "1.2.3.4", OpWrite, ResourceTopic, "logs", false, false},         // shorter than the prefix: bob's wildcard matched
		{alice, "1.2.3.4", OpDelete, ResourceTopic, "public", true, true},        // ALL to every user
		{bob, "1.2.3.4", OpDelete, ResourceTopic, "public", false, false},        // but DENY for bob
		{bob, "1.2.3.4", OpWrite, ResourceTopic, "public", true, true},
		{alice, "1.2.3.4", OpDescribeConfigs, ResourceTopic, "cfg", true, true}, // ALTER_CONFIGS implies DESCRIBE_CONFIGS
		{alice, "1.2.3.4", OpRead, ResourceTopic, "cfg", false, false},
		{alice, "10.0.0.1", OpRead, ResourceGroup, "g", true, true},
		{alice, "10.0.0.2", OpRead, ResourceGroup, "g", false, false}, // another host
		{alice, "10.0.0.2", OpRead, ResourceGroup, "h", false, true},  // no binding for the group at all
		{bob, "1.2.3.4", OpIdempotentWrite, ResourceCluster, ClusterName, true, true},
		{alice, "1.2.3.4", OpIdempotentWrite, ResourceCluster, ClusterName, false, false},
		{alice, "1.2.3.4", OpWrite, ResourceTransactionalID, "tx", false, true},
		{"User:root", "1.2.3.4", OpDelete, ResourceTopic, "logs-secret", true, true}, // super user
	}
	for _, open := range []bool{false, true} {
		a := NewAuthorizer([]string{"User:root"}, open, nil)
		a.Install(NewSet(bindings))
		for _, c := range cases {
			want := c.want
			if open {
				want = c.wantOpen
			}
			if got := a.Authorize(c.principal, c.host, c.op, c.rt, c.name); got != want {
				t.Errorf("allow.everyone.if.no.acl.found=%v: %s from %s, %s on %s %q: %v, want %v", open, c.principal, c.host, c.op, c.rt, c.name, got, want)
			}
		}
	}
}

// reference decides by scanning every binding, straight from the rules
// in doc.go, without an index: TestIndexMatchesReference holds the Set's
// index to it.
func reference(bs []Binding, super map[string]bool, open bool, principal, host string, op Operation, rt ResourceType, name string) bool {
	if super[principal] {
		return true
	}
	matched, allowedBy, deniedBy := false, false, false
	for _, b := range bs {
		if b.ResourceType != rt {
			continue
		}
		switch {
		case b.PatternType == PatternLiteral && (b.ResourceName == name || b.ResourceName == "*"):
		case b.PatternType == PatternPrefixed && len(name) >= len(b.ResourceName) && name[:len(b.ResourceName)] == b.ResourceName:
		default:
			continue
		}
		matched = true
		if (b.Principal != principal && b.Principal != "User:*") || (b.Host != host && b.Host != "*") {
			continue
		}
		same := b.Operation == op || b.Operation == OpAll
		implied := (op == OpDescribe && (b.Operation == OpRead || b.Operation == OpWrite || b.Operation == OpDelete || b.Operation == OpAlter)) ||
			(op == OpDescribeConfigs && b.Operation == OpAlterConfigs)
		if b.Permission == PermissionDeny && same {
			deniedBy = true
		}
		if b.Permission == PermissionAllow && (same || implied) {
			allowedBy = true
		}
	}
	switch {
	case deniedBy:
		return false
	case allowedBy:
		return true
	case !matched:
		return open
	}
	return false
}

// TestIndexMatchesReference: random binding sets and questions, the
// indexed Set against a scan of every binding.
func TestIndexMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "ab", "abc", "abd", "b", "ba", "*", "abcd", "x"}
	principals := []string{"User:p", "User:q", "User:*"}
	hosts := []string{"h1", "h2", "*"}
	ops := []Operation{OpAll, OpRead, OpWrite, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs}
	for round := range 300 {
		var bs []Binding
		for range r.IntN(30) {
			bs = append(bs, Binding{
				ResourceType: []ResourceType{ResourceTopic, ResourceGroup}[r.IntN(2)],
				ResourceName: names[r.IntN(len(names))],
				PatternType:  []PatternType{PatternLiteral, PatternPrefixed}[r.IntN(2)],
				Principal:    principals[r.IntN(len(principals))],
				Host:         hosts[r.IntN(len(hosts))],
				Operation:    ops[r.IntN(len(ops))],
				Permission:   []Permission{PermissionAllow, PermissionDeny}[r.IntN(2)],
			})
		}
		open := round%2 == 0
		a := NewAuthorizer([]string{"User:su"}, open, nil)
		a.Install(NewSet(bs))
		for range 200 {
			principal := []string{"User:p", "User:q", "User:su"}[r.IntN(3)]
			host := []string{"h1", "h2"}[r.IntN(2)]
			op := ops[1+r.IntN(len(ops)-1)]
			rt := []ResourceType{ResourceTopic, ResourceGroup}[r.IntN(2)]
			name := names[r.IntN(len(names)-1)] + []string{"", "z"}[r.IntN(2)]
			want := reference(bs, map[string]bool{"User:su": true}, open, principal, host, op, rt, name)
			if got := a.Authorize(principal, host, op, rt, name); got != want {
				t.Fatalf("round %d, bindings %v: %s from %s, %s on %s %q: %v, reference %v", round, bs, principal, host, op, rt, name, got, want)
			}
		}
	}
}

// TestFilterMatches covers Kafka's ResourcePatternFilter semantics.
func TestFilterMatches(t *testing.T) {
	s := func(v string) *string { return &v }
	lit := allow(ResourceTopic, "foo", PatternLiteral, "User:a", OpRead)
	wild := allow(ResourceTopic, "*", PatternLiteral, "User:a", OpRead)
	pre := allow(ResourceTopic, "fo", PatternPrefixed, "User:a", OpRead)
	other := allow(ResourceGroup, "foo", PatternLiteral, "User:b", OpWrite)
	all := []Binding{lit, wild, pre, other}
	anyF := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	cases := []struct {
		name string
		f    func(Filter) Filter
		want []Binding
	}{
		{"everything", func(f Filter) Filter { return f }, all},
		{"topics", func(f Filter) Filter { f.ResourceType = ResourceTopic; return f }, []Binding{lit, wild, pre}},
		{"ANY foo: exactly the name", func(f Filter) Filter { f.ResourceName = s("foo"); return f }, []Binding{lit, other}},
		{"MATCH foo: every pattern that applies", func(f Filter) Filter {
			f.ResourceType, f.PatternType, f.ResourceName = ResourceTopic, PatternMatch, s("foo")
			return f
		}, []Binding{lit, wild, pre}},
		{"PREFIXED", func(f Filter) Filter { f.PatternType = PatternPrefixed; return f }, []Binding{pre}},
		{"PREFIXED foo: exact prefix only", func(f Filter) Filter { f.PatternType, f.ResourceName = PatternPrefixed, s("foo"); return f }, nil},
		{"principal", func(f Filter) Filter { f.Principal = s("User:b"); return f }, []Binding{other}},
		{"operation", func(f Filter) Filter { f.Operation = OpWrite; return f }, []Binding{other}},
		{"permission", func(f Filter) Filter { f.Permission = PermissionDeny; return f }, nil},
		{"host", func(f Filter) Filter { f.Host = s("10.0.0.1"); return f }, nil},
	}
	set := NewSet(all)
	for _, c := range cases {
		got := set.Match(c.f(anyF))
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	good := allow(ResourceTopic, "t", PatternLiteral, "User:a", OpRead)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Binding){
		"cluster name":   func(b *Binding) { b.ResourceType = ResourceCluster },
		"empty name":     func(b *Binding) { b.ResourceName = "" },
		"ANY resource":   func(b *Binding) { b.ResourceType = ResourceAny },
		"MATCH pattern":  func(b *Binding) { b.PatternType = PatternMatch },
		"ANY operation":  func(b *Binding) { b.Operation = OpAny },
		"code 20":        func(b *Binding) { b.Operation = 20 },
		"ANY permission": func(b *Binding) { b.Permission = PermissionAny },
		"principal":      func(b *Binding) { b.Principal = "alice" },
		"principal name": func(b *Binding) { b.Principal = "User:" },
	} {
		b := good
		mut(&b)
		if err := b.Validate(); err == nil {
			t.Errorf("%s: %v accepted", name, b)
		}
	}
	f := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Filter){
		"resource": func(f *Filter) { f.ResourceType = ResourceUnknown },
		"pattern":  func(f *Filter) { f.PatternType = PatternUnknown },
		"op":       func(f *Filter) { f.Operation = OpUnknown },
		"perm":     func(f *Filter) { f.Permission = PermissionUnknown },
		"range":    func(f *Filter) { f.PatternType = 9 },
	} {
		g := f
		mut(&g)
		if err := g.Validate(); err == nil {
			t.Errorf("%s: %+v accepted", name, g)
		}
	}
}

// TestCache: answers stay the set's across installs and principals.
func TestCache(t *testing.T) {
	a := NewAuthorizer(nil, false, nil)
	var c Cache
	if c.Authorize(a, "User:a", "h", OpRead, ResourceTopic, "t") {
		t.Fatal("allowed with no bindings")
	}
	a.Install(NewSet([]Binding{allow(ResourceTopic, "t", PatternLiteral, "User:a", OpRead)}))
	if !c.Authorize(a, "User:a", "h", OpRead, ResourceTopic, "t") {
		t.Fatal("the cache kept a decision of the previous set")
	}
	if c.Authorize(a, "User:b", "h", OpRead, ResourceTopic, "t") {
		t.Fatal("the cache answered for another principal")
	}
	buf := []byte("t")
	name := string(buf) // as a decoder would hand it
	c.Authorize(a, "User:a", "h", OpRead, ResourceTopic, name)
	a.Install(NewSet(nil))
	if c.Authorize(a, "User:a", "h", OpRead, ResourceTopic, "t") {
		t.Fatal("a removed binding still allows")
	}
	for i := range 3 * cacheMax {
		c.Authorize(a, "User:a", "h", OpRead, ResourceTopic, fmt.Sprint(i))
	}
	if len(c.m) > cacheMax {
		t.Fatalf("cache grew to %d entries", len(c.m))
	}
}

// TestAuthorizeAllocatesNothing: the produce path's check.
func TestAuthorizeAllocatesNothing(t *testing.T) {
	a := NewAuthorizer([]string{"User:root"}, false, nil)
	a.Install(NewSet(manyBindings(1000)))
	var c Cache
	name := "topic-0500"
	n := testing.AllocsPerRun(100, func() {
		if !a.Authorize("User:u500", "127.0.0.1", OpWrite, ResourceTopic, name) {
			t.Fatal("denied")
		}
		c.Authorize(a, "User:u500", "127.0.0.1", OpWrite, ResourceTopic, name)
	})
	if n != 0 {
		t.Fatalf("%v allocations per check", n)
	}
}

// manyBindings: n principals each allowed WRITE on its own topic, and as
// many prefixed READs.
func manyBindings(n int) []Binding {
	var bs []Binding
	for i := range n / 2 {
		bs = append(bs, allow(ResourceTopic, fmt.Sprintf("topic-%04d", i*2), PatternLiteral, fmt.Sprintf("User:u%d", i*2), OpWrite))
		bs = append(bs, allow(ResourceTopic, fmt.Sprintf("app-%d-", i), PatternPrefixed, fmt.Sprintf("User:u%d", i), OpRead))
	}
	return bs
}

func BenchmarkAuthorize(b *testing.B) {
	for _, n := range []int{0, 100, 1000} {
		a := NewAuthorizer(nil, true, nil)
		a.Install(NewSet(manyBindings(n)))
		b.Run(fmt.Sprintf("acls=%d", n), func(b *testing.B) {
			for b.Loop() {
				a.Authorize("User:u50", "127.0.0.1", OpWrite, ResourceTopic, "topic-0050")
			}
		})
		b.Run(fmt.Sprintf("acls=%d/cached", n), func(b *testing.B) {
			var c Cache
			for b.Loop() {
				c.Authorize(a, "User:u50", "127.0.0.1", OpWrite, ResourceTopic, "topic-0050")
			}
		})
	}
}

// TestAuthorizeByResourceType follows Kafka's default
// authorizeByResourceType: any ALLOW of the operation on a pattern that no
// DENY covers, super users and allow.everyone.if.no.acl.found through a
// check of a name no binding names, implied operations ignored.
func TestAuthorizeByResourceType(t *testing.T) {
	const alice = "User:alice"
	cases := []struct {
		name     string
		bindings []Binding
		open     bool
		want     bool
	}{
		{"nothing", nil, false, false},
		{"no binding, open", nil, true, true},
		{"a literal allow", []Binding{allow(ResourceTopic, "t", PatternLiteral, alice, OpWrite)}, false, true},
		{"another op", []Binding{allow(ResourceTopic, "t", PatternLiteral, alice, OpRead)}, false, false},
		{"ALL", []Binding{allow(ResourceTopic, "t", PatternLiteral, alice, OpAll)}, false, true},
		{"another user", []Binding{allow(ResourceTopic, "t", PatternLiteral, "User:bob", OpWrite)}, false, false},
		{"wildcard user, prefixed", []Binding{allow(ResourceTopic, "t-", PatternPrefixed, WildcardPrincipal, OpWrite)}, false, true},
		{"literal deny of the same name", []Binding{allow(ResourceTopic, "t", PatternLiteral, alice, OpWrite),
			deny(ResourceTopic, "t", PatternLiteral, alice, OpWrite)}, false, false},
		{"prefix deny covers the literal", []Binding{allow(ResourceTopic, "team-a", PatternLiteral, alice, OpWrite),
			deny(ResourceTopic, "team", PatternPrefixed, alice, OpWrite)}, false, false},
		{"prefix deny covers a longer prefix", []Binding{allow(ResourceTopic, "team-a", PatternPrefixed, alice, OpWrite),
			deny(ResourceTopic, "team-", PatternPrefixed, alice, OpWrite)}, false, false},
		{"a longer deny does not cover", []Binding{allow(ResourceTopic, "team-", PatternPrefixed, alice, OpWrite),
			deny(ResourceTopic, "team-a", PatternPrefixed, alice, OpWrite)}, false, true},
		{"wildcard deny", []Binding{allow(ResourceTopic, "t", PatternLiteral, alice, OpWrite),
			deny(ResourceTopic, WildcardResource, PatternLiteral, alice, OpWrite)}, false, false},
		{"wildcard allow", []Binding{allow(ResourceTopic, WildcardResource, PatternLiteral, alice, OpWrite)}, false, true},
		{"other type only", []Binding{allow(ResourceGroup, "t", PatternLiteral, alice, OpWrite)}, false, false},
		{"bindings elsewhere, open", []Binding{allow(ResourceTopic, "t", PatternLiteral, "User:bob", OpWrite)}, true, true},
	}
	for _, c := range cases {
		a := NewAuthorizer([]string{"User:admin"}, c.open, nil)
		a.Install(NewSet(c.bindings))
		if got := a.AuthorizeByResourceType(alice, "1.2.3.4", OpWrite, ResourceTopic); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
		if !a.AuthorizeByResourceType("User:admin", "1.2.3.4", OpWrite, ResourceTopic) {
			t.Errorf("%s: a super user refused", c.name)
		}
	}
}
