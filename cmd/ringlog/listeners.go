package main

import (
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"ringlog/broker"
	"ringlog/internal/sasl"
	"ringlog/kafka"
)

// The listener settings are read together once the whole file is in:
// listeners names them, listener.security.protocol.map gives each its
// protocol, inter.broker.listener.name picks the one brokers use, and the
// listener.name.<name>.* keys override the global ssl.* and sasl.* ones
// for one listener, as in Kafka.

// isListenerKey reports the keys collected for buildListeners.
func isListenerKey(k string) bool {
	switch k {
	case "listeners", "advertised.listeners", "listener.security.protocol.map", "inter.broker.listener.name",
		"security.inter.broker.protocol", "controller.listener.names", "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol",
		"sasl.server.max.receive.size", "connections.max.reauth.ms", "ringlog.sasl.authentication.timeout.ms":
		return true
	}
	return strings.HasPrefix(k, "ssl.") || strings.HasPrefix(k, "listener.name.") || strings.HasPrefix(k, "sasl.oauthbearer.")
}

// defaultProtocols is listener.security.protocol.map's default: each
// protocol is a listener name of its own.
var defaultProtocols = map[string]kafka.SecurityProtocol{
	"PLAINTEXT": kafka.Plaintext, "SSL": kafka.SSL, "SASL_PLAINTEXT": kafka.SASLPlaintext, "SASL_SSL": kafka.SASLSSL,
}

// buildListeners turns the collected listener settings into the broker's
// listeners. Without a listeners key it leaves the default (one
// PLAINTEXT listener, -listen) alone.
func (s *settings) buildListeners(kv map[string]string) error {
	for k := range kv {
		if strings.HasPrefix(k, "listener.name.") && kv["listeners"] == "" {
			return fmt.Errorf("%s: there is no listeners setting to apply it to", k)
		}
	}
	if err := checkOAuthKeys(kv); err != nil {
		return err
	}
	if kv["listeners"] == "" {
		for k := range kv {
			if strings.HasPrefix(k, "ssl.") || strings.HasPrefix(k, "sasl.") {
				return fmt.Errorf("%s: the only listener is PLAINTEXT (set listeners with an SSL or SASL listener)", k)
			}
		}
		return nil
	}
	protocols := map[string]kafka.SecurityProtocol{}
	if v := kv["listener.security.protocol.map"]; v != "" {
		for _, e := range strings.Split(v, ",") {
			name, proto, ok := strings.Cut(strings.TrimSpace(e), ":")
			p := kafka.SecurityProtocol(proto)
			if _, known := defaultProtocols[proto]; !ok || !known || name == "" {
				return fmt.Errorf("listener.security.protocol.map: %q (want NAME:PROTOCOL, PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", e)
			}
			protocols[name] = p
		}
	} else {
		protocols = defaultProtocols
	}
	controller := map[string]bool{}
	for _, n := range splitList(kv["controller.listener.names"]) {
		controller[n] = true
	}
	addrs, order, err := parseListeners("listeners", kv["listeners"])
	if err != nil {
		return err
	}
	// Without advertised.listeners each listener advertises its own
	// address, with the port it bound (port 0 takes a free one).
	adv := map[string]string{}
	if v := kv["advertised.listeners"]; v != "" {
		if adv, _, err = parseListeners("advertised.listeners", v); err != nil {
			return err
		}
		for n := range adv {
			if _, ok := addrs[n]; !ok {
				return fmt.Errorf("advertised.listeners: %s is not in listeners", n)
			}
		}
	}
	for _, name := range order {
		if controller[name] {
			// A controller outside controller.quorum.voters binds its
			// port from here; a static voter's is in the voter list.
			s.Cluster.ControllerListen = addrs[name]
			break
		}
	}
	if !s.Roles.Broker() {
		// A controller-only node has no broker listener.
		return s.controllerTLS(kv, controller, protocols)
	}
	inter := kv["inter.broker.listener.name"]
	if inter == "" {
		// Kafka's default: the listener named by
		// security.inter.broker.protocol, PLAINTEXT.
		inter = "PLAINTEXT"
		if p := kv["security.inter.broker.protocol"]; p != "" {
			inter = p
		}
	}
	if _, ok := addrs[inter]; !ok {
		return fmt.Errorf("inter.broker.listener.name: no listener named %s in listeners=%s (followers fetch from it)", inter, kv["listeners"])
	}
	if controller[inter] {
		return fmt.Errorf("inter.broker.listener.name=%s is a controller listener (controller.listener.names): name a broker listener", inter)
	}
	interProtocol, ok := protocols[inter]
	if !ok {
		return fmt.Errorf("listeners: %s has no security protocol in listener.security.protocol.map", inter)
	}
	s.Listen, s.Advertise, s.InterBrokerName = addrs[inter], adv[inter], inter
	s.Listeners = nil
	if err := s.interBrokerSecurity(kv, inter, interProtocol); err != nil {
		return err
	}
	if err := s.controllerTLS(kv, controller, protocols); err != nil {
		return err
	}
	for _, name := range order {
		if name == inter || controller[name] {
			// The controller listener is bound from controller.quorum.voters.
			continue
		}
		p, ok := protocols[name]
		if !ok {
			return fmt.Errorf("listeners: %s has no security protocol in listener.security.protocol.map", name)
		}
		l, err := buildListener(kv, name, p)
		if err != nil {
			return fmt.Errorf("listener %s: %w", name, err)
		}
		l.Addr, l.Advertise = addrs[name], adv[name]
		s.Listeners = append(s.Listeners, l)
	}
	return nil
}

// listenerSetting is a listener's value of key: listener.name.<name>.<key>,
// else the global key.
func listenerSetting(kv map[string]string, name, key string) (string, bool) {
	if v, ok := kv["listener.name."+strings.ToLower(name)+"."+key]; ok {
		return v, true
	}
	v, ok := kv[key]
	return v, ok
}

func buildListener(kv map[string]string, name string, p kafka.SecurityProtocol) (broker.Listener, error) {
	l := broker.Listener{Name: name, Protocol: p}
	prefix := "listener.name." + strings.ToLower(name) + "."
	for k := range kv {
		if strings.HasPrefix(k, "listener.name.") && strings.HasPrefix(k, prefix) {
			rest := k[len(prefix):]
			if !strings.HasPrefix(rest, "ssl.") && !strings.HasPrefix(rest, "sasl.") && !strings.HasSuffix(rest, ".sasl.jaas.config") &&
				!strings.HasPrefix(rest, "oauthbearer.sasl.") && rest != "connections.max.reauth.ms" {
				return l, fmt.Errorf("%s: not a per-listener setting ringlog reads", k)
			}
		}
	}
	if p.TLS() {
		ts := listenerTLSSettings(kv, name)
		cfg, err := broker.TLSConfig(ts, nil)
		if err != nil {
			return l, err
		}
		l.TLS = cfg
		if l.PrincipalRules, err = kafka.ParsePrincipalRules(ts["ssl.principal.mapping.rules"]); err != nil {
			return l, err
		}
	}
	if !p.SASL() {
		return l, nil
	}
	mechs, _ := listenerSetting(kv, name, "sasl.enabled.mechanisms")
	l.Mechanisms = splitList(mechs)
	if len(l.Mechanisms) == 0 {
		return l, fmt.Errorf("no SASL mechanism: set sasl.enabled.mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; Kafka's default, GSSAPI, is not offered)")
	}
	if slices.Contains(l.Mechanisms, sasl.OAuthBearer) {
		oauth, err := buildOAuth(kv, name)
		if err != nil {
			return l, err
		}
		l.OAuth = oauth
	}
	if jaas, ok := kv[prefix+"plain.sasl.jaas.config"]; ok {
		users, err := plainJAAS(jaas)
		if err != nil {
			return l, fmt.Errorf("%splain.sasl.jaas.config: %w", prefix, err)
		}
		l.PlainUsers = users
	}
	if v, ok := listenerSetting(kv, name, "connections.max.reauth.ms"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return l, fmt.Errorf("connections.max.reauth.ms=%s: want a count of milliseconds", v)
		}
		l.ReauthMax = time.Duration(n) * time.Millisecond
	}
	if v, ok := listenerSetting(kv, name, "sasl.server.max.receive.size"); ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 || n > math.MaxInt32 {
			return l, fmt.Errorf("sasl.server.max.receive.size=%s: want a positive byte count", v)
		}
		l.MaxReceiveBytes = int32(n)
	}
	if v, ok := kv["ringlog.sasl.authentication.timeout.ms"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return l, fmt.Errorf("ringlog.sasl.authentication.timeout.ms=%s: want a positive count of milliseconds", v)
		}
		l.AuthTimeout = time.Duration(n) * time.Millisecond
	}
	return l, nil
}

// listenerTLSSettings are a listener's ssl.* settings: the global ones,
// overridden by listener.name.<name>.ssl.*.
func listenerTLSSettings(kv map[string]string, name string) broker.TLSSettings {
	prefix := "listener.name." + strings.ToLower(name) + "."
	ts := broker.TLSSettings{}
	for k := range kv {
		if strings.HasPrefix(k, "ssl.") {
			if _, over := kv[prefix+k]; !over {
				ts[k] = kv[k]
			}
		}
		if strings.HasPrefix(k, prefix+"ssl.") {
			ts[k[len(prefix):]] = kv[k]
		}
	}
	return ts
}

// parseListeners reads NAME://host:port,... into addresses by name and the
// names in order.
func parseListeners(key, v string) (map[string]string, []string, error) {
	addrs := map[string]string{}
	var order []string
	for _, e := range splitList(v) {
		name, addr, ok := strings.Cut(e, "://")
		if !ok || name == "" {
			return nil, nil, fmt.Errorf("%s: %q: want NAME://host:port", key, e)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, nil, fmt.Errorf("%s: %q: %w", key, e, err)
		}
		if _, dup := addrs[name]; dup {
			return nil, nil, fmt.Errorf("%s: %s named twice", key, name)
		}
		addrs[name] = addr
		order = append(order, name)
	}
	if len(order) == 0 {
		return nil, nil, fmt.Errorf("%s: no listener", key)
	}
	return addrs, order, nil
}

func splitList(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

var jaasOption = regexp.MustCompile(`([A-Za-z_][\w.-]*)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// plainJAAS reads the users of a PlainLoginModule JAAS entry: each
// user_<name>="<password>" option (username and password are the
// broker's own as a client, read by interBrokerSecurity on the
// inter-broker listener).
func plainJAAS(v string) (map[string]string, error) {
	opts, err := jaasOptions(v, plainLoginModule)
	if err != nil {
		return nil, fmt.Errorf("want %s required user_<name>=\"<password>\" ...;", plainLoginModule)
	}
	users := map[string]string{}
	for k, v := range opts {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			users[name] = v
		}
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("no user_<name>=\"<password>\" option")
	}
	return users, nil
}

// The JAAS login modules whose entries ringlog reads.
const (
	plainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// jaasOptions reads the key="value" options of a JAAS entry of module
// (`<module> required key="value" ...;`).
func jaasOptions(v, module string) (map[string]string, error) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, module) {
		return nil, fmt.Errorf("want %s required [option=\"value\" ...];", module)
	}
	opts := map[string]string{}
	for _, m := range jaasOption.FindAllStringSubmatch(v, -1) {
		opts[m[1]] = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[2])
	}
	return opts, nil
}

// controllerTLS sets the controller port's mutual TLS when the controller
// listener (controller.listener.names) maps to SSL; PLAINTEXT leaves it
// trusting its network, and the SASL protocols are refused (the port
// authenticates nodes by certificate only).
func (s *settings) controllerTLS(kv map[string]string, names map[string]bool, protocols map[string]kafka.SecurityProtocol) error {
	s.Cluster.TLS = nil
	for name := range names {
		p, ok := protocols[name]
		switch {
		case !ok || p == kafka.Plaintext:
			continue
		case p != kafka.SSL:
			return fmt.Errorf("controller listener %s is %s: the controller port is PLAINTEXT or SSL (mutual TLS, CN=node-<id>)", name, p)
		}
		prefix := "listener.name." + strings.ToLower(name) + "."
		ts := broker.TLSSettings{}
		for k, v := range kv {
			if strings.HasPrefix(k, "ssl.") && k != "ssl.principal.mapping.rules" {
				ts[k] = v
			}
		}
		for k, v := range kv {
			if strings.HasPrefix(k, prefix+"ssl.") {
				ts[k[len(prefix):]] = v
			}
		}
		cfg, err := broker.ControllerTLS(ts, nil)
		if err != nil {
			return fmt.Errorf("controller listener %s: %w", name, err)
		}
		s.Cluster.TLS = cfg
	}
	return nil
}
