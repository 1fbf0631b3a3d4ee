package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// The peers "ringlog-acl100" and "ringlog-acl1000" are ringlog io_uring
// (the same binary, -io uring, the gnet network) with its authorizer on
// (issue 15, §4): authorizer.class.name set, and 100 or 1,000 bindings
// created with CreateAcls before anything is measured. Their rows of the
// base produce table against ringlog io_uring's (the authorizer off) in
// the same table are the price of a decision on the produce path.
//
// The clients produce on a PLAINTEXT listener as User:ANONYMOUS, which is
// no super user: every Produce is decided by the bindings (a super user
// is allowed before any binding is looked at, and would measure
// nothing). ANONYMOUS is allowed what the suite's clients do on the topics
// it makes (PREFIXED "bench-": WRITE, which implies DESCRIBE, CREATE and
// DELETE) and IDEMPOTENT_WRITE on the cluster; the other bindings are
// other principals' on other topics, groups and prefixes, some of them on
// prefixes of the suite's topics (so that the decision for ANONYMOUS
// meets bindings it must pass over) and a few DENYs. The bindings are
// made by an administrator (User:admin, a super user) on a second
// listener, SASL_PLAINTEXT with PLAIN, whose only user it is: the first
// binding needs ALTER on the cluster, which nobody has before it.

// aclAdmin is the super user who creates the bindings.
const aclAdmin = "admin"

// aclTarget is issue 15's bound: records/s with the authorizer on at no
// less than this share of the authorizer off.
const aclTarget = 0.97

// aclSetup is one authorizer peer's files and administrator password.
type aclSetup struct {
	n        int // bindings
	dir      string
	password string
	admin    string // the SASL_PLAINTEXT listener's address
}

func newACLSetup(dir string, n int) (*aclSetup, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	return &aclSetup{n: n, dir: dir, password: hex.EncodeToString(secret)}, nil
}

// properties is the broker's server.properties: client the PLAINTEXT
// listener's address (the clients', User:ANONYMOUS), admin the
// SASL_PLAINTEXT one's.
func (a *aclSetup) properties(client, admin string) string {
	return fmt.Sprintf(`listeners=PLAINTEXT://%s,SASL_PLAINTEXT://%s
inter.broker.listener.name=PLAINTEXT
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:%s
allow.everyone.if.no.acl.found=false
`, client, admin, aclAdmin, a.password, aclAdmin)
}

// aclBindings are the n bindings of an authorizer peer: ANONYMOUS's four
// first, then other principals' (see the comment at the top).
func aclBindings(n int) []kmsg.CreateACLsRequestCreation {
	mk := func(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string,
		op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, perm
		return c
	}
	const (
		topic, group, cluster = kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster
		lit, pre              = kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
		allow, deny           = kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	)
	anon := "User:ANONYMOUS"
	bs := []kmsg.CreateACLsRequestCreation{
		mk(topic, "bench-", pre, anon, kmsg.ACLOperationWrite, allow),
		mk(topic, "bench-", pre, anon, kmsg.ACLOperationCreate, allow),
		mk(topic, "bench-", pre, anon, kmsg.ACLOperationDelete, allow),
		mk(cluster, "kafka-cluster", lit, anon, kmsg.ACLOperationIdempotentWrite, allow),
	}
	for i := 0; len(bs) < n; i++ {
		u := fmt.Sprintf("User:app-%d", i/8)
		switch i % 8 {
		case 0:
			bs = append(bs, mk(topic, fmt.Sprintf("app-%d.", i/8), pre, u, kmsg.ACLOperationWrite, allow))
		case 1:
			bs = append(bs, mk(topic, fmt.Sprintf("orders-%d", i), lit, u, kmsg.ACLOperationRead, allow))
		case 2:
			bs = append(bs, mk(group, fmt.Sprintf("app-%d-", i/8), pre, u, kmsg.ACLOperationRead, allow))
		case 3:
			// On prefixes of the suite's topics: matched by their names,
			// passed over for ANONYMOUS.
			bs = append(bs, mk(topic, "bench-"[:2+i/8%4], pre, u, kmsg.ACLOperationRead, allow))
		case 4:
			bs = append(bs, mk(topic, fmt.Sprintf("bench-%d", i), lit, u, kmsg.ACLOperationDescribe, allow))
		case 5:
			bs = append(bs, mk(topic, "bench-", pre, u, kmsg.ACLOperationWrite, deny))
		case 6:
			bs = append(bs, mk(cluster, "kafka-cluster", lit, u, kmsg.ACLOperationIdempotentWrite, allow))
		case 7:
			bs = append(bs, mk(topic, fmt.Sprintf("metrics.%d.", i), pre, u, kmsg.ACLOperationAll, allow))
		}
	}
	return bs[:n]
}

// adminClient is a client of the SASL_PLAINTEXT listener as User:admin.
func (a *aclSetup) adminClient() (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(a.admin), kgo.SASL(plain.Auth{User: aclAdmin, Pass: a.password}.AsMechanism()))
}

// create makes the bindings as the administrator, then waits until the
// broker describes all of them: CreateAcls is answered once the controller
// committed them, the broker's image applies them a moment later.
func (a *aclSetup) create(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := a.adminClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = aclBindings(a.n)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("CreateAcls: %w", err)
	}
	if len(resp.Results) != a.n {
		return fmt.Errorf("CreateAcls: %d results for %d bindings", len(resp.Results), a.n)
	}
	for i, r := range resp.Results {
		if r.ErrorCode != 0 {
			msg := ""
			if r.ErrorMessage != nil {
				msg = ": " + *r.ErrorMessage
			}
			return fmt.Errorf("CreateAcls: binding %d: error code %d%s", i, r.ErrorCode, msg)
		}
	}
	for {
		n, err := a.described(ctx, cl)
		if err == nil && n == a.n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the broker describes %d of the %d bindings after %v (%v)", n, a.n, timeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// described counts the bindings the broker describes.
func (a *aclSetup) described(ctx context.Context, cl *kgo.Client) (int, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if resp.ErrorCode != 0 {
		return 0, fmt.Errorf("DescribeAcls: error code %d", resp.ErrorCode)
	}
	n := 0
	for _, r := range resp.Resources {
		n += len(r.ACLs)
	}
	return n, nil
}

// aclWorkload is true for the workload the authorizer peers run: the
// base produce workload, the one their target reads.
func aclWorkload(w workload) bool { return w.main }

// aclReason is why the authorizer peers' other rows are not measured.
const aclReason = "the authorizer peers run the base produce workload only, the one of issue 15's target (a decision " +
	"per topic of every Produce)"

// quickACLReason is why -quick has no figure with 100 bindings.
const quickACLReason = "-quick measures the authorizer with 1,000 bindings only (each authorizer peer is one more broker " +
	"start and run; the bound that 1,000 bindings meet, 100 meet too); the standard matrix has both"

// startACLs starts the benchmarked binary as ringlog io_uring with its
// authorizer on, configured by a server.properties in the peer's folder.
func (p *peer) startACLs(broker string) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	client, adminListener, adminPort := ports[0], ports[1], ports[2]
	clientAddr := fmt.Sprintf("127.0.0.1:%d", client)
	p.acl.admin = fmt.Sprintf("127.0.0.1:%d", adminListener)
	// The rows differ from the reference's by the authorizer alone.
	_, settings, err := p.startConfigured(broker, filepath.Join(p.acl.dir, "server.properties"),
		p.acl.properties(clientAddr, p.acl.admin), clientAddr, adminPort)
	if err != nil {
		return err
	}
	p.settings = settings + fmt.Sprintf("; authorizer on (authorizer.class.name set, "+
		"allow.everyone.if.no.acl.found=false) with %d bindings made with CreateAcls before the runs: the clients "+
		"produce on PLAINTEXT://%s as User:ANONYMOUS, not a super user, allowed WRITE, CREATE and DELETE on the "+
		"PREFIXED topic pattern bench- and IDEMPOTENT_WRITE on the cluster; the other %d bindings are other "+
		"principals' (LITERAL and PREFIXED topics, some on prefixes of the suite's topics, groups, the cluster, "+
		"DENYs among them); User:admin (super.users) made them on SASL_PLAINTEXT://%s (PLAIN)",
		p.acl.n, clientAddr, p.acl.n-4, p.acl.admin)
	return nil
}

// aclTargets are issue 15's: each authorizer peer's records/s in the base
// produce table over ringlog io_uring's (the authorizer off), with each
// one's broker CPU per GB stated beside.
func (s *suite) aclTargets() []ratioTarget {
	base := s.findTable(partProduce, baseLike(kindProduce, 1024, false))
	var ks []ratioTarget
	for _, key := range []string{acl100Peer, acl1000Peer} {
		spec, _ := peerSpecByKey(key)
		k := ratioTarget{target: fmt.Sprintf("authorizer on, %s ACLs: produce 1 KiB records/s ≥ %.2fx the authorizer off",
			fmtThousands(spec.acls), aclTarget), atLeast: true, bound: aclTarget, format: fmtCount, where: " records/s"}
		if base != nil {
			ours, theirs := base.rows[key], base.refRowOf(referencePeer)
			k.compare(metricRate, ours, theirs, spec.name, "ringlog io_uring")
			a, ok1 := ours.spread(metricCPUPerGB)
			b, ok2 := theirs.spread(metricCPUPerGB)
			if k.known && ok1 && ok2 {
				k.where += fmt.Sprintf("; broker CPU %s against %s s/GB", fmtSeconds(a.med), fmtSeconds(b.med))
			}
		}
		ks = append(ks, k)
	}
	return ks
}

// fmtThousands prints n with a comma between thousands (1,000).
func fmtThousands(n int) string {
	if n < 1000 {
		return fmt.Sprint(n)
	}
	return fmtThousands(n/1000) + fmt.Sprintf(",%03d", n%1000)
}
