package chart

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agentenv/watchdog/pkg/alert"
)

const (
	evidenceName = "agentenv-scheduler-watchdog-evidence"
	keySecret    = "agentenv-scheduler-watchdog-key"
	passLease    = "agentenv-scheduler-watchdog"
)

// as is an admin client impersonating user (in groups).
func as(t *testing.T, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := kubernetes.NewForConfig(cfg)
	must(t, err)
	return c
}

// TestGuardPolicy: on the real API server, the chart renders none of the
// watchdog's own objects; the watchdog's ServiceAccount creates and writes them; a
// user bound to the built-in `edit` ClusterRole is denied every change of them by
// the guard policy, whose name the message carries, while other ConfigMaps stay
// theirs; a break-glass user (system:masters) may; helm upgrade and uninstall work.
func TestGuardPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-guard")
	must(t, err)
	r, _ := installChart(t, ns, release, "")
	guard := fmt.Sprintf("%s-guard-%s", fullname, ns)
	_, sa := saKubeconfig(t, ns, fullname)
	for _, name := range []string{stateName, evidenceName} {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("ConfigMap %s: %v, want none rendered by the chart", name, err)
		}
	}
	if _, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, passLease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Lease: %v, want none rendered by the chart", err)
	}
	// The watchdog creates them itself (its Role: create, then get/update by name).
	managed := map[string]string{"app.kubernetes.io/managed-by": "agentenv-scheduler-watchdog"}
	for _, name := range []string{stateName, evidenceName} {
		_, err := sa.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: managed}}, metav1.CreateOptions{})
		must(t, err)
	}
	_, err = sa.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: keySecret, Labels: managed}, Data: map[string][]byte{"key": []byte("k")}}, metav1.CreateOptions{})
	must(t, err)
	_, err = sa.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: passLease, Labels: managed}}, metav1.CreateOptions{})
	must(t, err)

	// The built-in edit role: its rules are system:aggregate-to-edit's and -view's,
	// which the controller-manager aggregates into `edit` (envtest runs none).
	for _, role := range []string{"edit", "system:aggregate-to-edit", "system:aggregate-to-view"} {
		_, err = env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mallory-" + strings.ReplaceAll(role, ":", "-")},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "mallory"}}}, metav1.CreateOptions{})
		must(t, err)
	}
	editor, oncall := as(t, "mallory"), as(t, "oncall", "system:masters", "system:authenticated")

	tamper := func(c kubernetes.Interface, dry []string) error {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(ctx, stateName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data = map[string]string{"state.json": `{"version":2,"alerts":{"wedged":{"event":"wedged","lastSentAt":"2999-01-01T00:00:00Z"}}}`}
		_, err = c.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{DryRun: dry})
		return err
	}
	err = waitDenied(t, "the guard to deny an editor", func() error { return tamper(editor, dryRunAll) })
	denied := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), guard) {
			t.Errorf("%s as an editor: %v, want Forbidden by %s", what, err, guard)
		} else {
			t.Logf("%s as an editor: %v", what, err)
		}
	}
	denied("update of the state ConfigMap", err)
	denied("update of the state ConfigMap, for real", tamper(editor, nil))
	denied("delete of the state ConfigMap", editor.CoreV1().ConfigMaps(ns).Delete(ctx, stateName, metav1.DeleteOptions{}))
	denied("delete of the evidence ConfigMap", editor.CoreV1().ConfigMaps(ns).Delete(ctx, evidenceName, metav1.DeleteOptions{}))
	denied("delete of the key Secret", editor.CoreV1().Secrets(ns).Delete(ctx, keySecret, metav1.DeleteOptions{}))
	s, err := editor.CoreV1().Secrets(ns).Get(ctx, keySecret, metav1.GetOptions{})
	must(t, err) // `edit` reads Secrets: the seal alone would not stop an editor
	s.Data["key"] = []byte("mine")
	_, err = editor.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
	denied("update of the key Secret", err)
	// Once deleted by a break-glass user, recreating it under its name is the watchdog's alone.
	must(t, oncall.CoreV1().ConfigMaps(ns).Delete(ctx, evidenceName, metav1.DeleteOptions{}))
	_, err = editor.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: evidenceName}}, metav1.CreateOptions{})
	denied("create of the evidence ConfigMap", err)
	// Leases and EndpointSlices: denied, by RBAC (not in `edit`) or by the guard.
	l, err := env.Client.CoordinationV1().Leases(ns).Get(ctx, passLease, metav1.GetOptions{})
	must(t, err)
	holder := "mallory"
	l.Spec.HolderIdentity = &holder
	if _, err := editor.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{DryRun: dryRunAll}); !apierrors.IsForbidden(err) {
		t.Errorf("update of the Lease as an editor: %v, want Forbidden", err)
	}
	// Not over-reaching: the editor's own ConfigMaps stay theirs.
	if _, err := editor.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("an editor's own ConfigMap: %v", err)
	}
	// The watchdog and break glass may.
	if err := tamper(sa, nil); err != nil {
		t.Errorf("the watchdog's own update of its state: %v", err)
	}
	if err := tamper(oncall, dryRunAll); err != nil {
		t.Errorf("a break-glass update of the state: %v", err)
	}
	if err := oncall.CoreV1().ConfigMaps(ns).Delete(ctx, stateName, metav1.DeleteOptions{DryRun: dryRunAll}); err != nil {
		t.Errorf("a break-glass delete of the state: %v", err)
	}
	r.upgrade()
	r.uninstall()
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, stateName, metav1.GetOptions{}); err != nil {
		t.Errorf("the state after uninstall: %v (the watchdog's, not helm's: it stays)", err)
	}
}

// TestOverlappingPassesRestartOnce: two CronJob passes of a due wedge at
// once, as two pods would (their own names): one holds the Lease and restarts, the
// other waits, finds the episode handled, and neither pages twice.
func TestOverlappingPassesRestartOnce(t *testing.T) {
	in := install(t, "delete", "scheduler-metrics-discovery-dead.txt")
	first := in.wd.check(in.flags...)
	first.expect(t, 0, "wedged", "wait")
	time.Sleep(time.Until(first.report.Time.Add(wedgedFor + 100*time.Millisecond)))
	other := *in.wd
	other.env = append([]string{}, in.wd.env...)
	for i, e := range other.env {
		if strings.HasPrefix(e, "WATCHDOG_POD_NAME=") {
			other.env[i] = "WATCHDOG_POD_NAME=" + fullname + "-other"
		}
	}
	before, _ := in.recv.got()
	var runs [2]runResult
	var wg sync.WaitGroup
	for i, w := range []*chartWatchdog{in.wd, &other} {
		wg.Go(func() { runs[i] = w.check(in.flags...) })
	}
	wg.Wait()
	restarts := 0
	for _, r := range runs {
		if r.code != 0 {
			t.Errorf("a pass exited %d:\n%s", r.code, r.stderr)
		}
		restarts += len(r.report.Restarts)
	}
	got, _ := in.recv.got()
	pages := 0
	for _, ev := range got[len(before):] {
		if ev == alert.EventRestarted {
			pages++
		}
	}
	if restarts != 1 || pages != 1 {
		t.Fatalf("%d restarts, %d restarted pages (%v), want one each\n--- a:\n%s\n--- b:\n%s", restarts, pages, got[len(before):], runs[0].stderr, runs[1].stderr)
	}
}
