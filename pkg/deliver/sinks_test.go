package deliver

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/agentenv/watchdog/internal/alerttest"
	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// captured is one request a capture server received.
type captured struct {
	method, path string
	header       http.Header
	body         []byte
	at           time.Time
}

// captureServer records every request on 127.0.0.1 and answers with status() and,
// when set, body().
type captureServer struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []captured
	status func(n int) int
	body   func(r *http.Request) string
}

func newCaptureServer(t *testing.T) *captureServer {
	t.Helper()
	c := &captureServer{status: func(int) int { return http.StatusOK }}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.reqs = append(c.reqs, captured{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body, at: time.Now()})
		n := len(c.reqs)
		status, answer := c.status, c.body
		c.mu.Unlock()
		w.WriteHeader(status(n))
		if answer != nil {
			_, _ = io.WriteString(w, answer(r))
		}
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *captureServer) requests() []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]captured(nil), c.reqs...)
}

// The plan's fixtures, shared with pkg/alert's tests (internal/alerttest).
var (
	t0                         = alerttest.T0
	intp                       = alerttest.IntP
	planConfig, target, result = alerttest.PlanConfig, alerttest.Target, alerttest.Result
	src                        = alerttest.Source
)

// goldenNotification is the fixed alert behind the golden files and the examples in
// docs/alerts.md: a wedge still waiting for --wedged-for, with strong evidence.
func goldenNotification() alert.Notification {
	at := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	since := at.Add(-2 * time.Minute)
	return alert.Notification{
		SchemaVersion: alert.SchemaVersion,
		ID:            "4f9d2c61a8b03e57",
		Event:         alert.EventWedged,
		Severity:      alert.SeverityCritical,
		Cluster:       "prod-eu1",
		Namespace:     "agentenv-system",
		Pod:           "agentenv-scheduler-7d9f8b6c5-x2x4k",
		UID:           "0b6f3e0e-51a4-4c11-9d7e-2f6a8c1d9e42",
		Verdict:       "wedged",
		Reason: "ready 0 while the API server lists 3 serving node(s); 6 heartbeat(s) rejected since 2026-03-01T10:03:00Z: " +
			"discovery does not know nodes that are calling in; wedged for 2m (strong evidence); ✗ wedged 2m < 4m; budget 0/3 used in 1h → wait",
		Evidence: "strong",
		Ready:    intp(0),
		Expected: intp(3),
		Since:    &since,
		Action:   "wait",
		Time:     at,
		Watchdog: "v1.2.3",
		NextStep: alert.Spec(alert.EventWedged).NextStep,
	}
}

func testNotification() alert.Notification {
	return alert.Notification{
		SchemaVersion: alert.SchemaVersion, ID: "test-1772359500000000000", Event: alert.EventTest, Severity: alert.SeverityInfo, Test: true,
		Cluster: "prod-eu1", Namespace: "agentenv-system",
		Reason: "This is a test alert from agentenv-scheduler-watchdog `notify test`; no action is needed.",
		Action: "none", Time: time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC), Watchdog: "v1.2.3",
		NextStep: "Nothing to do: this only proves the alert path works.",
	}
}

// golden compares got (JSON) with testdata/name, indented; -update rewrites it.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", name, err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/deliver -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from the golden file (go test ./pkg/deliver -update rewrites it):\n--- got\n%s\n--- want\n%s", name, buf.Bytes(), want)
	}
}

func testPoster(url string) *Poster {
	return NewPoster("test", url, 2*time.Second, 1, 5*time.Second)
}

func TestWebhookPayloadGolden(t *testing.T) {
	srv := newCaptureServer(t)
	n := goldenNotification()
	w := &Webhook{Poster: testPoster(srv.URL + "/hook"), Now: func() time.Time { return n.Time }}
	if err := w.Send(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	golden(t, "webhook-wedged.json", r.body)

	if r.method != http.MethodPost || r.path != "/hook" || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s content-type %q", r.method, r.path, r.header.Get("Content-Type"))
	}
	if r.header.Get(HeaderEvent) != "wedged" || r.header.Get(HeaderDelivery) != n.ID || r.header.Get("User-Agent") != "agentenv-scheduler-watchdog/v1.2.3" {
		t.Errorf("headers %v", r.header)
	}
	// Unsigned without a secret.
	if r.header.Get(HeaderSignature) != "" || r.header.Get(HeaderTimestamp) != "" {
		t.Errorf("signed without a secret: %v", r.header)
	}

	// The documented schema: every field present (null allowed for ready and
	// expected only), schemaVersion 1.
	var doc map[string]any
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if v, ok := doc["schemaVersion"].(float64); !ok || v != 1 {
		t.Errorf("schemaVersion = %v, want 1", doc["schemaVersion"])
	}
	for _, field := range []string{"schemaVersion", "id", "event", "severity", "cluster", "namespace", "pod", "uid", "verdict", "reason",
		"ready", "expected", "since", "action", "dryRun", "time", "watchdogVersion", "evidence", "nextStep"} {
		if _, ok := doc[field]; !ok {
			t.Errorf("field %q missing from the webhook body", field)
		}
	}
	// The body decodes back into the same notification.
	var back alert.Notification
	if err := json.Unmarshal(r.body, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != n.ID || back.Reason != n.Reason || !back.Since.Equal(*n.Since) || *back.Expected != 3 {
		t.Errorf("round trip: %+v", back)
	}
}

func TestWebhookSchemaOfTestAlert(t *testing.T) {
	b, err := json.Marshal(testNotification())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// Absent pod: ready and expected are null, not missing; test is true.
	if v, ok := doc["ready"]; !ok || v != nil {
		t.Errorf("ready = %v (present %v), want null", v, ok)
	}
	if doc["test"] != true || doc["event"] != "test" || doc["schemaVersion"] != float64(1) {
		t.Errorf("test alert body %s", b)
	}
	for _, absent := range []string{"pod", "uid", "since", "reminder"} {
		if _, ok := doc[absent]; ok {
			t.Errorf("%q should be omitted when empty: %s", absent, b)
		}
	}
}

func TestSlackPayloadGolden(t *testing.T) {
	for _, tc := range []struct {
		golden  string
		n       alert.Notification
		runbook string
	}{
		{"slack-wedged.json", goldenNotification(), "https://runbooks.example.com/agentenv/scheduler-wedged"},
		{"slack-test.json", testNotification(), ""},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			srv := newCaptureServer(t)
			s := &Slack{Poster: testPoster(srv.URL + "/services/T000/B000/XXXX"), RunbookURL: tc.runbook}
			if err := s.Send(context.Background(), tc.n); err != nil {
				t.Fatal(err)
			}
			reqs := srv.requests()
			if len(reqs) != 1 || reqs[0].header.Get("Content-Type") != "application/json" {
				t.Fatalf("requests %+v", reqs)
			}
			golden(t, tc.golden, reqs[0].body)

			// What was posted is SlackMessage's rendering, and Slack's own Go client
			// (slack-go, a test-only dependency: the binary has its own types) reads
			// it back as a webhook message with the same blocks.
			want, _ := json.Marshal(SlackMessage(tc.n, tc.runbook))
			if !bytes.Equal(reqs[0].body, want) {
				t.Errorf("posted body is not SlackMessage(n)")
			}
			var msg slack.WebhookMessage
			if err := json.Unmarshal(reqs[0].body, &msg); err != nil {
				t.Fatalf("slack-go cannot read the message back: %v", err)
			}
			if msg.Text == "" || msg.Blocks == nil || len(msg.Blocks.BlockSet) < 4 {
				t.Fatalf("message lacks fallback text or blocks: %s", reqs[0].body)
			}
			if msg.Blocks.BlockSet[0].BlockType() != slack.MBTHeader {
				t.Errorf("first block is %s, want header", msg.Blocks.BlockSet[0].BlockType())
			}
			// slack-go writes the same message back byte for byte: the local types
			// lose and add nothing that Slack's client library would send.
			again, err := json.Marshal(&msg)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, reqs[0].body) {
				t.Errorf("slack-go re-encodes the message differently:\n--- slack-go\n%s\n--- sent\n%s", again, reqs[0].body)
			}
		})
	}
}

func TestSlackMessageContent(t *testing.T) {
	n := goldenNotification()
	body := rawJSON(t, SlackMessage(n, "https://runbooks.example.com/x"))
	for _, want := range []string{
		"*Cluster*\nprod-eu1", "*Namespace*\nagentenv-system", "*Pod*\n" + n.Pod, "*Verdict*\nwedged", "*Ready / expected*\n0 / 3",
		"*For*\n2m0s (since 2026-03-01T10:03:00Z)", "*Watchdog did*\nwait", "*Evidence*\nstrong", "*Next step*: The watchdog restarts",
		"text=<https://runbooks.example.com/x|Runbook>", "text=critical · watchdog v1.2.3 · 2026-03-01T10:05:00Z",
		"text=[CRITICAL] scheduler wedged in prod-eu1/agentenv-system: ready 0", "type=header", "text=:rotating_light: AgentENV scheduler wedged",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("Slack message lacks %q:\n%s", want, body)
		}
	}
	// No runbook: no link.
	if strings.Contains(rawJSON(t, SlackMessage(n, "")), "Runbook") {
		t.Error("runbook link without --runbook-url")
	}
	// Reminders and dry runs say so in the title.
	n.Reminder, n.DryRun = true, true
	msg := SlackMessage(n, "")
	title := msg.Blocks[0].Text.Text
	if !strings.Contains(title, "(reminder)") || !strings.Contains(title, "[dry run]") {
		t.Errorf("title %q", title)
	}
	// The test alert is unmistakable.
	title = SlackMessage(testNotification(), "").Blocks[0].Text.Text
	if !strings.Contains(title, "test alert (not a real incident)") {
		t.Errorf("test title %q", title)
	}
}

// Slack's mrkdwn treats <, > and & as control characters: a reason such as
// "wedged 2m < 4m ... (> --max-watch-age 5m)" would otherwise be read as a link.
func TestSlackEscapesControlCharacters(t *testing.T) {
	n := goldenNotification()
	n.Reason = "the discovery watch saw no event for 9m (> --max-watch-age 5m); ✗ wedged 2m < 4m & more"
	msg := SlackMessage(n, "https://runbooks.example.com/x")
	var texts []string
	texts = append(texts, msg.Text)
	for _, b := range msg.Blocks {
		if b.Type == "section" && b.Text != nil {
			texts = append(texts, b.Text.Text)
		}
	}
	var reasonSeen int
	for _, s := range texts {
		if strings.Contains(s, "watch saw no event") {
			reasonSeen++
			if !strings.Contains(s, "(&gt; --max-watch-age 5m)") || !strings.Contains(s, "2m &lt; 4m &amp; more") || strings.ContainsAny(strings.SplitN(s, "watch saw", 2)[1], "<>") {
				t.Errorf("not escaped for mrkdwn: %q", s)
			}
		}
	}
	if reasonSeen != 2 {
		t.Errorf("reason found in %d texts, want the fallback and the section", reasonSeen)
	}
	if b := rawJSON(t, msg); !strings.Contains(b, "<https://runbooks.example.com/x|Runbook>") {
		t.Errorf("the runbook link itself must stay a link: %s", b)
	}
}

// TestSlackEscapesEveryField: every string of a notification, whoever wrote it (a
// forged outbox entry, a pod name, a reason quoting the scheduler), reaches Slack
// with <, > and & escaped: read back through Slack's own client (slack-go), no text
// object holds a mention, a link or a stray entity but the runbook link the
// configuration asked for. Long texts are cut without cutting an entity.
func TestSlackEscapesEveryField(t *testing.T) {
	const hostile = "<!channel> <https://evil.example/x|click here> &amp; <@U024BE7LH> & more > less"
	n := goldenNotification()
	v := reflect.ValueOf(&n).Elem()
	filled := 0
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			f.SetString(hostile)
			filled++
		}
	}
	if filled < 10 {
		t.Fatalf("only %d string fields filled", filled)
	}
	const runbook = "https://runbooks.example.com/a?b=1&c=<2>|3"
	for _, c := range []struct {
		name   string
		reason string
	}{
		{"short", hostile},
		{"cut", strings.Repeat("&<>", 1200)},
	} {
		t.Run(c.name, func(t *testing.T) {
			n.Reason = c.reason
			body, err := json.Marshal(SlackMessage(n, runbook))
			if err != nil {
				t.Fatal(err)
			}
			var msg slack.WebhookMessage
			if err := json.Unmarshal(body, &msg); err != nil {
				t.Fatalf("slack-go cannot read the message back: %v", err)
			}
			texts, err := testenv.SlackTexts(body)
			if err != nil {
				t.Fatal(err)
			}
			link := "<https://runbooks.example.com/a?b=1&amp;c=%3C2%3E%7C3|Runbook>"
			links := 0
			entity := regexp.MustCompile(`&(amp|lt|gt);`)
			for _, text := range texts {
				if strings.Contains(text, link) {
					links++
					text = strings.ReplaceAll(text, link, "")
				}
				if strings.ContainsAny(text, "<>") || strings.Contains(entity.ReplaceAllString(text, ""), "&") {
					t.Errorf("unescaped control characters reach Slack: %.300q", text)
				}
			}
			if links != 1 {
				t.Errorf("the runbook link appears %d times, want once", links)
			}
			all := strings.Join(texts, "\n")
			if !strings.Contains(all, "&lt;!channel&gt;") || !strings.Contains(all, "*Next step*: &lt;!channel&gt;") {
				t.Errorf("the hostile text is not in the message as text: %.400s", all)
			}
			if reason := msg.Blocks.BlockSet[1].(*slack.SectionBlock).Text.Text; len(c.reason) > 2900 && (len(reason) > 2900 || len(reason) < 2800) {
				t.Errorf("reason section of %d bytes, want it cut just under 2900", len(reason))
			}
		})
	}
}

// rawJSON renders a Slack message the way Slack reads it: JSON decoded, with every
// string value (texts, types, field labels) listed one per line.
func rawJSON(t *testing.T, msg *SlackWebhookMessage) string {
	t.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if s, ok := v[k].(string); ok {
					out = append(out, k+"="+s)
					continue
				}
				walk(v[k])
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return strings.Join(out, "\n")
}

var sigRe = regexp.MustCompile(`^sha256=[0-9a-f]{64}$`)

func TestWebhookSignature(t *testing.T) {
	srv := newCaptureServer(t)
	secret := []byte("s3cr3t-hmac-key")
	sentAt := time.Date(2026, 3, 1, 10, 5, 7, 0, time.UTC)
	w := &Webhook{Poster: testPoster(srv.URL), Secret: secret, Now: func() time.Time { return sentAt }}
	if err := w.Send(context.Background(), goldenNotification()); err != nil {
		t.Fatal(err)
	}
	r := srv.requests()[0]
	ts, sig := r.header.Get(HeaderTimestamp), r.header.Get(HeaderSignature)
	if ts != strconv.FormatInt(sentAt.Unix(), 10) || !sigRe.MatchString(sig) {
		t.Fatalf("timestamp %q signature %q", ts, sig)
	}

	// The documented algorithm, computed independently of Sign.
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "." + string(r.body)))
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); sig != want {
		t.Fatalf("signature %s, want hex(HMAC-SHA256(secret, ts + \".\" + body)) = %s", sig, want)
	}

	recvAt := sentAt.Add(3 * time.Second)
	tampered := bytes.Replace(r.body, []byte(`"ready":0`), []byte(`"ready":3`), 1)
	if bytes.Equal(tampered, r.body) {
		t.Fatal("tampering did not change the body")
	}
	for _, tc := range []struct {
		name   string
		secret []byte
		ts     string
		sig    string
		body   []byte
		now    time.Time
		want   bool
	}{
		{"genuine", secret, ts, sig, r.body, recvAt, true},
		{"genuine, without the sha256= prefix", secret, ts, strings.TrimPrefix(sig, "sha256="), r.body, recvAt, true},
		{"tampered body", secret, ts, sig, tampered, recvAt, false},
		{"wrong secret", []byte("not-the-secret"), ts, sig, r.body, recvAt, false},
		{"stale timestamp", secret, ts, sig, r.body, sentAt.Add(6 * time.Minute), false},
		{"timestamp from the future", secret, ts, sig, r.body, sentAt.Add(-6 * time.Minute), false},
		{"timestamp replaced", secret, strconv.FormatInt(recvAt.Unix(), 10), sig, r.body, recvAt, false},
		{"garbage timestamp", secret, "yesterday", sig, r.body, recvAt, false},
		{"empty signature", secret, ts, "sha256=", r.body, recvAt, false},
		{"non-hex signature", secret, ts, "sha256=zz", r.body, recvAt, false},
	} {
		if got := alerttest.Verify(tc.secret, tc.ts, tc.sig, tc.body, tc.now, 5*time.Minute); got != tc.want {
			t.Errorf("%s: Verify = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHeartbeatPing(t *testing.T) {
	srv := newCaptureServer(t)
	for _, tc := range []struct {
		url      string
		failed   bool
		wantPath string
	}{
		{srv.URL + "/ping/abc", false, "/ping/abc"},
		{srv.URL + "/ping/abc", true, "/ping/abc/fail"},
		{srv.URL + "/ping/abc/", true, "/ping/abc/fail"},
		// healthchecks.io auto-provisioning URLs carry a query: /fail goes on the path.
		{srv.URL + "/ping/key/slug?create=1", true, "/ping/key/slug/fail"},
		{srv.URL + "/ping/key/slug?create=1", false, "/ping/key/slug"},
	} {
		before := len(srv.requests())
		hb := &Heartbeat{Poster: testPoster(tc.url)}
		if err := hb.Ping(context.Background(), tc.failed, "ok"); err != nil {
			t.Fatal(err)
		}
		reqs := srv.requests()
		if len(reqs) != before+1 {
			t.Fatalf("%s: %d requests", tc.url, len(reqs)-before)
		}
		r := reqs[len(reqs)-1]
		if r.path != tc.wantPath || string(r.body) != "ok" || r.method != http.MethodPost {
			t.Errorf("%s failed=%v: got %s %s %q, want POST %s", tc.url, tc.failed, r.method, r.path, r.body, tc.wantPath)
		}
	}
	// The query survives.
	var mu sync.Mutex
	var rawQuery string
	q := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		rawQuery = r.URL.Path + "?" + r.URL.RawQuery
		mu.Unlock()
	}))
	defer q.Close()
	hb := &Heartbeat{Poster: testPoster(q.URL + "/k/s?create=1")}
	if err := hb.Ping(context.Background(), true, "failed"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if rawQuery != "/k/s/fail?create=1" {
		t.Errorf("failure ping went to %q, want /k/s/fail?create=1", rawQuery)
	}
}

// receiverVerify is the receiver-side example of docs/alerts.md, verbatim: it must
// accept what Webhook sends and refuse the rest.
func receiverVerify(secret []byte, r *http.Request, body []byte) bool {
	ts := r.Header.Get("X-Watchdog-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false // missing, malformed, stale or from the future: maybe a replay
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body) // the raw bytes received, not re-encoded JSON
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(want), []byte(r.Header.Get("X-Watchdog-Signature")))
}

func TestDocumentedReceiverVerification(t *testing.T) {
	secret := []byte("s3cr3t-hmac-key")
	type verdict struct {
		ok   bool
		body []byte
	}
	got := make(chan verdict, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ok := receiverVerify(secret, r, body)
		got <- verdict{ok, body}
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()

	send := func(secret []byte, now time.Time) error {
		w := &Webhook{Poster: testPoster(srv.URL), Secret: secret, Now: func() time.Time { return now }}
		return w.Send(context.Background(), goldenNotification())
	}
	if err := send(secret, time.Now()); err != nil || !(<-got).ok {
		t.Fatalf("a genuine delivery was refused: %v", err)
	}
	if err := send([]byte("other"), time.Now()); err == nil || (<-got).ok {
		t.Error("a delivery signed with another key was accepted")
	}
	if err := send(secret, time.Now().Add(-10*time.Minute)); err == nil || (<-got).ok {
		t.Error("a stale delivery was accepted")
	}
	if err := send(nil, time.Now()); err == nil || (<-got).ok {
		t.Error("an unsigned delivery was accepted")
	}
}
