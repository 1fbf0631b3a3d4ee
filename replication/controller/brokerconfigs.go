package controller

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Dynamic broker configs (KIP-226) are records of the quorum, as Kafka's
// ConfigRecords for BROKER resources are: set with AlterConfigs or
// IncrementalAlterConfigs on a broker id (that broker's value) or on the
// empty name (the cluster's default, Kafka's "<default>"), and applied by
// every broker from the image. Only the configs ringlog really changes
// while it runs are accepted: the replication throttles' rates.

// The dynamic broker configs, by Kafka's names (QuotaConfig).
const (
	LeaderReplicationThrottledRate   = "leader.replication.throttled.rate"
	FollowerReplicationThrottledRate = "follower.replication.throttled.rate"
)

// dynamicBrokerConfigs lists the broker configs that may be changed while
// the cluster runs, and their type (both LONG, at least 0, as
// QuotaConfig.brokerQuotaConfigs defines them).
var dynamicBrokerConfigs = []string{FollowerReplicationThrottledRate, LeaderReplicationThrottledRate}

// IsDynamicBrokerConfig reports whether name is a broker config ringlog
// applies while it runs.
func IsDynamicBrokerConfig(name string) bool { return slices.Contains(dynamicBrokerConfigs, name) }

// DynamicBrokerConfigs lists them, sorted.
func DynamicBrokerConfigs() []string { return slices.Clone(dynamicBrokerConfigs) }

// ValidateBrokerConfig checks a value of a dynamic broker config, in the
// words of Kafka's ConfigException (Kafka's brokers answer it as
// INVALID_REQUEST, KAFKA-13609, and so does ErrInvalidRequest here).
func ValidateBrokerConfig(name, value string) error {
	if !IsDynamicBrokerConfig(name) {
		return errf(ErrInvalidRequest, "Cannot update these configs dynamically: [%s]", name)
	}
	if _, err := parseRate(name, value); err != nil {
		return err
	}
	return nil
}

// parseRate reads a LONG of at least 0, as Kafka's ConfigDef does (the
// value trimmed).
func parseRate(name, value string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil {
		return 0, errf(ErrInvalidRequest, "Invalid value %s for configuration %s: Not a number of type LONG", value, name)
	}
	if n < 0 {
		return 0, errf(ErrInvalidRequest, "Invalid value %s for configuration %s: Value must be at least 0", value, name)
	}
	return n, nil
}

// checkBrokerConfigResource checks the name of a BROKER resource: empty
// (the cluster default) or a broker id.
func checkBrokerConfigResource(name string) error {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != name {
		return errf(ErrInvalidRequest, "Broker id must be an integer, but it is: %s", name)
	}
	return nil
}

// BrokerConfigs returns the dynamic configs of a BROKER resource: a
// broker id, or "" for the cluster's default. The map is the image's:
// read-only.
func (img *Image) BrokerConfigs(resource string) map[string]string {
	return img.brokerConfigs[resource]
}

// BrokerRate is a rate config of broker id as it applies: the broker's
// own dynamic value, else the cluster default's, else +Inf and ok false
// (Kafka's default, Long.MAX_VALUE: no bound).
func (img *Image) BrokerRate(id int32, name string) (rate float64, ok bool) {
	for _, r := range [...]string{strconv.Itoa(int(id)), ""} {
		if v, set := img.brokerConfigs[r][name]; set {
			if n, err := parseRate(name, v); err == nil {
				return float64(n), true
			}
		}
	}
	return math.Inf(1), false
}

// AlterBrokerConfigs sets and deletes dynamic configs of a BROKER
// resource (a broker id, or "" for the cluster default). Errors:
// INVALID_REQUEST for a resource that is no broker id, a config that is
// not dynamic, or a bad value.
func (c *Controller) AlterBrokerConfigs(ctx context.Context, resource string, set map[string]string, deletes []string) error {
	cmd := &command{typ: cmdAlterBrokerConfigs, topic: resource, configs: maps.Clone(set), deletes: slices.Clone(deletes)}
	if err := validateBrokerConfigChange(cmd); err != nil {
		return err
	}
	_, err := c.submit(ctx, cmd)
	return err
}

func validateBrokerConfigChange(c *command) error {
	if err := checkBrokerConfigResource(c.topic); err != nil {
		return err
	}
	if err := validateConfigs(c.configs, c.deletes); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(c.configs)) {
		if err := ValidateBrokerConfig(k, c.configs[k]); err != nil {
			return err
		}
	}
	return nil
}

// alterBrokerConfigs applies an AlterBrokerConfigs command. Deleting a
// config that is not set changes nothing, as in Kafka.
func (t *tx) alterBrokerConfigs(c *command) result {
	if err := validateBrokerConfigChange(c); err != nil {
		return result{err: err}
	}
	next := maps.Clone(t.brokerConfigMap())
	if next == nil {
		next = map[string]map[string]string{}
	}
	cfg := maps.Clone(next[c.topic])
	if cfg == nil {
		cfg = map[string]string{}
	}
	maps.Copy(cfg, c.configs)
	for _, k := range c.deletes {
		delete(cfg, k)
	}
	if len(cfg) == 0 {
		delete(next, c.topic)
	} else {
		next[c.topic] = cfg
	}
	if len(next) == 0 {
		next = nil
	}
	t.brokerConfigs, t.brokerConfigsChanged = next, true
	return result{}
}

func (t *tx) brokerConfigMap() map[string]map[string]string {
	if t.brokerConfigsChanged {
		return t.brokerConfigs
	}
	return t.base.brokerConfigs
}

//	broker configs (snapshot v8): count, (resource str | configs: count, key str, value str...)..., resources sorted

func encodeBrokerConfigs(e *encoder, m map[string]map[string]string) {
	keys := slices.Sorted(maps.Keys(m))
	e.uvarint(len(keys))
	for _, k := range keys {
		e.str(k)
		e.stringMap(m[k])
	}
}

func decodeBrokerConfigs(d *decoder) map[string]map[string]string {
	return sortedMap(d, (*decoder).stringMap, "broker config resources")
}

// checkBrokerConfigs asserts what every applied state keeps of its
// dynamic broker configs.
func checkBrokerConfigs(m map[string]map[string]string) error {
	if m != nil && len(m) == 0 {
		return fmt.Errorf("an empty, non-nil broker config map")
	}
	for r, cfg := range m {
		if err := checkBrokerConfigResource(r); err != nil {
			return err
		}
		if len(cfg) == 0 {
			return fmt.Errorf("broker config resource %q has no config", r)
		}
		for k, v := range cfg {
			if err := ValidateBrokerConfig(k, v); err != nil {
				return fmt.Errorf("broker %q: %w", r, err)
			}
		}
	}
	return nil
}
