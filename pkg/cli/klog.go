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
// API use, throttling notices) through the watchdog's logger, so that stderr stays
// one JSON object per line instead of interleaving klog's text lines.
//
// klog.SetLogger is not safe while other goroutines log, so it is called once per
// process, with a sink that writes to whichever logger was routed last (one per
// process in production; tests run many commands in one process).
//
// A few lines of logr.LogSink over zerolog rather than a dependency
// (github.com/go-logr/zerologr): logr is already in the build through client-go,
// and this is all the watchdog needs of an adapter.
func routeKlog(log zerolog.Logger) {
	klogDest.Store(&log)
	klogOnce.Do(func() { klog.SetLogger(logr.New(&klogSink{})) })
}

var (
	klogDest atomic.Pointer[zerolog.Logger]
	klogOnce sync.Once
)

// klogSink is a logr.LogSink writing to the routed zerolog logger. logr's V-levels
// map to zerolog's info (V(0)) and debug (V(1) and up); klog's own -v flag (0)
// gates them first, so client-go's chattier levels never arrive. klog's Warning
// lines arrive as V(0) Info (klog passes no severity), its Error lines as Error.
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

func (s *klogSink) event(log *zerolog.Logger, lvl zerolog.Level) *zerolog.Event {
	// "source", because klog passes a logger's name as the key "logger".
	e := log.WithLevel(lvl).Str("source", "klog")
	if s.name != "" {
		e = e.Str("logger", s.name)
	}
	return e.Fields(s.kv)
}

func (s *klogSink) Info(v int, msg string, kv ...any) {
	if log := klogDest.Load(); log != nil {
		s.event(log, level(v)).Fields(kv).Msg(strings.TrimSuffix(msg, "\n"))
	}
}

// Error is also where klog's Error/Errorf lines arrive, with a nil error.
func (s *klogSink) Error(err error, msg string, kv ...any) {
	log := klogDest.Load()
	if log == nil {
		return
	}
	e := s.event(log, zerolog.ErrorLevel).Fields(kv)
	if err != nil {
		e = e.Err(err)
	}
	e.Msg(strings.TrimSuffix(msg, "\n"))
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
