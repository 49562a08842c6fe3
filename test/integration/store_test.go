package integration

import (
	"context"
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
