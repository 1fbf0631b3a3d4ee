package controller

import (
	"context"
	"slices"
	"strings"

	"ringlog/internal/acl"
)

// ACLs are records of the quorum, as topics are (Kafka's
// AccessControlEntryRecord): CreateAcls adds bindings, DeleteAcls removes
// those its filters match, and every broker authorizes with the set its
// image holds, so all enforce the same one.

// Bounds of the ACL commands. Kafka refuses more than 10,000 records in
// one user operation (MAX_RECORDS_PER_USER_OP).
const (
	maxACLChanges     = 10000
	maxACLs           = 100000
	maxACLStringBytes = 32 << 10
)

// ACLs is the image's ACL set (never nil).
func (img *Image) ACLs() *acl.Set {
	if img.acls == nil {
		return emptyACLs
	}
	return img.acls
}

var emptyACLs = acl.NewSet(nil)

// CreateAcls adds bindings (Kafka's CreateAcls). Each must be valid
// (acl.Binding.Validate: the caller answers the invalid ones itself);
// bindings the set already holds are kept once.
func (c *Controller) CreateAcls(ctx context.Context, bindings []acl.Binding) error {
	if err := validateACLBindings(bindings); err != nil {
		return err
	}
	_, err := c.submit(ctx, &command{typ: cmdCreateAcls, acls: slices.Clone(bindings)})
	return err
}

// DeleteAcls removes the bindings each filter matches and returns them,
// filter by filter (a binding two filters match is in both answers), as
// the set held them before the command.
func (c *Controller) DeleteAcls(ctx context.Context, filters []acl.Filter) ([][]acl.Binding, error) {
	if err := validateACLFilters(filters); err != nil {
		return nil, err
	}
	r, err := c.submit(ctx, &command{typ: cmdDeleteAcls, aclFilters: slices.Clone(filters)})
	if err != nil {
		return nil, err
	}
	d := &decoder{b: r.payload}
	out := make([][]acl.Binding, d.count(1))
	for i := range out {
		out[i] = decodeBindings(d)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	if len(out) != len(filters) {
		return nil, errf(ErrInvalidRequest, "DeleteAcls answered %d filters of %d", len(out), len(filters))
	}
	return out, nil
}

func validateACLBindings(bs []acl.Binding) error {
	if len(bs) > maxACLChanges {
		return errf(ErrInvalidRequest, "%d ACLs in one request, at most %d", len(bs), maxACLChanges)
	}
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			return errf(ErrInvalidRequest, "%v", err)
		}
		if len(b.ResourceName) > maxACLStringBytes || len(b.Principal) > maxACLStringBytes || len(b.Host) > maxACLStringBytes {
			return errf(ErrInvalidRequest, "an ACL's name, principal or host is longer than %d bytes", maxACLStringBytes)
		}
	}
	return nil
}

func validateACLFilters(fs []acl.Filter) error {
	if len(fs) > maxACLChanges {
		return errf(ErrInvalidRequest, "%d ACL filters in one request, at most %d", len(fs), maxACLChanges)
	}
	for _, f := range fs {
		if err := f.Validate(); err != nil {
			return errf(ErrInvalidRequest, "%v", err)
		}
	}
	return nil
}

// createAcls adds the bindings the set does not hold yet.
func (t *tx) createAcls(c *command) result {
	if err := validateACLBindings(c.acls); err != nil {
		return result{err: err}
	}
	cur := t.aclSet().Bindings()
	have := make(map[acl.Binding]bool, len(cur)+len(c.acls))
	for _, b := range cur {
		have[b] = true
	}
	next := slices.Clone(cur)
	for _, b := range c.acls {
		if !have[b] {
			have[b] = true
			next = append(next, b)
		}
	}
	if len(next) > maxACLs {
		return result{err: errf(ErrInvalidRequest, "%d ACLs, at most %d", len(next), maxACLs)}
	}
	if len(next) != len(cur) {
		sortBindings(next)
		t.setACLs(acl.NewSet(next))
	}
	return result{}
}

// deleteAcls removes what the filters match. Payload: the count of
// filters, then each filter's matches as encodeBindings writes them.
func (t *tx) deleteAcls(c *command) result {
	if err := validateACLFilters(c.aclFilters); err != nil {
		return result{err: err}
	}
	cur := t.aclSet()
	gone := map[acl.Binding]bool{}
	e := &encoder{}
	e.uvarint(len(c.aclFilters))
	for _, f := range c.aclFilters {
		m := cur.Match(f)
		for _, b := range m {
			gone[b] = true
		}
		encodeBindings(e, m)
	}
	if len(gone) > 0 {
		next := slices.DeleteFunc(slices.Clone(cur.Bindings()), func(b acl.Binding) bool { return gone[b] })
		t.setACLs(acl.NewSet(next))
	}
	return result{payload: e.b}
}

func (t *tx) aclSet() *acl.Set {
	if t.aclsChanged {
		return t.acls
	}
	return t.base.ACLs()
}

func (t *tx) setACLs(s *acl.Set) {
	t.acls, t.aclsChanged = s, true
}

// sortBindings puts bindings in the order snapshots write them, so that
// equal sets encode to equal bytes.
func sortBindings(bs []acl.Binding) {
	slices.SortFunc(bs, compareBindings)
}

func compareBindings(a, b acl.Binding) int {
	switch {
	case a.ResourceType != b.ResourceType:
		return int(a.ResourceType) - int(b.ResourceType)
	case a.ResourceName != b.ResourceName:
		return strings.Compare(a.ResourceName, b.ResourceName)
	case a.PatternType != b.PatternType:
		return int(a.PatternType) - int(b.PatternType)
	case a.Principal != b.Principal:
		return strings.Compare(a.Principal, b.Principal)
	case a.Host != b.Host:
		return strings.Compare(a.Host, b.Host)
	case a.Operation != b.Operation:
		return int(a.Operation) - int(b.Operation)
	}
	return int(a.Permission) - int(b.Permission)
}

//	binding: resource type u8 | name str | pattern type u8 | principal str
//	         | host str | operation u8 | permission u8
//	filter:  resource type u8 | name nstr | pattern type u8 | principal nstr
//	         | host nstr | operation u8 | permission u8
//
// nstr is a string that may be null: a bool (present) and, when present,
// the string.

func encodeBindings(e *encoder, bs []acl.Binding) {
	e.uvarint(len(bs))
	for _, b := range bs {
		e.u8(uint8(b.ResourceType))
		e.str(b.ResourceName)
		e.u8(uint8(b.PatternType))
		e.str(b.Principal)
		e.str(b.Host)
		e.u8(uint8(b.Operation))
		e.u8(uint8(b.Permission))
	}
}

func decodeBindings(d *decoder) []acl.Binding {
	n := d.count(7)
	if n == 0 {
		return nil
	}
	out := make([]acl.Binding, 0, n)
	for range n {
		b := acl.Binding{ResourceType: acl.ResourceType(d.u8()), ResourceName: d.str(), PatternType: acl.PatternType(d.u8()),
			Principal: d.str(), Host: d.str(), Operation: acl.Operation(d.u8()), Permission: acl.Permission(d.u8())}
		if d.err != nil {
			return nil
		}
		out = append(out, b)
	}
	return out
}

func encodeFilters(e *encoder, fs []acl.Filter) {
	e.uvarint(len(fs))
	nstr := func(s *string) {
		e.bool(s != nil)
		if s != nil {
			e.str(*s)
		}
	}
	for _, f := range fs {
		e.u8(uint8(f.ResourceType))
		nstr(f.ResourceName)
		e.u8(uint8(f.PatternType))
		nstr(f.Principal)
		nstr(f.Host)
		e.u8(uint8(f.Operation))
		e.u8(uint8(f.Permission))
	}
}

func decodeFilters(d *decoder) []acl.Filter {
	n := d.count(7)
	if n == 0 {
		return nil
	}
	nstr := func() *string {
		if !d.bool() {
			return nil
		}
		s := d.str()
		return &s
	}
	out := make([]acl.Filter, 0, n)
	for range n {
		f := acl.Filter{ResourceType: acl.ResourceType(d.u8()), ResourceName: nstr(), PatternType: acl.PatternType(d.u8()),
			Principal: nstr(), Host: nstr(), Operation: acl.Operation(d.u8()), Permission: acl.Permission(d.u8())}
		if d.err != nil {
			return nil
		}
		out = append(out, f)
	}
	return out
}
