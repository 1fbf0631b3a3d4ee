package admincli

import (
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Changes of the metadata quorum's membership (KIP-853) and of the
// registered brokers, in the manner of kafka-metadata-quorum's
// add-controller and remove-controller and kafka-cluster's unregister.
// Each sends one request to the cluster, which the broker forwards to
// the quorum; the answer's error, if any, is the command's.

// membershipOut is the JSON of the three commands.
type membershipOut struct {
	Action string `json:"action"` // add-voter, remove-voter, unregister
	NodeID int32  `json:"node_id"`
}

func clusterAddVoter(c *cli, args []string) error {
	fs := c.flags()
	id := fs.Int("id", -1, "the node id of the controller to add as a voter (it must run and observe the quorum)")
	endpoint := fs.String("endpoint", "", "host:port of the controller's listener")
	name := fs.String("listener", "CONTROLLER", "the name of that listener")
	clusterID := fs.String("cluster-id", "", "the cluster's id, checked by the quorum when given")
	if pos, err := c.parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 || *id < 0 || *endpoint == "" {
		return fmt.Errorf("%w: cluster add-voter needs --id N and --endpoint host:port, and no arguments", ErrUsage)
	}
	host, portStr, err := net.SplitHostPort(*endpoint)
	port, perr := strconv.ParseUint(portStr, 10, 16)
	if err != nil || perr != nil {
		return fmt.Errorf("%w: --endpoint %q is not host:port", ErrUsage, *endpoint)
	}
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.VoterID = int32(*id)
	req.TimeoutMillis = int32(c.timeout.Milliseconds())
	if *clusterID != "" {
		req.ClusterID = clusterID
	}
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = *name, host, uint16(port)
	req.Listeners = append(req.Listeners, l)
	return c.membership(kmsg.AddRaftVoter.Int16(), req, "add-voter", req.VoterID, func(r kmsg.Response) (int16, *string) {
		resp := r.(*kmsg.AddRaftVoterResponse)
		return resp.ErrorCode, resp.ErrorMessage
	})
}

func clusterRemoveVoter(c *cli, args []string) error {
	fs := c.flags()
	id := fs.Int("id", -1, "the node id of the voter to remove")
	clusterID := fs.String("cluster-id", "", "the cluster's id, checked by the quorum when given")
	if pos, err := c.parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 || *id < 0 {
		return fmt.Errorf("%w: cluster remove-voter needs --id N, and no arguments", ErrUsage)
	}
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID = int32(*id)
	if *clusterID != "" {
		req.ClusterID = clusterID
	}
	return c.membership(kmsg.RemoveRaftVoter.Int16(), req, "remove-voter", req.VoterID, func(r kmsg.Response) (int16, *string) {
		resp := r.(*kmsg.RemoveRaftVoterResponse)
		return resp.ErrorCode, resp.ErrorMessage
	})
}

func clusterUnregister(c *cli, args []string) error {
	fs := c.flags()
	id := fs.Int("id", -1, "the node id of the broker to unregister (stopped for good)")
	if pos, err := c.parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 || *id < 0 {
		return fmt.Errorf("%w: cluster unregister needs --id N, and no arguments", ErrUsage)
	}
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = int32(*id)
	return c.membership(kmsg.UnregisterBroker.Int16(), req, "unregister", req.BrokerID, func(r kmsg.Response) (int16, *string) {
		resp := r.(*kmsg.UnregisterBrokerResponse)
		return resp.ErrorCode, resp.ErrorMessage
	})
}

// membership sends req (API key) to the cluster and reports the outcome.
func (c *cli) membership(key int16, req kmsg.Request, action string, id int32, answer func(kmsg.Response) (int16, *string)) error {
	if err := c.connect(); err != nil {
		return err
	}
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.requireAPI(ctx, key); err != nil {
		return err
	}
	resp, err := c.cl.Request(ctx, req)
	if err != nil {
		return fmt.Errorf("%s %d: %w", action, id, err)
	}
	code, msg := answer(resp)
	if err := kerr.ErrorForCode(code); err != nil {
		return fmt.Errorf("%s %d: %w", action, id, brokerError(err, deref(msg)))
	}
	if c.json {
		return c.printJSON(membershipOut{Action: action, NodeID: id})
	}
	fmt.Fprintf(c.stdout, "%s %d: done\n", action, id)
	return nil
}
