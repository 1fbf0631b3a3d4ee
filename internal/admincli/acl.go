package admincli

import (
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACL commands (issue 15): CreateAcls, DescribeAcls and DeleteAcls with
// kafka-acls' vocabulary: a principal and host, one resource (--topic,
// --group, --cluster, --transactional-id) with its pattern type, the
// operations and ALLOW or DENY.

// aclFlags are the binding or filter flags acl create, list and delete
// share.
type aclFlags struct {
	principal, host               string
	topic, group, transactionalID string
	cluster, deny                 bool
	pattern                       string
	ops                           multiFlag
	resourceSet                   bool // set by resource: the flags name one
}

func (a *aclFlags) register(fs *flag.FlagSet, patternDefault string) {
	fs.StringVar(&a.principal, "principal", "", "the principal, as User:NAME (User:* for every one)")
	fs.StringVar(&a.host, "host", "", "the client host the binding applies to (* for any; the default)")
	fs.StringVar(&a.topic, "topic", "", "a topic (or, with --pattern prefixed, a prefix of topic names)")
	fs.StringVar(&a.group, "group", "", "a consumer group (or prefix)")
	fs.StringVar(&a.transactionalID, "transactional-id", "", "a transactional id (or prefix)")
	fs.BoolVar(&a.cluster, "cluster", false, "the cluster resource")
	fs.StringVar(&a.pattern, "pattern", patternDefault, "the resource pattern type: literal or prefixed (filters: also any and match)")
	fs.Var(&a.ops, "operation", "an operation: read, write, create, delete, alter, describe, cluster_action, describe_configs, alter_configs, idempotent_write or all (repeatable)")
	fs.BoolVar(&a.deny, "deny", false, "a DENY binding (default ALLOW)")
}

// resource is the one resource the flags name, or ANY with no name.
func (a *aclFlags) resource() (kmsg.ACLResourceType, *string, error) {
	var rt kmsg.ACLResourceType = kmsg.ACLResourceTypeAny
	var name *string
	n := 0
	if a.topic != "" {
		rt, name, n = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(a.topic), n+1
	}
	if a.group != "" {
		rt, name, n = kmsg.ACLResourceTypeGroup, kmsg.StringPtr(a.group), n+1
	}
	if a.transactionalID != "" {
		rt, name, n = kmsg.ACLResourceTypeTransactionalId, kmsg.StringPtr(a.transactionalID), n+1
	}
	if a.cluster {
		rt, name, n = kmsg.ACLResourceTypeCluster, kmsg.StringPtr("kafka-cluster"), n+1
	}
	if n > 1 {
		return 0, nil, fmt.Errorf("%w: name one resource: --topic, --group, --transactional-id or --cluster", ErrUsage)
	}
	a.resourceSet = n == 1
	return rt, name, nil
}

func (a *aclFlags) patternType() (kmsg.ACLResourcePatternType, error) {
	p, err := kmsg.ParseACLResourcePatternType(a.pattern)
	if err != nil || p == kmsg.ACLResourcePatternTypeUnknown {
		return 0, fmt.Errorf("%w: --pattern %q: want literal, prefixed, any or match", ErrUsage, a.pattern)
	}
	return p, nil
}

func (a *aclFlags) operations() ([]kmsg.ACLOperation, error) {
	var ops []kmsg.ACLOperation
	for _, o := range a.ops {
		op, err := kmsg.ParseACLOperation(o)
		if err != nil || op == kmsg.ACLOperationUnknown {
			return nil, fmt.Errorf("%w: --operation %q is not one of Kafka's operations", ErrUsage, o)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func (a *aclFlags) permission() kmsg.ACLPermissionType {
	if a.deny {
		return kmsg.ACLPermissionTypeDeny
	}
	return kmsg.ACLPermissionTypeAllow
}

// aclOut is the JSON of one binding.
type aclOut struct {
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	ResourceType string `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  string `json:"pattern_type"`
	Operation    string `json:"operation"`
	Permission   string `json:"permission"`
	Status       string `json:"status,omitempty"`
	Error        string `json:"error,omitempty"`
	Message      string `json:"message,omitempty"`
}

func (o aclOut) row() []string {
	return []string{o.Principal, o.Host, o.ResourceType, o.ResourceName, o.PatternType, o.Operation, o.Permission}
}

var aclHeader = []string{"PRINCIPAL", "HOST", "RESOURCE", "NAME", "PATTERN", "OPERATION", "PERMISSION"}

func aclCreate(c *cli, args []string) error {
	fs := c.flags()
	var a aclFlags
	a.register(fs, "literal")
	if err := c.flagsOnly(fs, args); err != nil {
		return err
	}
	rt, name, err := a.resource()
	if err != nil {
		return err
	}
	pt, err := a.patternType()
	if err != nil {
		return err
	}
	ops, err := a.operations()
	if err != nil {
		return err
	}
	switch {
	case !a.resourceSet:
		return fmt.Errorf("%w: name a resource: --topic, --group, --transactional-id or --cluster", ErrUsage)
	case a.principal == "":
		return fmt.Errorf("%w: --principal is needed (User:NAME)", ErrUsage)
	case len(ops) == 0:
		return fmt.Errorf("%w: give at least one --operation", ErrUsage)
	case pt != kmsg.ACLResourcePatternTypeLiteral && pt != kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: a binding's --pattern is literal or prefixed", ErrUsage)
	}
	host := a.host
	if host == "" {
		host = "*"
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, op := range ops {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = rt, *name, pt
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = a.principal, host, op, a.permission()
		req.Creations = append(req.Creations, cr)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return fmt.Errorf("create acls: %w", err)
	}
	var out []aclOut
	var fails failures
	for i, cr := range req.Creations {
		o := newACLOut(cr.ResourceType, cr.ResourceName, cr.ResourcePatternType, cr.Principal, cr.Host, cr.Operation, cr.PermissionType, "created")
		if i >= len(resp.Results) {
			o.Status, o.Error = "failed", "MISSING"
			fails.add(o.Operation, fmt.Errorf("the broker did not answer for this binding"))
		} else if r := resp.Results[i]; r.ErrorCode != 0 {
			err := kerr.ErrorForCode(r.ErrorCode)
			o.Status, o.Error, o.Message = "failed", errName(err), deref(r.ErrorMessage)
			fails.add(o.Operation, brokerError(err, deref(r.ErrorMessage)))
		}
		out = append(out, o)
	}
	rows := make([][]string, len(out))
	for i, o := range out {
		rows[i] = append(o.row(), o.Status)
	}
	if err := c.show(out, append(append([]string{}, aclHeader...), "STATUS"), rows); err != nil {
		return err
	}
	return fails.err()
}

// filterCommand parses a filter command's flags (acl list, acl delete)
// into the DeleteAcls filter they make, which DescribeAcls' request
// holds too; with no flags, every binding.
func filterCommand(c *cli, args []string, pattern string) (*aclFlags, kmsg.DeleteACLsRequestFilter, error) {
	f := kmsg.NewDeleteACLsRequestFilter()
	fs := c.flags()
	a := &aclFlags{}
	a.register(fs, pattern)
	if err := c.flagsOnly(fs, args); err != nil {
		return nil, f, err
	}
	var err error
	if f.ResourceType, f.ResourceName, err = a.resource(); err != nil {
		return nil, f, err
	}
	if f.ResourcePatternType, err = a.patternType(); err != nil {
		return nil, f, err
	}
	ops, err := a.operations()
	if err != nil {
		return nil, f, err
	}
	switch len(ops) {
	case 0:
		f.Operation = kmsg.ACLOperationAny
	case 1:
		f.Operation = ops[0]
	default:
		return nil, f, fmt.Errorf("%w: a filter takes one --operation", ErrUsage)
	}
	if a.principal != "" {
		f.Principal = kmsg.StringPtr(a.principal)
	}
	if a.host != "" {
		f.Host = kmsg.StringPtr(a.host)
	}
	f.PermissionType = kmsg.ACLPermissionTypeAny
	if a.deny {
		f.PermissionType = kmsg.ACLPermissionTypeDeny
	}
	return a, f, nil
}

// newACLOut is the output of one binding.
func newACLOut(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType, status string) aclOut {
	return aclOut{Principal: principal, Host: host, ResourceType: rt.String(), ResourceName: name, PatternType: pt.String(),
		Operation: op.String(), Permission: perm.String(), Status: status}
}

func aclList(c *cli, args []string) error {
	_, f, err := filterCommand(c, args, "any")
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = f.ResourceType, f.ResourceName, f.ResourcePatternType
	req.Principal, req.Host, req.Operation, req.PermissionType = f.Principal, f.Host, f.Operation, f.PermissionType
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return fmt.Errorf("describe acls: %w", err)
	}
	if resp.ErrorCode != 0 {
		return brokerError(kerr.ErrorForCode(resp.ErrorCode), deref(resp.ErrorMessage))
	}
	out := []aclOut{}
	for _, r := range resp.Resources {
		for _, b := range r.ACLs {
			out = append(out, newACLOut(r.ResourceType, r.ResourceName, r.ResourcePatternType, b.Principal, b.Host, b.Operation, b.PermissionType, ""))
		}
	}
	sortACLs(out)
	rows := make([][]string, len(out))
	for i, o := range out {
		rows[i] = o.row()
	}
	return c.show(out, aclHeader, rows)
}

func aclDelete(c *cli, args []string) error {
	a, f, err := filterCommand(c, args, "literal")
	if err != nil {
		return err
	}
	if !a.resourceSet && a.principal == "" {
		// kafka-acls --remove needs a resource too: a filter matching
		// every binding is rarely what someone typing a command means.
		return fmt.Errorf("%w: name a resource (--topic, --group, --transactional-id, --cluster) or a --principal", ErrUsage)
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Filters = append(req.Filters, f)
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return fmt.Errorf("delete acls: %w", err)
	}
	out := []aclOut{}
	var fails failures
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			fails.add("filter", brokerError(kerr.ErrorForCode(r.ErrorCode), deref(r.ErrorMessage)))
			continue
		}
		for _, m := range r.MatchingACLs {
			o := newACLOut(m.ResourceType, m.ResourceName, m.ResourcePatternType, m.Principal, m.Host, m.Operation, m.PermissionType, "deleted")
			if m.ErrorCode != 0 {
				err := kerr.ErrorForCode(m.ErrorCode)
				o.Status, o.Error, o.Message = "failed", errName(err), deref(m.ErrorMessage)
				fails.add(o.ResourceName, brokerError(err, deref(m.ErrorMessage)))
			}
			out = append(out, o)
		}
	}
	sortACLs(out)
	rows := make([][]string, len(out))
	for i, o := range out {
		rows[i] = append(o.row(), o.Status)
	}
	if err := c.show(out, append(append([]string{}, aclHeader...), "STATUS"), rows); err != nil {
		return err
	}
	return fails.err()
}

func sortACLs(out []aclOut) {
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].row(), out[j].row()
		return strings.Join(append(a[2:5], a[0], a[1], a[5], a[6]), "\x00") < strings.Join(append(b[2:5], b[0], b[1], b[5], b[6]), "\x00")
	})
}
