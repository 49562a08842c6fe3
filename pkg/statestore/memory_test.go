package statestore_test

import (
	"testing"

	"github.com/agentenv/watchdog/internal/statetest"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// The memory store keeps the contract the ConfigMap store keeps on the API server
// (test/integration TestStateStoreContract).
func TestMemoryStoreContract(t *testing.T) {
	statetest.Contract(t, func(*testing.T) statetest.Subject {
		m := &statestore.MemoryStore{Namespace: "ns", Name: "agentenv-scheduler-watchdog"}
		return statetest.Subject{Store: m, SetData: m.SetData, Data: m.Data}
	})
}
