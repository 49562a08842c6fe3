package integration

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/statetest"
	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// The ConfigMap store keeps the store contract on a real API server; the unit
// tests of pkg/check use statestore.MemoryStore, which keeps the same contract.
func TestStateStoreContract(t *testing.T) {
	client, err := kube.New(env.Config)
	must(t, err)
	statetest.Contract(t, func(t *testing.T) statetest.Subject {
		ctx, cancel := testenv.Ctx()
		defer cancel()
		ns, err := env.CreateNamespace(ctx, "store")
		must(t, err)
		const name = "agentenv-scheduler-watchdog"
		cms := env.Client.CoreV1().ConfigMaps(ns)
		return statetest.Subject{
			Store: &statestore.Store{Client: client, Namespace: ns, Name: name},
			SetData: func(data map[string]string) {
				ctx, cancel := testenv.Ctx()
				defer cancel()
				cm, err := cms.Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}, metav1.CreateOptions{})
					must(t, err)
					return
				}
				must(t, err)
				cm.Data = data
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
				must(t, err)
			},
			Data: func() map[string]string {
				cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
				must(t, err)
				return cm.Data
			},
		}
	})
}

// TestStateStoreUpdateKey: one key of the state ConfigMap rewritten on the real API
// server: the ConfigMap created when missing, the state document and other keys
// kept, and a write that lost a race to another writer refused with ErrConflict,
// the winner's value kept.
func TestStateStoreUpdateKey(t *testing.T) {
	client, err := kube.New(env.Config)
	must(t, err)
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "key")
	must(t, err)
	const name, key = "agentenv-scheduler-watchdog", statestore.MetricsKey
	cms := env.Client.CoreV1().ConfigMaps(ns)
	st := &statestore.Store{Client: client, Namespace: ns, Name: name}
	data := func() map[string]string {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		must(t, err)
		return cm.Data
	}
	appendX := func(old string) (string, error) { return old + "x", nil }
	// set writes the key as another writer would.
	set := func(v string) {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		must(t, err)
		cm.Data[key] = v
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		must(t, err)
	}

	must(t, st.UpdateKey(ctx, key, appendX)) // no ConfigMap yet
	if d := data(); d[key] != "x" {
		t.Fatalf("after a create: %v", d)
	}
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	must(t, err)
	cm.Data[statestore.DataKey] = `{"version":2}`
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	must(t, err)

	// Another writer changes the key between this one's read and write.
	must(t, st.UpdateKey(ctx, key, appendX))
	err = st.UpdateKey(ctx, key, func(old string) (string, error) {
		set(old + "y")
		return old + "x", nil
	})
	if d := data(); !errors.Is(err, statestore.ErrConflict) || d[key] != "xxy" || d[statestore.DataKey] != `{"version":2}` {
		t.Errorf("after a lost race: %v, %v; want ErrConflict, %s=xxy and the state document kept", err, d, key)
	}
}
