package mirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sourceTopics lists the source topics the flow mirrors, with their
// partition counts.
func (w *worker) sourceTopics(ctx context.Context) (map[string]int32, error) {
	details, err := w.srcAdm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list source topics: %w", err)
	}
	out := map[string]int32{}
	for name, d := range details {
		if d.Err != nil || d.IsInternal || !w.f.Wanted(name) {
			continue
		}
		out[name] = int32(len(d.Partitions))
	}
	return out, nil
}

// syncedConfigs are the source topic's configs the target topic takes:
// those set on the topic (not defaults: MM2's use.defaults.from=target),
// but for the deny list (config.properties.exclude).
func (w *worker) syncedConfigs(ctx context.Context, topics []string) (map[string]map[string]*string, error) {
	out := map[string]map[string]*string{}
	if !w.f.SyncTopicConfigs || len(topics) == 0 {
		return out, nil
	}
	rcs, err := w.srcAdm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("describe source topic configs: %w", err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			continue // deleted since it was listed: the next refresh drops it
		}
		m := map[string]*string{}
		for _, c := range rc.Configs {
			if c.Source != kmsg.ConfigSourceDynamicTopicConfig || c.Sensitive || c.Value == nil || w.f.ConfigExclude.match(c.Key) {
				continue
			}
			m[c.Key] = c.Value
		}
		out[rc.Name] = m
	}
	return out, nil
}

// prepareTargets creates each remote topic with its source's partition
// count and synced configs, grows a remote topic whose source grew, and
// brings an existing one's configs up to the source's.
func (w *worker) prepareTargets(ctx context.Context, src map[string]int32) error {
	names := slices.Sorted(maps.Keys(src))
	cfgs, err := w.syncedConfigs(ctx, names)
	if err != nil {
		return err
	}
	remote := make([]string, 0, len(names))
	for _, t := range names {
		remote = append(remote, w.f.Policy.RemoteTopic(w.f.SourceAlias, t))
	}
	have, err := w.dstAdm.ListTopics(ctx, remote...)
	if err != nil {
		return fmt.Errorf("list target topics: %w", err)
	}
	for i, t := range names {
		r := remote[i]
		d, ok := have[r]
		if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			resp, err := w.dstAdm.CreateTopic(ctx, src[t], w.f.ReplicationFactor, cfgs[t], r)
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("create remote topic %s: %w (%s)", r, err, resp.ErrMessage)
			}
			w.log.Info("mirror: created remote topic", "flow", w.f.Name(), "topic", r, "partitions", src[t], "configs", len(cfgs[t]))
			continue
		}
		if d.Err != nil {
			return fmt.Errorf("remote topic %s: %w", r, d.Err)
		}
		if n := int32(len(d.Partitions)); n < src[t] {
			rs, err := w.dstAdm.UpdatePartitions(ctx, int(src[t]), r)
			if err == nil {
				err = rs.Error()
			}
			if errors.Is(err, kerr.InvalidPartitions) {
				// "Topic already has N partitions": another process of the
				// flow (or another flow from the same source) grew it
				// since it was listed. Were it still short, producing to
				// the new partitions fails the run, which starts over.
				err = nil
			}
			if err != nil {
				return fmt.Errorf("grow remote topic %s to %d partitions: %w", r, src[t], err)
			}
			w.log.Info("mirror: grew remote topic", "flow", w.f.Name(), "topic", r, "from", n, "to", src[t])
		}
		if len(cfgs[t]) > 0 {
			var alter []kadm.AlterConfig
			for k, v := range cfgs[t] {
				alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: v})
			}
			rs, err := w.dstAdm.AlterTopicConfigs(ctx, alter, r)
			if err == nil {
				for _, x := range rs {
					if x.Err != nil {
						err = fmt.Errorf("%w (%s)", x.Err, x.ErrMessage)
					}
				}
			}
			if err != nil {
				// The target may refuse a config it does not know (another
				// implementation, another version): the records still flow.
				w.log.Warn("mirror: config sync refused", "flow", w.f.Name(), "topic", r, "err", err)
			}
		}
	}
	return nil
}

// prepareInternal creates the flow's own topics on the target, compacted
// with one partition as MM2 creates its offset storage and offset syncs.
func (w *worker) prepareInternal(ctx context.Context) error {
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	topics := []struct {
		name string
		cfg  map[string]*string
	}{{w.f.OffsetsTopic(), compact}}
	if w.f.EmitOffsetSyncs {
		topics = append(topics, struct {
			name string
			cfg  map[string]*string
		}{w.f.OffsetSyncsTopic(), compact})
	}
	if w.f.HeartbeatInterval > 0 {
		topics = append(topics, struct {
			name string
			cfg  map[string]*string
		}{heartbeatsTopic, compact})
	}
	for _, t := range topics {
		resp, err := w.dstAdm.CreateTopic(ctx, 1, w.f.ReplicationFactor, t.cfg, t.name)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create %s on the target: %w (%s)", t.name, err, resp.ErrMessage)
		}
	}
	return nil
}
