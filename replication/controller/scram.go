package controller

import (
	"context"
	"maps"
	"slices"
)

// SCRAM credentials live in the quorum, as Kafka keeps them in its metadata
// log (UserScramCredentialRecord): every broker authenticates a SCRAM
// client against its own image, and AlterUserScramCredentials on any
// broker changes them for all. What is stored is what RFC 5802's server
// keeps (salt, iterations, StoredKey, ServerKey), never a password.

// ScramKey names one credential: a user and a mechanism (Kafka's
// numbering: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
type ScramKey struct {
	User      string
	Mechanism int8
}

// ScramCredential is a stored SCRAM credential.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// ScramChange is one alteration: an upsert of Credential, or, with
// Delete, its removal.
type ScramChange struct {
	ScramKey
	Delete     bool
	Credential ScramCredential
}

// Limits of a stored credential, checked before proposing and when
// decoding (the bytes of a hash are at most SHA-512's 64; Kafka bounds
// nothing tighter, so a salt may be longer).
const (
	maxScramChanges   = 1000
	maxScramUserBytes = 1024
	maxScramKeyBytes  = 64
	maxScramSaltBytes = 1024
)

// ScramCredential returns a user's credential for a mechanism.
func (img *Image) ScramCredential(user string, mechanism int8) (ScramCredential, bool) {
	c, ok := img.scram[ScramKey{user, mechanism}]
	return c, ok
}

// ScramCredentials returns every stored credential's key and iteration
// count, sorted by user and mechanism (DescribeUserScramCredentials).
func (img *Image) ScramCredentials() []ScramChange {
	keys := slices.SortedFunc(maps.Keys(img.scram), compareScramKeys)
	out := make([]ScramChange, 0, len(keys))
	for _, k := range keys {
		out = append(out, ScramChange{ScramKey: k, Credential: ScramCredential{Iterations: img.scram[k].Iterations}})
	}
	return out
}

func compareScramKeys(a, b ScramKey) int {
	switch {
	case a.User < b.User:
		return -1
	case a.User > b.User:
		return 1
	}
	return int(a.Mechanism) - int(b.Mechanism)
}

// AlterScramCredentials applies changes in one entry: all of them or, on a
// validation error, none. Deleting a credential that does not exist is not
// an error here (the Kafka handler answers RESOURCE_NOT_FOUND from the
// image before it calls; a race with another deletion ends the same).
func (c *Controller) AlterScramCredentials(ctx context.Context, changes []ScramChange) error {
	if err := validateScram(changes); err != nil {
		return err
	}
	_, err := c.submit(ctx, &command{typ: cmdAlterScram, scram: slices.Clone(changes)})
	return err
}

func validateScram(changes []ScramChange) error {
	if len(changes) > maxScramChanges {
		return errf(ErrInvalidRequest, "%d SCRAM changes in one request, at most %d", len(changes), maxScramChanges)
	}
	seen := map[ScramKey]bool{}
	for _, ch := range changes {
		if err := validateScramChange(ch); err != nil {
			return err
		}
		if seen[ch.ScramKey] {
			return errf(ErrInvalidRequest, "SCRAM credential of %q changed twice", ch.User)
		}
		seen[ch.ScramKey] = true
	}
	return nil
}

func validateScramChange(ch ScramChange) error {
	if ch.User == "" || len(ch.User) > maxScramUserBytes {
		return errf(ErrInvalidRequest, "SCRAM user name of %d bytes", len(ch.User))
	}
	if ch.Mechanism != 1 && ch.Mechanism != 2 {
		return errf(ErrInvalidRequest, "SCRAM mechanism %d", ch.Mechanism)
	}
	if ch.Delete {
		return nil
	}
	cr := ch.Credential
	if cr.Iterations < 1 || len(cr.Salt) == 0 || len(cr.Salt) > maxScramSaltBytes ||
		len(cr.StoredKey) == 0 || len(cr.StoredKey) > maxScramKeyBytes || len(cr.ServerKey) == 0 || len(cr.ServerKey) > maxScramKeyBytes {
		return errf(ErrInvalidRequest, "SCRAM credential of %q malformed", ch.User)
	}
	return nil
}

func (t *tx) alterScram(c *command) result {
	if err := validateScram(c.scram); err != nil {
		return result{err: err}
	}
	next := maps.Clone(t.base.scram)
	if next == nil {
		next = map[ScramKey]ScramCredential{}
	}
	for _, ch := range c.scram {
		if ch.Delete {
			delete(next, ch.ScramKey)
		} else {
			next[ch.ScramKey] = ch.Credential
		}
	}
	t.scram = next
	return result{}
}

func encodeScramChanges(e *encoder, changes []ScramChange) {
	e.uvarint(len(changes))
	for _, ch := range changes {
		e.str(ch.User)
		e.u8(uint8(ch.Mechanism))
		e.bool(ch.Delete)
		if !ch.Delete {
			encodeScramCredential(e, ch.Credential)
		}
	}
}

func decodeScramChanges(d *decoder) []ScramChange {
	n := d.count(3)
	if n == 0 {
		return nil
	}
	out := make([]ScramChange, 0, n)
	for range n {
		ch := ScramChange{ScramKey: ScramKey{User: d.str(), Mechanism: int8(d.u8())}, Delete: d.bool()}
		if !ch.Delete {
			ch.Credential = decodeScramCredential(d)
		}
		if d.err != nil {
			return nil
		}
		out = append(out, ch)
	}
	return out
}

func encodeScramCredential(e *encoder, c ScramCredential) {
	e.i32(c.Iterations)
	e.bytes(c.Salt)
	e.bytes(c.StoredKey)
	e.bytes(c.ServerKey)
}

func decodeScramCredential(d *decoder) ScramCredential {
	return ScramCredential{Iterations: d.i32(), Salt: d.bytes(), StoredKey: d.bytes(), ServerKey: d.bytes()}
}

// encodeScramImage writes the image's credentials, sorted, for a snapshot.
func encodeScramImage(e *encoder, m map[ScramKey]ScramCredential) {
	keys := slices.SortedFunc(maps.Keys(m), compareScramKeys)
	changes := make([]ScramChange, 0, len(keys))
	for _, k := range keys {
		changes = append(changes, ScramChange{ScramKey: k, Credential: m[k]})
	}
	encodeScramChanges(e, changes)
}

// decodeScramImage reads what encodeScramImage wrote and checks it.
func decodeScramImage(d *decoder) map[ScramKey]ScramCredential {
	changes := decodeScramChanges(d)
	if d.err != nil {
		return nil
	}
	m := make(map[ScramKey]ScramCredential, len(changes))
	for _, ch := range changes {
		if err := validateScramChange(ch); err != nil || ch.Delete {
			d.fail("SCRAM credential of %q in a snapshot: %v", ch.User, err)
			return nil
		}
		if _, dup := m[ch.ScramKey]; dup {
			d.fail("SCRAM credential of %q twice", ch.User)
			return nil
		}
		m[ch.ScramKey] = ch.Credential
	}
	return m
}
