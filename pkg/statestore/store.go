// Package statestore keeps the state document (pkg/state) in a ConfigMap: read and
// written with optimistic concurrency, an unreadable document kept aside, and an
// in-memory store with the same contract for tests (docs/design.md §3).
package statestore

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/state"
)

// Keys in the state ConfigMap.
const (
	DataKey = "state.json"
	// CorruptKey keeps the last unreadable document for a human: recovering loses nothing.
	CorruptKey = "state.unreadable.json"
	// MetricsKey keeps a CronJob run's pushed counter totals (pkg/metrics): losing them is a counter reset.
	MetricsKey = "metrics.json"
	// SealKey holds the state document's HMAC-SHA256 under the watchdog's key;
	// TamperedKey keeps the last document whose seal did not verify.
	SealKey     = "state.seal"
	TamperedKey = "state.tampered.json"
)

// ErrConflict means another writer changed the ConfigMap since it was read.
var ErrConflict = errors.New("state ConfigMap changed since it was read")

// Store reads and writes the state ConfigMap with optimistic concurrency.
type Store struct {
	Client    *kube.Client
	Namespace string
	Name      string
	Key       []byte // seals the whole document (SealKey); empty: neither sealed nor checked
}

// Snapshot is a state read at one resourceVersion.
type Snapshot struct {
	State           *state.State
	ResourceVersion string // the ConfigMap's when read; "" if it did not exist
	Recovered       string // why the stored document was not used (a warning), or ""
	// Tampered says why the stored document's seal did not verify (unused, kept under TamperedKey), or "".
	Tampered string

	configMap *corev1.ConfigMap
	aside     map[string]string // the unused document, under CorruptKey or TamperedKey
}

// Load reads the state: a fresh one for a missing ConfigMap or an unreadable document
// (Recovered says which); an error for an API failure or a newer watchdog's document.
func (st *Store) Load(ctx context.Context) (*Snapshot, error) {
	cm, err := st.Client.GetConfigMap(ctx, st.Namespace, st.Name)
	if apierrors.IsNotFound(err) {
		cm, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state ConfigMap %s/%s: %w", st.Namespace, st.Name, err)
	}
	return snapshotOf(cm, st.Namespace, st.Name, st.Key)
}

// snapshotOf reads the state out of cm (nil: the ConfigMap does not exist).
func snapshotOf(cm *corev1.ConfigMap, namespace, name string, key []byte) (*Snapshot, error) {
	if cm == nil {
		return &Snapshot{State: state.New(), Recovered: fmt.Sprintf("state ConfigMap %s/%s not found: starting with empty state", namespace, name)}, nil
	}
	snap := &Snapshot{State: state.New(), ResourceVersion: cm.ResourceVersion, configMap: cm}
	raw, ok := cm.Data[DataKey]
	if !ok {
		return snap, nil
	}
	if len(key) > 0 && !hmac.Equal([]byte(cm.Data[SealKey]), []byte(Seal(key, namespace, name, raw))) {
		// Nothing of it is used: not its restarts, alerts, outbox or back-off.
		snap.aside = map[string]string{TamperedKey: state.BoundCorrupt(raw)}
		snap.Tampered = fmt.Sprintf("the state in ConfigMap %s/%s is not sealed with the watchdog's key: edited by someone else "+
			"(or the first run of a sealing watchdog over an unsealed 0.1.0 document); this run decides from a fresh state and "+
			"keeps the document under key %s", namespace, name, TamperedKey)
		return snap, nil
	}
	s, err := state.Decode([]byte(raw))
	var newer *state.NewerVersionError
	if errors.As(err, &newer) {
		return nil, fmt.Errorf("state ConfigMap %s/%s: %w", namespace, name, err)
	}
	if err != nil {
		snap.aside = map[string]string{CorruptKey: state.BoundCorrupt(raw)}
		snap.Recovered = fmt.Sprintf("state in ConfigMap %s/%s key %s is unreadable (%v): starting with empty state; the old document will be kept under key %s", namespace, name, DataKey, err, CorruptKey)
		return snap, nil
	}
	snap.State = s
	return snap, nil
}

// Save writes s, creating the ConfigMap if the snapshot saw none, else updating it at
// the snapshot's resourceVersion (a lost race wraps ErrConflict); the snapshot moves on.
func (st *Store) Save(ctx context.Context, snap *Snapshot, s *state.State, now time.Time) error {
	cm, err := configMapOf(snap, s, now, st.Namespace, st.Name, st.Key)
	if err != nil {
		return err
	}
	saved, err := st.write(ctx, cm, snap.configMap == nil)
	if err != nil {
		return err
	}
	snap.saved(saved, s)
	return nil
}

// UpdateKey sets one key of the state ConfigMap (created when missing) to f of its
// value ("" when absent), the other keys written back as read, once: a lost race wraps
// ErrConflict. The metrics push calls it after the pass Lease is released, so a pass
// begun meanwhile (a hand-run check) can win; the CronJob's Forbid policy keeps its runs apart.
func (st *Store) UpdateKey(ctx context.Context, key string, f func(old string) (string, error)) error {
	cm, err := st.Client.GetConfigMap(ctx, st.Namespace, st.Name)
	exists := err == nil
	if apierrors.IsNotFound(err) {
		cm, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("read state ConfigMap %s/%s: %w", st.Namespace, st.Name, err)
	}
	cm = orNew(cm, st.Namespace, st.Name)
	v, err := f(cm.Data[key])
	if err != nil {
		return fmt.Errorf("state ConfigMap %s/%s key %s: %w", st.Namespace, st.Name, key, err)
	}
	cm.Data[key] = v
	_, err = st.write(ctx, cm, !exists)
	return err
}

// write creates cm, or updates it with its resourceVersion as the precondition.
func (st *Store) write(ctx context.Context, cm *corev1.ConfigMap, create bool) (saved *corev1.ConfigMap, err error) {
	what := fmt.Sprintf("update state ConfigMap %s/%s at resourceVersion %s", st.Namespace, st.Name, cm.ResourceVersion)
	if create {
		what = fmt.Sprintf("create state ConfigMap %s/%s", st.Namespace, st.Name)
		saved, err = st.Client.CreateConfigMap(ctx, cm, metav1.CreateOptions{FieldManager: "watchdog"})
	} else {
		saved, err = st.Client.UpdateConfigMap(ctx, cm, metav1.UpdateOptions{FieldManager: "watchdog"})
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		err = ErrConflict
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return saved, nil
}

// orNew is cm with a data map, or for nil a new, labelled state ConfigMap.
func orNew(cm *corev1.ConfigMap, namespace, name string) *corev1.ConfigMap {
	if cm == nil {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{
				"app.kubernetes.io/name": "agentenv-scheduler-watchdog", "app.kubernetes.io/component": "state",
				"app.kubernetes.io/managed-by": kube.ManagedBy,
			}},
			Data: map[string]string{},
		}
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	return cm
}

// configMapOf is the ConfigMap that writes s over what snap read (a copy, with its resourceVersion).
func configMapOf(snap *Snapshot, s *state.State, now time.Time, namespace, name string, key []byte) (*corev1.ConfigMap, error) {
	s.UpdatedAt = now.UTC()
	data, err := state.Encode(s, now)
	if err != nil {
		return nil, err
	}
	cm := orNew(snap.configMap.DeepCopy(), namespace, name)
	cm.Data[DataKey] = string(data)
	delete(cm.Data, SealKey)
	if len(key) > 0 {
		cm.Data[SealKey] = Seal(key, namespace, name, string(data))
	}
	maps.Copy(cm.Data, snap.aside)
	return cm, nil
}

// Seal is the MAC of the whole state document doc, bound to the ConfigMap it is in.
func Seal(key []byte, namespace, name, doc string) string {
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "agentenv-watchdog state v1\n%s\n%s\n", namespace, name)
	mac.Write([]byte(doc))
	return "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))
}

// saved moves the snapshot to the version just written.
func (s *Snapshot) saved(cm *corev1.ConfigMap, st *state.State) {
	s.configMap = cm
	s.ResourceVersion = cm.ResourceVersion
	s.aside = nil
	s.State = st
}

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
	cm, err := configMapOf(snap, s, now, m.Namespace, m.Name, m.Key)
	if err != nil {
		return err
	}
	if (snap.configMap == nil) != (m.cm == nil) || m.cm != nil && cm.ResourceVersion != m.cm.ResourceVersion {
		return fmt.Errorf("write state ConfigMap %s/%s at resourceVersion %q: %w", m.Namespace, m.Name, snap.ResourceVersion, ErrConflict)
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
