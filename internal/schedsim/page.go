package schedsim

import (
	"fmt"
	"strings"
)

// Values are what a simulated scheduler's metrics page says.
type Values struct {
	Ready, Connecting, Unhealthy, Lingering int
	// HeartbeatOK and HeartbeatRejected are Heartbeat RPC counts; a zero count is
	// left out of the page, as the scheduler creates a series on its first RPC.
	HeartbeatOK, HeartbeatRejected uint64
	// WatchAge, when set, adds the proposed freshness gauge.
	WatchAge *float64
}

// Page renders v in the scheduler's exposition format (see testdata/).
func Page(v Values) string {
	var b strings.Builder
	b.WriteString("# HELP agentenv_scheduler_observed_nodes Observed node count by derived status.\n")
	b.WriteString("# TYPE agentenv_scheduler_observed_nodes gauge\n")
	for _, s := range []struct {
		status string
		n      int
	}{{"connecting", v.Connecting}, {"lingering", v.Lingering}, {"ready", v.Ready}, {"unhealthy", v.Unhealthy}, {"unspecified", 0}} {
		fmt.Fprintf(&b, "agentenv_scheduler_observed_nodes{status=%q} %d\n", s.status, s.n)
	}
	b.WriteString("# HELP agentenv_scheduler_rpc_duration_seconds Scheduler gRPC duration by RPC and status.\n")
	b.WriteString("# TYPE agentenv_scheduler_rpc_duration_seconds histogram\n")
	for _, s := range []struct {
		status string
		n      uint64
	}{{"ok", v.HeartbeatOK}, {"invalid_argument", v.HeartbeatRejected}} {
		if s.n == 0 {
			continue
		}
		for _, le := range []string{"0.001", "0.01", "0.1", "1", "+Inf"} {
			fmt.Fprintf(&b, "agentenv_scheduler_rpc_duration_seconds_bucket{rpc=\"Heartbeat\",status=%q,le=%q} %d\n", s.status, le, s.n)
		}
		fmt.Fprintf(&b, "agentenv_scheduler_rpc_duration_seconds_sum{rpc=\"Heartbeat\",status=%q} %g\n", s.status, float64(s.n)*0.0013)
		fmt.Fprintf(&b, "agentenv_scheduler_rpc_duration_seconds_count{rpc=\"Heartbeat\",status=%q} %d\n", s.status, s.n)
	}
	if v.WatchAge != nil {
		b.WriteString("# HELP agentenv_scheduler_watch_last_event_age_seconds Seconds since the discovery watch last delivered an event.\n")
		b.WriteString("# TYPE agentenv_scheduler_watch_last_event_age_seconds gauge\n")
		fmt.Fprintf(&b, "agentenv_scheduler_watch_last_event_age_seconds %g\n", *v.WatchAge)
	}
	b.WriteString("# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines 42\n")
	return b.String()
}
