package kafka

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalRule is one rule of ssl.principal.mapping.rules: a client
// certificate's distinguished name (RFC 2253, as Kafka prints it) that
// matches Pattern becomes the name Replacement makes of it ($1 ...),
// lowered or uppercased when Case is 'L' or 'U'. A rule with a nil
// Pattern is DEFAULT: the name is the distinguished name itself.
type PrincipalRule struct {
	Pattern     *regexp.Regexp
	Replacement string
	Case        byte
}

// ParsePrincipalRules parses ssl.principal.mapping.rules: comma-separated
// RULE:pattern/replacement/[LU] and DEFAULT entries, tried in order (an
// empty value is DEFAULT alone). Patterns are Go regular expressions
// (RE2), which read Kafka's usual rules as Java does; a rule whose
// pattern does not compile is an error that names it.
func ParsePrincipalRules(v string) ([]PrincipalRule, error) {
	if strings.TrimSpace(v) == "" {
		return []PrincipalRule{{}}, nil
	}
	var rules []PrincipalRule
	rest := strings.TrimSpace(v)
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			rules = append(rules, PrincipalRule{})
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			parts, n, err := splitRule(rest[len("RULE:"):])
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: %w in %q", err, rest)
			}
			re, err := regexp.Compile(parts[0])
			if err != nil {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: pattern %q: %w", parts[0], err)
			}
			r := PrincipalRule{Pattern: re, Replacement: parts[1]}
			rest = rest[len("RULE:")+n:]
			if len(rest) > 0 && (rest[0] == 'L' || rest[0] == 'U') {
				r.Case, rest = rest[0], rest[1:]
			}
			rules = append(rules, r)
		default:
			return nil, fmt.Errorf("ssl.principal.mapping.rules: %q is neither RULE:pattern/replacement/[LU] nor DEFAULT", rest)
		}
		rest = strings.TrimSpace(rest)
		if rest != "" {
			if rest[0] != ',' {
				return nil, fmt.Errorf("ssl.principal.mapping.rules: %q after a rule", rest)
			}
			rest = strings.TrimSpace(rest[1:])
		}
	}
	return rules, nil
}

// splitRule reads "pattern/replacement/" (a backslash escapes a slash)
// and returns the two parts and the bytes read.
func splitRule(s string) ([2]string, int, error) {
	var parts [2]string
	var b strings.Builder
	part := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		case c == '/':
			parts[part] = b.String()
			b.Reset()
			if part++; part == 2 {
				return parts, i + 1, nil
			}
		default:
			b.WriteByte(c)
		}
	}
	return parts, 0, fmt.Errorf("unterminated rule")
}

// CertPrincipal is the principal of a client certificate under rules:
// "User:" and the name the first matching rule makes of its subject; with
// no rule matching, the subject itself (as Kafka's DEFAULT).
func CertPrincipal(cert *x509.Certificate, rules []PrincipalRule) string {
	dn := cert.Subject.String()
	for _, r := range rules {
		if r.Pattern == nil {
			return "User:" + dn
		}
		m := r.Pattern.FindStringSubmatchIndex(dn)
		if m == nil || m[0] != 0 || m[1] != len(dn) {
			continue // Kafka's rules match the whole name
		}
		name := string(r.Pattern.ExpandString(nil, r.Replacement, dn, m))
		switch r.Case {
		case 'L':
			name = strings.ToLower(name)
		case 'U':
			name = strings.ToUpper(name)
		}
		return "User:" + name
	}
	return "User:" + dn
}
