package state

import "time"

// MaxMissing bounds the nodes a probe record names: enough to tell and to judge.
const MaxMissing = 20

// Probe is what the discovery probe remembers of one process (docs/design.md, "The
// discovery probe"); it is reset with the process.
type Probe struct {
	// Unseen sums the time the watchdog's canaries existed, verified as written,
	// without this process listing them; CreditedTo is how far the current canary
	// (by its node id) is counted.
	Unseen     Duration   `json:"canaryUnseen,omitempty"`
	Canary     string     `json:"canary,omitempty"`
	CreditedTo *time.Time `json:"creditedTo,omitempty"`
	SeenAt     *time.Time `json:"canarySeenAt,omitempty"` // a canary last showed
	// Missing: serving nodes the API server listed that the scheduler did not know, since when.
	Missing map[string]time.Time `json:"missing,omitempty"`
}
