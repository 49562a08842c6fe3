package deliver

// The Block Kit subset the Slack sink sends: local types, not slack-go's whole Web API
// client (docs/performance.md "Slack payload types"); the tests decode them with slack-go.

// SlackWebhookMessage is an incoming-webhook message (the *_original fields sent as slack-go does).
type SlackWebhookMessage struct {
	Text            string       `json:"text,omitempty"`
	Blocks          []SlackBlock `json:"blocks,omitempty"`
	ReplaceOriginal bool         `json:"replace_original"`
	DeleteOriginal  bool         `json:"delete_original"`
}

// SlackBlock is one layout block: header (Text), section (Text, Fields) or context (Elements).
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
