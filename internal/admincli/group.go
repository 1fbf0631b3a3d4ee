package admincli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupSummary is the JSON of one group in `group list`.
type groupSummary struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Type         string `json:"type"`
	Coordinator  int32  `json:"coordinator"`
}

func groupList(c *cli, args []string) error {
	fs := c.flags()
	if pos, err := c.parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("%w: group list takes no arguments (%q)", ErrUsage, pos)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	listed, err := c.adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %w", err)
	}
	out := []groupSummary{}
	for _, g := range listed.Sorted() {
		out = append(out, groupSummary{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType, Type: g.GroupType, Coordinator: g.Coordinator})
	}
	if c.json {
		return c.printJSON(map[string]any{"groups": out})
	}
	var rows [][]string
	for _, g := range out {
		rows = append(rows, []string{g.Group, g.State, g.ProtocolType, g.Type, fmt.Sprint(g.Coordinator)})
	}
	return c.table([]string{"GROUP", "STATE", "PROTOCOL-TYPE", "TYPE", "COORDINATOR"}, rows)
}

// memberInfo is the JSON of one group member.
type memberInfo struct {
	MemberID   string           `json:"member_id"`
	InstanceID *string          `json:"instance_id"`
	ClientID   string           `json:"client_id"`
	Host       string           `json:"host"`
	Assignment []topicPartition `json:"assignment"`
}

// topicPartition is a topic and some of its partitions.
type topicPartition struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// offsetInfo is the JSON of one partition's position in a group: the
// committed offset (null when the group committed none), the log end
// offset (the high watermark, what a read_uncommitted consumer can reach)
// and the lag between them (null without a commit).
type offsetInfo struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	CommittedOffset *int64 `json:"committed_offset"`
	LogEndOffset    int64  `json:"log_end_offset"`
	Lag             *int64 `json:"lag"`
	MemberID        string `json:"member_id"`
	Error           string `json:"error,omitempty"`
}

// groupDescription is the JSON of one group in `group describe`.
type groupDescription struct {
	Group        string       `json:"group"`
	State        string       `json:"state"`
	Type         string       `json:"type"` // classic or consumer (KIP-848)
	ProtocolType string       `json:"protocol_type"`
	Protocol     string       `json:"protocol"`
	Coordinator  int32        `json:"coordinator"`
	Members      []memberInfo `json:"members"`
	Offsets      []offsetInfo `json:"offsets"`
	Error        string       `json:"error,omitempty"`
	Message      string       `json:"message,omitempty"`

	err error // the error behind Error, for the exit status
	// notFound: neither DescribeGroups nor ConsumerGroupDescribe knows
	// the group. reset-offsets takes it as Kafka's admin client does, a
	// group in state Dead (offsets may be set before a group first runs).
	notFound bool
}

// retriable reports whether err (a kadm shard error included) is one a
// later try may not meet: a coordinator loading or moving, which is what
// a cluster answers while it creates __consumer_offsets at its first use.
func retriable(err error) bool {
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		for _, e := range se.Errs {
			if !kerr.IsRetriable(e.Err) {
				return false
			}
		}
		return len(se.Errs) > 0
	}
	return kerr.IsRetriable(err)
}

// withRetry calls f until it answers something other than a retriable
// error, or ctx ends.
func withRetry[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for {
		v, err := f()
		if err == nil || !retriable(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// describeGroups describes groups with their members, committed offsets
// and lag. Classic groups come from DescribeGroups; a group it does not
// know as classic (GROUP_ID_NOT_FOUND, what Kafka answers for a KIP-848
// group) is asked again with ConsumerGroupDescribe.
func (c *cli) describeGroups(ctx context.Context, groups []string) ([]groupDescription, error) {
	described, err := withRetry(ctx, func() (kadm.DescribedGroups, error) {
		d, err := c.adm.DescribeGroups(ctx, groups...)
		if err == nil {
			for _, g := range d {
				if retriable(g.Err) {
					return d, g.Err
				}
			}
		}
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("describe groups: %w", err)
	}
	out := make([]groupDescription, 0, len(groups))
	var consumer []string
	for _, g := range groups {
		d, ok := described[g]
		desc := groupDescription{Group: g, Type: "classic", Members: []memberInfo{}, Offsets: []offsetInfo{}}
		switch {
		case !ok:
			desc.err = errors.New("the coordinator did not answer for this group")
			desc.Error = "MISSING"
		case errors.Is(d.Err, kerr.GroupIDNotFound):
			consumer = append(consumer, g)
		case d.Err != nil:
			desc.err, desc.Error, desc.Message = brokerError(d.Err, d.ErrMessage), errName(d.Err), d.ErrMessage
		default:
			desc.State, desc.ProtocolType, desc.Protocol, desc.Coordinator = d.State, d.ProtocolType, d.Protocol, d.Coordinator.NodeID
			for _, m := range d.Members {
				mi := memberInfo{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost, Assignment: []topicPartition{}}
				if a, ok := m.Assigned.AsConsumer(); ok {
					for _, t := range a.Topics {
						mi.Assignment = append(mi.Assignment, topicPartition{Topic: t.Topic, Partitions: sortedInt32(t.Partitions)})
					}
				}
				desc.Members = append(desc.Members, mi)
			}
		}
		out = append(out, desc)
	}
	// A broker without ConsumerGroupDescribe (Kafka before 4.0) has no
	// KIP-848 groups: its GROUP_ID_NOT_FOUND is the answer.
	if len(consumer) > 0 {
		if err := c.requireAPI(ctx, kmsg.ConsumerGroupDescribe.Int16()); errors.Is(err, ErrUnsupported) {
			consumer = nil
		} else if err != nil {
			return nil, err
		}
	}
	var cds kadm.DescribedConsumerGroups
	if len(consumer) > 0 {
		cds, err = withRetry(ctx, func() (kadm.DescribedConsumerGroups, error) {
			return c.adm.DescribeConsumerGroups(ctx, consumer...)
		})
		if err != nil {
			return nil, fmt.Errorf("describe consumer groups: %w", err)
		}
	}
	for i := range out {
		if !errors.Is(described[out[i].Group].Err, kerr.GroupIDNotFound) {
			continue
		}
		d, ok := cds[out[i].Group]
		if !ok {
			// Not asked (no KIP-848 on this broker) or not answered.
			d.Err = described[out[i].Group].Err
		}
		if d.Err != nil {
			out[i].err, out[i].Error = brokerError(d.Err, ""), errName(d.Err)
			out[i].notFound = errors.Is(d.Err, kerr.GroupIDNotFound)
			continue
		}
		out[i].Type, out[i].State, out[i].ProtocolType, out[i].Protocol, out[i].Coordinator = "consumer", d.State, "consumer", d.AssignorName, d.Coordinator.NodeID
		for _, m := range d.Members {
			mi := memberInfo{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost, Assignment: []topicPartition{}}
			for _, t := range m.Assignment.Sorted() {
				mi.Assignment = append(mi.Assignment, topicPartition{Topic: t.Topic, Partitions: sortedInt32(t.Partitions)})
			}
			out[i].Members = append(out[i].Members, mi)
		}
	}

	// Committed offsets, then the end offsets of every partition that is
	// committed or assigned.
	want := make(kadm.TopicsSet)
	committed := make(map[string]kadm.OffsetResponses)
	for i := range out {
		if out[i].err != nil {
			continue
		}
		offs, err := withRetry(ctx, func() (kadm.OffsetResponses, error) { return c.adm.FetchOffsets(ctx, out[i].Group) })
		if err != nil {
			out[i].err, out[i].Error = brokerError(err, ""), errName(err)
			continue
		}
		committed[out[i].Group] = offs
		offs.Each(func(o kadm.OffsetResponse) { want.Add(o.Topic, o.Partition) })
		for _, m := range out[i].Members {
			for _, a := range m.Assignment {
				want.Add(a.Topic, a.Partitions...)
			}
		}
	}
	var ends kadm.ListedOffsets
	if topics := want.Topics(); len(topics) > 0 {
		ends, err = c.adm.ListEndOffsets(ctx, topics...)
		var se *kadm.ShardErrors
		if err != nil && !errors.As(err, &se) {
			return nil, fmt.Errorf("list end offsets: %w", err)
		}
	}
	for i := range out {
		g := &out[i]
		if g.err != nil {
			continue
		}
		owner := make(map[string]map[int32]string)
		parts := make(kadm.TopicsSet)
		for _, m := range g.Members {
			for _, a := range m.Assignment {
				if owner[a.Topic] == nil {
					owner[a.Topic] = make(map[int32]string)
				}
				for _, p := range a.Partitions {
					owner[a.Topic][p] = m.MemberID
				}
				parts.Add(a.Topic, a.Partitions...)
			}
		}
		committed[g.Group].Each(func(o kadm.OffsetResponse) { parts.Add(o.Topic, o.Partition) })
		for _, tp := range parts.Sorted() {
			for _, p := range sortedInt32(tp.Partitions) {
				oi := offsetInfo{Topic: tp.Topic, Partition: p, LogEndOffset: -1, MemberID: owner[tp.Topic][p]}
				if o, ok := committed[g.Group].Lookup(tp.Topic, p); ok {
					if o.Err != nil {
						oi.Error = errName(o.Err)
					} else if o.At >= 0 {
						at := o.At
						oi.CommittedOffset = &at
					}
				}
				if e, ok := ends.Lookup(tp.Topic, p); !ok {
					oi.Error = kerr.UnknownTopicOrPartition.Message
				} else if e.Err != nil {
					oi.Error = errName(e.Err)
				} else {
					oi.LogEndOffset = e.Offset
					if oi.CommittedOffset != nil {
						lag := max(e.Offset-*oi.CommittedOffset, 0)
						oi.Lag = &lag
					}
				}
				g.Offsets = append(g.Offsets, oi)
			}
		}
	}
	return out, nil
}

func groupDescribe(c *cli, args []string) error {
	fs := c.flags()
	groups, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(groups) == 0 {
		return fmt.Errorf("%w: name the groups to describe", ErrUsage)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	out, err := c.describeGroups(ctx, groups)
	if err != nil {
		return err
	}
	var fails failures
	for _, g := range out {
		fails.add(g.Group, g.err)
	}
	if c.json {
		if err := c.printJSON(map[string]any{"groups": out}); err != nil {
			return err
		}
		return fails.err()
	}
	for i, g := range out {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		if g.err != nil {
			fmt.Fprintf(c.stdout, "Group: %s  Error: %v\n", g.Group, g.err)
			continue
		}
		fmt.Fprintf(c.stdout, "Group: %s  State: %s  Type: %s  Protocol: %s/%s  Coordinator: %d  Members: %d\n",
			g.Group, g.State, g.Type, g.ProtocolType, g.Protocol, g.Coordinator, len(g.Members))
		if len(g.Members) > 0 {
			var rows [][]string
			for _, m := range g.Members {
				var as []string
				for _, a := range m.Assignment {
					as = append(as, a.Topic+":"+int32List(a.Partitions))
				}
				rows = append(rows, []string{m.MemberID, m.ClientID, m.Host, strings.Join(as, " ")})
			}
			fmt.Fprintln(c.stdout)
			if err := c.table([]string{"MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"}, rows); err != nil {
				return err
			}
		}
		if len(g.Offsets) > 0 {
			var rows [][]string
			for _, o := range g.Offsets {
				rows = append(rows, []string{o.Topic, fmt.Sprint(o.Partition), optInt(o.CommittedOffset), fmt.Sprint(o.LogEndOffset), optInt(o.Lag), dash(o.MemberID), o.Error})
			}
			fmt.Fprintln(c.stdout)
			if err := c.table([]string{"TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "ERROR"}, rows); err != nil {
				return err
			}
		}
	}
	return fails.err()
}

// lagSummary is the JSON of one group's lag on one topic in `group lag`.
type lagSummary struct {
	Group      string `json:"group"`
	State      string `json:"state"`
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	Lag        int64  `json:"lag"`
	MaxLag     int64  `json:"max_lag"`
	// Uncommitted counts the partitions with no committed offset (not in
	// Lag: Kafka's tool shows their lag as "-").
	Uncommitted int `json:"uncommitted"`
}

func groupLag(c *cli, args []string) error {
	fs := c.flags()
	groups, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if len(groups) == 0 {
		listed, err := c.adm.ListGroups(ctx)
		if err != nil {
			return fmt.Errorf("list groups: %w", err)
		}
		for _, g := range listed.Sorted() {
			groups = append(groups, g.Group)
		}
	}
	var out []groupDescription
	if len(groups) > 0 {
		if out, err = c.describeGroups(ctx, groups); err != nil {
			return err
		}
	}
	var fails failures
	sums := []lagSummary{}
	for _, g := range out {
		fails.add(g.Group, g.err)
		byTopic := make(map[string]*lagSummary)
		var order []string
		for _, o := range g.Offsets {
			s := byTopic[o.Topic]
			if s == nil {
				s = &lagSummary{Group: g.Group, State: g.State, Topic: o.Topic}
				byTopic[o.Topic] = s
				order = append(order, o.Topic)
			}
			s.Partitions++
			if o.Lag == nil {
				s.Uncommitted++
				continue
			}
			s.Lag += *o.Lag
			s.MaxLag = max(s.MaxLag, *o.Lag)
		}
		sort.Strings(order)
		for _, t := range order {
			sums = append(sums, *byTopic[t])
		}
	}
	if c.json {
		if err := c.printJSON(map[string]any{"lag": sums}); err != nil {
			return err
		}
		return fails.err()
	}
	var rows [][]string
	for _, s := range sums {
		rows = append(rows, []string{s.Group, s.State, s.Topic, fmt.Sprint(s.Partitions), fmt.Sprint(s.Lag), fmt.Sprint(s.MaxLag), fmt.Sprint(s.Uncommitted)})
	}
	if err := c.table([]string{"GROUP", "STATE", "TOPIC", "PARTITIONS", "LAG", "MAX-LAG", "UNCOMMITTED"}, rows); err != nil {
		return err
	}
	return fails.err()
}

func optInt(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
