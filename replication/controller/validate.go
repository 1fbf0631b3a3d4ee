package controller

import "strings"

// validateTopicName applies Kafka's rules (the same as engine's): 1 to 249
// characters of [a-zA-Z0-9._-], not "." or "..".
func validateTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return errf(ErrInvalidTopic, "%q", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return errf(ErrInvalidTopic, "%q has the character %q", name, r)
		}
	}
	return nil
}

// maxConfigs bounds the keys of one topic's config or of one change.
const maxConfigs = 1000

// validateConfigs checks a config change. Values are stored as given: the
// kafka layer validates them against the engine's topic config parser
// before it calls the controller. Only the keys the controller itself acts
// on are checked here.
func validateConfigs(set map[string]string, deletes []string) error {
	if len(set)+len(deletes) > maxConfigs {
		return errf(ErrInvalidConfig, "%d keys in one change, at most %d", len(set)+len(deletes), maxConfigs)
	}
	for k, v := range set {
		if k == "" || len(k) > maxConfigBytes || len(v) > maxConfigBytes {
			return errf(ErrInvalidConfig, "key %.40q: key or value empty or too long", k)
		}
		if k == configUncleanLeaderElection && !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return errf(ErrInvalidConfig, "%s=%q is not a boolean", k, v)
		}
	}
	for _, k := range deletes {
		if _, ok := set[k]; ok {
			return errf(ErrInvalidRequest, "key %q both set and deleted", k)
		}
	}
	return nil
}
