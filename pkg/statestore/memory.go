package statestore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentenv/watchdog/pkg/state"
)

// MemoryStore is a Store kept in memory (tests, backtest): the same codec, recovery
// and optimistic concurrency (a stale snapshot's write, or creating what another
// writer created, fails with ErrConflict), without an API server.
type MemoryStore struct {
	Namespace string
	Name      string
	Key       []byte // as Store.Key

	mu sync.Mutex
	cm *corev1.ConfigMap // nil until created
	rv int
}

// Load reads the state as Store.Load does.
func (m *MemoryStore) Load(context.Context) (*Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return snapshotOf(m.cm.DeepCopy(), m.Namespace, m.Name, m.Key) // nil stays nil
}

// Save writes s as Store.Save does, with snap's resourceVersion as precondition.
func (m *MemoryStore) Save(_ context.Context, snap *Snapshot, s *state.State, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cm, err := configMapOf(snap, s, now, m.Namespace, m.Name)
	if err != nil {
		return err
	}
	switch {
	case snap.configMap == nil && m.cm != nil:
		return fmt.Errorf("create state ConfigMap %s/%s: %w", m.Namespace, m.Name, ErrConflict)
	case snap.configMap != nil && (m.cm == nil || cm.ResourceVersion != m.cm.ResourceVersion):
		return fmt.Errorf("update state ConfigMap %s/%s at resourceVersion %s: %w", m.Namespace, m.Name, snap.ResourceVersion, ErrConflict)
	}
	m.store(cm)
	snap.saved(m.cm.DeepCopy(), s)
	return nil
}

// store keeps cm as a new version unless, as on the API server, nothing changed.
func (m *MemoryStore) store(cm *corev1.ConfigMap) {
	if m.cm != nil && maps.Equal(m.cm.Data, cm.Data) && maps.Equal(m.cm.Labels, cm.Labels) {
		return
	}
	m.rv++
	cm.ResourceVersion = strconv.Itoa(m.rv)
	m.cm = cm
}

// SetData replaces (or creates) the stored data as another writer or kubectl edit would.
func (m *MemoryStore) SetData(data map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cm := cmp.Or(m.cm.DeepCopy(), &corev1.ConfigMap{})
	cm.Name, cm.Namespace, cm.Data = m.Name, m.Namespace, maps.Clone(data)
	m.store(cm)
}

// Data is a copy of the stored ConfigMap's data; nil if it does not exist.
func (m *MemoryStore) Data() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cm == nil {
		return nil
	}
	return maps.Clone(m.cm.Data)
}
