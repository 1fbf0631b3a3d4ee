//go:build tools

// Package deps pins modules that the layers under construction import, so
// that parallel work does not race on go.mod. It is never built; it goes
// away once every module here is imported by real code.
package deps

import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/panjf2000/gnet/v2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "github.com/valyala/bytebufferpool"
)
