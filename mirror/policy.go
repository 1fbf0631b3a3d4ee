package mirror

import (
	"fmt"
	"regexp"
	"strings"
)

// Policy names remote topics, as MirrorMaker 2's ReplicationPolicy does.
type Policy interface {
	// RemoteTopic is the name on the target of topic from the cluster
	// sourceAlias.
	RemoteTopic(sourceAlias, topic string) string
	// TopicSource is the alias of the cluster topic was mirrored from,
	// "" for a topic that is not a remote topic (or whose origin the
	// policy cannot tell).
	TopicSource(topic string) string
	// UpstreamTopic is topic's name on the cluster it came from, "" when
	// TopicSource is "".
	UpstreamTopic(topic string) string
}

// DefaultPolicy is MM2's DefaultReplicationPolicy: "<alias><sep><topic>".
type DefaultPolicy struct{ Separator string }

func (p DefaultPolicy) sep() string {
	if p.Separator == "" {
		return "."
	}
	return p.Separator
}

func (p DefaultPolicy) RemoteTopic(sourceAlias, topic string) string {
	return sourceAlias + p.sep() + topic
}

// TopicSource follows Kafka's: the text before the first separator, when
// there is one.
func (p DefaultPolicy) TopicSource(topic string) string {
	i := strings.Index(topic, p.sep())
	if i <= 0 {
		return ""
	}
	return topic[:i]
}

func (p DefaultPolicy) UpstreamTopic(topic string) string {
	src := p.TopicSource(topic)
	if src == "" {
		return ""
	}
	return topic[len(src)+len(p.sep()):]
}

// IdentityPolicy is MM2's IdentityReplicationPolicy: remote topics keep
// their names, so their origin cannot be told from the name (but for
// heartbeats, which keep the default policy's names so that they still
// trace the path). Like MM2, it cannot detect cycles: do not run it in
// both directions.
type IdentityPolicy struct{ DefaultPolicy }

func (p IdentityPolicy) RemoteTopic(sourceAlias, topic string) string {
	if isHeartbeats(topic) {
		return p.DefaultPolicy.RemoteTopic(sourceAlias, topic)
	}
	return topic
}

func (p IdentityPolicy) TopicSource(topic string) string {
	if isHeartbeats(topic) {
		return p.DefaultPolicy.TopicSource(topic)
	}
	return ""
}

func (p IdentityPolicy) UpstreamTopic(topic string) string {
	if isHeartbeats(topic) {
		return p.DefaultPolicy.UpstreamTopic(topic)
	}
	return ""
}

const heartbeatsTopic = "heartbeats"

func isHeartbeats(topic string) bool {
	return topic == heartbeatsTopic || strings.HasSuffix(topic, "."+heartbeatsTopic)
}

// isCycle reports whether topic came, at some hop, from the cluster
// targetAlias: mirroring it there would send records back where they
// came from (MirrorSourceConnector.isCycle).
func isCycle(p Policy, targetAlias, topic string) bool {
	for range 64 { // a name has a bounded number of hops
		src := p.TopicSource(topic)
		if src == "" {
			return false
		}
		if src == targetAlias {
			return true
		}
		up := p.UpstreamTopic(topic)
		if up == "" || up == topic {
			return false
		}
		topic = up
	}
	return true
}

// PolicyByName returns the policy replication.policy.class names: Kafka's
// class names (with or without their package) or "default"/"identity".
func PolicyByName(name, separator string) (Policy, error) {
	d := DefaultPolicy{Separator: separator}
	switch strings.TrimPrefix(name, "org.apache.kafka.connect.mirror.") {
	case "", "default", "DefaultReplicationPolicy":
		return d, nil
	case "identity", "IdentityReplicationPolicy":
		return IdentityPolicy{d}, nil
	}
	return nil, fmt.Errorf("mirror: replication.policy.class %q: want DefaultReplicationPolicy or IdentityReplicationPolicy", name)
}

// patternList is MM2's comma-separated list of regexes, each matching a
// whole name.
type patternList []*regexp.Regexp

func compileList(s string) (patternList, error) {
	var out patternList
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		re, err := regexp.Compile("^(?:" + part + ")$")
		if err != nil {
			return nil, fmt.Errorf("mirror: pattern %q: %w", part, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func (l patternList) match(name string) bool {
	for _, re := range l {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// isInternalTopic is MM2's: Kafka's own topics, MM2's internal topics
// (but heartbeats, which are mirrored to trace the path).
func isInternalTopic(topic string) bool {
	return strings.HasPrefix(topic, "__") || strings.HasPrefix(topic, ".") ||
		strings.HasSuffix(topic, ".internal") || strings.HasSuffix(topic, "-internal")
}
