package admincli

import (
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client quotas (DescribeClientQuotas, AlterClientQuotas) and dynamic
// broker configs (DescribeConfigs and IncrementalAlterConfigs on a BROKER
// resource), with kafka-configs' entity vocabulary: a user, a client id,
// an IP address, or the default of each.

// entityFlags name a quota entity: each component by name or as the
// default.
type entityFlags struct {
	user, clientID, ip                      string
	userDefault, clientIDDefault, ipDefault bool
}

func (e *entityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.user, "user", "", "the user (principal name without User:)")
	fs.BoolVar(&e.userDefault, "user-default", false, "the default user entity")
	fs.StringVar(&e.clientID, "client-id", "", "the client id")
	fs.BoolVar(&e.clientIDDefault, "client-id-default", false, "the default client id entity")
	fs.StringVar(&e.ip, "ip", "", "an IP address (connection_creation_rate)")
	fs.BoolVar(&e.ipDefault, "ip-default", false, "the default IP entity")
}

// components are the entity's parts, each with its name (nil: the
// default), in Kafka's order; an error when a part is named twice.
func (e *entityFlags) components() (kadm.ClientQuotaEntity, error) {
	var out kadm.ClientQuotaEntity
	add := func(typ, name string, def bool) error {
		switch {
		case name != "" && def:
			return fmt.Errorf("%w: give --%s or --%s-default, not both", ErrUsage, typ, typ)
		case name != "":
			out = append(out, kadm.ClientQuotaEntityComponent{Type: typ, Name: kmsg.StringPtr(name)})
		case def:
			out = append(out, kadm.ClientQuotaEntityComponent{Type: typ})
		}
		return nil
	}
	if err := add("user", e.user, e.userDefault); err != nil {
		return nil, err
	}
	if err := add("client-id", e.clientID, e.clientIDDefault); err != nil {
		return nil, err
	}
	if err := add("ip", e.ip, e.ipDefault); err != nil {
		return nil, err
	}
	return out, nil
}

// quotaOut is the JSON of one entity's quotas.
type quotaOut struct {
	Entity  map[string]*string `json:"entity"` // type -> name (null: the default)
	Quotas  map[string]float64 `json:"quotas,omitempty"`
	Status  string             `json:"status,omitempty"`
	Error   string             `json:"error,omitempty"`
	Message string             `json:"message,omitempty"`
}

func entityMap(e kadm.ClientQuotaEntity) map[string]*string {
	m := map[string]*string{}
	for _, c := range e {
		m[c.Type] = c.Name
	}
	return m
}

func quotaDescribe(c *cli, args []string) error {
	fs := c.flags()
	var e entityFlags
	e.register(fs)
	if err := c.flagsOnly(fs, args); err != nil {
		return err
	}
	ent, err := e.components()
	if err != nil {
		return err
	}
	var match []kadm.DescribeClientQuotaComponent
	for _, comp := range ent {
		m := kadm.DescribeClientQuotaComponent{Type: comp.Type, MatchName: comp.Name, MatchType: 0}
		if comp.Name == nil {
			m.MatchType = 1 // the default entity
		}
		match = append(match, m)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	got, err := c.adm.DescribeClientQuotas(ctx, false, match)
	if err != nil {
		return brokerError(fmt.Errorf("describe client quotas: %w", err), "")
	}
	out := []quotaOut{}
	for _, q := range got {
		o := quotaOut{Entity: entityMap(q.Entity), Quotas: map[string]float64{}}
		for _, v := range q.Values {
			o.Quotas[v.Key] = v.Value
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return entityString(out[i].Entity) < entityString(out[j].Entity) })
	var rows [][]string
	for _, o := range out {
		keys := make([]string, 0, len(o.Quotas))
		for k := range o.Quotas {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			rows = append(rows, []string{entityString(o.Entity), k, strconv.FormatFloat(o.Quotas[k], 'f', -1, 64)})
		}
	}
	return c.show(out, []string{"ENTITY", "QUOTA", "VALUE"}, rows)
}

// entityString is user=alice,client-id=<default> in Kafka's order.
func entityString(m map[string]*string) string {
	var parts []string
	for _, typ := range []string{"user", "client-id", "ip"} {
		name, ok := m[typ]
		if !ok {
			continue
		}
		if name == nil {
			parts = append(parts, typ+"=<default>")
		} else {
			parts = append(parts, typ+"="+*name)
		}
	}
	return strings.Join(parts, ",")
}

func quotaAlter(c *cli, args []string) error {
	fs := c.flags()
	var e entityFlags
	e.register(fs)
	var set, del multiFlag
	fs.Var(&set, "set", "a quota to set, key=value: producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate, connection_creation_rate (repeatable)")
	fs.Var(&del, "delete", "a quota to remove (repeatable)")
	if err := c.flagsOnly(fs, args); err != nil {
		return err
	}
	ent, err := e.components()
	if err != nil {
		return err
	}
	if len(ent) == 0 {
		return fmt.Errorf("%w: name the entity: --user, --client-id, --ip or their -default", ErrUsage)
	}
	if len(set) == 0 && len(del) == 0 {
		return fmt.Errorf("%w: nothing to alter: give --set or --delete", ErrUsage)
	}
	var ops []kadm.AlterClientQuotaOp
	for _, kv := range set {
		k, v, ok := strings.Cut(kv, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || k == "" || err != nil {
			return fmt.Errorf("%w: --set %q is not key=number", ErrUsage, kv)
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
	}
	for _, k := range del {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	res, err := c.adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: ops}})
	if err != nil {
		return fmt.Errorf("alter client quotas: %w", err)
	}
	var fails failures
	var out []quotaOut
	for _, r := range res {
		o := quotaOut{Entity: entityMap(r.Entity), Status: "altered"}
		if r.Err != nil {
			o.Status, o.Error, o.Message = "failed", errName(r.Err), r.ErrMessage
			fails.add(entityString(o.Entity), brokerError(r.Err, r.ErrMessage))
		}
		out = append(out, o)
	}
	rows := make([][]string, len(out))
	for i, o := range out {
		rows[i] = []string{entityString(o.Entity), o.Status, o.Message}
	}
	if err := c.show(out, []string{"ENTITY", "STATUS", "MESSAGE"}, rows); err != nil {
		return err
	}
	return fails.err()
}

// brokerTarget is --id N or --default: a broker's own dynamic configs or
// the cluster's default ones.
func brokerTarget(fs *flag.FlagSet) (id *int, def *bool) {
	return fs.Int("id", -1, "the broker's node id"), fs.Bool("default", false, "the cluster-wide default of every broker")
}

func brokerIDs(id int, def bool) ([]int32, error) {
	switch {
	case id >= 0 && def:
		return nil, fmt.Errorf("%w: give --id or --default, not both", ErrUsage)
	case id >= 0:
		return []int32{int32(id)}, nil
	case def:
		return nil, nil // kadm: no broker names the cluster default
	}
	return nil, fmt.Errorf("%w: name the broker with --id N, or --default", ErrUsage)
}

// brokerConfigOut is the JSON of one config of a broker.
type brokerConfigOut struct {
	Name   string  `json:"name"`
	Value  *string `json:"value"`
	Source string  `json:"source"`
}

func brokerConfigDescribe(c *cli, args []string) error {
	fs := c.flags()
	id, def := brokerTarget(fs)
	dynamic := fs.Bool("dynamic", false, "only the configs set dynamically (per broker or cluster default)")
	if err := c.flagsOnly(fs, args); err != nil {
		return err
	}
	ids, err := brokerIDs(*id, *def)
	if err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	rcs, err := c.adm.DescribeBrokerConfigs(ctx, ids...)
	if err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	out := []brokerConfigOut{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return brokerError(rc.Err, rc.ErrMessage)
		}
		for _, cfg := range rc.Configs {
			isDynamic := cfg.Source == kmsg.ConfigSourceDynamicBrokerConfig || cfg.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig
			if *dynamic && !isDynamic {
				continue
			}
			out = append(out, brokerConfigOut{Name: cfg.Key, Value: cfg.Value, Source: cfg.Source.String()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	rows := make([][]string, len(out))
	for i, o := range out {
		v := "(sensitive)"
		if o.Value != nil {
			v = *o.Value
		}
		rows[i] = []string{o.Name, v, o.Source}
	}
	return c.show(out, []string{"NAME", "VALUE", "SOURCE"}, rows)
}

func brokerConfigAlter(c *cli, args []string) error {
	fs := c.flags()
	id, def := brokerTarget(fs)
	var set, del multiFlag
	fs.Var(&set, "set", "a dynamic config to set, key=value, such as leader.replication.throttled.rate=10485760 (repeatable)")
	fs.Var(&del, "delete", "a dynamic config to remove (repeatable)")
	if err := c.flagsOnly(fs, args); err != nil {
		return err
	}
	ids, err := brokerIDs(*id, *def)
	if err != nil {
		return err
	}
	if len(set) == 0 && len(del) == 0 {
		return fmt.Errorf("%w: nothing to alter: give --set or --delete", ErrUsage)
	}
	alters, err := configAlters(set, del)
	if err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resps, err := c.adm.AlterBrokerConfigs(ctx, alters, ids...)
	if err != nil {
		return fmt.Errorf("alter configs: %w", err)
	}
	type result struct {
		Broker  string `json:"broker"`
		Status  string `json:"status"`
		Error   string `json:"error,omitempty"`
		Message string `json:"message,omitempty"`
	}
	var fails failures
	var out []result
	for _, r := range resps {
		name := r.Name
		if name == "" {
			name = "<default>"
		}
		o := result{Broker: name, Status: "altered"}
		if r.Err != nil {
			o.Status, o.Error, o.Message = "failed", errName(r.Err), r.ErrMessage
			fails.add("broker "+name, brokerError(r.Err, r.ErrMessage))
		}
		out = append(out, o)
	}
	rows := make([][]string, len(out))
	for i, o := range out {
		rows[i] = []string{o.Broker, o.Status, o.Message}
	}
	if err := c.show(out, []string{"BROKER", "STATUS", "MESSAGE"}, rows); err != nil {
		return err
	}
	return fails.err()
}
