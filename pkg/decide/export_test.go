package decide

import "github.com/agentenv/watchdog/pkg/state"

// EveryGate runs each restart gate over the first pod of o, judged against s at o.At
// as one of one (takeOver: completing an unfinished claim), calling after with each
// gate's name once it ran; then runGates and the wedged-for gate.
func EveryGate(o Observation, s *state.State, cfg Config, takeOver bool, after func(gate string)) {
	p := &judgedPod{Pod: o.Pods[0], obs: o, state: s, cfg: cfg, now: o.At, judged: 1, rec: s.Pods[o.Pods[0].UID], takeOver: takeOver}
	for _, g := range restartGates {
		g.check(p)
		after(g.name)
	}
	p.runGates(&Target{})
	p.restartDue(&Target{})
}
