package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"ringlog/internal/fsutil"
	"ringlog/internal/sasl"
	"ringlog/replication/controller"
)

// ScramBootstrap is a SCRAM credential put into the metadata quorum at a
// broker's first start, the part of Kafka's `kafka-storage format
// --add-scram` that a cluster secured with SCRAM needs: the brokers' own
// credential for a SASL inter-broker listener, or an administrator's, must
// exist before anyone can authenticate to create it.
type ScramBootstrap struct {
	User string
	// Mechanism is SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string
	Password  string
	// Iterations of the salted password; 4096 (Kafka's default) when 0.
	Iterations int
}

// scramBootstrapDone, in the data directory, records that the broker put
// its bootstrap credentials into the quorum: later starts leave the quorum
// alone, so that a credential deleted or changed through
// AlterUserScramCredentials is not brought back by a restart with the same
// flags (Kafka formats a node once).
const scramBootstrapDone = "scram-bootstrap.done"

func (s ScramBootstrap) check() error {
	if s.User == "" {
		return errors.New("a SCRAM bootstrap credential needs a name")
	}
	if sasl.ScramMechanismNamed(s.Mechanism) == sasl.ScramUnknown {
		return fmt.Errorf("SCRAM bootstrap credential of %s: mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", s.User, s.Mechanism)
	}
	if s.Password == "" {
		return fmt.Errorf("SCRAM bootstrap credential of %s: no password", s.User)
	}
	if it := s.Iterations; it != 0 && (it < sasl.ScramIterationsMin || it > sasl.ScramIterationsMax) {
		return fmt.Errorf("SCRAM bootstrap credential of %s: iterations %d: want %d to %d", s.User, it, sasl.ScramIterationsMin, sasl.ScramIterationsMax)
	}
	return nil
}

// bootstrapScram puts the configured credentials that the quorum does not
// hold yet into it, once per data directory (scramBootstrapDone). Brokers
// of a cluster given the same credentials race harmlessly: each writes
// only what it finds missing, and a credential written twice authenticates
// the same password.
func (b *Broker) bootstrapScram(ctx context.Context) error {
	if len(b.cfg.BootstrapScram) == 0 {
		return nil
	}
	done := filepath.Join(b.cfg.DataDir, scramBootstrapDone)
	if _, err := os.Stat(done); err == nil {
		b.log.Info("SCRAM bootstrap credentials were written at an earlier start; the quorum's are left as they are", "marker", done)
		return nil
	}
	img := b.cl.node.Controller().Image()
	var changes []controller.ScramChange
	for _, s := range b.cfg.BootstrapScram {
		m := sasl.ScramMechanismNamed(s.Mechanism)
		if _, ok := img.ScramCredential(s.User, int8(m)); ok {
			continue
		}
		it := s.Iterations
		if it == 0 {
			it = sasl.ScramIterationsMin
		}
		salt := make([]byte, 32)
		rand.Read(salt)
		salted, err := sasl.SaltPassword(m, s.Password, salt, it)
		if err != nil {
			return fmt.Errorf("broker: SCRAM bootstrap credential of %s: %w", s.User, err)
		}
		c := sasl.NewCredential(m, salted, salt, int32(it))
		changes = append(changes, controller.ScramChange{ScramKey: controller.ScramKey{User: s.User, Mechanism: int8(m)},
			Credential: controller.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}})
	}
	if len(changes) > 0 {
		if err := b.cl.node.Controller().AlterScramCredentials(ctx, changes); err != nil {
			return fmt.Errorf("broker: writing the SCRAM bootstrap credentials into the quorum: %w", err)
		}
	}
	b.log.Info("SCRAM bootstrap credentials in the quorum", "written", len(changes), "present", len(b.cfg.BootstrapScram)-len(changes))
	var note []byte
	for _, c := range changes {
		note = fmt.Appendf(note, "%s %s\n", c.User, sasl.ScramMechanism(c.Mechanism))
	}
	if err := fsutil.WriteFileAtomic(b.cfg.DataDir, scramBootstrapDone, note); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	return nil
}
