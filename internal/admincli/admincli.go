package admincli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrUsage is returned, wrapped, for a command line that names no known
// command or has a bad flag: the caller prints it and exits non-zero.
var ErrUsage = errors.New("admincli: usage")

// command is one `ringlog admin GROUP VERB`.
type command struct {
	group, verb string
	synopsis    string
	run         func(c *cli, args []string) error
}

// commands lists every command, in the order the usage prints them.
var commands = []command{
	{"topic", "create", "TOPIC [-p N] [-r N] [-c key=value ...] [--if-not-exists]", topicCreate},
	{"topic", "list", "[--internal]", topicList},
	{"topic", "describe", "TOPIC ...", topicDescribe},
	{"topic", "alter", "TOPIC [--set key=value ...] [--delete key ...] [--partitions N]", topicAlter},
	{"topic", "delete", "TOPIC ...", topicDelete},
	{"group", "list", "", groupList},
	{"group", "describe", "GROUP ...", groupDescribe},
	{"group", "lag", "[GROUP ...]", groupLag},
	{"group", "reset-offsets", "GROUP (--topic T[:P,...] ... | --all-topics) (--to-earliest | --to-latest | --to-offset N | --to-datetime T) [--dry-run | --execute]", groupResetOffsets},
	{"cluster", "status", "", clusterStatus},
	{"cluster", "quorum", "", clusterQuorum},
	{"cluster", "add-voter", "--id N --endpoint HOST:PORT [--listener NAME] [--cluster-id ID]", clusterAddVoter},
	{"cluster", "remove-voter", "--id N [--cluster-id ID]", clusterRemoveVoter},
	{"cluster", "unregister", "--id N", clusterUnregister},
	{"partition", "elect", "(--topic T[:P,...] ... | --all) [--type preferred|unclean]", partitionElect},
	{"partition", "reassign", "(--file PLAN.json | --move-off N | --spread) [--topic T ...] [--execute] | --list | --cancel --file PLAN.json", partitionReassign},
	{"acl", "create", "--principal User:NAME [--host H] (--topic T | --group G | --transactional-id X | --cluster) [--pattern literal|prefixed] --operation OP ... [--deny]", aclCreate},
	{"acl", "list", "[--principal P] [--host H] [--topic T | --group G | --transactional-id X | --cluster] [--pattern any|match|literal|prefixed] [--operation OP] [--deny]", aclList},
	{"acl", "delete", "(--principal P | --topic T | --group G | --transactional-id X | --cluster) [--host H] [--pattern ...] [--operation OP] [--deny]", aclDelete},
	{"quota", "describe", "[--user U | --user-default] [--client-id C | --client-id-default] [--ip IP | --ip-default]", quotaDescribe},
	{"quota", "alter", "(--user U | --user-default) [--client-id ...] [--ip ...] [--set key=value ...] [--delete key ...]", quotaAlter},
	{"broker", "config-describe", "(--id N | --default) [--dynamic]", brokerConfigDescribe},
	{"broker", "config-alter", "(--id N | --default) [--set key=value ...] [--delete key ...]", brokerConfigAlter},
}

// Main runs `ringlog admin` with args (the words after "admin"), writing
// results to stdout and diagnostics to stderr. A nil error means every
// operation asked for succeeded.
func Main(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return fmt.Errorf("%w: a command is needed", ErrUsage)
		}
		return nil
	}
	if len(args) < 2 {
		usage(stderr)
		return fmt.Errorf("%w: %q needs a verb", ErrUsage, args[0])
	}
	for _, cmd := range commands {
		if cmd.group == args[0] && cmd.verb == args[1] {
			c := &cli{stdout: stdout, stderr: stderr, name: "ringlog admin " + cmd.group + " " + cmd.verb, synopsis: cmd.synopsis}
			defer c.close()
			if err := cmd.run(c, args[2:]); !errors.Is(err, flag.ErrHelp) {
				return err
			}
			return nil
		}
	}
	usage(stderr)
	return fmt.Errorf("%w: unknown command %q", ErrUsage, strings.Join(args[:2], " "))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ringlog admin GROUP VERB [flags] (every command takes -b/--brokers, --command-config, --json, --timeout)")
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %s %s %s\n", cmd.group, cmd.verb, cmd.synopsis)
	}
}

// cli is the state of one command: its flags, its client and its output.
type cli struct {
	stdout, stderr io.Writer
	name, synopsis string

	brokers       string
	commandConfig string
	json          bool
	timeout       time.Duration

	cl  *kgo.Client
	adm *kadm.Client
}

// flags is a flag set holding the connection and output flags every
// command shares.
func (c *cli) flags() *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	for _, n := range []string{"b", "brokers", "bootstrap-server"} {
		fs.StringVar(&c.brokers, n, "127.0.0.1:9092", "host:port,... of brokers to bootstrap from")
	}
	fs.StringVar(&c.commandConfig, "command-config", "", "a file of Kafka client properties (security.protocol, ssl.*, sasl.*)")
	fs.BoolVar(&c.json, "json", false, "print JSON for scripts rather than tables")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long the command may take")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: %s %s\n", c.name, c.synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with fs, letting flags and positional arguments be
// mixed as in Kafka's tools (`topic create foo -p 3`): the flag package
// stops at the first positional, so parsing resumes after each.
func (c *cli) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// connect makes the client from the connection flags.
func (c *cli) connect() error {
	opts := []kgo.Opt{kgo.SeedBrokers(splitList(c.brokers)...), kgo.ClientID("ringlog-admin")}
	if c.commandConfig != "" {
		props, err := readProperties(c.commandConfig)
		if err != nil {
			return err
		}
		sec, err := securityOptions(props)
		if err != nil {
			return fmt.Errorf("--command-config %s: %w", c.commandConfig, err)
		}
		opts = append(opts, sec...)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	c.cl, c.adm = cl, kadm.NewClient(cl)
	c.adm.SetTimeoutMillis(int32(c.timeout.Milliseconds()))
	return nil
}

func (c *cli) close() {
	if c.cl != nil {
		c.cl.Close()
	}
}

// ctx bounds one command by --timeout.
func (c *cli) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.timeout)
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// show prints v as JSON with --json, else rows under header as a table.
func (c *cli) show(v any, header []string, rows [][]string) error {
	if c.json {
		return c.printJSON(v)
	}
	return c.table(header, rows)
}

// flagsOnly parses args with fs for a command that takes no positional
// argument.
func (c *cli) flagsOnly(fs *flag.FlagSet, args []string) error {
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: %s takes flags only (%q)", ErrUsage, strings.TrimPrefix(c.name, "ringlog admin "), pos)
	}
	return nil
}

// configAlters turns --set key=value and --delete key into incremental
// config changes.
func configAlters(set, del []string) ([]kadm.AlterConfig, error) {
	var alters []kadm.AlterConfig
	for _, kv := range set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: --set %q is not key=value", ErrUsage, kv)
		}
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kmsg.StringPtr(v)})
	}
	for _, k := range del {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	return alters, nil
}

// table writes rows under header, aligned.
func (c *cli) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// brokerError is an error a broker answered: its code's name (Kafka's,
// such as UNKNOWN_TOPIC_OR_PARTITION) and the broker's message.
func brokerError(err error, msg string) error {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if msg != "" && msg != ke.Description {
			return fmt.Errorf("%s: %s", ke.Message, msg)
		}
		return fmt.Errorf("%s: %s", ke.Message, ke.Description)
	}
	if msg != "" {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// errName is the Kafka name of an error code for JSON output ("" for none).
func errName(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// failures joins the errors of a command that acts on many things: every
// result is printed, then the command fails if any failed.
type failures []error

func (f *failures) add(what string, err error) {
	if err != nil {
		*f = append(*f, fmt.Errorf("%s: %w", what, err))
	}
}

func (f failures) err() error { return errors.Join(f...) }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// multiFlag is a repeatable string flag (-c a=1 -c b=2).
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func int32List(is []int32) string {
	s := make([]string, len(is))
	for i, v := range is {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

func sortedInt32(is []int32) []int32 {
	out := append([]int32(nil), is...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// topicID shows a topic id as Kafka does (Uuid.toString: URL-safe
// base64 without padding), the form its tools print and take.
func topicID(id kadm.TopicID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// orEmpty makes a nil slice an empty one, so that JSON shows [] not null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
