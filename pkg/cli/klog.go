package cli

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/go-logr/zerologr"
	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// routeKlog sends client-go's own log lines (klog: API server warnings, throttling)
// to out at level, as the watchdog's own, so that stderr stays one JSON object per
// line: V(0) as info (klog's warnings too: it passes no severity), V(1) as debug.
// klog.SetLogger is not safe while others log, so it is set once per process, over a
// writer that follows the destination routed last (tests run many commands in one).
func routeKlog(out io.Writer, level zerolog.Level) {
	klogDest.Store(&klogTarget{out, level})
	klogOnce.Do(func() {
		// "source": zerologr writes a logger's name as "logger". At debug, zerologr
		// reports V(2) and up disabled, so client-go does not even format them.
		l := zerolog.New(klogWriter{}).Level(zerolog.DebugLevel).With().Timestamp().Str("source", "klog").Logger()
		klog.SetLogger(zerologr.New(&l))
	})
}

type klogTarget struct {
	out   io.Writer
	level zerolog.Level
}

var (
	klogDest atomic.Pointer[klogTarget]
	klogOnce sync.Once
)

// klogWriter writes klog's lines to the destination routed last, at its level.
type klogWriter struct{}

func (w klogWriter) Write(p []byte) (int, error) { return w.WriteLevel(zerolog.NoLevel, p) }

func (klogWriter) WriteLevel(level zerolog.Level, p []byte) (int, error) {
	if t := klogDest.Load(); t != nil && level >= t.level {
		return t.out.Write(p)
	}
	return len(p), nil
}
