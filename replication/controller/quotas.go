package controller

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"
)

// Client quotas are records of the quorum (Kafka's ClientQuotaRecord),
// set with AlterClientQuotas: for an entity (a user, a client id, both,
// or an IP address; a null name is the entity type's default), a value
// per quota key. Validation is Kafka's ClientQuotaControlManager's.

// Quota entity types and keys, by Kafka's names.
const (
	QuotaUser     = "user"
	QuotaClientID = "client-id"
	QuotaIP       = "ip"

	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// Bounds of the quota commands.
const (
	maxQuotaEntities  = 10000
	maxQuotaNameBytes = 1024
)

// QuotaEntityPart is one component of a quota entity; a nil Name is the
// default entity of the type.
type QuotaEntityPart struct {
	Type string
	Name *string
}

// QuotaEntity is an entity, its parts sorted by type.
type QuotaEntity []QuotaEntityPart

// QuotaOp sets a key (Remove false) or removes it.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// QuotaAlteration is one entity's changes in an AlterClientQuotas.
type QuotaAlteration struct {
	Entity QuotaEntity
	Ops    []QuotaOp
}

// Quota is an entity and its values, as the image holds it.
type Quota struct {
	Entity QuotaEntity
	Values map[string]float64
}

// quotaKeyType says how a key's value must look: integral (and its
// largest value) or a double.
var quotaKeys = map[string]float64{ // key: largest value; 0: any double
	QuotaProducerByteRate:       math.MaxInt64,
	QuotaConsumerByteRate:       math.MaxInt64,
	QuotaRequestPercentage:      0,
	QuotaControllerMutationRate: 0,
	QuotaConnectionCreationRate: math.MaxInt32,
}

// Quotas lists the image's quotas, sorted by entity.
func (img *Image) Quotas() []Quota {
	keys := slices.Sorted(maps.Keys(img.quotas))
	out := make([]Quota, 0, len(keys))
	for _, k := range keys {
		out = append(out, img.quotas[k])
	}
	return out
}

// Quota returns the values of exactly entity (sorted by type).
func (img *Image) Quota(entity QuotaEntity) (map[string]float64, bool) {
	q, ok := img.quotas[entity.Key()]
	return q.Values, ok
}

// Key is the entity's map key: its parts, each type and name (or a mark
// for the default), in order.
func (e QuotaEntity) Key() string {
	var b strings.Builder
	for _, p := range e {
		b.WriteString(p.Type)
		if p.Name == nil {
			b.WriteString("\x00d")
		} else {
			b.WriteString("\x00n")
			b.WriteString(*p.Name)
		}
		b.WriteByte(0xff)
	}
	return b.String()
}

// SortQuotaEntity sorts an entity's parts by type.
func SortQuotaEntity(e QuotaEntity) {
	slices.SortFunc(e, func(a, b QuotaEntityPart) int { return strings.Compare(a.Type, b.Type) })
}

// ValidateQuotaAlteration checks one entity's changes as Kafka does; the
// error is INVALID_REQUEST with Kafka's message. The entity must be
// sorted (SortQuotaEntity).
func ValidateQuotaAlteration(a QuotaAlteration) error {
	if len(a.Entity) == 0 {
		return errf(ErrInvalidRequest, "Invalid empty client quota entity")
	}
	var user, client, ip bool
	for i, p := range a.Entity {
		if i > 0 && a.Entity[i-1].Type == p.Type {
			return errf(ErrInvalidRequest, "Invalid client quota entity, duplicate entity entry %s", p.Type)
		}
		switch p.Type {
		case QuotaUser:
			user = true
		case QuotaClientID:
			client = true
		case QuotaIP:
			ip = true
		default:
			return errf(ErrInvalidRequest, "Unhandled client quota entity type: %s", p.Type)
		}
		if p.Name != nil && *p.Name == "" {
			return errf(ErrInvalidRequest, "Empty %s not supported", p.Type)
		}
		if p.Name != nil && len(*p.Name) > maxQuotaNameBytes {
			return errf(ErrInvalidRequest, "%s name of %d bytes, at most %d", p.Type, len(*p.Name), maxQuotaNameBytes)
		}
	}
	if ip && (user || client) {
		return errf(ErrInvalidRequest, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
	}
	if ip {
		if n := a.Entity[0].Name; n != nil {
			if _, err := netip.ParseAddr(*n); err != nil {
				return errf(ErrInvalidRequest, "%s is not a valid IP or resolvable host.", *n)
			}
		}
	}
	for _, op := range a.Ops {
		if op.Remove {
			continue
		}
		largest, known := quotaKeys[op.Key]
		if known && (op.Key == QuotaConnectionCreationRate) != ip {
			known = false
		}
		switch {
		case !known:
			return errf(ErrInvalidRequest, "Invalid configuration key %s", op.Key)
		case !(op.Value > 0):
			return errf(ErrInvalidRequest, "Quota %s must be greater than 0", op.Key)
		case largest == 0:
		case op.Value > largest:
			kind := "a LONG"
			if largest == math.MaxInt32 {
				kind = "an INT"
			}
			return errf(ErrInvalidRequest, "Proposed value for %s is too large for %s.", op.Key, kind)
		case math.Abs(math.Mod(op.Value, 1)) > 1e-6:
			return errf(ErrInvalidRequest, "%s cannot be a fractional value.", op.Key)
		}
	}
	return nil
}

// AlterClientQuotas applies each entity's changes that pass validation
// and returns one error (or nil) per alteration; with validateOnly it
// only validates. The entities must be sorted (SortQuotaEntity).
func (c *Controller) AlterClientQuotas(ctx context.Context, as []QuotaAlteration, validateOnly bool) ([]error, error) {
	if len(as) > maxQuotaEntities {
		return nil, errf(ErrInvalidRequest, "%d quota entities in one request, at most %d", len(as), maxQuotaEntities)
	}
	if validateOnly {
		out := make([]error, len(as))
		for i, a := range as {
			out[i] = ValidateQuotaAlteration(a)
		}
		return out, nil
	}
	r, err := c.submit(ctx, &command{typ: cmdAlterClientQuotas, quotas: as})
	if err != nil {
		return nil, err
	}
	d := &decoder{b: r.payload}
	out := make([]error, d.count(1))
	for i := range out {
		if msg := d.str(); msg != "" {
			out[i] = errf(ErrInvalidRequest, "%s", msg)
		}
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	if len(out) != len(as) {
		return nil, errf(ErrInvalidRequest, "AlterClientQuotas answered %d entities of %d", len(out), len(as))
	}
	return out, nil
}

// alterClientQuotas applies the valid alterations. Payload: the count,
// then per alteration the message of its refusal ("" when applied).
func (t *tx) alterClientQuotas(c *command) result {
	if len(c.quotas) > maxQuotaEntities {
		return result{err: errf(ErrInvalidRequest, "%d quota entities, at most %d", len(c.quotas), maxQuotaEntities)}
	}
	next := t.quotaMap()
	copied := false
	e := &encoder{}
	e.uvarint(len(c.quotas))
	for _, a := range c.quotas {
		if !slices.IsSortedFunc(a.Entity, func(x, y QuotaEntityPart) int { return strings.Compare(x.Type, y.Type) }) {
			e.str("client quota entity not sorted by type")
			continue
		}
		if err := ValidateQuotaAlteration(a); err != nil {
			e.str(strings.TrimPrefix(err.Error(), ErrInvalidRequest.Error()+": "))
			continue
		}
		e.str("")
		if !copied {
			next, copied = maps.Clone(next), true
			if next == nil {
				next = map[string]Quota{}
			}
		}
		k := a.Entity.Key()
		q, ok := next[k]
		if !ok {
			q = Quota{Entity: a.Entity}
		}
		q.Values = maps.Clone(q.Values)
		if q.Values == nil {
			q.Values = map[string]float64{}
		}
		for _, op := range a.Ops {
			if op.Remove {
				delete(q.Values, op.Key)
			} else {
				q.Values[op.Key] = op.Value
			}
		}
		if len(q.Values) == 0 {
			delete(next, k)
		} else {
			next[k] = q
		}
	}
	if copied {
		t.quotas, t.quotasChanged = next, true
	}
	return result{payload: e.b}
}

func (t *tx) quotaMap() map[string]Quota {
	if t.quotasChanged {
		return t.quotas
	}
	return t.base.quotas
}

//	alteration: entity (count, part...) | ops (count, op...)
//	part:       type str | name nstr
//	op:         key str | remove bool | value f64 (when not removed)
//	quota (snapshot): entity | values (count, key str | value f64 ...), keys sorted

func encodeQuotaEntity(e *encoder, ent QuotaEntity) {
	e.uvarint(len(ent))
	for _, p := range ent {
		e.str(p.Type)
		e.bool(p.Name != nil)
		if p.Name != nil {
			e.str(*p.Name)
		}
	}
}

func decodeQuotaEntity(d *decoder) QuotaEntity {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	out := make(QuotaEntity, 0, n)
	for range n {
		p := QuotaEntityPart{Type: d.str()}
		if d.bool() {
			s := d.str()
			p.Name = &s
		}
		if d.err != nil {
			return nil
		}
		out = append(out, p)
	}
	return out
}

func encodeQuotaAlterations(e *encoder, as []QuotaAlteration) {
	e.uvarint(len(as))
	for _, a := range as {
		encodeQuotaEntity(e, a.Entity)
		e.uvarint(len(a.Ops))
		for _, op := range a.Ops {
			e.str(op.Key)
			e.bool(op.Remove)
			if !op.Remove {
				e.u64(math.Float64bits(op.Value))
			}
		}
	}
}

func decodeQuotaAlterations(d *decoder) []QuotaAlteration {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	out := make([]QuotaAlteration, 0, n)
	for range n {
		a := QuotaAlteration{Entity: decodeQuotaEntity(d)}
		m := d.count(2)
		for range m {
			op := QuotaOp{Key: d.str(), Remove: d.bool()}
			if !op.Remove {
				op.Value = math.Float64frombits(d.u64())
			}
			if d.err != nil {
				return nil
			}
			a.Ops = append(a.Ops, op)
		}
		if d.err != nil {
			return nil
		}
		out = append(out, a)
	}
	return out
}

func encodeQuotaImage(e *encoder, qs map[string]Quota) {
	keys := slices.Sorted(maps.Keys(qs))
	e.uvarint(len(keys))
	for _, k := range keys {
		q := qs[k]
		encodeQuotaEntity(e, q.Entity)
		names := slices.Sorted(maps.Keys(q.Values))
		e.uvarint(len(names))
		for _, n := range names {
			e.str(n)
			e.u64(math.Float64bits(q.Values[n]))
		}
	}
}

func decodeQuotaImage(d *decoder) map[string]Quota {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	out := make(map[string]Quota, n)
	for range n {
		q := Quota{Entity: decodeQuotaEntity(d)}
		m := d.count(9)
		q.Values = make(map[string]float64, m)
		for range m {
			q.Values[d.str()] = math.Float64frombits(d.u64())
		}
		if d.err != nil {
			return nil
		}
		k := q.Entity.Key()
		if _, dup := out[k]; dup {
			d.fail("quota entity %v twice", q.Entity)
			return nil
		}
		out[k] = q
	}
	return out
}

// checkQuotas asserts what every applied state keeps of its quotas.
func checkQuotas(qs map[string]Quota) error {
	for k, q := range qs {
		if !slices.IsSortedFunc(q.Entity, func(x, y QuotaEntityPart) int { return strings.Compare(x.Type, y.Type) }) {
			return fmt.Errorf("quota entity %v not sorted by type", q.Entity)
		}
		if q.Entity.Key() != k {
			return fmt.Errorf("quota of %v filed under another key", q.Entity)
		}
		if len(q.Values) == 0 {
			return fmt.Errorf("quota of %v has no value", q.Entity)
		}
		ops := make([]QuotaOp, 0, len(q.Values))
		for key, v := range q.Values {
			ops = append(ops, QuotaOp{Key: key, Value: v})
		}
		if err := ValidateQuotaAlteration(QuotaAlteration{Entity: q.Entity, Ops: ops}); err != nil {
			return fmt.Errorf("quota of %v: %w", q.Entity, err)
		}
	}
	return nil
}
