package integration

import (
	"os"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
)

// The shared test helpers (internal/testenv) under the short names these tests use.
var (
	must     = testenv.Must
	fixture  = testenv.MustFixture
	waitFor  = testenv.WaitFor
	freeAddr = testenv.FreeAddr
)

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func writeFile(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o600)
}

// serviceAccountToken creates (if needed) a ServiceAccount and returns a token for
// it from the TokenRequest API: the identity a CronJob's pod would have.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	seconds := int64(3600)
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	must(t, err)
	return tr.Status.Token
}
