package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions, v0 to v5. v5 (KIP-1242) lets a client name the cluster and
// node it believes it reached: both or neither (INVALID_REQUEST), and a
// connection that reached another cluster or node is answered
// REBOOTSTRAP_REQUIRED, with no versions, as Kafka answers it.
func init() {
	register(api{key: kmsg.ApiVersions, min: 0, max: 5, async: handleApiVersions})
}

// handleApiVersions lists exactly the APIs and versions this broker serves.
// It runs inline: it touches nothing but the registry and the broker's
// fixed identity.
func handleApiVersions(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	if req.Version >= 5 {
		switch {
		case (req.ClusterID == nil) != (req.NodeID == -1):
			cx.reply(apiVersionsRefusal(kerr.InvalidRequest.Code))
			return
		case req.ClusterID != nil && (*req.ClusterID != s.eng.ClusterID() || req.NodeID != s.cfg.NodeID):
			cx.reply(apiVersionsRefusal(kerr.RebootstrapRequired.Code))
			return
		}
	}
	cx.reply(apiVersionsResponse(0))
}

// transactionVersion is the level of Kafka's transaction.version feature
// this broker serves and finalizes: 2, transactions v2 (KIP-890 part 2:
// Produce v12+ and TxnOffsetCommit v5 add their partitions to the
// transaction, EndTxn v5 bumps the producer's epoch), as a Kafka 4 cluster
// created new finalizes it. Clients opt in to v2 by this feature (franz-go,
// the Java client), and fall back to AddPartitionsToTxn and EndTxn v4
// without it.
const transactionVersion = 2

func apiVersionsResponse(code int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = code
	if code == 0 {
		// Features (KIP-584, v3+): only transaction.version, the one a
		// client acts on here. The finalized levels never change, so
		// their epoch does not either.
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = "transaction.version", 0, transactionVersion
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = "transaction.version", transactionVersion, transactionVersion
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		resp.FinalizedFeaturesEpoch = 1
	}
	for _, a := range apis {
		if a == nil {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = int16(a.key), a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}

// apiVersionsRefusal is v5's answer to a client that named the wrong
// cluster or node, or only one of them: the code and nothing else.
func apiVersionsRefusal(code int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = code
	return resp
}
