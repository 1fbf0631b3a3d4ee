package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// InitProducerId, v0 to v5, for idempotent producers (KIP-98): a new
// producer id with epoch 0. franz-go and the Java client ask for one by
// default, before their first produce.
//
// Kafka hands an idempotent producer a new id even when it sends its
// current id and epoch (v3+, KIP-360, bumping after an error): only a
// transactional producer keeps its id across InitProducerId. So does this
// broker. The ids come in blocks from the metadata quorum
// (engine.Config.ProducerIDBlock), so that no two brokers hand out one id.
// Transactional ids are refused (see handleProduce for the choice of
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
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
	case req.TransactionalID != nil && *req.TransactionalID == "":
		// Kafka's coordinator refuses an empty transactional id outright.
		return fail(kerr.InvalidRequest.Code)
	case req.TransactionalID != nil:
		return fail(kerr.TransactionalIDAuthorizationFailed.Code)
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
