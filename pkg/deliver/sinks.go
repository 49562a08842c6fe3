package deliver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

// Header names of the generic webhook (docs/alerts.md).
const (
	HeaderEvent     = "X-Watchdog-Event"
	HeaderDelivery  = "X-Watchdog-Delivery"
	HeaderTimestamp = "X-Watchdog-Timestamp"
	HeaderSignature = "X-Watchdog-Signature"
)

// Webhook posts the Notification JSON, signed with HMAC-SHA256 when Secret is set.
type Webhook struct {
	*Poster // its Reach is the sink's
	Secret  []byte
	Now     func() time.Time
}

func (w *Webhook) Name() string { return "webhook" }

func (w *Webhook) Send(ctx context.Context, n alert.Notification) error {
	body, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("webhook: encode: %w", err)
	}
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"agentenv-scheduler-watchdog/" + n.Watchdog},
		HeaderEvent: {n.Event}, HeaderDelivery: {n.ID}}
	if len(w.Secret) > 0 {
		ts := strconv.FormatInt(w.Now().Unix(), 10)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, "sha256="+Sign(w.Secret, ts, body))
	}
	return w.Post(ctx, body, h)
}

// Sign is X-Watchdog-Signature after "sha256=": hex(HMAC-SHA256(secret, timestamp + "." + body)).
func Sign(secret []byte, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	fmt.Fprintf(mac, "%s.", timestamp)
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// Slack posts a Block Kit message to an incoming webhook, with a text fallback.
type Slack struct {
	*Poster    // its Reach is the sink's
	RunbookURL string
}

func (s *Slack) Name() string { return "slack" }

func (s *Slack) Send(ctx context.Context, n alert.Notification) error {
	body, err := json.Marshal(SlackMessage(n, s.RunbookURL))
	if err != nil {
		return fmt.Errorf("slack: encode: %w", err)
	}
	return s.Post(ctx, body, http.Header{"Content-Type": {"application/json"}})
}

// SlackMessage renders n as an incoming-webhook message in Block Kit. Every text
// is escaped, whoever wrote its parts: Slack reads <!channel> and <url|text> in any.
func SlackMessage(n alert.Notification, runbookURL string) *SlackWebhookMessage {
	fallback := tagIf(n.Shadow, "[shadow] ") + fmt.Sprintf("[%s] scheduler %s in %s: %s",
		esc(strings.ToUpper(n.Severity)), esc(n.Event), esc(where(n)), esc(n.Reason))
	title := fmt.Sprintf("%s AgentENV scheduler %s", alert.Spec(n.Event).Emoji, n.Event)
	if n.Test {
		title = alert.Spec(alert.EventTest).Emoji + " Watchdog test alert (not a real incident)"
	}
	title += tagIf(n.Reminder, " (reminder)") + tagIf(n.DryRun, " [dry run]") + tagIf(n.Shadow, " [shadow]") +
		tagIf(n.Paused != "", " [paused]")
	since := "-"
	if n.Since != nil {
		since = fmt.Sprintf("%s (since %s)", n.Time.Sub(*n.Since).Round(time.Second), n.Since.UTC().Format(time.RFC3339))
	}
	var fields []*SlackText
	for _, f := range [][2]string{{"Cluster", alert.OrDash(n.Cluster)}, {"Namespace", n.Namespace},
		{"Pod", alert.OrDash(n.Pod)}, {"Verdict", alert.OrDash(n.Verdict)},
		{"Ready / expected", alert.IntOrDash(n.Ready) + " / " + alert.IntOrDash(n.Expected)}, {"For", since},
		{"Watchdog did", alert.OrDash(n.Action)}, {"Evidence", alert.OrDash(n.Evidence)}} {
		fields = append(fields, mrkdwn("*"+f[0]+"*\n"+esc(f[1])))
	}
	blocks := []SlackBlock{
		{Type: "header", Text: &SlackText{Type: "plain_text", Text: escCut(title, 150), Emoji: true}},
		section(escCut(n.Reason, 2900)),
		{Type: "section", Fields: fields},
	}
	if n.Paused != "" {
		blocks = append(blocks, section("*Paused*: "+escCut(n.Paused, 2900)+"; the watchdog restarts nothing meanwhile"))
	}
	if n.NextStep != "" {
		blocks = append(blocks, section("*Next step*: "+escCut(n.NextStep, 2900)))
	}
	ctxElems := []*SlackText{mrkdwn(fmt.Sprintf("%s · watchdog %s · %s", esc(n.Severity), esc(n.Watchdog), n.Time.UTC().Format(time.RFC3339)))}
	if len(n.Labels) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(n.Labels)) {
			kv = append(kv, k+"="+n.Labels[k])
		}
		ctxElems = append(ctxElems, mrkdwn(escCut(strings.Join(kv, " · "), 2900)))
	}
	if runbookURL != "" {
		ctxElems = append(ctxElems, mrkdwn(fmt.Sprintf("<%s|Runbook>", escLinkURL(runbookURL))))
	}
	blocks = append(blocks, SlackBlock{Type: "context", Elements: ctxElems})
	return &SlackWebhookMessage{Text: fallback, Blocks: blocks}
}

// tagIf is tag when on, else "".
func tagIf(on bool, tag string) string {
	if on {
		return tag
	}
	return ""
}

// where is cluster/namespace, or the namespace alone without --cluster-name.
func where(n alert.Notification) string { return strings.TrimPrefix(n.Cluster+"/"+n.Namespace, "/") }

// esc escapes what Slack's mrkdwn reads as control: unescaped, "2m < 4m ... (> 5m)" is swallowed as a link.
var esc = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// escCut escapes s and cuts it to at most n bytes, never inside an entity ("&am").
func escCut(s string, n int) string {
	out := state.Truncate(esc(s), n)
	if i := strings.LastIndexByte(out, '&'); i >= 0 && !strings.Contains(out[i:], ";") {
		out = out[:i] + "..."
	}
	return out
}

// escLinkURL makes a URL safe inside Slack's <url|text> (a | would end the URL).
var escLinkURL = strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C").Replace

func mrkdwn(s string) *SlackText { return &SlackText{Type: "mrkdwn", Text: s} }

func section(s string) SlackBlock { return SlackBlock{Type: "section", Text: mrkdwn(s)} }

// Heartbeat is a dead man's switch pinged after every run, at <url>/fail if it failed (healthchecks.io).
type Heartbeat struct {
	*Poster // its Reach is the sink's
}

// Ping reports a run's outcome. body is a short, secret-free summary.
func (h *Heartbeat) Ping(ctx context.Context, failed bool, body string) error {
	target := h.url
	if failed {
		// On the path: appended to a query (healthchecks.io's ?create=1) it reports success.
		var err error
		if target, err = url.JoinPath(h.url, "fail"); err != nil {
			return errors.New("heartbeat: invalid URL")
		}
	}
	hdr := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	return h.exchange(ctx, http.MethodPost, target, []byte(body), hdr, nil)
}
