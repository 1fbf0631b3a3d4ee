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

func apiVersionsResponse(code int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = code
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
