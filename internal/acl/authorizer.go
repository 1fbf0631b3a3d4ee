package acl

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Set is an immutable, indexed set of bindings.
type Set struct {
	bindings []Binding
	byType   [resourceTypeEnd]index
}

// index holds one resource type's bindings by pattern.
type index struct {
	literal  map[string][]Binding // by name; "*" is the wildcard
	prefixed map[string][]Binding // by prefix
	// prefixLens are the distinct lengths of prefixed, ascending: a
	// resource name is looked up by its prefixes of these lengths only.
	prefixLens []int
}

// NewSet indexes bindings (which it keeps; the caller must not change
// them after).
func NewSet(bindings []Binding) *Set {
	s := &Set{bindings: bindings}
	for _, b := range bindings {
		if b.ResourceType <= ResourceAny || b.ResourceType >= resourceTypeEnd {
			continue
		}
		ix := &s.byType[b.ResourceType]
		switch b.PatternType {
		case PatternLiteral:
			if ix.literal == nil {
				ix.literal = map[string][]Binding{}
			}
			ix.literal[b.ResourceName] = append(ix.literal[b.ResourceName], b)
		case PatternPrefixed:
			if ix.prefixed == nil {
				ix.prefixed = map[string][]Binding{}
			}
			if _, ok := ix.prefixed[b.ResourceName]; !ok && !slices.Contains(ix.prefixLens, len(b.ResourceName)) {
				ix.prefixLens = append(ix.prefixLens, len(b.ResourceName))
			}
			ix.prefixed[b.ResourceName] = append(ix.prefixed[b.ResourceName], b)
		}
	}
	for i := range s.byType {
		slices.Sort(s.byType[i].prefixLens)
	}
	return s
}

// Bindings are the set's bindings, in the order given to NewSet; the
// caller must not change them.
func (s *Set) Bindings() []Binding { return s.bindings }

// Len is the number of bindings.
func (s *Set) Len() int { return len(s.bindings) }

// Match returns the bindings that f selects.
func (s *Set) Match(f Filter) []Binding {
	var out []Binding
	for _, b := range s.bindings {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// verdict is what the bindings of one resource say.
type verdict uint8

const (
	noBinding   verdict = iota // no binding matched the resource at all
	defaultDeny                // bindings matched the resource, none applied
	allowed
	denied
)

// decide applies the bindings of the resource (principal, host) to op.
func (s *Set) decide(principal, host string, op Operation, rt ResourceType, name string) verdict {
	if rt <= ResourceAny || rt >= resourceTypeEnd {
		return noBinding
	}
	ix := &s.byType[rt]
	v := noBinding
	apply := func(bs []Binding) bool { // true: denied, stop
		for i := range bs {
			b := &bs[i]
			if v == noBinding {
				v = defaultDeny
			}
			if b.Principal != principal && b.Principal != WildcardPrincipal {
				continue
			}
			if b.Host != host && b.Host != WildcardHost {
				continue
			}
			if !applies(b, op) {
				continue
			}
			if b.Permission == PermissionDeny {
				v = denied
				return true
			}
			v = allowed
		}
		return false
	}
	if ix.literal != nil {
		if apply(ix.literal[name]) {
			return denied
		}
		if name != WildcardResource && apply(ix.literal[WildcardResource]) {
			return denied
		}
	}
	for _, n := range ix.prefixLens {
		if n > len(name) {
			break
		}
		if apply(ix.prefixed[name[:n]]) {
			return denied
		}
	}
	return v
}

// applies reports whether b's operation covers op: the same, ALL, or
// (for an ALLOW only) an operation that implies op.
func applies(b *Binding, op Operation) bool {
	if b.Operation == OpAll || b.Operation == op {
		return true
	}
	if b.Permission != PermissionAllow {
		return false
	}
	switch op {
	case OpDescribe:
		switch b.Operation {
		case OpRead, OpWrite, OpDelete, OpAlter:
			return true
		}
	case OpDescribeConfigs:
		return b.Operation == OpAlterConfigs
	}
	return false
}

// Authorizer decides with a Set, super.users and
// allow.everyone.if.no.acl.found. Its methods may be called from any
// goroutine.
type Authorizer struct {
	superUsers   map[string]bool
	allowIfNoACL bool
	// source is the set in force: the metadata image's, read at every
	// decision (an atomic load), or the one Install stored.
	source    func() *Set
	installed atomic.Pointer[Set]
}

// NewAuthorizer returns an authorizer that decides with the set source
// returns at each decision; with a nil source, with the set Install
// stored last (none at first).
func NewAuthorizer(superUsers []string, allowIfNoACL bool, source func() *Set) *Authorizer {
	a := &Authorizer{superUsers: map[string]bool{}, allowIfNoACL: allowIfNoACL, source: source}
	for _, u := range superUsers {
		a.superUsers[u] = true
	}
	a.installed.Store(NewSet(nil))
	if a.source == nil {
		a.source = a.installed.Load
	}
	return a
}

// Install makes s the set of an authorizer made without a source.
func (a *Authorizer) Install(s *Set) { a.installed.Store(s) }

// Set is the set in force.
func (a *Authorizer) Set() *Set { return a.source() }

// SuperUser reports whether principal is in super.users.
func (a *Authorizer) SuperUser(principal string) bool { return a.superUsers[principal] }

// AllowIfNoACL is allow.everyone.if.no.acl.found.
func (a *Authorizer) AllowIfNoACL() bool { return a.allowIfNoACL }

// Authorize decides whether principal, connected from host, may do op
// on the resource. It allocates nothing.
func (a *Authorizer) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	return a.authorize(a.source(), principal, host, op, rt, name)
}

func (a *Authorizer) authorize(set *Set, principal, host string, op Operation, rt ResourceType, name string) bool {
	if a.superUsers[principal] {
		return true
	}
	switch set.decide(principal, host, op, rt, name) {
	case allowed:
		return true
	case noBinding:
		return a.allowIfNoACL
	}
	return false
}

// AuthorizedOperations is KIP-430's bit field: bit i set when the
// principal may do operation i on the resource, over the operations
// that apply to the resource's type.
func (a *Authorizer) AuthorizedOperations(principal, host string, rt ResourceType, name string) int32 {
	set := a.source()
	var bits int32
	for _, op := range Operations(rt) {
		if a.authorize(set, principal, host, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// Cache remembers one connection's decisions while the authorizer's set
// stays the same one (and the connection's principal and host do). Its
// methods may be called from several goroutines (a connection's admin
// requests run on their own).
type Cache struct {
	mu              sync.Mutex
	set             *Set
	principal, host string
	m               map[cacheKey]bool
}

type cacheKey struct {
	op   Operation
	rt   ResourceType
	name string
}

// cacheMax bounds a connection's cache: a client naming ever new
// resources (topics it may not see) must not grow it without end.
const cacheMax = 1024

// Authorize is a.Authorize, answered from the cache when the same
// question was asked under the same set.
func (c *Cache) Authorize(a *Authorizer, principal, host string, op Operation, rt ResourceType, name string) bool {
	set := a.source()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.set != set || c.principal != principal || c.host != host {
		clear(c.m)
		if c.m == nil {
			c.m = make(map[cacheKey]bool)
		}
		c.set, c.principal, c.host = set, principal, host
	}
	k := cacheKey{op, rt, name}
	if ok, hit := c.m[k]; hit {
		return ok
	}
	ok := a.authorize(set, principal, host, op, rt, name)
	if len(c.m) >= cacheMax {
		clear(c.m)
	}
	// The name may point into a request's buffer: the key keeps a copy.
	k.name = strings.Clone(name)
	c.m[k] = ok
	return ok
}

// AuthorizeByResourceType reports whether principal may do op on some
// resource of the type (Kafka's Authorizer.authorizeByResourceType, which
// KIP-679 uses to let a producer with WRITE on any topic be idempotent):
// yes for a super user or where a resource no binding names would be
// allowed, otherwise yes when an ALLOW of op (or ALL) applies to a
// literal or prefixed pattern that no DENY of op covers: a DENY on the
// wildcard covers every pattern, a literal DENY its own name, a prefixed
// DENY every pattern that starts with it. Implied operations play no part.
// It scans the type's bindings: it is for requests made once per
// producer, not per record.
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op Operation, rt ResourceType) bool {
	set := a.source()
	// A name no one would give a resource: the super user and
	// allow.everyone.if.no.acl.found answers, and a wildcard or prefix
	// binding that happens to match it, as Kafka's "hardcode" check.
	if a.authorize(set, principal, host, op, rt, "hardcode") {
		return true
	}
	if rt <= ResourceAny || rt >= resourceTypeEnd {
		return false
	}
	ix := &set.byType[rt]
	applies := func(b *Binding) bool {
		return (b.Principal == principal || b.Principal == WildcardPrincipal) &&
			(b.Host == host || b.Host == WildcardHost) && (b.Operation == op || b.Operation == OpAll)
	}
	denyLiteral := map[string]bool{}
	denyPrefixed := map[string]bool{}
	var allowLiteral, allowPrefixed []string
	wildcardAllow := false
	scan := func(m map[string][]Binding, prefixed bool) bool { // true: a wildcard DENY
		for name, bs := range m {
			for i := range bs {
				b := &bs[i]
				if !applies(b) {
					continue
				}
				switch {
				case b.Permission == PermissionDeny && !prefixed && name == WildcardResource:
					return true
				case b.Permission == PermissionDeny && prefixed:
					denyPrefixed[name] = true
				case b.Permission == PermissionDeny:
					denyLiteral[name] = true
				case b.Permission != PermissionAllow:
				case !prefixed && name == WildcardResource:
					wildcardAllow = true
				case prefixed:
					allowPrefixed = append(allowPrefixed, name)
				default:
					allowLiteral = append(allowLiteral, name)
				}
			}
		}
		return false
	}
	if scan(ix.literal, false) || scan(ix.prefixed, true) {
		return false
	}
	if wildcardAllow {
		return true
	}
	dominated := func(name string) bool {
		for n := 1; n <= len(name); n++ {
			if denyPrefixed[name[:n]] {
				return true
			}
		}
		return false
	}
	for _, name := range allowLiteral {
		if !denyLiteral[name] && !dominated(name) {
			return true
		}
	}
	for _, name := range allowPrefixed {
		if !dominated(name) {
			return true
		}
	}
	return false
}
