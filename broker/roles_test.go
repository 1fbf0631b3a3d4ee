package broker

import (
	"strings"
	"testing"
)

func TestParseRoles(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"broker", "broker", ""},
		{"controller", "controller", ""},
		{"broker,controller", "broker,controller", ""},
		{"controller, broker", "broker,controller", ""},
		{"broker,broker", "", "duplicate role names found in `process.roles`: broker,broker"},
		{"zookeeper", "", "unknown process role 'zookeeper' (only 'broker' and 'controller' are allowed roles)"},
		{"", "", "unknown process role ''"},
	} {
		r, err := ParseRoles(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || r.String() != tc.want):
			t.Errorf("%q: %v %v, want %s", tc.in, r, err, tc.want)
		}
	}
	var zero Roles
	if !zero.Broker() || !zero.Controller() || zero.String() != "broker,controller" {
		t.Fatalf("the zero Roles is %s, want combined", zero)
	}
}

// TestValidateRoles: Kafka's rules for process.roles against the quorum
// settings, with its wording.
func TestValidateRoles(t *testing.T) {
	const voters = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
	for _, tc := range []struct {
		name  string
		roles Roles
		id    int32
		cl    ClusterConfig
		cid   string
		err   string
	}{
		{"combined local", 0, 1, ClusterConfig{}, "", ""},
		{"combined voter", 0, 1, ClusterConfig{Voters: voters}, "", ""},
		{"broker with voters", RoleBroker, 4, ClusterConfig{Voters: voters}, "", ""},
		{"controller voter", RoleController, 2, ClusterConfig{Voters: voters}, "", ""},
		{"broker alone", RoleBroker, 4, ClusterConfig{}, "", "either controller.quorum.bootstrap.servers must contain the set of bootstrap controllers or controller.quorum.voters"},
		{"controller alone", RoleController, 1, ClusterConfig{}, "", "either controller.quorum.bootstrap.servers"},
		{"broker among voters", RoleBroker, 2, ClusterConfig{Voters: voters}, "", "the node id 2 must not be included in the set of voters"},
		{"controller not a voter", RoleController, 4, ClusterConfig{Voters: voters}, "", "the node id 4 must be included in the set of voters"},
		{"combined not a voter", 0, 4, ClusterConfig{Voters: voters}, "", "the node id 4 must be included in the set of voters"},
		{"bootstrap without cluster id", RoleBroker, 4, ClusterConfig{BootstrapServers: "127.0.0.1:9093"}, "", "needs cluster.id"},
		{"bootstrap broker", RoleBroker, 4, ClusterConfig{BootstrapServers: "127.0.0.1:9093"}, "abc", ""},
		{"bad bootstrap", RoleBroker, 4, ClusterConfig{BootstrapServers: "nohost"}, "abc", "bootstrap.servers"},
		{"new controller without listener", RoleController, 4, ClusterConfig{BootstrapServers: "127.0.0.1:9093"}, "abc", "its controller listener is needed"},
		{"new controller", RoleController, 4, ClusterConfig{BootstrapServers: "127.0.0.1:9093", ControllerListen: "127.0.0.1:9096"}, "abc", ""},
	} {
		cfg := DefaultConfig()
		cfg.Roles, cfg.NodeID, cfg.Cluster, cfg.ClusterID = tc.roles, tc.id, tc.cl, tc.cid
		err := cfg.validateRoles()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
}
