package integration

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/kube"
)

// TestEnsureKey, on the real API server: the key Secret is created once, with 32
// random bytes or the legacy key (0.1.0's --outbox-key), read back ever after, the
// same for racing creators; ReadKey (a dry run) never creates it.
func TestEnsureKey(t *testing.T) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	client, err := kube.New(env.Config)
	must(t, err)
	const name = "agentenv-scheduler-watchdog-key"

	ns, err := env.CreateNamespace(ctx, "key")
	must(t, err)
	if key, err := kube.ReadKey(ctx, client, ns, name); key != nil || err != nil {
		t.Fatalf("ReadKey of a missing Secret: %q, %v", key, err)
	}
	if _, err := env.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("ReadKey created the Secret: %v", err)
	}
	first, err := kube.EnsureKey(ctx, client, ns, name, nil)
	must(t, err)
	if len(first) != 32 {
		t.Fatalf("a new key of %d bytes, want 32", len(first))
	}
	again, err := kube.EnsureKey(ctx, client, ns, name, []byte(outboxKey))
	must(t, err)
	if !bytes.Equal(again, first) {
		t.Fatalf("a second EnsureKey changed the key (a legacy key must not replace an existing one)")
	}
	s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	must(t, err)
	if !bytes.Equal(s.Data["key"], first) || s.Labels["app.kubernetes.io/managed-by"] != "agentenv-scheduler-watchdog" {
		t.Fatalf("Secret data %v labels %v", len(s.Data["key"]), s.Labels)
	}

	// An upgrade from 0.1.0: seeded with its key.
	ns, err = env.CreateNamespace(ctx, "key-legacy")
	must(t, err)
	got, err := kube.EnsureKey(ctx, client, ns, name, []byte(outboxKey))
	must(t, err)
	if string(got) != outboxKey {
		t.Fatalf("seeded key %q, want the legacy one", got)
	}

	// Racing creators (two passes at once): one key for all.
	ns, err = env.CreateNamespace(ctx, "key-race")
	must(t, err)
	keys := make([][]byte, 6)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := kube.EnsureKey(ctx, client, ns, name, nil)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !bytes.Equal(k, keys[0]) || len(k) != 32 {
			t.Fatalf("racing EnsureKey returned different keys")
		}
	}
}

// TestCheckCreatesKeySecret: a dry run leaves no key Secret; the first real pass
// creates it, seeded from --outbox-key, and seals the outbox with it.
func TestCheckCreatesKeySecret(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	ctx, cancel := testenv.Ctx()
	defer cancel()
	get := func() ([]byte, error) {
		sec, err := env.Client.CoreV1().Secrets(s.ns).Get(ctx, "agentenv-scheduler-watchdog-key", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return sec.Data["key"], nil
	}
	s.check("--dry-run", "--outbox-key", outboxKey).expect(t, 0, "healthy", "none")
	if _, err := get(); !apierrors.IsNotFound(err) {
		t.Fatalf("a dry run created the key Secret: %v", err)
	}
	s.check("--outbox-key", outboxKey).expect(t, 0, "healthy", "none")
	key, err := get()
	must(t, err)
	if string(key) != outboxKey {
		t.Fatalf("the key Secret holds %d bytes, want the --outbox-key it was seeded from", len(key))
	}
}

// TestMissingNamespaceSaidFirst: check and doctor with a --namespace that does not
// exist say so, first (before: a blind verdict and a state error that did not say why).
func TestMissingNamespaceSaidFirst(t *testing.T) {
	args := []string{"--kubeconfig", env.Kubeconfig, "--namespace", "no-such-namespace", "--timeout", "30s"}
	r := runCLI(t, append([]string{"check", "--output", "json"}, args...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "namespace no-such-namespace does not exist") {
		t.Errorf("check: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	d := runCLI(t, append([]string{"doctor", "--output", "text"}, args...)...)
	i := strings.Index(d.stdout, "✗")
	if d.code != 1 || i < 0 || !strings.Contains(strings.SplitN(d.stdout[i:], "\n", 2)[0], "namespace") || !strings.Contains(d.stdout, "namespace no-such-namespace does not exist") {
		t.Errorf("doctor: exit %d, want the namespace as its first failure:\n%s", d.code, d.stdout)
	}
}
