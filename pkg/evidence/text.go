package evidence

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/termtext"
)

// WriteText writes the bundle for a person (history --evidence).
func (b Bundle) WriteText(w io.Writer) error {
	termtext.Fprintf(w, "evidence %s\n", b.Key)
	if b.Integrity != "" {
		termtext.Fprintf(w, "  seal: %s %s\n", mark[b.Integrity == IntegritySealed], Integrities[b.Integrity])
	}
	termtext.Fprintf(w, "  %s of %s (%s) at %s: %s, %s evidence\n  reason: %s\n", b.Action, b.Pod, b.UID, b.At.Format(time.RFC3339), b.Verdict, b.Evidence, b.Reason)
	for _, g := range b.Gates {
		termtext.Fprintf(w, "  gate %s %s: %s\n", mark[g.OK], g.Name, g.Detail)
	}
	if s := b.Sample; s != nil {
		var observed []string
		for _, status := range slices.Sorted(maps.Keys(s.Observed)) {
			observed = append(observed, fmt.Sprintf("%s %d", status, s.Observed[status]))
		}
		termtext.Fprintf(w, "  metrics: observed_nodes %s; heartbeats ok %d, rejected %d\n", strings.Join(observed, ", "), s.HeartbeatOK, s.HeartbeatRejected)
	}
	if e := b.Endpoints; e != nil {
		termtext.Fprintf(w, "  endpoints: %d serving node(s), %d lingering, in %d slice(s)\n", e.Serving, e.Lingering, e.Slices)
	}
	st := b.Status
	termtext.Fprintf(w, "  pod: phase %s, ready %v, running %v since %s, %s\n", st.Phase, st.Ready, st.Running, st.StartedAt.Format(time.RFC3339), cmp.Or(st.Controller, "-"))
	for _, warn := range b.Warnings {
		termtext.Fprintf(w, "  warning: %s\n", warn)
	}
	if b.LogError != "" {
		termtext.Fprintf(w, "  log: not saved: %s\n", b.LogError)
		return nil
	}
	termtext.Fprintf(w, "  log (last %d line(s)):\n", strings.Count(b.Log, "\n"))
	for _, line := range strings.Split(strings.TrimSuffix(b.Log, "\n"), "\n") {
		termtext.Fprintf(w, "    %s\n", line)
	}
	return nil
}

var mark = map[bool]string{true: "✓", false: "✗"}
