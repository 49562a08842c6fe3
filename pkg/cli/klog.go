package cli

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// routeKlog sends client-go's own log lines (klog: API server warnings, deprecated
// API use, throttling) through the watchdog's logger, so that stderr stays one JSON
// object per line. klog.SetLogger is not safe while others log, so it is set once
// per process, to a sink writing to the logger routed last (tests run many commands
// in one process). logr is in the build through client-go already; this is all the
// watchdog needs of an adapter such as go-logr/zerologr.
func routeKlog(log zerolog.Logger) {
	klogDest.Store(&log)
	klogOnce.Do(func() { klog.SetLogger(logr.New(&klogSink{})) })
}

var (
	klogDest atomic.Pointer[zerolog.Logger]
	klogOnce sync.Once
)

// klogSink writes to the routed logger: V(0) as info, V(1) and up as debug (klog's
// own -v, 0, gates them first). klog's Warning lines arrive as V(0) Info (klog
// passes no severity), its Error lines as Error with a nil error.
type klogSink struct {
	name string
	kv   []any
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func level(v int) zerolog.Level {
	if v > 0 {
		return zerolog.DebugLevel
	}
	return zerolog.InfoLevel
}

func (s *klogSink) Enabled(v int) bool {
	log := klogDest.Load()
	return log != nil && log.GetLevel() <= level(v)
}

func (s *klogSink) Info(v int, msg string, kv ...any) { s.write(level(v), nil, msg, kv) }

func (s *klogSink) Error(err error, msg string, kv ...any) { s.write(zerolog.ErrorLevel, err, msg, kv) }

func (s *klogSink) write(lvl zerolog.Level, err error, msg string, kv []any) {
	log := klogDest.Load()
	if log == nil {
		return
	}
	// "source", because klog passes a logger's name as the key "logger".
	e := log.WithLevel(lvl).Str("source", "klog")
	if s.name != "" {
		e = e.Str("logger", s.name)
	}
	e.Fields(s.kv).Fields(kv).Err(err).Msg(strings.TrimSuffix(msg, "\n")) // Err(nil) adds nothing
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{name: s.name, kv: append(append([]any(nil), s.kv...), kv...)}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &klogSink{name: name, kv: s.kv}
}
