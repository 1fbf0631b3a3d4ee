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
	principal, host                string
	topic, group, transactionalID  string
	cluster, deny                  bool
	pattern                        string
	ops                            multiFlag
	resourceSet, principalSet, any bool
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
		o := aclOut{Principal: cr.Principal, Host: cr.Host, ResourceType: cr.ResourceType.String(), ResourceName: cr.ResourceName,
			PatternType: cr.ResourcePatternType.String(), Operation: cr.Operation.String(), Permission: cr.PermissionType.String(), Status: "created"}
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

// aclFilter is the DescribeAcls / DeleteAcls filter the flags make; with
// no flags, every binding.
func (a *aclFlags) filter() (kmsg.ACLResourceType, *string, kmsg.ACLResourcePatternType, *string, *string, kmsg.ACLOperation, kmsg.ACLPermissionType, error) {
	rt, name, err := a.resource()
	if err != nil {
		return 0, nil, 0, nil, nil, 0, 0, err
	}
	pt, err := a.patternType()
	if err != nil {
		return 0, nil, 0, nil, nil, 0, 0, err
	}
	ops, err := a.operations()
	if err != nil {
		return 0, nil, 0, nil, nil, 0, 0, err
	}
	if len(ops) > 1 {
		return 0, nil, 0, nil, nil, 0, 0, fmt.Errorf("%w: a filter takes one --operation", ErrUsage)
	}
	op := kmsg.ACLOperationAny
	if len(ops) == 1 {
		op = ops[0]
	}
	var principal, host *string
	if a.principal != "" {
		principal = kmsg.StringPtr(a.principal)
	}
	if a.host != "" {
		host = kmsg.StringPtr(a.host)
	}
	perm := kmsg.ACLPermissionTypeAny
	if a.deny {
		perm = kmsg.ACLPermissionTypeDeny
	}
	return rt, name, pt, principal, host, op, perm, nil
}

func aclList(c *cli, args []string) error {
	fs := c.flags()
	var a aclFlags
	a.register(fs, "any")
	if err := c.flagsOnly(fs, args); err != nil {
		return err
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	var err error
	req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType, err = a.filter()
	if err != nil {
		return err
	}
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
			out = append(out, aclOut{Principal: b.Principal, Host: b.Host, ResourceType: r.ResourceType.String(), ResourceName: r.ResourceName,
				PatternType: r.ResourcePatternType.String(), Operation: b.Operation.String(), Permission: b.PermissionType.String()})
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
	fs := c.flags()
	var a aclFlags
	a.register(fs, "literal")
	if err := c.flagsOnly(fs, args); err != nil {
		return err
	}
	f := kmsg.NewDeleteACLsRequestFilter()
	var err error
	f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType, err = a.filter()
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
			o := aclOut{Principal: m.Principal, Host: m.Host, ResourceType: m.ResourceType.String(), ResourceName: m.ResourceName,
				PatternType: m.ResourcePatternType.String(), Operation: m.Operation.String(), Permission: m.PermissionType.String(), Status: "deleted"}
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
