package admincli

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrGroupActive is returned, wrapped, when reset-offsets is asked of a
// group with members: their positions would overwrite the reset (Kafka's
// tool refuses for the same reason, in dry runs too).
var ErrGroupActive = errors.New("admincli: group is not inactive")

// resetOffset is the JSON of one partition in `group reset-offsets`.
type resetOffset struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"current_offset"`
	NewOffset     int64  `json:"new_offset"`
	Error         string `json:"error,omitempty"`
}

// datetimeLayouts are the forms --to-datetime takes: Kafka's tool's
// (YYYY-MM-DDTHH:mm:SS.sss, with an optional zone, local time without
// one) and RFC 3339.
var datetimeLayouts = []string{"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.000", time.RFC3339Nano, "2006-01-02T15:04:05"}

func parseDatetime(s string) (time.Time, error) {
	for _, l := range datetimeLayouts {
		if t, err := time.ParseInLocation(l, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: --to-datetime %q: want YYYY-MM-DDTHH:mm:SS.sss[Z|+hh:mm] or RFC 3339", ErrUsage, s)
}

// parseTopicPartitions reads --topic values: "t" (every partition) or
// "t:0,1,2".
func parseTopicPartitions(vals []string) (map[string][]int32, error) {
	out := make(map[string][]int32)
	for _, v := range vals {
		t, ps, hasParts := strings.Cut(v, ":")
		if t == "" {
			return nil, fmt.Errorf("%w: --topic %q names no topic", ErrUsage, v)
		}
		if !hasParts {
			out[t] = nil
			continue
		}
		for _, p := range strings.Split(ps, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: --topic %q: %q is not a partition number", ErrUsage, v, p)
			}
			out[t] = append(out[t], int32(n))
		}
	}
	return out, nil
}

func groupResetOffsets(c *cli, args []string) error {
	fs := c.flags()
	var topicFlags multiFlag
	fs.Var(&topicFlags, "topic", "a topic, or topic:0,1,2 for some partitions (repeatable)")
	allTopics := fs.Bool("all-topics", false, "every topic the group has committed offsets for")
	earliest := fs.Bool("to-earliest", false, "reset to the log start offsets")
	latest := fs.Bool("to-latest", false, "reset to the log end offsets")
	toOffset := fs.Int64("to-offset", -1, "reset to this offset (kept within the log start and end offsets, as Kafka does)")
	toDatetime := fs.String("to-datetime", "", "reset to the first offset at or after this time (YYYY-MM-DDTHH:mm:SS.sss)")
	execute := fs.Bool("execute", false, "apply the reset (without it, only the plan is shown)")
	dryRun := fs.Bool("dry-run", false, "show the plan only (the default; Kafka's tool has the flag)")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: name one group", ErrUsage)
	}
	group := pos[0]
	if *dryRun && *execute {
		return fmt.Errorf("%w: --dry-run and --execute together", ErrUsage)
	}
	toOffsetSet := false
	fs.Visit(func(f *flag.Flag) { toOffsetSet = toOffsetSet || f.Name == "to-offset" })
	n := 0
	for _, b := range []bool{*earliest, *latest, toOffsetSet, *toDatetime != ""} {
		if b {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime", ErrUsage)
	}
	if toOffsetSet && *toOffset < 0 {
		return fmt.Errorf("%w: --to-offset %d is negative", ErrUsage, *toOffset)
	}
	if (len(topicFlags) > 0) == *allTopics {
		return fmt.Errorf("%w: give --topic (repeatable) or --all-topics", ErrUsage)
	}
	topics, err := parseTopicPartitions(topicFlags)
	if err != nil {
		return err
	}
	var at time.Time
	if *toDatetime != "" {
		if at, err = parseDatetime(*toDatetime); err != nil {
			return err
		}
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()

	// The group must have no members, as Kafka's tool demands: Empty, or
	// Dead (a group that does not exist yet).
	descs, err := c.describeGroups(ctx, []string{group})
	if err != nil {
		return err
	}
	g := descs[0]
	if g.notFound {
		g.err, g.State = nil, "Dead"
	}
	if g.err != nil {
		return fmt.Errorf("group %s: %w", group, g.err)
	}
	if g.State != "Empty" && g.State != "Dead" {
		return fmt.Errorf("%w: assignments can only be reset if the group %q is inactive, but the current state is %s (members: %d)",
			ErrGroupActive, group, g.State, len(g.Members))
	}
	current := make(map[string]map[int32]int64)
	for _, o := range g.Offsets {
		if o.CommittedOffset == nil {
			continue
		}
		if current[o.Topic] == nil {
			current[o.Topic] = make(map[int32]int64)
		}
		current[o.Topic][o.Partition] = *o.CommittedOffset
	}

	// The partitions to reset.
	set := make(kadm.TopicsSet)
	if *allTopics {
		for t, ps := range current {
			for p := range ps {
				set.Add(t, p)
			}
		}
	} else {
		var whole []string
		for t, ps := range topics {
			if ps == nil {
				whole = append(whole, t)
			} else {
				set.Add(t, ps...)
			}
		}
		if len(whole) > 0 {
			md, err := c.adm.Metadata(ctx, whole...)
			if err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			for _, t := range whole {
				d, ok := md.Topics[t]
				if !ok {
					d.Err = kerr.UnknownTopicOrPartition
				}
				if d.Err != nil {
					return fmt.Errorf("topic %s: %w", t, brokerError(d.Err, ""))
				}
				for p := range d.Partitions {
					set.Add(t, p)
				}
			}
		}
	}
	if len(set) == 0 {
		return fmt.Errorf("group %s has no committed offsets to reset", group)
	}
	names := set.Topics()
	starts, err := c.adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	var byTime kadm.ListedOffsets
	if !at.IsZero() {
		if byTime, err = c.adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), names...); err != nil {
			return fmt.Errorf("list offsets by time: %w", err)
		}
	}
	var fails failures
	var plan []resetOffset
	commit := make(kadm.Offsets)
	for _, tp := range set.Sorted() {
		for _, p := range sortedInt32(tp.Partitions) {
			r := resetOffset{Topic: tp.Topic, Partition: p, NewOffset: -1}
			if cur, ok := current[tp.Topic][p]; ok {
				r.CurrentOffset = &cur
			}
			s, sok := starts.Lookup(tp.Topic, p)
			e, eok := ends.Lookup(tp.Topic, p)
			switch {
			case !sok || !eok:
				r.Error = "UNKNOWN_TOPIC_OR_PARTITION"
			case s.Err != nil:
				r.Error = errName(s.Err)
			case e.Err != nil:
				r.Error = errName(e.Err)
			case *earliest:
				r.NewOffset = s.Offset
			case *latest:
				r.NewOffset = e.Offset
			case toOffsetSet:
				r.NewOffset = min(max(*toOffset, s.Offset), e.Offset)
			default:
				b, ok := byTime.Lookup(tp.Topic, p)
				switch {
				case !ok:
					r.Error = "UNKNOWN_TOPIC_OR_PARTITION"
				case b.Err != nil:
					r.Error = errName(b.Err)
				case b.Offset < 0:
					// No record at or after the time: the end, as Kafka's
					// tool resets.
					r.NewOffset = e.Offset
				default:
					r.NewOffset = b.Offset
				}
			}
			if r.Error != "" {
				fails.add(fmt.Sprintf("%s/%d", tp.Topic, p), errors.New(r.Error))
			} else {
				commit.Add(kadm.Offset{Topic: tp.Topic, Partition: p, At: r.NewOffset, LeaderEpoch: -1})
			}
			plan = append(plan, r)
		}
	}
	if fails.err() != nil {
		// Nothing is committed when a target could not be computed.
		*execute = false
	}
	if *execute {
		resps, err := c.adm.CommitOffsets(ctx, group, commit)
		if err != nil {
			return fmt.Errorf("commit offsets: %w", err)
		}
		for i := range plan {
			if plan[i].Error != "" {
				continue
			}
			r, ok := resps.Lookup(plan[i].Topic, plan[i].Partition)
			switch {
			case !ok:
				plan[i].Error = "MISSING"
				fails.add(fmt.Sprintf("%s/%d", plan[i].Topic, plan[i].Partition), errors.New("the coordinator did not answer for this partition"))
			case r.Err != nil:
				plan[i].Error = errName(r.Err)
				fails.add(fmt.Sprintf("%s/%d", plan[i].Topic, plan[i].Partition), brokerError(r.Err, ""))
			}
		}
	}
	if c.json {
		if err := c.printJSON(map[string]any{"group": group, "executed": *execute, "offsets": plan}); err != nil {
			return err
		}
	} else {
		var rows [][]string
		for _, r := range plan {
			rows = append(rows, []string{group, r.Topic, fmt.Sprint(r.Partition), optInt(r.CurrentOffset), fmt.Sprint(r.NewOffset), r.Error})
		}
		if err := c.table([]string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "ERROR"}, rows); err != nil {
			return err
		}
		if !*execute && fails.err() == nil {
			fmt.Fprintln(c.stderr, "dry run: nothing was changed; add --execute to commit these offsets")
		}
	}
	return fails.err()
}
