package testenv

import (
	"os"
	"path/filepath"

	"github.com/agentenv/watchdog/internal/schedsim"
)

// The simulated scheduler lives in internal/schedsim (it needs no API server);
// these names keep the harness's spelling.
type (
	Sim    = schedsim.Sim
	Phase  = schedsim.Phase
	Values = schedsim.Values
)

const (
	Healthy     = schedsim.Healthy
	DeadRolled  = schedsim.DeadRolled
	Unreachable = schedsim.Unreachable
	Flap        = schedsim.Flap
	StaleCache  = schedsim.StaleCache
)

var (
	NewSim = schedsim.NewSim
	Page   = schedsim.Page
)

// Fixture returns a file of the repository's testdata/ folder.
func Fixture(name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "testdata", name))
	return string(b), err
}
