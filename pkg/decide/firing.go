package decide

import (
	"fmt"
	"strings"
)

// GateAlerts holds a due restart while alerts matching --hold-restarts-on-alert fire.
const GateAlerts = "firing-alerts"

// FiringAlerts is what Alertmanager said, read just before a restart.
type FiringAlerts struct {
	Matchers string   // the configured matchers, for the messages
	Firing   []string // the active alerts that match, as alertname{labels}
	Err      error
}

// alertsGate refuses while a matching alert fires. Alertmanager unreachable lets
// the restart through (docs/design.md, "Holding restarts while alerts fire"):
// the wedge is certain, the outage behind the alerts only suspected.
func alertsGate(p *judgedPod) Gate {
	if !p.cfg.HoldOnAlerts {
		return Gate{}
	}
	a := p.obs.Alerts
	switch {
	case a == nil:
		return Gate{Name: GateAlerts, InProgress: true, Detail: "firing alerts not read yet: reading Alertmanager"}
	case a.Err != nil:
		return Gate{Name: GateAlerts, OK: true, Detail: fmt.Sprintf("cannot read the firing alerts (%v): restart allowed, the hold fails open", a.Err)}
	case len(a.Firing) > 0:
		return Gate{Name: GateAlerts, Detail: fmt.Sprintf("held while alerts fire: %s (matching %s); a restart cannot help while they do", strings.Join(a.Firing, ", "), a.Matchers)}
	}
	return Gate{Name: GateAlerts, OK: true, Detail: fmt.Sprintf("no alert matching %s is firing", a.Matchers)}
}
