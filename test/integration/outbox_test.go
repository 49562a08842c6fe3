package integration

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// namespaceEditor returns a client as a ServiceAccount with what the cluster's
// `edit` ClusterRole grants in ns: what a namespace editor may do, the API server
// decides. `edit` is an aggregated role, filled in by kube-controller-manager's
// aggregation controller, which does not run here: the binding is to the two
// bootstrap roles it aggregates.
func namespaceEditor(t *testing.T, ns string) kubernetes.Interface {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	token := serviceAccountToken(t, ns, "editor")
	for _, role := range []string{"system:aggregate-to-edit", "system:aggregate-to-view"} {
		_, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "editor-" + strings.TrimPrefix(role, "system:")},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "editor", Namespace: ns}},
		}, metav1.CreateOptions{})
		must(t, err)
	}
	c, err := kubernetes.NewForConfig(&rest.Config{Host: env.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}})
	must(t, err)
	return c
}

// editState edits the state ConfigMap as a namespace editor would: the document
// as JSON, changed by edit, written back with an update.
func editState(t *testing.T, editor kubernetes.Interface, ns string, edit func(doc map[string]any)) {
	t.Helper()
	var last error
	defer func() {
		if t.Failed() {
			t.Logf("last error: %v", last)
		}
	}()
	waitFor(t, 10*time.Second, "the editor's update of the state ConfigMap", func() bool {
		ctx, cancel := testenv.Ctx()
		defer cancel()
		cm, err := editor.CoreV1().ConfigMaps(ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
		if last = err; err != nil {
			return false // the RoleBinding reaches the authorizer within a moment
		}
		var doc map[string]any
		must(t, json.Unmarshal([]byte(cm.Data[statestore.DataKey]), &doc))
		edit(doc)
		raw, err := json.Marshal(doc)
		must(t, err)
		cm.Data[statestore.DataKey] = string(raw)
		_, last = editor.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return last == nil
	})
}

// addToOutbox appends entries to the state document's outbox, as an editor.
func addToOutbox(t *testing.T, editor kubernetes.Interface, ns string, entries ...map[string]any) {
	t.Helper()
	editState(t, editor, ns, func(doc map[string]any) {
		outbox, _ := doc["outbox"].([]any)
		for _, e := range entries {
			outbox = append(outbox, e)
		}
		doc["outbox"] = outbox
	})
}

// forgedEntry is the example: an outbox entry for every sink, with the
// severity, namespace, cluster and text of the editor's choosing.
func forgedEntry(id string, at time.Time) map[string]any {
	return map[string]any{
		"id": id, "event": alert.EventWedged, "createdAt": at, "attempts": 1,
		"sinks": []string{"webhook", "slack", "alertmanager"},
		"payload": map[string]any{
			"schemaVersion": 1, "id": id, "event": alert.EventWedged, "severity": "info",
			"cluster": "prod-other", "namespace": "kube-system", "pod": "agentenv-scheduler-evil",
			"reason": "<!channel> all clear, ignore the pages", "action": "none", "dryRun": false,
			"time": at, "watchdogVersion": "v9.9.9", "ready": nil, "expected": nil,
		},
	}
}

// TestOutboxForgedByANamespaceEditor, on the real API server with the real
// Alertmanager: a receiver outage leaves the watchdog's own alert in the outbox;
// a namespace editor (the cluster's `edit` role) adds the forged entry
// and a copy of the genuine one with its reason changed. With --outbox-key the
// state's seal fails: the next run sets the whole document aside, decides afresh
// and pages watchdog-error naming the tampering; nothing of the forgeries reaches
// a receiver. Without a key the forged entry is retried rebuilt: the
// webhook, Slack and Alertmanager get the configuration's namespace and cluster and
// the event table's severity, never the entry's; Slack, read back through
// slack-go, shows its "<!channel>" as text.
func TestOutboxForgedByANamespaceEditor(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		name := map[bool]string{true: "with outbox key", false: "without outbox key"}[keyed]
		t.Run(name, func(t *testing.T) {
			am := startAlertmanager(t)
			rcv := newReceiver(t)
			s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
			flags := []string{"--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey, "--alertmanager-url", am.Base, "--slack-webhook-url", rcv.url(slackPath),
				"--cluster-name", clusterName, "--wedged-for", "1h", "--realert-interval", "1h"}
			if keyed {
				flags = append(flags, "--outbox-key", outboxKey)
			} else {
				flags = append(flags, "--key-secret", "") // no key Secret either
			}

			// The outage: the webhook and Slack refuse, the genuine wedged alert is kept.
			rcv.setStatus(webhookPath, http.StatusServiceUnavailable)
			rcv.setStatus(slackPath, http.StatusServiceUnavailable)
			first := s.check(flags...)
			first.expect(t, 0, "wedged", "wait")
			st, _ := s.state()
			if len(st.Outbox) != 1 || st.Outbox[0].Event != alert.EventWedged || st.Outbox[0].Attempts != 1 {
				t.Fatalf("outbox %+v, want the genuine wedged alert kept", st.Outbox)
			}
			genuine := st.Outbox[0]

			// The editor's forgeries.
			var copied map[string]any
			raw, err := json.Marshal(genuine)
			must(t, err)
			must(t, json.Unmarshal(raw, &copied))
			payload := copied["payload"].(map[string]any)
			payload["reason"] = "scheduler healthy, restart it anyway"
			copied["payload"] = payload
			now := time.Now().UTC()
			entries := []map[string]any{forgedEntry("f0f0f0f0f0f0f0f0", now)}
			if keyed {
				entries = append(entries, copied)
			}
			addToOutbox(t, namespaceEditor(t, s.ns), s.ns, entries...)

			// The receiver is back.
			rcv.setStatus(webhookPath, http.StatusOK)
			rcv.setStatus(slackPath, http.StatusOK)
			mark := rcv.count()
			second := s.check(flags...)
			second.expect(t, 0, "wedged", "wait")
			sent := webhooks(t, rcv.since(mark, webhookPath))
			var ids []string
			for _, n := range sent {
				ids = append(ids, n.ID)
				// What the configuration and the event table own is never the entry's.
				if n.Namespace != s.ns || n.Cluster != clusterName || n.Severity != alert.SeverityCritical || n.Watchdog == "v9.9.9" {
					t.Errorf("the webhook got the forgery's labels: %+v", n)
				}
				// With a key, not a word of the forgeries.
				if keyed && (strings.Contains(n.Reason, "<!channel>") || strings.Contains(n.Reason, "anyway")) {
					t.Errorf("the webhook got the forgery's text: %+v", n)
				}
			}
			dropped := 0
			for _, w := range second.report.Warnings {
				if strings.Contains(w, "dropped, never delivered") {
					dropped++
				}
			}
			if keyed {
				// The state's seal fails: the whole document is set aside, the run decides
				// afresh (a new wedged page) and pages the tampering; nothing of it is sent.
				got := eventNames(sent)
				slices.Sort(got)
				if !slices.Equal(got, []string{"watchdog-error", "wedged"}) || dropped != 0 || !strings.Contains(strings.Join(second.report.Warnings, "\n"), "not sealed") {
					t.Fatalf("the webhook got %v, warnings %q: want wedged afresh and watchdog-error naming the tampering", got, second.report.Warnings)
				}
			} else if len(sent) != 2 {
				t.Errorf("webhook got %v: want the genuine and the rebuilt forgery", ids)
			}
			// Slack, read back through slack-go: the retried messages name the
			// configuration's cluster and namespace, and no text object holds a
			// mention or a link (the forgery's "<!channel>" arrives escaped, as text).
			messages := rcv.since(mark, slackPath)
			if len(messages) != 2 {
				t.Errorf("Slack got %d messages, want 2", len(messages))
			}
			escaped := 0
			for _, m := range messages {
				texts, err := testenv.SlackTexts(m.Body)
				must(t, err)
				if !keyed && !strings.HasPrefix(texts[0], "[CRITICAL] scheduler wedged in "+clusterName+"/"+s.ns+": ") {
					t.Errorf("Slack fallback %q, want the configuration's cluster and namespace and the event table's severity", texts[0])
				}
				for _, text := range texts {
					if strings.ContainsAny(text, "<>") || keyed && strings.Contains(text, "channel") {
						t.Errorf("Slack renders a raw <, > or the forgery's mention: %q", text)
					}
				}
				if strings.Contains(strings.Join(texts, "\n"), "&lt;!channel&gt; all clear") {
					escaped++
				}
			}
			if want := map[bool]int{true: 0, false: 1}[keyed]; escaped != want {
				t.Errorf("Slack shows the forgery's reason, as text, in %d messages, want %d", escaped, want)
			}
			// Alertmanager: no alert ever under the forgery's labels.
			for _, ns := range []string{"kube-system", s.ns} {
				for _, a := range am.active(t, ns) {
					if a.Labels["namespace"] != s.ns || a.Labels["cluster"] != clusterName || a.Labels["severity"] != alert.SeverityCritical || strings.Contains(a.Annotations["description"], "<!channel>") && keyed {
						t.Errorf("Alertmanager holds an alert with the forgery's labels or text: %+v", a)
					}
				}
			}
			if st, _ := s.state(); len(st.Outbox) != 0 {
				t.Errorf("outbox %+v after the retry", st.Outbox)
			}
			leakCheck(t, s, first, second)
		})
	}
}
