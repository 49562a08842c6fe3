package check

import (
	"context"

	"github.com/agentenv/watchdog/pkg/decide"
)

// Prober is the pass's discovery probe (pkg/probe): Begin writes the canary, Read
// gives each observation's judged pods their readings, End removes the canary.
type Prober interface {
	Begin(ctx context.Context)
	Read(ctx context.Context, obs *decide.Observation, sel decide.Selection)
	End() error
}

func (p *pass) beginProbe() func() {
	if p.Prober == nil {
		return func() {}
	}
	p.Prober.Begin(p.ctx)
	return func() {
		if err := p.Prober.End(); err != nil {
			p.warn("canary not removed", err.Error()+"; the next pass removes it, or the garbage collector with this pod")
		}
	}
}
