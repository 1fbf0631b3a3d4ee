package difftest

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// decompressor inflates the compressed batches of Fetch responses.
var decompressor = kgo.DefaultDecompressor()

// A difference between the two brokers' answers to one step, at one path
// of the response (Topics[0].Partitions[1].ErrorCode).
type difference struct {
	Path           string
	Kafka, Ringlog string
}

func (d difference) String() string {
	return fmt.Sprintf("%s: kafka %s, ringlog %s", d.Path, d.Kafka, d.Ringlog)
}

// How a field the brokers may legitimately answer differently is compared.
type leniency int

const (
	// generated values (UUIDs, member ids, producer ids, cluster ids) are
	// compared only for being set on both sides or unset on both: a topic
	// id where Kafka answers the zero UUID is still a difference.
	generated leniency = iota + 1
	// ignored values are not compared at all.
	ignored
)

// allowance is one field allowed to differ. path is the field's path with
// every index written [*]; a path that starts with a dot matches that
// field at any depth. key limits the allowance to one API (-1: all).
type allowance struct {
	key  int16
	path string
	how  leniency
	why  string
}

// allowances is the whole list of fields allowed to differ. Anything else
// that differs is reported. Keep it short, and give each entry its reason.
var allowances = []allowance{
	{-1, ".ClusterID", generated, "a random id chosen when the cluster is formatted"},
	{int16(kmsg.CreateTopics), ".ThrottleMillis", generated, "a controller mutation quota's throttle left (KIP-599): the clock's; the scripts check it"},
	{int16(kmsg.CreatePartitions), ".ThrottleMillis", generated, "as CreateTopics'"},
	{int16(kmsg.DeleteTopics), ".ThrottleMillis", generated, "as CreateTopics'"},
	{-1, ".TopicID", generated, "a random UUID chosen when the topic is created (KIP-516)"},
	{-1, ".Port", ignored, "each broker listens on a free port"},
	{-1, ".ErrorMessage", ignored, "free text: the error code carries the meaning, and Kafka's wording is its own " +
		"(a client shows the text when there is one, else the code's default message)"},
	{int16(kmsg.InitProducerID), ".ProducerID", generated, "allocated by the broker, in blocks, in an order that depends on every test run before"},
	{int16(kmsg.EndTxn), ".ProducerID", generated, "the producer id an EndTxn v5 answer names (KIP-890), allocated by the broker"},
	{int16(kmsg.DescribeProducers), ".ActiveProducers[*].ProducerID", generated, "allocated by the broker (as InitProducerId's)"},
	{int16(kmsg.ListTransactions), ".TransactionStates[*].ProducerID", generated, "allocated by the broker (as InitProducerId's)"},
	{int16(kmsg.Fetch), ".SessionID", generated, "a fetch session's id, chosen by the broker (KIP-227)"},
	{int16(kmsg.Produce), ".LogAppendTime", generated, "the broker's clock (topics with message.timestamp.type=LogAppendTime)"},
	{int16(kmsg.JoinGroup), ".MemberID", generated, "the coordinator names members: client id and a UUID (KIP-394)"},
	{int16(kmsg.JoinGroup), ".LeaderID", generated, "the leader's member id, generated (KIP-394)"},
	{int16(kmsg.JoinGroup), ".Members[*].MemberID", generated, "generated member ids (KIP-394)"},
	{int16(kmsg.LeaveGroup), ".Members[*].MemberID", generated, "the generated member ids the request named (KIP-394)"},
	{int16(kmsg.DescribeGroups), ".Groups[*].Members[*].MemberID", generated, "generated member ids (KIP-394)"},
	{int16(kmsg.ConsumerGroupHeartbeat), ".MemberID", generated, "v0: the coordinator names members (KIP-848)"},
	{int16(kmsg.ConsumerGroupDescribe), ".Groups[*].Members[*].MemberID", generated, "v0: the coordinator names members (KIP-848)"},
}

// comparer walks two responses of one API side by side.
type comparer struct {
	key   int16
	diffs []difference
}

// compareResponses returns every difference between Kafka's response and
// ringlog's, field by field, but for the allowances.
func compareResponses(kafka, ringlog kmsg.Response) []difference {
	c := &comparer{key: kafka.Key()}
	c.walk("", "", reflect.ValueOf(kafka).Elem(), reflect.ValueOf(ringlog).Elem())
	return c.diffs
}

func (c *comparer) allowance(norm string) *allowance {
	for i := range allowances {
		a := &allowances[i]
		if a.key != -1 && a.key != c.key {
			continue
		}
		if a.path == norm || a.path == "."+norm || (strings.HasPrefix(a.path, ".") && strings.HasSuffix(norm, a.path)) {
			return a
		}
	}
	return nil
}

func (c *comparer) report(path string, a, b reflect.Value) {
	c.diffs = append(c.diffs, difference{Path: path, Kafka: format(path, a), Ringlog: format(path, b)})
}

// walk compares a and b (of the same type) at path; norm is the path with
// indices written [*], which allowances match.
func (c *comparer) walk(path, norm string, a, b reflect.Value) {
	if al := c.allowance(norm); al != nil {
		if al.how == generated && isSet(a) != isSet(b) {
			c.report(path, a, b)
		}
		return
	}
	switch a.Kind() {
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[kmsg.Tags]() {
			ta, tb := tags(a), tags(b)
			if !reflect.DeepEqual(ta, tb) {
				c.diffs = append(c.diffs, difference{Path: path, Kafka: fmt.Sprint(ta), Ringlog: fmt.Sprint(tb)})
			}
			return
		}
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() || f.Name == "Version" {
				continue
			}
			p, n := f.Name, f.Name
			if path != "" {
				p, n = path+"."+f.Name, norm+"."+f.Name
			}
			if f.Anonymous {
				p, n = path, norm
			}
			if f.Name == "RecordBatches" && f.Type == reflect.TypeFor[[]byte]() {
				ba, ea := decodeBatches(a.Field(i).Bytes())
				bb, eb := decodeBatches(b.Field(i).Bytes())
				c.walk(p, n, reflect.ValueOf(ba), reflect.ValueOf(bb))
				if ea != eb {
					c.diffs = append(c.diffs, difference{Path: p + " (after the whole batches)",
						Kafka: cmp.Or(ea, "nothing"), Ringlog: cmp.Or(eb, "nothing")})
				}
				continue
			}
			c.walk(p, n, a.Field(i), b.Field(i))
		}
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				c.report(path, a, b)
			}
			return
		}
		c.walk(path, norm, a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Type().Elem().Kind() == reflect.Uint8 {
			if a.IsNil() != b.IsNil() || string(a.Bytes()) != string(b.Bytes()) {
				c.report(path, a, b)
			}
			return
		}
		if ka, kb, ok := keyed(a), keyed(b), identity(a.Type().Elem()) != nil; ok {
			c.walkKeyed(path, norm, ka, kb)
			return
		}
		for i := range max(a.Len(), b.Len()) {
			p := path + "[" + strconv.Itoa(i) + "]"
			switch {
			case i >= a.Len():
				c.diffs = append(c.diffs, difference{Path: p, Kafka: "absent", Ringlog: summary(b.Index(i))})
			case i >= b.Len():
				c.diffs = append(c.diffs, difference{Path: p, Kafka: summary(a.Index(i)), Ringlog: "absent"})
			default:
				c.walk(p, norm+"[*]", a.Index(i), b.Index(i))
			}
		}
	case reflect.Array:
		if !a.Equal(b) {
			c.report(path, a, b)
		}
	case reflect.Map:
		panic("difftest: maps in responses are not compared: " + path)
	default:
		if !a.Equal(b) {
			c.report(path, a, b)
		}
	}
}

// isSet tells a generated value from its absence: a nil pointer, an empty
// string or byte slice, the zero UUID and negative numbers (-1 is Kafka's
// "none") are unset.
func isSet(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer:
		return !v.IsNil() && isSet(v.Elem())
	case reflect.String, reflect.Slice:
		return v.Len() > 0
	case reflect.Array:
		return !v.IsZero()
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		return v.Int() >= 0
	}
	return !v.IsZero()
}

func tags(v reflect.Value) map[uint32]string {
	t := v.Interface().(kmsg.Tags)
	m := map[uint32]string{}
	t.Each(func(k uint32, b []byte) { m[k] = hex.EncodeToString(b) })
	return m
}

// identityFields name what an array element is about. Kafka builds many
// arrays from hash maps (the topics of Metadata, a resource's configs, the
// groups of ListGroups), so their order means nothing and clients match
// elements by these fields: elements of such arrays are matched by them,
// and paths name them by them (Configs[retention.ms], Partitions[1]). The
// members of a group are told apart by their client ids, which the scripts
// make distinct (their member ids are generated).
var identityFields = []string{"ResourceType", "ResourceName", "Topic", "Name", "Group", "Partition", "ApiKey", "NodeID", "ClientID"}

// identityOf overrides identityFields for element types that have one of
// those fields as a value: FindCoordinator's coordinators are about a key,
// and the node is the answer.
var identityOf = map[reflect.Type][]string{
	reflect.TypeFor[kmsg.FindCoordinatorResponseCoordinator](): {"Key"},
	// ListTransactions' transactions are about their transactional ids.
	reflect.TypeFor[kmsg.ListTransactionsResponseTransactionState](): {"TransactionalID"},
}

// identity returns the indices of an element type's identity fields (nil:
// none, the array is compared by position).
func identity(t reflect.Type) []int {
	if t.Kind() != reflect.Struct {
		return nil
	}
	names := identityFields
	if o, ok := identityOf[t]; ok {
		names = o
	}
	var fields []int
	for _, name := range names {
		if f, ok := t.FieldByName(name); ok && len(f.Index) == 1 {
			fields = append(fields, f.Index[0])
		}
	}
	return fields
}

// element is an array element and its key.
type element struct {
	key string
	v   reflect.Value
}

// keyed returns the elements of a slice of structs with identity fields,
// sorted by key; a key seen twice gets "#2", "#3" added.
func keyed(v reflect.Value) []element {
	fields := identity(v.Type().Elem())
	if fields == nil {
		return nil
	}
	out := make([]element, v.Len())
	seen := map[string]int{}
	for i := range out {
		var parts []string
		for _, f := range fields {
			fv := v.Index(i).Field(f)
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					parts = append(parts, "null")
					continue
				}
				fv = fv.Elem()
			}
			parts = append(parts, fmt.Sprint(fv.Interface()))
		}
		k := strings.Join(parts, " ")
		if seen[k]++; seen[k] > 1 {
			k += "#" + strconv.Itoa(seen[k])
		}
		out[i] = element{k, v.Index(i)}
	}
	slices.SortStableFunc(out, func(x, y element) int { return strings.Compare(x.key, y.key) })
	return out
}

// walkKeyed compares two keyed arrays element by element, by key.
func (c *comparer) walkKeyed(path, norm string, a, b []element) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || (i < len(a) && a[i].key < b[j].key):
			c.diffs = append(c.diffs, difference{Path: path + "[" + a[i].key + "]", Kafka: summary(a[i].v), Ringlog: "absent"})
			i++
		case i >= len(a) || b[j].key < a[i].key:
			c.diffs = append(c.diffs, difference{Path: path + "[" + b[j].key + "]", Kafka: "absent", Ringlog: summary(b[j].v)})
			j++
		default:
			c.walk(path+"["+a[i].key+"]", norm+"[*]", a[i].v, b[j].v)
			i++
			j++
		}
	}
}

// format shows a value in a report: error codes with their names, byte
// strings quoted when printable.
func format(path string, v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "null"
		}
		v = v.Elem()
	}
	switch {
	case v.Kind() == reflect.Int16 && strings.HasSuffix(path, "ErrorCode"):
		code := int16(v.Int())
		if code == 0 {
			return "0"
		}
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
			return fmt.Sprintf("%d (%s)", code, e.Message)
		}
		return strconv.Itoa(int(code))
	case v.Kind() == reflect.Int8 && strings.HasSuffix(path, "Source"):
		return fmt.Sprintf("%d (%s)", v.Int(), kmsg.ConfigSource(v.Int()))
	case v.Kind() == reflect.Int8 && strings.HasSuffix(path, "ConfigType"):
		return fmt.Sprintf("%d (%s)", v.Int(), kmsg.ConfigType(v.Int()))
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
		if v.IsNil() {
			return "null"
		}
		b := v.Bytes()
		if utf8.Valid(b) {
			return strconv.Quote(string(b))
		}
		if len(b) > 32 {
			return fmt.Sprintf("%x... (%d bytes)", b[:32], len(b))
		}
		return fmt.Sprintf("%x", b)
	case v.Kind() == reflect.String:
		return strconv.Quote(v.String())
	case v.Kind() == reflect.Array:
		return fmt.Sprintf("%x", v.Interface())
	}
	return fmt.Sprintf("%+v", v.Interface())
}

// summary shows an array element that only one side has: its scalar
// fields, and the length of its arrays.
func summary(v reflect.Value) string {
	if v.Kind() != reflect.Struct {
		return format("", v)
	}
	var parts []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		fv := v.Field(i)
		switch {
		case !f.IsExported() || f.Type == reflect.TypeFor[kmsg.Tags]():
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() != reflect.Uint8:
			parts = append(parts, fmt.Sprintf("%s=[%d]", f.Name, fv.Len()))
		case fv.Kind() == reflect.Struct:
			parts = append(parts, f.Name+"="+summary(fv))
		default:
			parts = append(parts, f.Name+"="+format(f.Name, fv))
		}
	}
	s := "{" + strings.Join(parts, " ") + "}"
	if len(s) > 300 {
		s = s[:300] + "...}"
	}
	return s
}

// fetchedBatch is a RecordBatch of a Fetch response with its records
// decoded, so that a difference names the record and field.
type fetchedBatch struct {
	kmsg.RecordBatch
	Records []kmsg.Record
}

// decodeBatches decodes a Fetch response's records field into its whole
// batches; the string describes what follows them, if anything (a batch
// cut by the fetch's max bytes, or bytes that do not decode).
func decodeBatches(b []byte) ([]fetchedBatch, string) {
	var out []fetchedBatch
	for len(b) > 0 {
		if len(b) < 12 {
			return out, fmt.Sprintf("a partial batch header of %d bytes", len(b))
		}
		n := int(int32(binary.BigEndian.Uint32(b[8:]))) + 12
		if n < 61 || n > len(b) {
			return out, fmt.Sprintf("a partial batch: %d bytes of %d", len(b), n)
		}
		var fb fetchedBatch
		if err := fb.RecordBatch.ReadFrom(b[:n]); err != nil {
			return out, fmt.Sprintf("an undecodable batch: %v", err)
		}
		recs := fb.RecordBatch.Records
		fb.RecordBatch.Records = nil
		if codec := fb.Attributes & 0x07; codec != 0 {
			// Compressed: the compressed bytes are compared (Length,
			// CRC), and the records inside as well, with a client's
			// decompressor.
			var err error
			if recs, err = decompressor.Decompress(recs, kgo.CompressionCodecType(codec)); err != nil {
				return out, fmt.Sprintf("a batch that does not decompress: %v", err)
			}
		}
		{
			for len(recs) > 0 {
				l, m := binary.Varint(recs)
				if m <= 0 || int(l) < 0 || int(l)+m > len(recs) {
					return out, "an undecodable record"
				}
				var r kmsg.Record
				if err := r.ReadFrom(recs[:int(l)+m]); err != nil {
					return out, fmt.Sprintf("an undecodable record: %v", err)
				}
				fb.Records = append(fb.Records, r)
				recs = recs[int(l)+m:]
			}
		}
		out = append(out, fb)
		b = b[n:]
	}
	return out, ""
}
