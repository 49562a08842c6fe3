// Package testenv runs a real kube-apiserver and etcd on 127.0.0.1 for tests (through
// controller-runtime's envtest), and lays out a simulated AgentENV scheduler: its
// pods (status set through the status subresource, as no kubelet runs), its
// Deployment, the agentenv-nodes EndpointSlices, and a loopback metrics server.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client kubernetes.Interface
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	env        *envtest.Environment
	dir        string
	seq        atomic.Int64
}

// Assets returns the folder with kube-apiserver, etcd and kubectl: $KUBEBUILDER_ASSETS
// if set, else the cache of hack/control-plane.sh.
func Assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("bash", filepath.Join(root, "hack", "control-plane.sh"), "--print").Output()
	if err != nil {
		return "", fmt.Errorf("control-plane binaries are not built: run hack/control-plane.sh (or make test): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// RepoRoot finds the repository root from this source file.
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the repository")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Start launches etcd and kube-apiserver on loopback.
func Start() (*Env, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 60 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	api := te.ControlPlane.GetAPIServer()
	// On loopback the API server needs these (docs/design.md §6).
	api.Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane from %s: %w", assets, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = te.Stop()
		return nil, err
	}
	dir, err := os.MkdirTemp("", "watchdog-testenv-")
	if err != nil {
		_ = te.Stop()
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, te.KubeConfig, 0o600); err != nil {
		_ = te.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: client, Kubeconfig: kubeconfig, env: te, dir: dir}, nil
}

// Stop tears the control plane down.
func (e *Env) Stop() error {
	err := e.env.Stop()
	_ = os.RemoveAll(e.dir)
	return err
}

// StopAPIServer stops only the API server (fault injection); etcd keeps the data.
func (e *Env) StopAPIServer() error {
	return e.env.ControlPlane.APIServer.Stop()
}

// StartAPIServer starts the API server again on the same address.
func (e *Env) StartAPIServer() error {
	return e.env.ControlPlane.APIServer.Start()
}

// UniqueName returns a fresh DNS-label name with prefix.
func (e *Env) UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid()%10000, e.seq.Add(1))
}

// WriteKubeconfig writes a kubeconfig for the API server that authenticates with
// bearer token, and returns its path.
func (e *Env) WriteKubeconfig(name, token string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(e.dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}

// Ctx returns a context bounded for one API interaction in a test.
func Ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}
