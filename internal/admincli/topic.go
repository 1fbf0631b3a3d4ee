package admincli

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicResult is the JSON of one topic acted on (create, alter, delete):
// Error is the Kafka error code's name ("" on success), Message the
// broker's text.
type topicResult struct {
	Topic             string `json:"topic"`
	ID                string `json:"id,omitempty"`
	Partitions        int32  `json:"partitions,omitempty"`
	ReplicationFactor int16  `json:"replication_factor,omitempty"`
	Status            string `json:"status"`
	Error             string `json:"error,omitempty"`
	Message           string `json:"message,omitempty"`
}

func topicCreate(c *cli, args []string) error {
	fs := c.flags()
	var partitions, rf int
	for _, n := range []string{"p", "partitions"} {
		fs.IntVar(&partitions, n, -1, "partitions (-1: the broker's num.partitions)")
	}
	for _, n := range []string{"r", "replication-factor"} {
		fs.IntVar(&rf, n, -1, "replication factor (-1: the broker's default.replication.factor)")
	}
	var configs multiFlag
	for _, n := range []string{"c", "config"} {
		fs.Var(&configs, n, "a topic config key=value (repeatable)")
	}
	ifNotExists := fs.Bool("if-not-exists", false, "succeed when the topic exists already")
	topics, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(topics) == 0 {
		return fmt.Errorf("%w: name the topic to create", ErrUsage)
	}
	cfg := make(map[string]*string, len(configs))
	for _, kv := range configs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%w: -c %q is not key=value", ErrUsage, kv)
		}
		cfg[k] = kmsg.StringPtr(v)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resps, err := c.adm.CreateTopics(ctx, int32(partitions), int16(rf), cfg, topics...)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	var fails failures
	var out []topicResult
	for _, t := range topics {
		r, ok := resps[t]
		res := topicResult{Topic: t}
		switch {
		case !ok:
			res.Status, res.Error = "failed", "MISSING"
			fails.add(t, errors.New("the broker did not answer for this topic"))
		case errors.Is(r.Err, kerr.TopicAlreadyExists) && *ifNotExists:
			res.Status = "exists"
		case r.Err != nil:
			res.Status, res.Error, res.Message = "failed", errName(r.Err), r.ErrMessage
			fails.add(t, brokerError(r.Err, r.ErrMessage))
		default:
			res.Status, res.ID, res.Partitions, res.ReplicationFactor = "created", topicID(r.ID), r.NumPartitions, r.ReplicationFactor
		}
		out = append(out, res)
	}
	if c.json {
		if err := c.printJSON(map[string]any{"topics": out}); err != nil {
			return err
		}
	} else {
		var rows [][]string
		for _, r := range out {
			parts, rf, id := "-", "-", dash(r.ID)
			if r.Status == "created" {
				parts, rf = fmt.Sprint(r.Partitions), fmt.Sprint(r.ReplicationFactor)
			}
			rows = append(rows, []string{r.Topic, r.Status, parts, rf, id, strings.TrimSpace(r.Error + " " + r.Message)})
		}
		if err := c.table([]string{"TOPIC", "STATUS", "PARTITIONS", "REPLICATION-FACTOR", "ID", "ERROR"}, rows); err != nil {
			return err
		}
	}
	return fails.err()
}

// topicSummary is the JSON of one topic in `topic list`.
type topicSummary struct {
	Topic             string `json:"topic"`
	ID                string `json:"id"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
}

func topicList(c *cli, args []string) error {
	fs := c.flags()
	internal := fs.Bool("internal", false, "list internal topics (__consumer_offsets, ...) too")
	if pos, err := c.parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("%w: topic list takes no arguments (%q)", ErrUsage, pos)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	list := c.adm.ListTopics
	if *internal {
		list = c.adm.ListTopicsWithInternal
	}
	details, err := list(ctx)
	if err != nil {
		return fmt.Errorf("list topics: %w", err)
	}
	var out []topicSummary
	var fails failures
	for _, name := range details.Names() {
		d := details[name]
		fails.add(name, brokerError(d.Err, ""))
		s := topicSummary{Topic: name, ID: topicID(d.ID), Partitions: len(d.Partitions), Internal: d.IsInternal}
		for _, p := range d.Partitions {
			s.ReplicationFactor = max(s.ReplicationFactor, len(p.Replicas))
		}
		out = append(out, s)
	}
	if c.json {
		if err := c.printJSON(map[string]any{"topics": orEmpty(out)}); err != nil {
			return err
		}
	} else {
		var rows [][]string
		for _, s := range out {
			rows = append(rows, []string{s.Topic, fmt.Sprint(s.Partitions), fmt.Sprint(s.ReplicationFactor), fmt.Sprint(s.Internal), s.ID})
		}
		if err := c.table([]string{"TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "INTERNAL", "ID"}, rows); err != nil {
			return err
		}
	}
	return fails.err()
}

// partitionInfo is the JSON of one partition in `topic describe`.
type partitionInfo struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	Error           string  `json:"error,omitempty"`
}

// configInfo is the JSON of one config entry.
type configInfo struct {
	Key       string  `json:"key"`
	Value     *string `json:"value"`
	Source    string  `json:"source"`
	Sensitive bool    `json:"sensitive,omitempty"`
}

// topicDescription is the JSON of one topic in `topic describe`.
type topicDescription struct {
	Topic             string          `json:"topic"`
	ID                string          `json:"id"`
	Internal          bool            `json:"internal"`
	ReplicationFactor int             `json:"replication_factor"`
	Partitions        []partitionInfo `json:"partitions"`
	Configs           []configInfo    `json:"configs"`
	Error             string          `json:"error,omitempty"`
	Message           string          `json:"message,omitempty"`
}

func topicDescribe(c *cli, args []string) error {
	fs := c.flags()
	all := fs.Bool("all-configs", false, "show every config, defaults included (otherwise only those not DEFAULT_CONFIG)")
	topics, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(topics) == 0 {
		return fmt.Errorf("%w: name the topics to describe", ErrUsage)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	md, err := c.adm.Metadata(ctx, topics...)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	var fails failures
	var out []topicDescription
	var found []string
	for _, t := range topics {
		d, ok := md.Topics[t]
		desc := topicDescription{Topic: t, Partitions: []partitionInfo{}, Configs: []configInfo{}}
		switch {
		case !ok:
			desc.Error = kerr.UnknownTopicOrPartition.Message
			fails.add(t, brokerError(kerr.UnknownTopicOrPartition, ""))
		case d.Err != nil:
			desc.Error = errName(d.Err)
			fails.add(t, brokerError(d.Err, ""))
		default:
			found = append(found, t)
			desc.ID, desc.Internal = topicID(d.ID), d.IsInternal
			for _, p := range d.Partitions.Sorted() {
				desc.ReplicationFactor = max(desc.ReplicationFactor, len(p.Replicas))
				desc.Partitions = append(desc.Partitions, partitionInfo{
					Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
					Replicas: orEmpty(p.Replicas), ISR: orEmpty(p.ISR), OfflineReplicas: orEmpty(p.OfflineReplicas),
					Error: errName(p.Err),
				})
			}
		}
		out = append(out, desc)
	}
	if len(found) > 0 {
		rcs, err := c.adm.DescribeTopicConfigs(ctx, found...)
		if err != nil {
			return fmt.Errorf("describe configs: %w", err)
		}
		for _, rc := range rcs {
			for i := range out {
				if out[i].Topic != rc.Name {
					continue
				}
				if rc.Err != nil {
					out[i].Error, out[i].Message = errName(rc.Err), rc.ErrMessage
					fails.add(rc.Name+" configs", brokerError(rc.Err, rc.ErrMessage))
				}
				for _, cf := range rc.Configs {
					if !*all && cf.Source == kmsg.ConfigSourceDefaultConfig {
						continue
					}
					out[i].Configs = append(out[i].Configs, configInfo{Key: cf.Key, Value: cf.Value, Source: cf.Source.String(), Sensitive: cf.Sensitive})
				}
				sort.Slice(out[i].Configs, func(a, b int) bool { return out[i].Configs[a].Key < out[i].Configs[b].Key })
			}
		}
	}
	if c.json {
		if err := c.printJSON(map[string]any{"topics": out}); err != nil {
			return err
		}
		return fails.err()
	}
	for i, d := range out {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		if d.Error != "" && len(d.Partitions) == 0 {
			fmt.Fprintf(c.stdout, "Topic: %s  Error: %s %s\n", d.Topic, d.Error, d.Message)
			continue
		}
		fmt.Fprintf(c.stdout, "Topic: %s  ID: %s  Partitions: %d  ReplicationFactor: %d  Internal: %v\n",
			d.Topic, d.ID, len(d.Partitions), d.ReplicationFactor, d.Internal)
		var rows [][]string
		for _, p := range d.Partitions {
			rows = append(rows, []string{fmt.Sprint(p.Partition), fmt.Sprint(p.Leader), fmt.Sprint(p.LeaderEpoch),
				int32List(p.Replicas), int32List(p.ISR), int32List(p.OfflineReplicas), p.Error})
		}
		if err := c.table([]string{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "ERROR"}, rows); err != nil {
			return err
		}
		if len(d.Configs) > 0 {
			fmt.Fprintln(c.stdout)
			rows = rows[:0]
			for _, cf := range d.Configs {
				v := "null"
				switch {
				case cf.Sensitive:
					v = "(sensitive)"
				case cf.Value != nil:
					v = *cf.Value
				}
				rows = append(rows, []string{cf.Key, v, cf.Source})
			}
			if err := c.table([]string{"CONFIG", "VALUE", "SOURCE"}, rows); err != nil {
				return err
			}
		}
	}
	return fails.err()
}

func topicAlter(c *cli, args []string) error {
	fs := c.flags()
	var set, del multiFlag
	fs.Var(&set, "set", "a config to set, key=value (repeatable)")
	fs.Var(&del, "delete", "a config to delete (back to its default; repeatable)")
	partitions := fs.Int("partitions", 0, "raise the topic's partition count to N")
	topics, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(topics) == 0 {
		return fmt.Errorf("%w: name the topics to alter", ErrUsage)
	}
	if len(set) == 0 && len(del) == 0 && *partitions == 0 {
		return fmt.Errorf("%w: nothing to alter: give --set, --delete or --partitions", ErrUsage)
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
	var fails failures
	type alterResult struct {
		Topic   string `json:"topic"`
		Action  string `json:"action"`
		Status  string `json:"status"`
		Error   string `json:"error,omitempty"`
		Message string `json:"message,omitempty"`
	}
	var out []alterResult
	if len(alters) > 0 {
		resps, err := c.adm.AlterTopicConfigs(ctx, alters, topics...)
		if err != nil {
			return fmt.Errorf("alter configs: %w", err)
		}
		var what []string
		for _, a := range alters {
			if a.Op == kadm.SetConfig {
				what = append(what, "set "+a.Name+"="+*a.Value)
			} else {
				what = append(what, "delete "+a.Name)
			}
		}
		for _, t := range topics {
			r := alterResult{Topic: t, Action: strings.Join(what, ", "), Status: "altered"}
			resp, err := resps.On(t, nil)
			if err != nil {
				r.Status, r.Error = "failed", "MISSING"
				fails.add(t, errors.New("the broker did not answer for this topic"))
			} else if resp.Err != nil {
				r.Status, r.Error, r.Message = "failed", errName(resp.Err), resp.ErrMessage
				fails.add(t, brokerError(resp.Err, resp.ErrMessage))
			}
			out = append(out, r)
		}
	}
	if *partitions > 0 {
		resps, err := c.adm.UpdatePartitions(ctx, *partitions, topics...)
		if err != nil {
			return fmt.Errorf("create partitions: %w", err)
		}
		for _, t := range topics {
			r := alterResult{Topic: t, Action: fmt.Sprintf("partitions=%d", *partitions), Status: "altered"}
			resp, ok := resps[t]
			if !ok {
				r.Status, r.Error = "failed", "MISSING"
				fails.add(t, errors.New("the broker did not answer for this topic"))
			} else if resp.Err != nil {
				r.Status, r.Error, r.Message = "failed", errName(resp.Err), resp.ErrMessage
				fails.add(t, brokerError(resp.Err, resp.ErrMessage))
			}
			out = append(out, r)
		}
	}
	if c.json {
		if err := c.printJSON(map[string]any{"results": out}); err != nil {
			return err
		}
	} else {
		var rows [][]string
		for _, r := range out {
			rows = append(rows, []string{r.Topic, r.Action, r.Status, strings.TrimSpace(r.Error + " " + r.Message)})
		}
		if err := c.table([]string{"TOPIC", "ACTION", "STATUS", "ERROR"}, rows); err != nil {
			return err
		}
	}
	return fails.err()
}

func topicDelete(c *cli, args []string) error {
	fs := c.flags()
	topics, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(topics) == 0 {
		return fmt.Errorf("%w: name the topics to delete", ErrUsage)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resps, err := c.adm.DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("delete topics: %w", err)
	}
	var fails failures
	var out []topicResult
	for _, t := range topics {
		res := topicResult{Topic: t, Status: "deleted"}
		r, ok := resps[t]
		if !ok {
			res.Status, res.Error = "failed", "MISSING"
			fails.add(t, errors.New("the broker did not answer for this topic"))
		} else if r.Err != nil {
			res.Status, res.Error, res.Message = "failed", errName(r.Err), r.ErrMessage
			fails.add(t, brokerError(r.Err, r.ErrMessage))
		}
		out = append(out, res)
	}
	if c.json {
		if err := c.printJSON(map[string]any{"topics": out}); err != nil {
			return err
		}
	} else {
		var rows [][]string
		for _, r := range out {
			rows = append(rows, []string{r.Topic, r.Status, strings.TrimSpace(r.Error + " " + r.Message)})
		}
		if err := c.table([]string{"TOPIC", "STATUS", "ERROR"}, rows); err != nil {
			return err
		}
	}
	return fails.err()
}
