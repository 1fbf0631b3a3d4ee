package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
)

// InitProducerId, v0 to v5 (KIP-98). Without a transactional id, for
// idempotent producers: a new producer id with epoch 0. franz-go and the
// Java client ask for one by default, before their first produce. Kafka
// hands an idempotent producer a new id even when it sends its current id
// and epoch (v3+, KIP-360, bumping after an error): only a transactional
// producer keeps its id across InitProducerId. So does this broker. The
// ids come in blocks from the metadata quorum
// (engine.Config.ProducerIDBlock), so that no two brokers hand out one id.
//
// With a transactional id, the transaction coordinator (engine/txn)
// answers: the id's producer id at a bumped epoch, which fences the older
// instances; with v3+'s producer id and epoch, KIP-360's recovery.
//
// With an authorizer, a transactional producer needs WRITE on its
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), an idempotent
// one IDEMPOTENT_WRITE on the cluster or WRITE on any topic (KIP-679;
// CLUSTER_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.InitProducerID, min: 0, max: 5, sync: handleInitProducerID})
}

func handleInitProducerID(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	// A refusal names no producer: id and epoch -1, as Kafka answers.
	fail := func(code int16) kmsg.Response {
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp
	}
	switch {
	case req.TransactionalID != nil && !s.authorize(cx, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID):
		return fail(kerr.TransactionalIDAuthorizationFailed.Code)
	case req.TransactionalID == nil && !s.authorizeCluster(cx, acl.OpIdempotentWrite) &&
		!s.authorizeByResourceType(cx, acl.OpWrite, acl.ResourceTopic):
		// An idempotent producer needs IDEMPOTENT_WRITE on the cluster
		// or, since KIP-679, WRITE on any topic.
		return fail(kerr.ClusterAuthorizationFailed.Code)
	case req.TransactionalID != nil && *req.TransactionalID == "":
		// Kafka's coordinator refuses an empty transactional id outright.
		return fail(kerr.InvalidRequest.Code)
	case req.TransactionalID != nil:
		type answer struct {
			code  int16
			id    int64
			epoch int16
		}
		ch := make(chan answer, 1)
		s.cfg.Txns.InitProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch,
			func(code int16, id int64, epoch int16) { ch <- answer{code, id, epoch} })
		a := <-ch
		if a.code == kerr.ProducerFenced.Code && req.Version < 4 {
			// Clients before v4 do not know PRODUCER_FENCED.
			a.code = kerr.InvalidProducerEpoch.Code
		}
		if a.code != 0 {
			return fail(a.code)
		}
		resp.ProducerID, resp.ProducerEpoch = a.id, a.epoch
		return resp
	}
	id, err := s.eng.AllocateProducerID()
	switch {
	case errors.Is(err, engine.ErrNoProducerIDBlock):
		// A broker of a cluster waits for a block from the metadata
		// quorum. Kafka answers COORDINATOR_LOAD_IN_PROGRESS then, not
		// REQUEST_TIMED_OUT, which older clients take as fatal.
		s.log.Warn("allocate producer id", "err", err)
		return fail(kerr.CoordinatorLoadInProgress.Code)
	case err != nil:
		s.log.Error("allocate producer id", "err", err)
		return fail(errorCode(err))
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
