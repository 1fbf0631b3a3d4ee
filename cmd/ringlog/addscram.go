package main

import (
	"fmt"
	"strconv"
	"strings"

	"ringlog/broker"
)

// scramFlags collects -add-scram values (the flag repeats).
type scramFlags []broker.ScramBootstrap

func (f *scramFlags) String() string { return fmt.Sprint(len(*f), " credentials") }

func (f *scramFlags) Set(v string) error {
	c, err := parseAddScram(v)
	if err != nil {
		return err
	}
	*f = append(*f, c)
	return nil
}

// parseAddScram reads a credential in the syntax of Kafka's
// `kafka-storage format --add-scram`:
//
//	SCRAM-SHA-512=[name=alice,password=alice-secret]
//	SCRAM-SHA-256=[name=broker,iterations=8192,password="a,b"]
//
// A value may be double-quoted (it may then hold commas). Kafka's salt and
// saltedpassword keys are not taken: the broker salts the password itself.
func parseAddScram(v string) (broker.ScramBootstrap, error) {
	bad := func(format string, args ...any) (broker.ScramBootstrap, error) {
		return broker.ScramBootstrap{}, fmt.Errorf("-add-scram %q: %s", v, fmt.Sprintf(format, args...))
	}
	mech, body, ok := strings.Cut(v, "=")
	if !ok || !strings.HasPrefix(body, "[") || !strings.HasSuffix(body, "]") {
		return bad("want MECHANISM=[name=...,password=...]")
	}
	c := broker.ScramBootstrap{Mechanism: strings.TrimSpace(mech)}
	if c.Mechanism != "SCRAM-SHA-256" && c.Mechanism != "SCRAM-SHA-512" {
		return bad("mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", c.Mechanism)
	}
	fields, err := splitQuoted(body[1 : len(body)-1])
	if err != nil {
		return bad("%v", err)
	}
	seen := map[string]bool{}
	for _, f := range fields {
		k, val, ok := strings.Cut(f, "=")
		k = strings.TrimSpace(k)
		if !ok {
			return bad("%q is not key=value", f)
		}
		if seen[k] {
			return bad("%s given twice", k)
		}
		seen[k] = true
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		switch k {
		case "name":
			c.User = val
		case "password":
			c.Password = val
		case "iterations":
			n, err := strconv.Atoi(val)
			if err != nil {
				return bad("iterations %q: %v", val, err)
			}
			c.Iterations = n
		case "salt", "saltedpassword":
			return bad("%s is not supported: give the password, the broker salts it", k)
		default:
			return bad("unknown key %q (want name, password, iterations)", k)
		}
	}
	if c.User == "" || c.Password == "" {
		return bad("name and password are required")
	}
	return c, nil
}

// splitQuoted splits s at commas outside double quotes.
func splitQuoted(s string) ([]string, error) {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote")
	}
	return append(out, s[start:]), nil
}
