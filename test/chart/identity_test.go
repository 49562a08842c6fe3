package chart

// The chart's identity from outside a pod: its ServiceAccount's token, a kubeconfig
// and a client for it, and a container's environment resolved as the kubelet would.

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agentenv/watchdog/internal/testenv"
)

// saToken returns a TokenRequest token for the chart's ServiceAccount: the identity
// the CronJob's pod would have.
func saToken(t *testing.T, ns, sa string) string {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	seconds := int64(3600)
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	must(t, err)
	return tr.Status.Token
}

// kubeconfigs numbers the kubeconfig files, which share one folder.
var kubeconfigs atomic.Int64

// saKubeconfig returns a kubeconfig file and a client for a fresh token of sa.
func saKubeconfig(t *testing.T, ns, sa string) (string, kubernetes.Interface) {
	t.Helper()
	token := saToken(t, ns, sa)
	path, err := env.WriteKubeconfig(fmt.Sprintf("%s-%s-%d", ns, sa, kubeconfigs.Add(1)), token)
	must(t, err)
	cfg := &rest.Config{Host: env.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}, QPS: 200, Burst: 400}
	client, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	return path, client
}

// containerEnv resolves a container's environment as the kubelet would: plain values,
// Secret keys (read as admin), the pod's name, UID and IP, the name of this minute's Job.
func containerEnv(t *testing.T, ns string, c corev1.Container, podName string) []string {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	var out []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out = append(out, e.Name+"="+e.Value)
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			optional := ref.Optional != nil && *ref.Optional
			s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && optional {
				continue
			}
			must(t, err)
			v, ok := s.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				t.Fatalf("Secret %s has no key %s", ref.Name, ref.Key)
			}
			out = append(out, e.Name+"="+string(v))
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			out = append(out, e.Name+"="+podName)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.uid":
			// No pod exists here: a UID no object has, as a pod that is gone would leave.
			out = append(out, e.Name+"=00000000-0000-4000-8000-"+fmt.Sprintf("%012x", len(podName)))
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			// A test address behind the unreachable routes (docs/design.md §6).
			out = append(out, e.Name+"=198.18.0.10")
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.labels['batch.kubernetes.io/job-name']":
			// As the CronJob controller names the Job of this minute's run.
			out = append(out, fmt.Sprintf("%s=%s-%d", e.Name, podName, time.Now().Unix()/60))
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.uid":
			// The canary's owner (probe.mode canary); a pod's UID, made up: no pod exists.
			out = append(out, e.Name+"=0c0ffee0-0000-4000-8000-000000000000")
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			out = append(out, e.Name+"=10.244.0.7") // not loopback: --probe-address refuses it
		default:
			t.Fatalf("cannot resolve env %s: %+v", e.Name, e.ValueFrom)
		}
	}
	// The kubelet sets this in every container: the process stands in for the pod,
	// where --scrape-via auto scrapes the pod IPs directly (--kubeconfig still gives
	// the ServiceAccount's token from outside).
	return append(out, "KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443")
}
