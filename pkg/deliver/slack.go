package deliver

// The Block Kit subset the Slack sink sends. Local types rather than
// github.com/slack-go/slack, a whole Web API client, for four structs
// (docs/performance.md "Slack payload types"). The JSON is the same byte for byte
// (testdata/slack-*.json), and the tests decode every payload with slack-go.

// Block and text object types.
const (
	SlackHeader    = "header"
	SlackSection   = "section"
	SlackContext   = "context"
	SlackPlainText = "plain_text"
	SlackMarkdown  = "mrkdwn"
)

// SlackWebhookMessage is an incoming-webhook message: a fallback text and the
// blocks. The *_original fields are always sent, as slack-go sends them.
type SlackWebhookMessage struct {
	Text            string       `json:"text,omitempty"`
	Blocks          []SlackBlock `json:"blocks,omitempty"`
	ReplaceOriginal bool         `json:"replace_original"`
	DeleteOriginal  bool         `json:"delete_original"`
}

// SlackBlock is one layout block. Header: Text (plain_text). Section: Text and/or
// Fields (at most 10). Context: Elements (at most 10).
type SlackBlock struct {
	Type     string       `json:"type"`
	Text     *SlackText   `json:"text,omitempty"`
	Fields   []*SlackText `json:"fields,omitempty"`
	Elements []*SlackText `json:"elements,omitempty"`
}

// SlackText is a text object: plain_text (Emoji renders :codes:) or mrkdwn.
type SlackText struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Emoji bool   `json:"emoji,omitempty"`
}
