package alert

// The events the watchdog tells people about: one literal per event holds every
// fact sinks, Kubernetes Events and the docs (`make event-docs`) use.

// Event names are part of the interface: receivers route on them.
const (
	EventWedged             = "wedged"
	EventRestarted          = "restarted"
	EventWouldRestart       = "would-restart" // shadow mode would have restarted, and did not
	EventRestartFailed      = "restart-failed"
	EventRestartBlocked     = "restart-blocked"
	EventRestartIneffective = "restart-ineffective"
	EventDegraded           = "degraded"
	EventNodesUnreachable   = "nodes-unreachable"
	EventRecovered          = "recovered"
	EventBlind              = "blind"
	EventWatchdogError      = "watchdog-error"
	EventPauseInvalid       = "pause-invalid"
	EventTest               = "test"
)

// Severities.
const (
	SeverityCritical = "critical"
	SeverityWarning  = "warning"
	SeverityInfo     = "info"
)

// Kind says how an event lives, which decides how every sink treats it.
type Kind string

const (
	// Ongoing: a problem that lasts: reminded, refreshed, closed by recovered.
	Ongoing Kind = "ongoing"
	// OneShot: something that happened, sent once; in Alertmanager it ends a TTL later.
	OneShot Kind = "one-shot"
	// Resolution: no alert of its own; Alertmanager gets the alerts it closes resolved.
	Resolution Kind = "resolution"
)

// EventSpec is everything about one event. Every field is set for every event
// (but Alertname for a Resolution).
type EventSpec struct {
	Name     string
	Severity string
	Kind     Kind
	// Reason is the Kubernetes Event reason (stable: people filter on it). The
	// Event's type is Normal for info, Warning otherwise.
	Reason    string
	Alertname string // routing trees match on it
	Emoji     string // starts the Slack title
	NextStep  string // tells a human what to do
	When      string // for the docs' tables: when the event is sent
}

// Events lists every event, in the order the docs show them.
var Events = []EventSpec{
	{
		Name: EventWedged, Severity: SeverityCritical, Kind: Ongoing,
		Reason: "SchedulerWedged", Alertname: "AgentenvSchedulerWedged", Emoji: ":rotating_light:",
		NextStep: "The watchdog restarts the scheduler once the wedge is confirmed. If it cannot, check the scheduler's logs and its RBAC for EndpointSlices, then `kubectl delete pod` it.",
		When:     "a pod is judged wedged (past its startup grace), at once, before the restart; reminded while it lasts",
	},
	{
		Name: EventRestarted, Severity: SeverityWarning, Kind: OneShot,
		Reason: "WatchdogRestarted", Alertname: "AgentenvSchedulerRestarted", Emoji: ":arrows_counterclockwise:",
		NextStep: "Watch the new scheduler pod become healthy (`watchdog status`); repeated restarts mean the cause is outside the pod.",
		When:     "the watchdog restarted a pod (one per restart; the Event also goes on the Deployment)",
	},
	{
		Name: EventWouldRestart, Severity: SeverityWarning, Kind: OneShot,
		Reason: "WatchdogWouldRestart", Alertname: "AgentenvSchedulerWouldRestart", Emoji: ":ghost:",
		NextStep: "Shadow mode: nothing was restarted. Check that this matches a real outage (`watchdog status`); if the scheduler stays wedged, restart it by hand (`kubectl -n <namespace> delete pod <pod>`).",
		When:     "shadow mode (`--shadow`) would have restarted a pod and did not (one per episode; recorded in the state)",
	},
	{
		Name: EventRestartFailed, Severity: SeverityCritical, Kind: OneShot,
		Reason: "WatchdogRestartFailed", Alertname: "AgentenvSchedulerRestartFailed", Emoji: ":x:",
		NextStep: "Restart the scheduler by hand (`kubectl -n <namespace> delete pod <pod>`) and fix the watchdog's permissions or API access.",
		When:     "the delete or patch was refused (one per attempt); the run exits 1",
	},
	{
		Name: EventRestartBlocked, Severity: SeverityCritical, Kind: Ongoing,
		Reason: "WatchdogRestartBlocked", Alertname: "AgentenvSchedulerRestartBlocked", Emoji: ":no_entry:",
		NextStep: "A restart is due but a safety gate refused it (see reason). Decide whether to restart by hand.",
		When:     "a restart is due but a gate refuses it (budget, rollout, leader, ...); not for a restart already in progress, nor one held back by the back-off alone",
	},
	{
		Name: EventRestartIneffective, Severity: SeverityCritical, Kind: Ongoing,
		Reason: "WatchdogRestartIneffective", Alertname: "AgentenvSchedulerRestartIneffective", Emoji: ":repeat:",
		NextStep: "Restarting does not fix it: find the cause outside the scheduler (its RBAC for EndpointSlices, NetworkPolicy, the nodes' network). The watchdog waits longer between restarts until the scheduler stays healthy.",
		When:     "a restart did not heal (the replacement wedged again soon after its start): the watchdog backs off between restarts (`--restart-backoff`, doubling up to `--restart-backoff-max`, reset once the scheduler stays healthy)",
	},
	{
		Name: EventDegraded, Severity: SeverityWarning, Kind: Ongoing,
		Reason: "SchedulerDegraded", Alertname: "AgentenvSchedulerDegraded", Emoji: ":warning:",
		NextStep: "Discovery looks stale: some nodes heartbeat but are rejected. Consider a restart (`kubectl rollout restart deployment/agentenv-scheduler`).",
		When:     "some nodes ready but fewer than serve, with heartbeats rejected, for `--wedged-for`",
	},
	{
		Name: EventNodesUnreachable, Severity: SeverityCritical, Kind: Ongoing,
		Reason: "NodesUnreachable", Alertname: "AgentenvSchedulerNodesUnreachable", Emoji: ":electric_plug:",
		NextStep: "The scheduler's discovery works but no node reports to it: a restart does not help. Check the nodes' network path to the scheduler's gRPC port (NetworkPolicy, DNS of the scheduler Service, the nodes' logs).",
		When:     "ready 0 while the scheduler's ListNodes names every serving node and no heartbeat is rejected (the discovery probe): never restarted",
	},
	{
		Name: EventRecovered, Severity: SeverityInfo, Kind: Resolution,
		Reason: "SchedulerRecovered", Emoji: ":white_check_mark:",
		NextStep: "Nothing to do.",
		When:     "a clean run finds it healthy (or no-nodes with no wedge open) again after any other alert, `watchdog-error` included; once per episode; resolves what it closes",
	},
	{
		Name: EventBlind, Severity: SeverityWarning, Kind: Ongoing,
		Reason: "WatchdogBlind", Alertname: "AgentenvWatchdogBlind", Emoji: ":see_no_evil:",
		NextStep: "The watchdog cannot see the scheduler's state: check the metrics endpoint, network policy and the watchdog's RBAC.",
		When:     "verdict `unknown` in `--blind-after` runs since a run last saw the scheduler fine (the bad runs of an episode do not reset the count)",
	},
	{
		Name: EventWatchdogError, Severity: SeverityCritical, Kind: Ongoing,
		Reason: "WatchdogError", Alertname: "AgentenvWatchdogError", Emoji: ":boom:",
		NextStep: "The watchdog cannot do its job: read its Job logs (`kubectl logs job/...`).",
		When:     "the watchdog cannot do its job (API refused, state not writable or of a newer version, nodes Service or port misnamed); never for a pass cut short by its own shutdown",
	},
	{
		Name: EventPauseInvalid, Severity: SeverityWarning, Kind: OneShot,
		Reason: "PauseAnnotationInvalid", Alertname: "AgentenvWatchdogPauseInvalid", Emoji: ":warning:",
		NextStep: "Fix or remove the pause annotations on the scheduler Deployment: an RFC 3339 expiry at most 7 days ahead and a reason (docs/design.md, \"Pause\").",
		When:     "a pause annotation makes no valid pause (ignored: restarts go ahead) or ends more than 7 days after it was first seen (capped there); once per annotation",
	},
	{
		Name: EventTest, Severity: SeverityInfo, Kind: OneShot,
		Reason: "WatchdogTest", Alertname: "AgentenvWatchdogTest", Emoji: ":test_tube:",
		NextStep: "Nothing to do: this only proves the alert path works.",
		When:     "`watchdog notify test` or `doctor --send-test`: marked as a test in every payload; sinks only, no Kubernetes Event",
	},
}

var eventsByName = func() map[string]EventSpec {
	m := make(map[string]EventSpec, len(Events))
	for _, e := range Events {
		m[e.Name] = e
	}
	return m
}()

// Lookup returns the spec of a known event.
func Lookup(event string) (EventSpec, bool) {
	e, ok := eventsByName[event]
	return e, ok
}

// Spec returns the spec of event; the zero spec for an unknown one.
func Spec(event string) EventSpec { return eventsByName[event] }
