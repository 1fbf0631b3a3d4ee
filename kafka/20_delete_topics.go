package kafka

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
	"ringlog/replication/controller"
)

// DeleteTopics v0-v6: by name, and from v6 by topic id too (KIP-516).
// v4 is flexible, v5 adds error messages. The controller deletes the
// topic, and the answer waits until this broker applied the deletion: the
// topic's partition folders here are gone when it is sent (the engine
// renames them out of the way first, so a crash midway finishes the
// deletion at the next start); other brokers delete theirs as they apply
// it. With an authorizer, the principal needs DELETE on the cluster or on
// the topic (TOPIC_AUTHORIZATION_FAILED), and a topic it may not DESCRIBE
// is refused without its existence or (named by id) its name being told.
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
	// With an authorizer, DELETE on the cluster allows every topic.
	clusterDelete := s.authorizeCluster(cx, acl.OpDelete)
	mq := s.newMutationQuota(cx, 5) // KIP-599: strict from v5
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
		resp.Topics = append(resp.Topics, s.deleteTopic(cx, d, clusterDelete, mq))
	}
	resp.ThrottleMillis = int32(mq.throttleTime(cx).Milliseconds())
	return resp
}

// deleteTopic deletes the topic d names, by name or id, through the
// controller.
func (s *Server) deleteTopic(cx *reqCtx, d *deleteTarget, clusterDelete bool, mq *mutationQuota) kmsg.DeleteTopicsResponseTopic {
	var zero [16]byte
	switch {
	case d.name == nil && d.id == zero:
		return deleteAnswer(nil, zero, refuse(kerr.InvalidRequest, "Neither topic name nor id were specified."))
	case d.name != nil && d.id != zero:
		return deleteAnswer(d.name, d.id, refuse(kerr.InvalidRequest, "You may not specify both topic name and topic id."))
	}
	img := s.cfg.Node.Image()
	// Kafka's controller checks DESCRIBE and DELETE on the topic: a
	// topic named by id is looked up first, and its name is told only to
	// a principal that may describe it; a topic named by name is refused
	// before its existence is told, unless the principal may describe it.
	describable := func(name string) bool {
		return clusterDelete || s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, name)
	}
	deletable := func(name string) bool {
		return clusterDelete || s.authorize(cx, acl.OpDelete, acl.ResourceTopic, name)
	}
	refused := refuse(kerr.TopicAuthorizationFailed, "%s", kerr.TopicAuthorizationFailed.Message)
	var t *controller.Topic
	if d.name == nil {
		if t = img.TopicByID(controller.TopicID(d.id)); t == nil {
			return deleteAnswer(nil, d.id, refuse(kerr.UnknownTopicID, "No topic with id %s", uuidString(d.id)))
		}
		if !deletable(t.Name) {
			if describable(t.Name) {
				return deleteAnswer(&t.Name, d.id, refused)
			}
			return deleteAnswer(nil, d.id, refused)
		}
		d.name = &t.Name
	} else if !describable(*d.name) {
		return deleteAnswer(d.name, d.id, refused)
	} else if t = img.Topic(*d.name); t == nil {
		return deleteAnswer(d.name, d.id, refuse(kerr.UnknownTopicOrPartition, "No topic named %s", *d.name))
	}
	if !deletable(t.Name) {
		return deleteAnswer(d.name, d.id, refused)
	}
	// The controller mutation quota (KIP-599): its partitions, once the
	// topic is known and may be deleted, as Kafka's controller takes them.
	if err := mq.take(len(t.Partitions)); err != nil {
		return deleteAnswer(d.name, [16]byte(t.ID), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	err := s.cfg.Node.Controller().DeleteTopic(ctx, t.Name)
	if err == nil {
		err = s.waitApplied(ctx)
	} else {
		mq.give(len(t.Partitions))
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
