package streams

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Errors a topology or an application reports. Build and Start wrap them
// with what they are about; test with errors.Is.
var (
	ErrTopology      = errors.New("streams: invalid topology")
	ErrSerde         = errors.New("streams: serde")
	ErrCopartition   = errors.New("streams: co-partitioning mismatch")
	ErrMissingTopic  = errors.New("streams: missing topic") // a source's, a sink's or a global table's
	ErrKeyNotLocal   = errors.New("streams: key not hosted by this instance")
	ErrUnknownStore  = errors.New("streams: unknown store")
	ErrNotRunning    = errors.New("streams: application not running")
	ErrStoreMismatch = errors.New("streams: store type mismatch")
	ErrTaskTimeout   = errors.New("streams: task timeout") // exactly-once commits failed for longer than Config.TaskTimeout
	// ErrStoreRestoring: the key's task is here but its stores are still
	// being restored from their changelogs (Kafka's
	// InvalidStateStoreException while restoring); ask again later.
	ErrStoreRestoring = errors.New("streams: store restoring")
)

type nodeKind int

const (
	kindSource nodeKind = iota
	kindProcessor
	kindSink
)

// node is one processor of the topology graph: untyped metadata (names,
// edges, topics, stores) plus inst, which builds the node's typed
// processing function for one task. The typed functions call each other
// directly, so a record crosses the graph without boxing.
type node struct {
	name     string
	kind     nodeKind
	parents  []*node
	children []*node
	sub      int // subtopology, set by Build

	// Sources: explicit topics, a pattern, or an internal topic suffix
	// (repartition: the full name is "<app>-<suffix>").
	topics   []string
	pattern  *regexp.Regexp
	internal string
	// readerSized: the internal topic has the partitions of the
	// subtopology reading it (a foreign-key join's subscription and
	// response topics), not of the one writing it.
	readerSized bool

	// Sinks: a topic or an internal suffix.
	sinkTopic    string
	sinkInternal string
	// sinkPartitioned: the sink sets each record's partition itself (a
	// foreign-key join's responses go back to the left row's task).
	sinkPartitioned bool

	stores []*storeDef // stores this node reads and writes
	// storeNames are the processor stores a Process node was given
	// (Stores), connected by Build.
	storeNames []string

	// windowFinal is set on windowed aggregations: the stream time at
	// which a window ending at end (ms) can no longer change (Suppress).
	windowFinal func(end int64) int64

	// inst returns, for task t, func(Record[K,V]) for the node's input
	// type, or func(*kgo.Record) for a source. Called once per node per
	// task (task.instance memoizes).
	inst func(t *task) any
}

// storeDef is a key-value store of the topology: named, local to each
// task of its subtopology, backed by "<app>-<name>-changelog" unless it
// is a global store (whose source topic is its changelog).
type storeDef struct {
	name               string
	node               *node
	global             *globalDef
	keySerde, valSerde any // Serde[K], Serde[V]
	// windowed stores end their keys with the window start (8 bytes),
	// which is not part of the key the input was partitioned by.
	windowed bool
	// session stores end their keys with the session end and start (16
	// bytes, Kafka's SessionKeySchema).
	session bool
	// serKey and deValue use them untyped, for App.Store's Get.
	serKey  func(topic string, k any) ([]byte, error)
	deValue func(topic string, b []byte) (any, error)
}

// newStoreDef records a store's serdes, typed and untyped.
func newStoreDef[K, V any](name string, k Serde[K], v Serde[V]) *storeDef {
	return &storeDef{name: name, keySerde: k, valSerde: v,
		serKey: func(topic string, key any) ([]byte, error) {
			kk, ok := key.(K)
			if !ok {
				return nil, fmt.Errorf("%w: store %q has %T keys, not %T", ErrStoreMismatch, name, *new(K), key)
			}
			return k.Serialize(topic, kk)
		},
		deValue: func(topic string, b []byte) (any, error) { return v.Deserialize(topic, b) },
	}
}

// Builder collects a topology. It is not safe for concurrent use; Build
// checks it and returns an immutable Topology.
type Builder struct {
	nodes  []*node
	stores map[string]*storeDef
	// procStores are declared by AddKeyValueStore, connected to their
	// processor by Build.
	procStores map[string]*storeDef
	globals    []*globalDef
	copart     []copartGroup // the two sides of each join (join.go)
	names      map[string]int
	seq        int
	errs       []error
}

// NewBuilder returns an empty topology builder.
func NewBuilder() *Builder {
	return &Builder{stores: map[string]*storeDef{}, procStores: map[string]*storeDef{}, names: map[string]int{}}
}

func (b *Builder) errorf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("%w: "+format, append([]any{ErrTopology}, args...)...))
}

// name returns the user's name for a node, or Kafka's generated one
// (KSTREAM-MAP-0000000003); a user's name used twice is an error.
func (b *Builder) name(kind, user string) string {
	b.seq++
	if user == "" {
		return fmt.Sprintf("%s-%010d", kind, b.seq)
	}
	b.names[user]++
	if b.names[user] == 2 {
		b.errorf("name %q used twice", user)
	}
	return user
}

func (b *Builder) add(kind nodeKind, name string, parents ...*node) *node {
	n := &node{name: name, kind: kind, parents: parents}
	for _, p := range parents {
		p.children = append(p.children, n)
	}
	b.nodes = append(b.nodes, n)
	return n
}

func (b *Builder) addStore(s *storeDef, n *node) *storeDef {
	if _, dup := b.stores[s.name]; dup {
		b.errorf("store %q defined twice", s.name)
	}
	s.node = n
	b.stores[s.name] = s
	n.stores = append(n.stores, s)
	return s
}

// Opt names an operation or gives it serdes (KeySerde, ValueSerde).
type Opt func(*opConf)

type opConf struct {
	name      string
	key, val  any
	retention time.Duration // windowed stores (Retention)
	stores    []string      // processor stores (Stores)
}

// Named names an operation: its processor, and for a stateful one its
// store ("<app>-<name>-changelog") and repartition topic
// ("<app>-<name>-repartition"). A name may be used once.
func Named(name string) Opt { return func(c *opConf) { c.name = name } }

// KeySerde sets the key serde an operation writes with (a repartition
// topic, a sink, a store).
func KeySerde[K any](s Serde[K]) Opt { return func(c *opConf) { c.key = s } }

// ValueSerde sets the value serde an operation writes with.
func ValueSerde[V any](s Serde[V]) Opt { return func(c *opConf) { c.val = s } }

func conf(opts []Opt) opConf {
	var c opConf
	for _, o := range opts {
		o(&c)
	}
	return c
}

// serdesOf returns the serdes of c, typed, falling back on the given
// ones; a serde of another type than the operation's is a topology
// error.
func serdesOf[K, V any](b *Builder, c opConf, op string, k Serde[K], v Serde[V]) (Serde[K], Serde[V]) {
	if c.key != nil {
		ks, ok := c.key.(Serde[K])
		if !ok {
			b.errorf("%s: key serde %T does not serialize %T", op, c.key, *new(K))
		} else {
			k = ks
		}
	}
	if c.val != nil {
		vs, ok := c.val.(Serde[V])
		if !ok {
			b.errorf("%s: value serde %T does not serialize %T", op, c.val, *new(V))
		} else {
			v = vs
		}
	}
	return k, v
}

// Topology is a checked, immutable topology: its subtopologies (the
// connected parts of the graph, cut at repartition topics), each run as
// one task per input partition.
type Topology struct {
	nodes   []*node
	subs    []*subtopology
	stores  map[string]*storeDef
	globals []*globalDef
	copart  []copartGroup
}

type subtopology struct {
	id      int
	sources []*node
	stores  []*storeDef
}

// Build checks the topology and returns it, or every mistake found
// joined in one error (each wrapping ErrTopology): no source, a name or a
// store used twice, a repartition or sink without serdes, a store whose
// serdes are missing.
func (b *Builder) Build() (*Topology, error) {
	errs := append([]error(nil), b.errs...)
	errs = append(errs, b.connectProcStores()...)
	if len(b.nodes) == 0 || !hasSource(b.nodes) {
		if len(b.globals) == 0 {
			errs = append(errs, fmt.Errorf("%w: no source: add a Stream or a Table", ErrTopology))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t := &Topology{nodes: b.nodes, stores: b.stores, globals: b.globals, copart: b.copart}
	// Subtopologies: union-find over the graph's edges. Repartition
	// topics are a sink in one part and a source in another, with no
	// edge between them, so they cut the graph as Kafka's do.
	parent := make(map[*node]*node, len(b.nodes))
	var find func(n *node) *node
	find = func(n *node) *node {
		if p, ok := parent[n]; ok && p != n {
			r := find(p)
			parent[n] = r
			return r
		}
		parent[n] = n
		return n
	}
	for _, n := range b.nodes {
		for _, p := range n.parents {
			parent[find(n)] = find(p)
		}
	}
	ids := map[*node]int{}
	for _, n := range b.nodes { // node order: sources first in each part
		r := find(n)
		id, ok := ids[r]
		if !ok {
			id = len(t.subs)
			ids[r] = id
			t.subs = append(t.subs, &subtopology{id: id})
		}
		n.sub = id
		if n.kind == kindSource {
			t.subs[id].sources = append(t.subs[id].sources, n)
		}
		for _, s := range n.stores {
			t.subs[id].stores = append(t.subs[id].stores, s)
		}
	}
	return t, nil
}

func hasSource(nodes []*node) bool {
	for _, n := range nodes {
		if n.kind == kindSource {
			return true
		}
	}
	return false
}

// Describe prints the topology as Kafka's TopologyDescription does:
// subtopologies, their nodes and edges, topics and stores.
func (t *Topology) Describe() string {
	var sb strings.Builder
	for _, s := range t.subs {
		fmt.Fprintf(&sb, "Sub-topology: %d\n", s.id)
		for _, n := range t.nodes {
			if n.sub != s.id {
				continue
			}
			switch n.kind {
			case kindSource:
				what := strings.Join(n.topics, ", ")
				if n.pattern != nil {
					what = "/" + n.pattern.String() + "/"
				} else if n.internal != "" {
					what = "<app>-" + n.internal
				}
				fmt.Fprintf(&sb, "  Source: %s (topics: [%s])\n", n.name, what)
			case kindSink:
				to := n.sinkTopic
				if n.sinkInternal != "" {
					to = "<app>-" + n.sinkInternal
				}
				fmt.Fprintf(&sb, "  Sink: %s (topic: %s)\n", n.name, to)
			default:
				var st []string
				for _, s := range n.stores {
					st = append(st, s.name)
				}
				sort.Strings(st)
				fmt.Fprintf(&sb, "  Processor: %s (stores: [%s])\n", n.name, strings.Join(st, ", "))
			}
			var ch []string
			for _, c := range n.children {
				ch = append(ch, c.name)
			}
			if len(ch) > 0 {
				fmt.Fprintf(&sb, "    --> %s\n", strings.Join(ch, ", "))
			}
		}
	}
	for _, g := range t.globals {
		fmt.Fprintf(&sb, "Global store: %s (topic: %s)\n", g.store.name, g.topic)
	}
	return sb.String()
}
