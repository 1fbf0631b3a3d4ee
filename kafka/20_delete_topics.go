package kafka

import (
	"context"
	"encoding/base64"
	"fmt"
	"ringlog/replication/controller"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics v0-v6: by name, and from v6 by topic id too (KIP-516).
// v4 is flexible, v5 adds error messages. The controller deletes the
// topic, and the answer waits until this broker applied the deletion: the
// topic's partition folders here are gone when it is sent (the engine
// renames them out of the way first, so a crash midway finishes the
// deletion at the next start); other brokers delete theirs as they apply
// it.
func init() {
	register(api{key: kmsg.DeleteTopics, min: 0, max: 6, sync: handleDeleteTopics})
}

// deleteTarget is one topic to delete, named or identified.
type deleteTarget struct {
	name *string
	id   [16]byte
}

func (d *deleteTarget) key() string {
	if d.name != nil {
		return "n" + *d.name
	}
	return fmt.Sprintf("i%x", d.id)
}

func handleDeleteTopics(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	var targets []deleteTarget
	if req.Version < 6 {
		for i := range req.TopicNames {
			targets = append(targets, deleteTarget{name: &req.TopicNames[i]})
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, deleteTarget{name: t.Topic, id: t.TopicID})
		}
	}
	dups := duplicates(targets, (*deleteTarget).key)
	answered := make(map[string]bool, len(dups))
	for i := range targets {
		d := &targets[i]
		if dups[d.key()] {
			if answered[d.key()] {
				continue
			}
			answered[d.key()] = true
			msg := msgDuplicateTopic
			if d.name == nil {
				msg = "Duplicate topic id."
			}
			resp.Topics = append(resp.Topics, deleteAnswer(d.name, d.id, refuse(kerr.InvalidRequest, "%s", msg)))
			continue
		}
		resp.Topics = append(resp.Topics, s.deleteTopic(d))
	}
	return resp
}

// deleteTopic deletes the topic d names, by name or id, through the
// controller.
func (s *Server) deleteTopic(d *deleteTarget) kmsg.DeleteTopicsResponseTopic {
	var zero [16]byte
	switch {
	case d.name == nil && d.id == zero:
		return deleteAnswer(nil, zero, refuse(kerr.InvalidRequest, "Neither topic name nor id were specified."))
	case d.name != nil && d.id != zero:
		return deleteAnswer(d.name, d.id, refuse(kerr.InvalidRequest, "You may not specify both topic name and topic id."))
	}
	img := s.cfg.Node.Image()
	var t *controller.Topic
	if d.name == nil {
		if t = img.TopicByID(controller.TopicID(d.id)); t == nil {
			return deleteAnswer(nil, d.id, refuse(kerr.UnknownTopicID, "No topic with id %s", uuidString(d.id)))
		}
		d.name = &t.Name
	} else if t = img.Topic(*d.name); t == nil {
		return deleteAnswer(d.name, d.id, refuse(kerr.UnknownTopicOrPartition, "No topic named %s", *d.name))
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	err := s.cfg.Node.Controller().DeleteTopic(ctx, t.Name)
	if err == nil {
		err = s.waitApplied(ctx)
	}
	return deleteAnswer(d.name, [16]byte(t.ID), err)
}

func deleteAnswer(name *string, id [16]byte, err error) kmsg.DeleteTopicsResponseTopic {
	rt := kmsg.NewDeleteTopicsResponseTopic()
	rt.Topic, rt.TopicID = name, id
	rt.ErrorCode, rt.ErrorMessage = adminCode(err), errorMessage(err)
	return rt
}

// uuidString formats a topic id as Kafka prints it: URL-safe base64
// without padding.
func uuidString(id [16]byte) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}
