package admincli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionResult is the JSON of one partition acted on by elect or
// reassign.
type partitionResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	Message   string `json:"message,omitempty"`
}

// topicsSet resolves --topic values (t or t:0,1) to partitions, asking
// the metadata for the partitions of topics named whole.
func (c *cli) topicsSet(ctx context.Context, vals []string) (kadm.TopicsSet, error) {
	topics, err := parseTopicPartitions(vals)
	if err != nil {
		return nil, err
	}
	set := make(kadm.TopicsSet)
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
			return nil, fmt.Errorf("metadata: %w", err)
		}
		for _, t := range whole {
			d, ok := md.Topics[t]
			if !ok {
				d.Err = kerr.UnknownTopicOrPartition
			}
			if d.Err != nil {
				return nil, fmt.Errorf("topic %s: %w", t, brokerError(d.Err, ""))
			}
			for p := range d.Partitions {
				set.Add(t, p)
			}
		}
	}
	return set, nil
}

func partitionElect(c *cli, args []string) error {
	fs := c.flags()
	var topicFlags multiFlag
	fs.Var(&topicFlags, "topic", "a topic, or topic:0,1,2 for some partitions (repeatable)")
	all := fs.Bool("all", false, "every partition of the cluster")
	typ := fs.String("type", "preferred", "preferred (the first replica, if in the ISR) or unclean (any live replica when no ISR member is)")
	if pos, err := c.parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("%w: partition elect takes no arguments (%q)", ErrUsage, pos)
	}
	if (len(topicFlags) > 0) == *all {
		return fmt.Errorf("%w: give --topic (repeatable) or --all", ErrUsage)
	}
	var how kadm.ElectLeadersHow
	switch *typ {
	case "preferred":
		how = kadm.ElectPreferredReplica
	case "unclean":
		how = kadm.ElectLiveReplica
	default:
		return fmt.Errorf("%w: --type %q: preferred or unclean", ErrUsage, *typ)
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.requireAPI(ctx, kmsg.ElectLeaders.Int16()); err != nil {
		return err
	}
	var set kadm.TopicsSet // nil: every partition
	if !*all {
		var err error
		if set, err = c.topicsSet(ctx, topicFlags); err != nil {
			return err
		}
	}
	rs, err := c.adm.ElectLeaders(ctx, how, set)
	if err != nil {
		return fmt.Errorf("elect leaders: %w", err)
	}
	var out []partitionResult
	var fails failures
	for _, t := range sortedKeys(rs) {
		for _, p := range sortedKeys(rs[t]) {
			r := rs[t][p]
			pr := partitionResult{Topic: t, Partition: p, Status: "elected"}
			switch {
			case errors.Is(r.Err, kerr.ElectionNotNeeded):
				// Kafka's tool counts this as success: the wanted
				// leader leads already.
				pr.Status = "already-elected"
			case r.Err != nil:
				pr.Status, pr.Error, pr.Message = "failed", errName(r.Err), r.ErrMessage
				fails.add(fmt.Sprintf("%s/%d", t, p), brokerError(r.Err, r.ErrMessage))
			}
			out = append(out, pr)
		}
	}
	return c.printResults(out, fails)
}

func (c *cli) printResults(out []partitionResult, fails failures) error {
	if c.json {
		if err := c.printJSON(map[string]any{"partitions": orEmpty(out)}); err != nil {
			return err
		}
		return fails.err()
	}
	var rows [][]string
	for _, r := range out {
		rows = append(rows, []string{r.Topic, fmt.Sprint(r.Partition), r.Status, strings.TrimSpace(r.Error + " " + r.Message)})
	}
	if err := c.table([]string{"TOPIC", "PARTITION", "STATUS", "ERROR"}, rows); err != nil {
		return err
	}
	return fails.err()
}

// reassignOut is the JSON of `partition reassign` with a plan: the
// current assignment of the partitions it moves (to roll back with), the
// proposed one, both in Kafka's reassignment format, and the results when
// executed.
type reassignOut struct {
	Current  Plan              `json:"current"`
	Proposed Plan              `json:"proposed"`
	Executed bool              `json:"executed"`
	Results  []partitionResult `json:"results"`
}

// ongoing is the JSON of one partition in `partition reassign --list`.
type ongoing struct {
	Topic            string  `json:"topic"`
	Partition        int32   `json:"partition"`
	Replicas         []int32 `json:"replicas"`
	AddingReplicas   []int32 `json:"adding_replicas"`
	RemovingReplicas []int32 `json:"removing_replicas"`
}

func partitionReassign(c *cli, args []string) error {
	fs := c.flags()
	file := fs.String("file", "", "a reassignment plan in Kafka's JSON format")
	moveOff := fs.Int("move-off", -1, "plan moving every replica off broker N")
	spread := fs.Bool("spread", false, "plan spreading replicas and preferred leaders evenly over the brokers")
	var topicFlags multiFlag
	fs.Var(&topicFlags, "topic", "plan for this topic only (repeatable; default every topic)")
	execute := fs.Bool("execute", false, "start the reassignment (without it, only the plan is shown)")
	dryRun := fs.Bool("dry-run", false, "show the plan only (the default)")
	list := fs.Bool("list", false, "list the reassignments in progress")
	cancelIt := fs.Bool("cancel", false, "cancel the reassignments of the partitions in --file")
	if pos, err := c.parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("%w: partition reassign takes no arguments (%q)", ErrUsage, pos)
	}
	if *dryRun && *execute {
		return fmt.Errorf("%w: --dry-run and --execute together", ErrUsage)
	}
	modes := 0
	for _, b := range []bool{*file != "" && !*cancelIt, *moveOff >= 0, *spread, *list, *cancelIt} {
		if b {
			modes++
		}
	}
	if modes != 1 {
		return fmt.Errorf("%w: give one of --file, --move-off N, --spread, --list, --cancel --file", ErrUsage)
	}
	if *cancelIt && *file == "" {
		return fmt.Errorf("%w: --cancel needs --file naming the partitions", ErrUsage)
	}
	if len(topicFlags) > 0 && (*file != "" || *list) {
		return fmt.Errorf("%w: --topic only narrows --move-off and --spread", ErrUsage)
	}
	var filePlan Plan
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		if err := json.Unmarshal(b, &filePlan); err != nil {
			return fmt.Errorf("%w: --file %s: %w", ErrPlan, *file, err)
		}
	}
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if *list {
		return c.listReassignments(ctx)
	}
	if *cancelIt || *execute {
		if err := c.requireAPI(ctx, kmsg.AlterPartitionAssignments.Int16()); err != nil {
			return err
		}
	}

	md, err := c.adm.Metadata(ctx, topicFlags...)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	var brokers []PlanBroker
	for _, b := range md.Brokers {
		brokers = append(brokers, PlanBroker{ID: b.NodeID, Rack: deref(b.Rack)})
	}
	var current []Assignment
	for _, t := range md.Topics.Names() {
		d := md.Topics[t]
		if d.Err != nil {
			return fmt.Errorf("topic %s: %w", t, brokerError(d.Err, ""))
		}
		for _, p := range d.Partitions.Sorted() {
			current = append(current, Assignment{Topic: t, Partition: p.Partition, Replicas: slices.Clone(p.Replicas)})
		}
	}

	if *cancelIt {
		if err := checkPlan(filePlan, brokers, current); err != nil {
			return err
		}
		req := make(kadm.AlterPartitionAssignmentsReq)
		for _, a := range filePlan.Partitions {
			req.CancelAssign(a.Topic, a.Partition)
		}
		return c.alterAssignments(ctx, req, "cancelled")
	}

	var proposed Plan
	switch {
	case *file != "":
		if err := checkPlan(filePlan, brokers, current); err != nil {
			return err
		}
		proposed = filePlan
	case *moveOff >= 0:
		if proposed, err = PlanMoveOff(brokers, current, int32(*moveOff)); err != nil {
			return err
		}
	default:
		proposed = PlanSpread(brokers, current)
	}
	out := reassignOut{Proposed: proposed, Current: Plan{Version: 1}, Results: []partitionResult{}}
	var was []Assignment
	for _, a := range proposed.Partitions {
		for _, cur := range current {
			if cur.Topic == a.Topic && cur.Partition == a.Partition {
				was = append(was, Assignment{Topic: cur.Topic, Partition: cur.Partition, Replicas: cur.Replicas})
			}
		}
	}
	out.Current = newPlan(was)

	var fails failures
	if *execute && len(proposed.Partitions) > 0 {
		req := make(kadm.AlterPartitionAssignmentsReq)
		for _, a := range proposed.Partitions {
			req.Assign(a.Topic, a.Partition, a.Replicas)
		}
		resps, err := c.adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			return fmt.Errorf("alter partition reassignments: %w", err)
		}
		out.Executed = true
		for _, r := range resps.Sorted() {
			pr := partitionResult{Topic: r.Topic, Partition: r.Partition, Status: "started"}
			if r.Err != nil {
				pr.Status, pr.Error, pr.Message = "failed", errName(r.Err), r.ErrMessage
				fails.add(fmt.Sprintf("%s/%d", r.Topic, r.Partition), brokerError(r.Err, r.ErrMessage))
			}
			out.Results = append(out.Results, pr)
		}
	}
	if c.json {
		if err := c.printJSON(out); err != nil {
			return err
		}
		return fails.err()
	}
	if len(proposed.Partitions) == 0 {
		fmt.Fprintln(c.stdout, "Nothing to move: the plan is empty.")
		return nil
	}
	cur, _ := json.Marshal(out.Current)
	prop, _ := json.Marshal(out.Proposed)
	fmt.Fprintf(c.stdout, "Current partition replica assignment (keep it to roll back):\n%s\n\nProposed partition reassignment configuration:\n%s\n", cur, prop)
	if !out.Executed {
		fmt.Fprintln(c.stderr, "dry run: nothing was changed; add --execute to start this reassignment")
		return nil
	}
	fmt.Fprintln(c.stdout)
	var rows [][]string
	for _, r := range out.Results {
		rows = append(rows, []string{r.Topic, fmt.Sprint(r.Partition), r.Status, strings.TrimSpace(r.Error + " " + r.Message)})
	}
	if err := c.table([]string{"TOPIC", "PARTITION", "STATUS", "ERROR"}, rows); err != nil {
		return err
	}
	return fails.err()
}

func (c *cli) alterAssignments(ctx context.Context, req kadm.AlterPartitionAssignmentsReq, status string) error {
	resps, err := c.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return fmt.Errorf("alter partition reassignments: %w", err)
	}
	var out []partitionResult
	var fails failures
	for _, r := range resps.Sorted() {
		pr := partitionResult{Topic: r.Topic, Partition: r.Partition, Status: status}
		if r.Err != nil {
			pr.Status, pr.Error, pr.Message = "failed", errName(r.Err), r.ErrMessage
			fails.add(fmt.Sprintf("%s/%d", r.Topic, r.Partition), brokerError(r.Err, r.ErrMessage))
		}
		out = append(out, pr)
	}
	return c.printResults(out, fails)
}

func (c *cli) listReassignments(ctx context.Context) error {
	if err := c.requireAPI(ctx, kmsg.ListPartitionReassignments.Int16()); err != nil {
		return err
	}
	// Every partition: null topics. (kadm's ListPartitionReassignments
	// sends nothing for an empty set and answers none, so `--list` showed
	// nothing in progress, against Kafka too.)
	resp, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, c.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("list partition reassignments: %w", err)
	}
	out := []ongoing{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, ongoing{Topic: t.Topic, Partition: p.Partition, Replicas: orEmpty(p.Replicas),
				AddingReplicas: orEmpty(p.AddingReplicas), RemovingReplicas: orEmpty(p.RemovingReplicas)})
		}
	}
	slices.SortFunc(out, func(a, b ongoing) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	if c.json {
		return c.printJSON(map[string]any{"reassignments": out})
	}
	var rows [][]string
	for _, r := range out {
		rows = append(rows, []string{r.Topic, fmt.Sprint(r.Partition), int32List(r.Replicas), int32List(r.AddingReplicas), int32List(r.RemovingReplicas)})
	}
	return c.table([]string{"TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING"}, rows)
}

func sortedKeys[K string | int32, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
