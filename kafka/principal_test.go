package kafka

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
)

func TestPrincipalRules(t *testing.T) {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Example"}}}
	for _, c := range []struct{ rules, want string }{
		{"", "User:CN=Alice,OU=ServiceUsers,O=Example"},
		{"DEFAULT", "User:CN=Alice,OU=ServiceUsers,O=Example"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "User:Alice"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT", "User:alice"},
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$3/U", "User:ALICE@EXAMPLE"},
		{"RULE:^CN=Bob.*$/bob/,RULE:^CN=(.*?),.*$/x\\/$1/", "User:x/Alice"},
		{"RULE:^CN=Bob$/bob/", "User:CN=Alice,OU=ServiceUsers,O=Example"}, // nothing matches: the name
	} {
		rules, err := ParsePrincipalRules(c.rules)
		if err != nil {
			t.Fatalf("%q: %v", c.rules, err)
		}
		if got := CertPrincipal(cert, rules); got != c.want {
			t.Errorf("%q: %q, want %q", c.rules, got, c.want)
		}
	}
	for _, bad := range []string{"RULE:^CN=(.*$/$1/", "RULE:unterminated", "SOMETHING", "DEFAULT DEFAULT", "RULE:a/b/X"} {
		if _, err := ParsePrincipalRules(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
