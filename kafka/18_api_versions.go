package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{key: kmsg.ApiVersions, min: 0, max: 4, async: handleApiVersions})
}

// handleApiVersions lists exactly the APIs and versions this broker serves.
// It runs inline: it touches nothing but the registry.
func handleApiVersions(s *Server, cx *reqCtx, _ kmsg.Request) {
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
